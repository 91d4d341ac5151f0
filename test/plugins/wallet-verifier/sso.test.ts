import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { saveClient, tokenForm } from '../oidc/helpers.ts';
import { adminCall, body, openSession, sendEncrypted, VERIFIER_OVERRIDES } from './helpers.ts';
import { issuePid, makeHolder, makeIssuerCa, presentPid, type Holder, type TestCa } from './wallet.ts';

const GRANT = 'urn:sovcomms:params:oauth:grant-type:sso_assertion';
let s: TestServer;
let ca: TestCa;
let holder: Holder;
let A: string;
let secret: string;
const clock = new ManualClock(Date.now());
const basic = (id: string, sec: string) => ({ authorization: `Basic ${Buffer.from(`${id}:${sec}`).toString('base64')}` });

beforeAll(async () => {
  s = await startTestServer({
    clock,
    overrides: { ...VERIFIER_OVERRIDES, plugins: { 'wallet-verifier': { perIpPerMinute: 100_000, signIn: { tenants: { 'off.example': { mode: 'off' } } } } } },
  });
  A = `localhost:${s.port}`;
  ca = await makeIssuerCa();
  holder = await makeHolder();
  expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem })).status).toBe(200);
  await s.appliance.core.users.add(s.primary, { name: 'erika.mustermann', role: 'user', password: 'correct horse battery staple' });
  secret = (await saveClient(s, A, { client_id: 'office-app', grant_types: [GRANT], token_endpoint_auth_method: 'client_secret_basic' })).client_secret!;
});
afterAll(async () => {
  await s?.stop();
});

async function signIn(host?: string) {
  const o = await openSession(s, 'preset=pid', host);
  const r = await sendEncrypted(
    s,
    o,
    await presentPid(await issuePid(ca, holder), holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) }),
    {},
    host,
  );
  expect(r.status).toBe(200);
  return body(r);
}

describe('wallet sign-in: sso_assertion redeemed at the token endpoint', () => {
  it('a PID mapped to an account yields a one-time assertion; the relying party exchanges it for tokens of that account', async () => {
    const out = await signIn();
    expect(out.sso_assertion).toMatch(/^vpa_/);
    const t = await tokenForm(s, A, { grant_type: GRANT, assertion: out.sso_assertion, scope: 'openid profile' }, basic('office-app', secret));
    expect(t.status).toBe(200);
    expect(t.body.wallet_presentation).toEqual({ family_name: 'Mustermann', given_name: 'Erika', birthdate: '1964-08-12' });
    const idt = jose.decodeJwt(t.body.id_token as string);
    expect(idt.aud).toBe('office-app');
    expect(idt.amr).toEqual(['pid']);
    const user = s.appliance.core.users.byName(s.primary, 'erika.mustermann')!;
    expect(idt.sub).toBe(user.id);
    // One-time: the second exchange fails.
    const again = await tokenForm(s, A, { grant_type: GRANT, assertion: out.sso_assertion }, basic('office-app', secret));
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
    const ev = await body(await adminCall(s, 'GET', '/signal.ashx?list-vp-events&limit=20', 'list-vp-events'));
    expect(ev.events.some((e: { event: string; extra: string }) => e.event === 'vp-sso-minted' && e.extra.includes(`session=${out.session_id}`))).toBe(true);
  });

  it('short-lived: refused after its TTL; a client must authenticate and be allowed the grant', async () => {
    const out = await signIn();
    expect((await tokenForm(s, A, { grant_type: GRANT, assertion: out.sso_assertion })).status).toBe(401);
    const other = (await saveClient(s, A, { client_id: 'no-sso', grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_basic' }))
      .client_secret!;
    expect((await tokenForm(s, A, { grant_type: GRANT, assertion: out.sso_assertion }, basic('no-sso', other))).body.error).toBe('unauthorized_client');
    clock.advance(61_000);
    try {
      const late = await tokenForm(s, A, { grant_type: GRANT, assertion: out.sso_assertion }, basic('office-app', secret));
      expect(late.status).toBe(400);
      expect(late.body.error).toBe('invalid_grant');
    } finally {
      clock.advance(-61_000);
    }
    expect((await tokenForm(s, A, { grant_type: GRANT, assertion: 'vpa_forged' }, basic('office-app', secret))).body.error).toBe('invalid_grant');
  });

  it('tenant policy: no matching account, or sign-in off for the tenant, means no assertion', async () => {
    const user = s.appliance.core.users.byName(s.primary, 'erika.mustermann')!;
    s.appliance.core.users.setStatus(s.primary, user.id, 'disabled');
    try {
      expect((await signIn()).sso_assertion).toBeUndefined();
    } finally {
      s.appliance.core.users.setStatus(s.primary, user.id, 'active');
    }
    const { tenant } = await s.addTenant('off.example');
    await s.appliance.core.users.add(tenant, { name: 'erika.mustermann', role: 'user', password: 'correct horse battery staple' });
    expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem }, 'off.example')).status).toBe(200);
    const out = await signIn('off.example');
    expect(out.status).toBe('verified');
    expect(out.sso_assertion).toBeUndefined();
  });
});
