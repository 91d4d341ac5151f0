import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as jose from 'jose';
import * as oidc from 'openid-client';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { rp, saveClient, tokenForm } from './helpers.ts';

let s: TestServer;
let A: string; // primary tenant, addressed as localhost:PORT
let B: string; // a second tenant
let secret: string;

beforeAll(async () => {
  // A short slow-down pause keeps the sign-in limit's test quick; the behaviour is the default's.
  s = await startTestServer({ overrides: { plugins: { oidc: { loginSlowdownMs: 400 } } } });
  A = `localhost:${s.port}`;
  B = `b.test:${s.port}`;
  await s.addTenant('b.test');
  const r = await saveClient(s, A, {
    client_id: 'svc',
    redirect_uris: ['http://127.0.0.1/cb'],
    grant_types: ['client_credentials', 'authorization_code', 'refresh_token', 'password'],
    token_endpoint_auth_method: 'client_secret_basic',
  });
  secret = r.client_secret!;
  await s.appliance.core.users.add(s.primary, { name: 'alice', role: 'user', password: 'alice password 1', email: 'alice@example.test' });
});
afterAll(async () => {
  await s?.stop();
});

describe('discovery, JWKS, federation', () => {
  it('serves discovery at all three addresses with issuer = the origin addressed', async () => {
    for (const p of ['/.well-known/openid-configuration', '/oauth2/v1/.well-known/openid-configuration', '/oidc.ashx?action=discovery']) {
      const res = await s.fetch(p, { host: A });
      expect(res.status).toBe(200);
      const d = (await res.json()) as Record<string, unknown>;
      expect(d.issuer).toBe(`http://${A}`);
      expect(d.code_challenge_methods_supported).toEqual(['plain', 'S256']);
      expect(d.grant_types_supported).toContain('urn:ietf:params:oauth:grant-type:jwt-bearer');
    }
    const b = (await (await s.fetch('/.well-known/openid-configuration', { host: B })).json()) as { issuer: string };
    expect(b.issuer).toBe(`http://${B}`);
  });

  it('serves the JWKS (RS256 and ES256, public parts only) at three addresses, per tenant', async () => {
    const sets = [];
    for (const p of ['/.well-known/jwks.json', '/oauth2/v1/keys', '/oidc.ashx?action=jwks']) {
      const j = (await (await s.fetch(p, { host: A })).json()) as { keys: jose.JWK[] };
      expect(j.keys.map((k) => k.alg).sort()).toEqual(['ES256', 'RS256']);
      for (const k of j.keys) expect(k.d).toBeUndefined();
      sets.push(j);
    }
    expect(sets[1]).toEqual(sets[0]);
    const jb = (await (await s.fetch('/.well-known/jwks.json', { host: B })).json()) as { keys: jose.JWK[] };
    expect(jb.keys.map((k) => k.kid)).not.toContain(sets[0]!.keys[0]!.kid);
  });

  it('serves a self-signed ES256 entity statement, cacheable for an hour', async () => {
    for (const p of ['/.well-known/openid-federation', '/oidc.ashx?action=federation-entity']) {
      const res = await s.fetch(p, { host: A });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/entity-statement\+jwt/);
      expect(res.headers.get('cache-control')).toBe('public, max-age=3600');
      const jwt = await res.text();
      const claims = jose.decodeJwt(jwt) as { jwks: jose.JSONWebKeySet; iss: string; sub: string };
      expect(jose.decodeProtectedHeader(jwt)).toMatchObject({ alg: 'ES256', typ: 'entity-statement+jwt' });
      expect(claims.iss).toBe(`http://${A}`);
      expect(claims.sub).toBe(claims.iss);
      await jose.jwtVerify(jwt, jose.createLocalJWKSet(claims.jwks));
    }
  });
});

describe('token endpoint and bearer', () => {
  it('client_credentials through openid-client yields an RFC 9068 ES256 access token', async () => {
    const c = await rp(s, A, 'svc', secret, oidc.ClientSecretBasic(secret));
    const t = await oidc.clientCredentialsGrant(c);
    expect(t!.token_type).toBe('bearer');
    const h = jose.decodeProtectedHeader(t!.access_token);
    expect(h).toMatchObject({ typ: 'at+jwt', alg: 'ES256' });
    const claims = jose.decodeJwt(t!.access_token);
    expect(claims).toMatchObject({ sub: 'svc', client_id: 'svc', iss: `http://${A}`, tenant: s.primary.id });
    expect(claims.exp! - claims.iat!).toBe(3600);
  });

  it('wrong secret: 401 invalid_client with WWW-Authenticate Basic', async () => {
    const r = await tokenForm(s, A, { grant_type: 'client_credentials' }, { Authorization: `Basic ${Buffer.from('svc:nope').toString('base64')}` });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('invalid_client');
    expect(r.headers.get('www-authenticate')).toMatch(/^Basic/);
  });

  it('standard error codes for unknown grant types and bad scopes', async () => {
    expect((await tokenForm(s, A, { grant_type: 'magic', client_id: 'sovcomms-console' })).body.error).toBe('unsupported_grant_type');
    expect(
      (await tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid root' }))
        .body.error,
    ).toBe('invalid_scope');
    const noAuth = await tokenForm(s, A, { grant_type: 'client_credentials' });
    expect(noAuth.status).toBe(401);
  });

  it('password grant on /oidc.ashx/token gives an admin bearer that the v1 surface accepts', async () => {
    const res = await s.fetch('/oidc.ashx/token', {
      method: 'POST',
      host: A,
      body: new URLSearchParams({ grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid' }),
    });
    expect(res.status).toBe(200);
    const t = (await res.json()) as { access_token: string; id_token: string; refresh_token?: string };
    expect(t.refresh_token).toBeUndefined();
    expect(jose.decodeProtectedHeader(t.id_token).alg).toBe('RS256');
    const ok = await s.fetch('/api.ashx/v1/auditlog?event=login-ok', { host: A, key: t.access_token });
    expect(ok.status).toBe(200);
    const log = (await ok.json()) as { items?: { event: string; user: string }[] };
    expect(JSON.stringify(log)).toContain('login-ok');
    // Another tenant: the signature is not by its keys.
    const other = await s.fetch('/api.ashx/v1/auditlog', { host: B, key: t.access_token });
    expect(other.status).toBe(401);
  });

  it('a user bearer gets 403 on v1; a bad password is audited and refused', async () => {
    const t = await tokenForm(s, A, {
      grant_type: 'password',
      client_id: 'sovcomms-console',
      username: 'alice',
      password: 'alice password 1',
      scope: 'openid profile email',
    });
    expect(t.status).toBe(200);
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: A, key: String(t.body.access_token) })).status).toBe(403);
    const bad = await tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username: 'alice', password: 'wrong password' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_grant');
    const log = await (await s.fetch('/api.ashx/v1/auditlog?event=login-fail', { host: A, key: s.adminKey })).text();
    expect(log).toContain('alice');
    expect(log).not.toContain('wrong password');
  });

  it('per-account sign-in limit: name and e-mail share one budget; past it the account is slowed (one at a time, a queue of 3, then 429), never locked: the right password still signs in', async () => {
    await s.appliance.core.users.add(s.primary, { name: 'target', role: 'user', password: 'target password 1', email: 'target@example.test' });
    const form = (username: string, password: string) => tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username, password });
    const codes: number[] = [];
    for (let i = 0; i < 5; i++) codes.push((await form(i % 2 ? 'target@example.test' : 'TARGET', `guess ${i} guess`)).status);
    expect(codes).toEqual([400, 400, 400, 400, 400]);
    // Limited now: four guesses at once, three wait their turn (400 each), the fourth is refused.
    const burst = await Promise.all([0, 1, 2, 3].map((i) => form('target', `burst ${i} guess`)));
    expect(burst.map((r) => r.status).sort()).toEqual([400, 400, 400, 429]);
    // The owner is not locked out: the right password gets in, after the pause.
    const t0 = Date.now();
    const ok = await form('target@example.test', 'target password 1');
    expect(ok.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
    // Signed in, the account's budget is whole again.
    expect((await form('target', 'one more wrong')).status).toBe(400);
    const log = await (await s.fetch('/api.ashx/v1/auditlog?event=login-rate-limited', { host: A, key: s.adminKey })).text();
    expect(log).toContain('target');
  });

  it('alg none and a forged signature are refused by the bearer hook', async () => {
    const t = await tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid' });
    const claims = jose.decodeJwt(String(t.body.access_token));
    const none = new jose.UnsecuredJWT(claims).encode();
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: A, key: none })).status).toBe(401);
    const { privateKey } = await jose.generateKeyPair('ES256');
    const kid = jose.decodeProtectedHeader(String(t.body.access_token)).kid!;
    const forged = await new jose.SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid }).sign(privateKey);
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: A, key: forged })).status).toBe(401);
  });

  it('introspection needs client authentication; revocation always answers 200 and takes effect', async () => {
    const t = await tokenForm(s, A, { grant_type: 'client_credentials' }, { Authorization: `Basic ${Buffer.from(`svc:${secret}`).toString('base64')}` });
    const at = String(t.body.access_token);
    const c = await rp(s, A, 'svc', secret, oidc.ClientSecretBasic(secret));
    expect((await oidc.tokenIntrospection(c, at)).active).toBe(true);
    expect((await oidc.tokenIntrospection(c, 'garbage')).active).toBe(false);
    const anon = await s.fetch('/oauth2/v1/introspect', { method: 'POST', host: A, body: new URLSearchParams({ token: at }) });
    expect(anon.status).toBe(401);
    await oidc.tokenRevocation(c, at);
    expect((await oidc.tokenIntrospection(c, at)).active).toBe(false);
    const unknown = await s.fetch('/oauth2/v1/revoke', { method: 'POST', host: A, body: new URLSearchParams({ token: 'nothing' }) });
    expect(unknown.status).toBe(200);
    const log = await (await s.fetch('/api.ashx/v1/auditlog', { host: A, key: s.adminKey })).text();
    expect(log).toContain('"introspect"');
    expect(log).toContain('"revoke"');
    // Neither the server log nor the audit log carries tokens or secrets.
    expect(s.logs.text()).not.toContain(at);
    expect(s.logs.text()).not.toContain(secret);
    expect(log).not.toContain(at);
  });
});

describe('token endpoint fast path', () => {
  it('answers like the full stack: same tokens and errors behind a proxy header, 415 for JSON, 413 for huge bodies', async () => {
    const basic = { Authorization: `Basic ${Buffer.from(`svc:${secret}`).toString('base64')}` };
    const fast = await tokenForm(s, A, { grant_type: 'client_credentials' }, basic);
    const full = await tokenForm(s, A, { grant_type: 'client_credentials' }, { ...basic, 'X-Forwarded-For': '10.0.0.9' });
    expect(fast.status).toBe(200);
    expect(full.status).toBe(200);
    expect(Object.keys(fast.body).sort()).toEqual(Object.keys(full.body).sort());
    expect(fast.headers.get('cache-control')).toBe('no-store');
    expect(fast.headers.get('x-request-id')).toBeTruthy();
    const e1 = await tokenForm(s, A, { grant_type: 'nope' });
    const e2 = await tokenForm(s, A, { grant_type: 'nope' }, { 'X-Forwarded-For': '10.0.0.9' });
    expect(e1.body).toEqual(e2.body);
    const json = await s.fetch('/oauth2/v1/token', { method: 'POST', host: A, json: { grant_type: 'client_credentials' } });
    expect(json.status).toBe(415);
    const huge = await s.fetch('/oauth2/v1/token', {
      method: 'POST',
      host: A,
      body: new URLSearchParams({ grant_type: 'x', pad: 'a'.repeat(2 * 1024 * 1024) }),
    });
    expect(huge.status).toBe(413);
    const repeated = await s.fetch('/oauth2/v1/token', {
      method: 'POST',
      host: A,
      body: 'grant_type=a&grant_type=b',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(((await repeated.json()) as { error: string }).error).toBe('invalid_request');
  });
});

describe('API description', () => {
  it('lists the OIDC routes and their aliases in /openapi.json', async () => {
    const res = await s.fetch('/openapi.json', { host: A });
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { paths: Record<string, unknown> };
    const paths = Object.keys(doc.paths).join(' ');
    for (const p of ['/oauth2/v1/token', '/oauth2/v1/authorize', '/.well-known/openid-configuration', '/oauth2/v1/introspect', '/oauth2/v1/logout'])
      expect(paths).toContain(p);
    expect(JSON.stringify(doc)).toContain('oidc-clients-save');
  });
});

describe('client management', () => {
  it('lists clients without secrets (HMAC), tenant-isolated; genkey shows a new secret once', async () => {
    const list = await s.fetch('/signal.ashx?oidc-clients=1', { host: A, headers: { 'X-Service-Admin-Signature': s.hmac('oidc-clients', A) } });
    expect(list.status).toBe(200);
    const body = await list.text();
    expect(body).toContain('"svc"');
    expect(body).toContain('sovcomms-console');
    expect(body).not.toContain(secret);
    const listB = await s.fetch('/signal.ashx?oidc-clients=1', { host: B, headers: { 'X-Service-Admin-Signature': s.hmac('oidc-clients', B) } });
    expect(await listB.text()).not.toContain('"svc"');
    const json = JSON.stringify({ client_id: 'svc' });
    const g = await s.fetch('/signal.ashx?oidc-clients-genkey=1', {
      method: 'POST',
      host: A,
      json: { client_id: 'svc' },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-clients-genkey', A, json.length) },
    });
    expect(g.status).toBe(200);
    const ns = ((await g.json()) as { client_secret: string }).client_secret;
    expect(ns).not.toBe(secret);
    const old = await tokenForm(s, A, { grant_type: 'client_credentials' }, { Authorization: `Basic ${Buffer.from(`svc:${secret}`).toString('base64')}` });
    expect(old.status).toBe(401);
    secret = ns;
  });

  it('genkey without client_id (as the spec calls it): the only client of the tenant with a secret, else 400 naming client_id', async () => {
    const genkey = (host: string) =>
      s.fetch('/signal.ashx?oidc-clients-genkey=1', { method: 'POST', host, headers: { 'X-Service-Admin-Signature': s.hmac('oidc-clients-genkey', host) } });
    const none = await genkey(B);
    expect(none.status).toBe(400);
    expect(await none.json()).toMatchObject({
      error: 'invalid_request',
      field: 'client_id',
      error_description: expect.stringMatching(/no client with a secret/),
    });
    await saveClient(s, B, { client_id: 'only-b', redirect_uris: [], grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_post' });
    const one = await genkey(B);
    expect(one.status).toBe(200);
    const { client_id, client_secret } = (await one.json()) as { client_id: string; client_secret: string };
    expect(client_id).toBe('only-b');
    const tok = await tokenForm(s, B, { grant_type: 'client_credentials', client_id: 'only-b', client_secret });
    expect(tok.status).toBe(200);
    await saveClient(s, B, {
      client_id: 'second-b',
      redirect_uris: [],
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    const two = await genkey(B);
    expect(two.status).toBe(400);
    expect(((await two.json()) as { error_description: string }).error_description).toMatch(
      /client_id is required: the tenant has 2 clients with a secret \(only-b, second-b\)/,
    );
  });

  it('refuses invalid metadata with 400', async () => {
    const bad = async (body: Record<string, unknown>) => {
      const json = JSON.stringify(body);
      const r = await s.fetch('/signal.ashx?oidc-clients-save=1', {
        method: 'POST',
        host: A,
        json: body,
        headers: { 'X-Service-Admin-Signature': s.hmac('oidc-clients-save', A, json.length) },
      });
      return r.status;
    };
    expect(await bad({ client_id: 'x', redirect_uris: ['http://evil.example/cb'], grant_types: ['authorization_code'] })).toBe(400);
    expect(await bad({ client_id: 'x', redirect_uris: ['https://ok.example/cb#frag'] })).toBe(400);
    expect(await bad({ client_id: 'x', grant_types: ['client_credentials'], token_endpoint_auth_method: 'none' })).toBe(400);
    expect(await bad({ client_id: 'x', token_endpoint_auth_method: 'private_key_jwt', grant_types: ['client_credentials'] })).toBe(400);
    expect(await bad({ client_id: 'x', grant_types: ['telepathy'] })).toBe(400);
  });

  it('apikey-create needs an admin OIDC bearer: an ak_ key is refused', async () => {
    const byKey = await s.fetch('/signal.ashx?apikey-create=1', { method: 'POST', host: A, json: { name: 'ci' }, key: s.adminKey });
    expect(byKey.status).toBe(403);
    const t = await tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid' });
    const ok = await s.fetch('/signal.ashx?apikey-create=1', { method: 'POST', host: A, json: { name: 'ci' }, key: String(t.body.access_token) });
    expect(ok.status).toBe(200);
    const k = (await ok.json()) as { key: string };
    expect(k.key).toMatch(/^ak_/);
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: A, key: k.key })).status).toBe(200);
  });
});
