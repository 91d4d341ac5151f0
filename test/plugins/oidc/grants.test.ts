import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definePlugin, type AnyPlugin } from '../../../server/plugin.ts';
import audit from '../../../plugins/audit/index.ts';
import oidcPlugin from '../../../plugins/oidc/index.ts';
import { oauthError } from '../../../plugins/oidc/provider.ts';
import { OIDC, type OidcService } from '../../../plugins/oidc/api.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { saveClient, tokenForm } from './helpers.ts';

const PRE_AUTH = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';
const AS_USER = 'urn:test:params:oauth:grant-type:as_user';

let oidc: OidcService;
let seen: Record<string, unknown> | undefined;

/** A stand-in for the wallet issuer and verifier: each plugs a grant with its own parameters into the token endpoint. */
const issuerLike = definePlugin({
  name: 'grant-test',
  description: 'registers the pre-authorized_code grant and a grant that signs a named user in',
  dependsOn: ['oidc'],
  setup(ctx) {
    oidc = ctx.use(OIDC);
    oidc.registerGrant({
      type: PRE_AUTH,
      parameters: ['pre-authorized_code', 'tx_code'],
      clientAuth: 'optional',
      handler: async (g) => {
        seen = g as unknown as Record<string, unknown>;
        if (g.form['pre-authorized_code'] !== 'good') throw oauthError('invalid_grant', 'unknown pre-authorized_code');
        return { access_token: `cred-${g.tenant.id}`, token_type: 'Bearer', expires_in: 300, c_nonce: 'n' };
      },
    });
    oidc.registerGrant({
      type: AS_USER,
      parameters: ['test_user_id', 'scope'],
      clientAuth: 'required',
      handler: async (g) => {
        const user = g.activeUser(g.form.test_user_id ?? '');
        if (!user) throw oauthError('invalid_grant', 'no such active user');
        return g.issue({ user, scope: g.scope(g.form.scope, ['openid']), idToken: true, amr: ['test'] });
      },
    });
  },
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ plugins: [audit, oidcPlugin, issuerLike] as AnyPlugin[] });
});
afterAll(async () => {
  await s?.stop();
});

describe('pluggable grants', () => {
  it('a grant registered through ctx.use("oidc") is listed in discovery and served without client authentication', async () => {
    const d = (await (await s.fetch('/.well-known/openid-configuration')).json()) as { grant_types_supported: string[] };
    expect(d.grant_types_supported).toContain(PRE_AUTH);
    const t = await tokenForm(s, `127.0.0.1:${s.port}`, { grant_type: PRE_AUTH, 'pre-authorized_code': 'good' });
    expect(t.status).toBe(200);
    expect(t.body).toMatchObject({ access_token: `cred-${s.primary.id}`, c_nonce: 'n' });
    const bad = await tokenForm(s, `127.0.0.1:${s.port}`, { grant_type: PRE_AUTH, 'pre-authorized_code': 'forged' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_grant');
  });

  it("the grant's handler gets narrow methods, never the provider", () => {
    expect(seen).toBeDefined();
    expect(Object.keys(seen!).sort()).toEqual(['activeUser', 'client', 'form', 'issue', 'issuer', 'req', 'scope', 'tenant']);
  });

  it("the token form and its /openapi.json description are composed from every grant's parameters", async () => {
    const doc = (await (await s.fetch('/openapi.json')).json()) as {
      paths: Record<
        string,
        { post?: { description?: string; requestBody?: { content: Record<string, { schema: { properties: Record<string, unknown> } }> } } }
      >;
    };
    const op = doc.paths['/oauth2/v1/token']!.post!;
    const fields = Object.keys(op.requestBody!.content['application/x-www-form-urlencoded']!.schema.properties);
    for (const f of [
      'grant_type',
      'code',
      'code_verifier',
      'refresh_token',
      'username',
      'assertion',
      'pre-authorized_code',
      'tx_code',
      'test_user_id',
      'client_assertion',
    ])
      expect(fields).toContain(f);
    expect(op.description).toContain(`\`${PRE_AUTH}\`: pre-authorized_code, tx_code (client authentication optional)`);
    // A registered grant's field is bounded like every other: a repeated one is refused.
    const twice = await s.fetch('/oauth2/v1/token', {
      method: 'POST',
      body: new URLSearchParams([
        ['grant_type', PRE_AUTH],
        ['tx_code', '1'],
        ['tx_code', '2'],
      ]),
    });
    expect(twice.status).toBe(400);
    expect(((await twice.json()) as { error_description: string }).error_description).toContain('tx_code');
  });

  it('a client may be registered for the grants that are registered, and for no other', async () => {
    const host = `127.0.0.1:${s.port}`;
    const { client_secret } = await saveClient(s, host, { client_id: 'as-user-rp', grant_types: [AS_USER] });
    const ok = await tokenForm(
      s,
      host,
      { grant_type: AS_USER, test_user_id: s.appliance.core.users.byName(s.primary, 'admin')!.id, scope: 'openid profile' },
      { authorization: `Basic ${Buffer.from(`as-user-rp:${client_secret}`).toString('base64')}` },
    );
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ token_type: 'Bearer', scope: 'openid profile' });
    expect(typeof ok.body.id_token).toBe('string');
    expect(ok.body.refresh_token).toBeUndefined();
    // The wallet verifier's grant is not registered on this server: no client may ask for it.
    const json = { client_id: 'sso-rp', grant_types: ['urn:sovcomms:params:oauth:grant-type:sso_assertion'] };
    const refused = await s.fetch('/signal.ashx?oidc-clients-save=1', {
      method: 'POST',
      host,
      json,
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-clients-save', host, Buffer.byteLength(JSON.stringify(json))) },
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error_description: string }).error_description).toContain('grant_types');
  });

  it('grants are registered at setup: once the token endpoint is mounted, a late one is refused', () => {
    expect(() => oidc.registerGrant({ type: 'urn:test:late', parameters: [], clientAuth: 'required', handler: async () => ({}) })).toThrow(/at setup/);
  });
});
