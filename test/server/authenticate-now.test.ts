import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HMAC_HEADER, HMAC_V2_HEADER, policy, signAdminHmac, signAdminHmacV2, type AuthPolicy, type AuthRequest, type Principal } from '../../server/auth.ts';
import { AppError } from '../../server/errors.ts';
import type { Tenant } from '../../server/tenancy.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

/**
 * The dispatcher asks AuthService.authenticateNow first and awaits authenticate only when it
 * returns undefined. So for every policy and credential it decides, it must give the principal
 * authenticate gives, or throw the error authenticate rejects with (class, status, code,
 * description, headers); and it must leave to authenticate exactly the credentials that need I/O.
 */
let s: TestServer;
let other: { tenant: Tenant; adminKey: string };
let userKey: string;

beforeAll(async () => {
  s = await startTestServer();
  other = await s.addTenant('other.example');
  const u = await s.appliance.core.users.add(s.primary, { name: 'plain-user', role: 'user', password: 'long enough password' });
  userKey = s.appliance.core.auth.createApiKey(s.primary, u, { createdBy: 'test' }).key;
  s.appliance.core.auth.registerVerifier('probe-token', ({ headers }) =>
    Promise.resolve(headers['x-probe'] === 'yes' ? { kind: 'credential', tenantId: s.primary.id, subject: 'probe', scopes: [], superAdmin: false } : null),
  );
});
afterAll(async () => {
  await s?.stop();
});

const POLICIES: [string, AuthPolicy][] = [
  ['public', policy.public],
  ['v1Admin', policy.v1Admin],
  ['adminOrHmac', policy.adminOrHmac('test-echo')],
  ['bearer', policy.bearer()],
  ['adminBearerOnly', policy.adminBearerOnly],
  ['superAdmin with bucket', policy.superAdmin('test-whoami')],
  ['superAdmin', policy.superAdmin()],
  ['scoped', { kind: 'credentials', accept: ['bearer', 'apiKey', 'hmac'], hmacBucket: 'test-echo', scope: 'calls' }],
  ['custom', policy.custom('probe-token', 'probe token')],
  ['custom without verifier', policy.custom('nobody', 'missing token')],
];

type Headers = Record<string, string>;
/** Credentials, made fresh per call (a V2 signature is accepted once). */
const CREDENTIALS: [string, (host: string) => Headers, Tenant?][] = [
  ['none', () => ({})],
  ['admin ak_ key', () => ({ authorization: `Bearer ${s.adminKey}` })],
  ['user ak_ key', () => ({ authorization: `Bearer ${userKey}` })],
  ['other tenant ak_ key', () => ({ authorization: `Bearer ${other.adminKey}` })],
  ['unknown ak_ key', () => ({ authorization: 'Bearer ak_unknownunknown' })],
  ['malformed ak_ key', () => ({ authorization: 'Bearer ak_no/pe' })],
  ['Basic', () => ({ authorization: 'Basic dXNlcjpwdw==' })],
  ['OIDC bearer', () => ({ authorization: 'Bearer eyJhbGciOiJub25lIn0.e30.' })],
  ['HMAC', (host) => ({ [HMAC_HEADER]: signAdminHmac(s.appliance.core.auth.adminSecret(), 'test-echo', host) })],
  ['HMAC other bucket', (host) => ({ [HMAC_HEADER]: signAdminHmac(s.appliance.core.auth.adminSecret(), 'test-whoami', host) })],
  ['HMAC bad', () => ({ [HMAC_HEADER]: 'ab'.repeat(32) })],
  ['HMAC malformed', () => ({ [HMAC_HEADER]: 'nope' })],
  [
    'HMAC V2',
    (host) => ({ [HMAC_V2_HEADER]: signAdminHmacV2(s.appliance.core.auth.adminSecret(), 'test-echo', host, '', Math.floor(Date.now() / 1000) - fresh++) }),
  ],
  ['HMAC V2 stale', (host) => ({ [HMAC_V2_HEADER]: signAdminHmacV2(s.appliance.core.auth.adminSecret(), 'test-echo', host, '', 1_000_000) })],
  ['HMAC V2 malformed', () => ({ [HMAC_V2_HEADER]: 't=1,sig=zz' })],
  ['custom credential', () => ({ 'x-probe': 'yes' })],
];
let fresh = 0;

type Outcome = { principal: Principal | null } | { error: { name: string; status?: number; code?: string; message: string; headers?: Record<string, string> } };

function outcomeOf(e: unknown): Outcome {
  const err = e as Error;
  return {
    error: {
      name: err.constructor.name,
      message: err.message,
      ...(err instanceof AppError ? { status: err.status, code: err.code, headers: err.headers } : {}),
    },
  };
}

describe('authenticateNow decides what needs no I/O, as authenticate does', () => {
  for (const tenantName of ['primary', 'other']) {
    for (const [pName, p] of POLICIES) {
      it(`${pName} on the ${tenantName} tenant`, async () => {
        const auth = s.appliance.core.auth;
        const tenant = tenantName === 'primary' ? s.primary : other.tenant;
        const host = tenantName === 'primary' ? `127.0.0.1:${s.port}` : 'other.example';
        let decided = 0;
        for (const [cName, make] of CREDENTIALS) {
          const req = (): AuthRequest => ({ headers: make(host), tenant, rawHost: host, bodyLen: 0 });
          let now: Outcome | undefined;
          try {
            const r = auth.authenticateNow(p, req());
            now = r === undefined ? undefined : { principal: r };
          } catch (e) {
            now = outcomeOf(e);
          }
          let later: Outcome;
          try {
            later = { principal: await auth.authenticate(p, req()) };
          } catch (e) {
            later = outcomeOf(e);
          }
          if (now === undefined) {
            // Left to authenticate: an OIDC bearer token or a custom verifier, nothing else.
            expect(p.kind === 'custom' || (cName === 'OIDC bearer' && p.kind === 'credentials' && p.accept.includes('bearer')), `${cName} left undecided`).toBe(
              true,
            );
            continue;
          }
          decided++;
          expect(now, cName).toEqual(later);
        }
        if (p.kind !== 'custom') expect(decided).toBeGreaterThan(10);
      });
    }
  }

  it('takes the admin ak_ key on a v1 route without a promise', () => {
    const p = s.appliance.core.auth.authenticateNow(policy.v1Admin, {
      headers: { authorization: `Bearer ${s.adminKey}` },
      tenant: s.primary,
      rawHost: '',
      bodyLen: 0,
    });
    expect(p).toMatchObject({ kind: 'apiKey', tenantId: s.primary.id, role: 'admin', superAdmin: true });
  });
});
