import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as jose from 'jose';
import * as oidc from 'openid-client';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { TestBrowser, authorizeThrough, hidden, rp, saveClient, tokenForm } from './helpers.ts';

let s: TestServer;
let A: string;
let webSecret: string;
let jarKey: jose.CryptoKey;
const alice = { username: 'alice', password: 'alice password 1' };
const CB = 'http://127.0.0.1/cb';

beforeAll(async () => {
  s = await startTestServer();
  A = `localhost:${s.port}`;
  await s.appliance.core.users.add(s.primary, { name: 'alice', role: 'user', password: alice.password, email: 'alice@example.test' });
  webSecret = (
    await saveClient(s, A, {
      client_id: 'webapp',
      client_name: 'Web App',
      redirect_uris: [CB],
      post_logout_redirect_uris: ['http://127.0.0.1/bye'],
      grant_types: ['authorization_code', 'refresh_token', 'implicit'],
      token_endpoint_auth_method: 'client_secret_basic',
    })
  ).client_secret!;
  await saveClient(s, A, {
    client_id: 'spa',
    redirect_uris: [CB],
    grant_types: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_method: 'none',
    skip_consent: true,
  });
  const kp = await jose.generateKeyPair('ES256', { extractable: true });
  jarKey = kp.privateKey;
  const pub = { ...(await jose.exportJWK(kp.publicKey)), kid: 'jar-1', alg: 'ES256', use: 'sig' };
  await saveClient(s, A, {
    client_id: 'jarapp',
    redirect_uris: [CB],
    grant_types: ['authorization_code', 'client_credentials', 'urn:ietf:params:oauth:grant-type:jwt-bearer'],
    token_endpoint_auth_method: 'private_key_jwt',
    jwks: { keys: [pub] },
    skip_consent: true,
  });
});
afterAll(async () => {
  await s?.stop();
});

async function codeFlow(c: oidc.Configuration, b: TestBrowser, extra: Record<string, string> = {}, method: 'S256' | 'plain' | 'none' = 'S256') {
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const params: Record<string, string> = { redirect_uri: CB, scope: 'openid profile email offline_access', state, nonce, ...extra };
  if (method !== 'none') {
    params.code_challenge = method === 'S256' ? await oidc.calculatePKCECodeChallenge(verifier) : verifier;
    params.code_challenge_method = method;
  }
  const url = oidc.buildAuthorizationUrl(c, params);
  const back = await authorizeThrough(b, url, alice);
  const tokens = await oidc.authorizationCodeGrant(c, new URL(back), {
    pkceCodeVerifier: method === 'none' ? undefined : verifier,
    expectedState: state,
    expectedNonce: nonce,
    idTokenExpected: true,
  });
  return { tokens, back };
}

describe('authorization code flow (openid-client as the RP)', () => {
  it('code + PKCE S256 with consent, then userinfo, refresh rotation with reuse detection', async () => {
    const c = await rp(s, A, 'webapp', webSecret, oidc.ClientSecretBasic(webSecret));
    const b = new TestBrowser(s, A);
    const { tokens, back } = await codeFlow(c, b);
    expect(new URL(back).searchParams.get('iss')).toBe(`http://${A}`);
    const claims = tokens.claims()!;
    expect(claims.sub).toBe(s.appliance.core.users.byName(s.primary, 'alice')!.id);
    expect(claims.auth_time).toBeTypeOf('number');
    expect(tokens.refresh_token).toMatch(/^rt_/);
    const info = await oidc.fetchUserInfo(c, tokens.access_token, claims.sub);
    expect(info).toMatchObject({ preferred_username: 'alice', email: 'alice@example.test' });
    const r2 = await oidc.refreshTokenGrant(c, tokens.refresh_token!);
    expect(r2.refresh_token).not.toBe(tokens.refresh_token);
    // Reuse of the rotated-out token: refused, and the whole family is revoked.
    await expect(oidc.refreshTokenGrant(c, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    await expect(oidc.refreshTokenGrant(c, r2.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    expect((await oidc.tokenIntrospection(c, r2.access_token)).active).toBe(false);
    // Consent remembered: a second run needs no page, the session signs in silently.
    const again = await codeFlow(c, b, { prompt: 'none' });
    expect(again.tokens.access_token).toBeTruthy();
  });

  it('public client with PKCE plain; plain switched off per tenant is refused', async () => {
    const c = await rp(s, A, 'spa', undefined, oidc.None());
    const b = new TestBrowser(s, A);
    const { tokens } = await codeFlow(c, b, {}, 'plain');
    expect(tokens.id_token).toBeTruthy();
    const json = JSON.stringify({ allowPlainPkce: false });
    const off = await s.fetch('/signal.ashx?oidc-settings=1', {
      method: 'POST',
      host: A,
      json: { allowPlainPkce: false },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-settings', A, json.length) },
    });
    expect(off.status).toBe(200);
    const url = oidc.buildAuthorizationUrl(c, {
      redirect_uri: CB,
      scope: 'openid',
      code_challenge: 'a'.repeat(43),
      code_challenge_method: 'plain',
      state: 'st',
    });
    const r = await b.get(url.href);
    expect(r.status).toBe(302);
    const loc = new URL(r.headers.get('location')!);
    expect(loc.searchParams.get('error')).toBe('invalid_request');
    expect(loc.searchParams.get('state')).toBe('st');
    const d = (await (await s.fetch('/.well-known/openid-configuration', { host: A })).json()) as { code_challenge_methods_supported: string[] };
    expect(d.code_challenge_methods_supported).toEqual(['S256']);
    const on = JSON.stringify({ allowPlainPkce: true });
    await s.fetch('/signal.ashx?oidc-settings=1', {
      method: 'POST',
      host: A,
      json: { allowPlainPkce: true },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-settings', A, on.length) },
    });
    // A public client without PKCE is refused.
    const noPkce = await b.get(oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid' }).href);
    expect(new URL(noPkce.headers.get('location')!).searchParams.get('error')).toBe('invalid_request');
  });

  it('implicit id_token and hybrid code id_token answer in the fragment, with nonce', async () => {
    const c = await rp(s, A, 'webapp', webSecret, oidc.ClientSecretBasic(webSecret));
    oidc.useIdTokenResponseType(c);
    const b = new TestBrowser(s, A);
    const nonce = oidc.randomNonce();
    const state = oidc.randomState();
    const back = await authorizeThrough(b, oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', nonce, state }), alice);
    expect(new URL(back).hash).toContain('id_token=');
    const idt = await oidc.implicitAuthentication(c, new URL(back), nonce, { expectedState: state });
    expect(idt.nonce).toBe(nonce);
    // Nonce replay: the same response checked against another expected nonce is refused.
    await expect(oidc.implicitAuthentication(c, new URL(back), oidc.randomNonce(), { expectedState: state })).rejects.toThrow();
    // Missing nonce with an id_token response: error back to the client.
    const noNonce = await b.get(
      `/oauth2/v1/authorize?client_id=webapp&response_type=id_token&scope=openid&state=${state}&redirect_uri=${encodeURIComponent(CB)}`,
    );
    expect(new URL(noNonce.headers.get('location')!).hash).toContain('error=invalid_request');

    const h = await rp(s, A, 'webapp', webSecret, oidc.ClientSecretBasic(webSecret));
    oidc.useCodeIdTokenResponseType(h);
    const n2 = oidc.randomNonce();
    const st2 = oidc.randomState();
    const hb = await authorizeThrough(b, oidc.buildAuthorizationUrl(h, { redirect_uri: CB, scope: 'openid', nonce: n2, state: st2 }), alice);
    const frag = new URLSearchParams(new URL(hb).hash.slice(1));
    expect(jose.decodeJwt(frag.get('id_token')!).c_hash).toBeTruthy();
    const tokens = await oidc.authorizationCodeGrant(h, new URL(hb), { expectedNonce: n2, expectedState: st2 });
    expect(tokens.access_token).toBeTruthy();
  });

  it('JAR request object signed by the client, private_key_jwt at the token endpoint; query wins on conflict', async () => {
    const c = await rp(s, A, 'jarapp', {}, oidc.PrivateKeyJwt({ key: jarKey, kid: 'jar-1' }));
    const b = new TestBrowser(s, A);
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = await oidc.buildAuthorizationUrlWithJAR(
      c,
      {
        redirect_uri: CB,
        scope: 'openid',
        state,
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      },
      { key: jarKey, kid: 'jar-1' },
    );
    const back = await authorizeThrough(b, url, alice);
    const tokens = await oidc.authorizationCodeGrant(c, new URL(back), { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.id_token).toBeTruthy();
    // The query's state overrides the request object's.
    url.searchParams.set('state', 'from-query');
    const r = await b.get(url.href);
    expect(new URL(r.headers.get('location')!).searchParams.get('state')).toBe('from-query');
    // An unsigned request object is refused.
    const none = new jose.UnsecuredJWT({ client_id: 'jarapp', redirect_uri: CB, scope: 'openid', response_type: 'code' }).setIssuer('jarapp').encode();
    const rn = await b.get(`/oauth2/v1/authorize?client_id=jarapp&response_type=code&redirect_uri=${encodeURIComponent(CB)}&request=${none}`);
    expect(new URL(rn.headers.get('location')!).searchParams.get('error')).toBe('invalid_request_object');
  });

  it('client_credentials with private_key_jwt and the RFC 7523 jwt-bearer grant', async () => {
    const c = await rp(s, A, 'jarapp', {}, oidc.PrivateKeyJwt({ key: jarKey, kid: 'jar-1' }));
    const cc = await oidc.clientCredentialsGrant(c);
    expect(jose.decodeJwt(cc.access_token).client_id).toBe('jarapp');
    const assertion = await new jose.SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: 'jar-1' })
      .setIssuer('jarapp')
      .setSubject('alice')
      .setAudience(`http://${A}`)
      .setIssuedAt()
      .setExpirationTime('5m')
      .setJti(crypto.randomUUID())
      .sign(jarKey);
    const t = await oidc.genericGrantRequest(c, 'urn:ietf:params:oauth:grant-type:jwt-bearer', { assertion, scope: 'openid profile' });
    expect(jose.decodeJwt(t.access_token).preferred_username).toBe('alice');
    // Replay of the same assertion is refused.
    await expect(oidc.genericGrantRequest(c, 'urn:ietf:params:oauth:grant-type:jwt-bearer', { assertion })).rejects.toMatchObject({ error: 'invalid_grant' });
  });
});

describe('response modes', () => {
  it('form_post answers with an auto-submitting form carrying code, state and iss', async () => {
    const c = await rp(s, A, 'spa', undefined, oidc.None());
    const b = new TestBrowser(s, A);
    const url = oidc.buildAuthorizationUrl(c, {
      redirect_uri: CB,
      scope: 'openid',
      state: 'fp',
      response_mode: 'form_post',
      code_challenge: 'a'.repeat(43),
      code_challenge_method: 'S256',
    });
    let { res } = await b.follow(await b.get(url.href));
    let html = await res.text();
    ({ res } = await b.follow(
      await b.post('/oidc.ashx/login', { i: hidden(html, 'i'), csrf: hidden(html, 'csrf'), username: alice.username, password: alice.password }),
    ));
    html = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(html).toContain(`action="${CB}"`);
    expect(hidden(html, 'code')).toMatch(/^ac_/);
    expect(hidden(html, 'state')).toBe('fp');
    expect(hidden(html, 'iss')).toBe(`http://${A}`);
  });
});

describe('negative cases', () => {
  it('a wrong redirect_uri is answered 400 without redirecting', async () => {
    const b = new TestBrowser(s, A);
    const r = await b.get(`/oauth2/v1/authorize?client_id=webapp&response_type=code&scope=openid&redirect_uri=${encodeURIComponent('http://127.0.0.1/evil')}`);
    expect(r.status).toBe(400);
    expect(r.headers.get('location')).toBeNull();
  });

  it('a reused code is refused and revokes the tokens of its first use', async () => {
    const c = await rp(s, A, 'webapp', webSecret, oidc.ClientSecretBasic(webSecret));
    const b = new TestBrowser(s, A);
    const { tokens, back } = await codeFlow(c, b);
    const code = new URL(back).searchParams.get('code')!;
    const again = await tokenForm(
      s,
      A,
      { grant_type: 'authorization_code', code, redirect_uri: CB },
      { Authorization: `Basic ${Buffer.from(`webapp:${webSecret}`).toString('base64')}` },
    );
    expect(again.body.error).toBe('invalid_grant');
    expect((await oidc.tokenIntrospection(c, tokens.access_token)).active).toBe(false);
    await expect(oidc.refreshTokenGrant(c, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('PKCE downgrade: a verifier sent when no challenge was made is invalid_grant', async () => {
    const c = await rp(s, A, 'webapp', webSecret, oidc.ClientSecretBasic(webSecret));
    const b = new TestBrowser(s, A);
    const back = await authorizeThrough(b, oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', state: 'x' }), alice);
    const code = new URL(back).searchParams.get('code')!;
    const r = await tokenForm(
      s,
      A,
      { grant_type: 'authorization_code', code, redirect_uri: CB, code_verifier: 'v'.repeat(50) },
      { Authorization: `Basic ${Buffer.from(`webapp:${webSecret}`).toString('base64')}` },
    );
    expect(r.body.error).toBe('invalid_grant');
  });

  it('prompt=none without a session answers login_required; prompt=login forces the password page', async () => {
    const b = new TestBrowser(s, A);
    const r = await b.get(
      `/oauth2/v1/authorize?client_id=spa&response_type=code&scope=openid&prompt=none&state=q&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256&redirect_uri=${encodeURIComponent(CB)}`,
    );
    expect(new URL(r.headers.get('location')!).searchParams.get('error')).toBe('login_required');
    const c = await rp(s, A, 'spa', undefined, oidc.None());
    await codeFlow(c, b);
    const sidBefore = b.jar.get('sc_sid');
    const r2 = await b.get(
      oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', prompt: 'login', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' }).href,
    );
    expect(r2.headers.get('location')).toMatch(/^\/login\.html\?i=/);
    // Signing in again rotates the session cookie (no fixation).
    await authorizeThrough(
      b,
      oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', prompt: 'login', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' }),
      alice,
    );
    expect(b.jar.get('sc_sid')).not.toBe(sidBefore);
  });

  it('prompt=none without consent answers consent_required; a request object signed by another key is refused', async () => {
    await s.appliance.core.users.add(s.primary, { name: 'dave', role: 'user', password: 'dave password 1' });
    const c = await rp(s, A, 'webapp', webSecret, oidc.ClientSecretBasic(webSecret));
    const b = new TestBrowser(s, A);
    // Sign dave in through another client that needs no consent, then ask webapp silently.
    const spa = await rp(s, A, 'spa', undefined, oidc.None());
    await authorizeThrough(
      b,
      oidc.buildAuthorizationUrl(spa, { redirect_uri: CB, scope: 'openid', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' }),
      { username: 'dave', password: 'dave password 1' },
    );
    const r = await b.get(oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', prompt: 'none', state: 'c' }).href);
    expect(new URL(r.headers.get('location')!).searchParams.get('error')).toBe('consent_required');
    const other = (await jose.generateKeyPair('ES256')).privateKey;
    const jar = await rp(s, A, 'jarapp', {}, oidc.PrivateKeyJwt({ key: jarKey, kid: 'jar-1' }));
    const url = await oidc.buildAuthorizationUrlWithJAR(
      jar,
      { redirect_uri: CB, scope: 'openid', state: 'k', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' },
      { key: other, kid: 'jar-1' },
    );
    // The redirect_uri was only inside the unverifiable object: nothing to redirect to safely.
    const rj = await b.get(url.href);
    expect(rj.status).toBe(400);
    expect(rj.headers.get('location')).toBeNull();
    url.searchParams.set('redirect_uri', CB);
    const rq = await b.get(url.href);
    expect(new URL(rq.headers.get('location')!).searchParams.get('error')).toBe('invalid_request_object');
  });

  it('a login form without the CSRF token is refused', async () => {
    const b = new TestBrowser(s, A);
    const r = await b.get(
      `/oauth2/v1/authorize?client_id=spa&response_type=code&scope=openid&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256&redirect_uri=${encodeURIComponent(CB)}`,
    );
    const page = await b.get(r.headers.get('location')!);
    const i = hidden(await page.text(), 'i');
    const post = await b.post('/oidc.ashx/login', { i, csrf: 'forged', username: alice.username, password: alice.password });
    expect(post.status).toBe(403);
  });
});

describe('end session', () => {
  it('logs out with id_token_hint and a registered post_logout_redirect_uri; refuses an unregistered one', async () => {
    const c = await rp(s, A, 'webapp', webSecret, oidc.ClientSecretBasic(webSecret));
    const b = new TestBrowser(s, A);
    const { tokens } = await codeFlow(c, b);
    const bad = await b.get(oidc.buildEndSessionUrl(c, { id_token_hint: tokens.id_token!, post_logout_redirect_uri: 'http://127.0.0.1/evil' }).href);
    expect(bad.status).toBe(400);
    const url = oidc.buildEndSessionUrl(c, { id_token_hint: tokens.id_token!, post_logout_redirect_uri: 'http://127.0.0.1/bye', state: 'z' });
    const r = await b.get(url.href);
    expect(r.status).toBe(302);
    expect(r.headers.get('location')).toBe('http://127.0.0.1/bye?state=z');
    expect(b.jar.has('sc_sid')).toBe(false);
    const none = await b.get(oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', prompt: 'none' }).href);
    expect(new URL(none.headers.get('location')!).searchParams.get('error')).toBe('login_required');
    const log = await (await s.fetch('/api.ashx/v1/auditlog?event=end-session', { host: A, key: s.adminKey })).text();
    expect(log).toContain('end-session');
  });
});

describe('logout confirmation', () => {
  it('without id_token_hint a signed-in user confirms on a page (CSRF-protected) before being signed out', async () => {
    const c = await rp(s, A, 'spa', undefined, oidc.None());
    const b = new TestBrowser(s, A);
    await authorizeThrough(
      b,
      oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' }),
      alice,
    );
    const r = await b.get('/oauth2/v1/logout');
    expect(r.status).toBe(200);
    const html = await r.text();
    expect(html).toContain('action="/oidc.ashx/logout"');
    expect((await b.post('/oidc.ashx/logout', { csrf: 'forged', confirm: 'yes' })).status).toBe(403);
    const done = await b.post('/oidc.ashx/logout', { csrf: hidden(html, 'csrf'), confirm: 'yes', post_logout_redirect_uri: '', state: '', client_id: '' });
    expect(done.status).toBe(200);
    expect(b.jar.has('sc_sid')).toBe(false);
  });
});

describe('accounts, max_age, key rotation', () => {
  it('prompt=select_account shows the chooser with every signed-in account; max_age=0 asks for the password again', async () => {
    await s.appliance.core.users.add(s.primary, { name: 'bob', role: 'user', password: 'bob password 12' });
    const c = await rp(s, A, 'spa', undefined, oidc.None());
    const b = new TestBrowser(s, A);
    const challenge = { code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' };
    await authorizeThrough(b, oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', ...challenge }), alice);
    await authorizeThrough(b, oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', prompt: 'login', ...challenge }), {
      username: 'bob',
      password: 'bob password 12',
    });
    const r = await b.get(oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', prompt: 'select_account', ...challenge }).href);
    expect(r.headers.get('location')).toMatch(/^\/select-account\.html\?i=/);
    const html = await (await b.get(r.headers.get('location')!)).text();
    expect(html).toContain('alice');
    expect(html).toContain('bob');
    const aliceId = s.appliance.core.users.byName(s.primary, 'alice')!.id;
    const chosen = await b.post('/oidc.ashx/select-account', { i: hidden(html, 'i'), csrf: hidden(html, 'csrf'), account: aliceId });
    expect(chosen.status).toBe(302);
    expect(new URL(chosen.headers.get('location')!).searchParams.get('code')).toBeTruthy();
    // Two accounts and prompt=none: the OP cannot choose silently.
    const none = await b.get(oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', prompt: 'none', ...challenge }).href);
    expect(new URL(none.headers.get('location')!).searchParams.get('error')).toBe('account_selection_required');
    // max_age=0 → the session is too old by definition: back to the password page.
    const fresh = new TestBrowser(s, A);
    await authorizeThrough(fresh, oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', ...challenge }), alice);
    await new Promise((res) => setTimeout(res, 1100));
    const ma = await fresh.get(oidc.buildAuthorizationUrl(c, { redirect_uri: CB, scope: 'openid', max_age: '0', ...challenge }).href);
    expect(ma.headers.get('location')).toMatch(/^\/login\.html/);
  });

  it('rotated keys stay published: a token signed before rotation still verifies', async () => {
    const t = await tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid' });
    const before = (await (await s.fetch('/.well-known/jwks.json', { host: A })).json()) as { keys: { kid: string }[] };
    const rot = await s.fetch('/signal.ashx?oidc-keys-rotate=1', {
      method: 'POST',
      host: A,
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-keys-rotate', A) },
    });
    expect(rot.status).toBe(200);
    const after = (await (await s.fetch('/.well-known/jwks.json', { host: A })).json()) as { keys: { kid: string }[] };
    expect(after.keys).toHaveLength(before.keys.length + 2);
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: A, key: String(t.body.access_token) })).status).toBe(200);
    const t2 = await tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid' });
    expect(jose.decodeProtectedHeader(String(t2.body.access_token)).kid).not.toBe(jose.decodeProtectedHeader(String(t.body.access_token)).kid);
  });

  it('a rotation storm keeps at most two retired keys per algorithm published (the JWKS stays small)', async () => {
    const rotate = () =>
      s.fetch('/signal.ashx?oidc-keys-rotate=1', { method: 'POST', host: A, headers: { 'X-Service-Admin-Signature': s.hmac('oidc-keys-rotate', A) } });
    for (let i = 0; i < 6; i++) expect((await rotate()).status).toBe(200);
    const jwks = (await (await s.fetch('/.well-known/jwks.json', { host: A })).json()) as { keys: { kid: string; alg: string }[] };
    // Per algorithm (RS256, ES256): the active key and the two newest retired ones.
    for (const alg of ['RS256', 'ES256']) expect(jwks.keys.filter((k) => k.alg === alg)).toHaveLength(3);
    // Tokens signed now still verify.
    const t = await tokenForm(s, A, { grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid' });
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: A, key: String(t.body.access_token) })).status).toBe(200);
  });

  it('rotation is rate-limited per tenant (429 + Retry-After past keyRotationsPerMinute), and another tenant may still rotate', async () => {
    const rotate = (host: string) =>
      s.fetch('/signal.ashx?oidc-keys-rotate=1', { method: 'POST', host, headers: { 'X-Service-Admin-Signature': s.hmac('oidc-keys-rotate', host) } });
    let refused: Response | undefined;
    for (let i = 0; i < 12 && !refused; i++) {
      const r = await rotate(A);
      if (r.status === 429) refused = r;
      else expect(r.status).toBe(200);
    }
    expect(refused, 'a storm of rotations is refused').toBeDefined();
    expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    await s.addTenant('rot-b.test');
    expect((await rotate(`rot-b.test:${s.port}`)).status).toBe(200);
  });
});
