import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import { digest } from '@sd-jwt/crypto-nodejs';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { authorizeThrough, TestBrowser } from '../oidc/helpers.ts';
import { CLAIMS, createOffer, errorOf } from './support.ts';
import { newHolder, walletClient } from './wallet.ts';

const REDIRECT = 'https://wallet.example/cb?x=1';
const alice = { username: 'alice', password: 'alice password 1', email: 'alice@office.test' };
const bob = { username: 'bob', password: 'bob password 12' };
let srv: TestServer;
let host: string;
/** One browser for the whole file: after the first sign-in its OIDC session answers at once. */
let browser: TestBrowser;
const clock = new ManualClock(Date.now());
beforeAll(async () => {
  srv = await startTestServer({ clock, publicOrigin: true, overrides: { plugins: { 'wallet-issuer': { tokenPerMinute: 1000 } } } });
  host = `127.0.0.1:${srv.port}`;
  await srv.appliance.core.users.add(srv.primary, { name: alice.username, role: 'user', password: alice.password, email: alice.email });
  await srv.appliance.core.users.add(srv.primary, { name: bob.username, role: 'user', password: bob.password });
  browser = new TestBrowser(srv, host);
});
afterAll(async () => {
  await srv.stop();
});

function whitelistFile(): string {
  return path.join(srv.dataDir, 'tenants', srv.primary.id, 'wallet-clients.json');
}

function pkce(): { verifier: string; challenge: string } {
  const verifier = crypto.randomBytes(32).toString('base64url');
  return { verifier, challenge: crypto.createHash('sha256').update(verifier).digest('base64url') };
}

async function issuerState(): Promise<string> {
  const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: false });
  const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: { authorization_code: { issuer_state: string } } };
  return o.grants.authorization_code.issuer_state;
}

async function par(form: Record<string, string>): Promise<Response> {
  return srv.fetch('/vci.ashx?par', { method: 'POST', body: new URLSearchParams(form) });
}

/** PAR + authorize by hand; returns the code and the PKCE verifier. */
async function codeFor(clientId = 'wallet-dev'): Promise<{ code: string; verifier: string }> {
  const p = pkce();
  const res = await par({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
    issuer_state: await issuerState(),
    state: 'st',
  });
  expect(res.status).toBe(201);
  const { request_uri } = (await res.json()) as { request_uri: string };
  const loc = new URL(
    await authorizeThrough(browser, `/vci.ashx?authorize&client_id=${encodeURIComponent(clientId)}&request_uri=${encodeURIComponent(request_uri)}`, alice),
  );
  expect(loc.searchParams.get('state')).toBe('st');
  return { code: loc.searchParams.get('code')!, verifier: p.verifier };
}

const token = (form: Record<string, string>) =>
  srv.fetch('/vci.ashx?token', { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', ...form }) });

describe('wallet issuer: authorization code flow (PAR + PKCE) for whitelisted wallet clients', () => {
  it('creates wallet-clients.json with the default client on the first issuance request', async () => {
    expect(fs.existsSync(whitelistFile())).toBe(false);
    await par({ response_type: 'code', client_id: 'nobody', redirect_uri: REDIRECT });
    const f = JSON.parse(fs.readFileSync(whitelistFile(), 'utf8')) as { client_ids: string[] };
    expect(f.client_ids).toEqual(['wallet-dev']);
  });

  it('issues an SD-JWT VC to @openid4vc/openid4vci + @openid4vc/oauth2: offer, PAR + PKCE, authorize, token, credential', async () => {
    const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: false });
    const holder = newHolder();
    const wallet = walletClient(holder, 'wallet-dev');
    const credentialOffer = await wallet.resolveCredentialOffer(offer.offer_uri!);
    const issuerMetadata = await wallet.resolveIssuerMetadata(credentialOffer.credential_issuer);
    const init = await wallet.initiateAuthorization({
      clientId: 'wallet-dev',
      credentialOffer,
      issuerMetadata,
      redirectUri: REDIRECT,
      scope: 'eu.europa.ec.eudi.pid.1.sd-jwt',
    });
    // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-comparison -- the library's enum value, compared with its documented string
    if (init.authorizationFlow !== 'Oauth2Redirect') throw new Error('expected the redirect flow');
    // It used PAR: the authorization URL carries only client_id and request_uri.
    const authUrl = new URL(init.authorizationRequestUrl);
    expect(authUrl.searchParams.get('request_uri')).toMatch(/^urn:ietf:params:oauth:request_uri:/);
    // The authorize step sends the browser to the tenant's own OpenID Provider; a fresh browser
    // gets its sign-in page, posts the password form, and is sent back to the wallet.
    const fresh = new TestBrowser(srv, host);
    const a = await fresh.get(authUrl.toString());
    expect(a.status).toBe(302);
    const toLogin = new URL(a.headers.get('location')!);
    expect(toLogin.pathname).toBe('/oauth2/v1/authorize');
    expect(toLogin.searchParams.get('client_id')).toBe('wallet-issuer');
    expect(toLogin.searchParams.get('code_challenge_method')).toBe('S256');
    const loginPage = await fresh.follow(a);
    expect(loginPage.location).toBeUndefined();
    const html = await loginPage.res.text();
    expect(html).toContain('action="/oidc.ashx/login"');
    const hidden = (n: string) => new RegExp(`name="${n}" value="([^"]*)"`).exec(html)![1]!;
    const signedIn = await fresh.follow(
      await fresh.post('/oidc.ashx/login', { i: hidden('i'), csrf: hidden('csrf'), username: alice.username, password: alice.password }),
    );
    const redirect = signedIn.location!;
    expect(redirect.startsWith('https://wallet.example/cb?x=1&code=')).toBe(true);
    const resp = wallet.parseAndVerifyAuthorizationResponseRedirectUrl({
      url: redirect,
      authorizationServerMetadata: issuerMetadata.authorizationServers[0]!,
    });
    if (!resp.code) throw new Error('no code');
    const { accessTokenResponse } = await wallet.retrieveAuthorizationCodeAccessTokenFromOffer({
      credentialOffer,
      issuerMetadata,
      authorizationCode: resp.code,
      pkceCodeVerifier: init.pkce?.codeVerifier,
      redirectUri: REDIRECT,
    });
    const { c_nonce } = await wallet.requestNonce({ issuerMetadata });
    const proof = await wallet.createCredentialRequestJwtProof({
      issuerMetadata,
      credentialConfigurationId: 'eu.europa.ec.eudi.pid.1.sd-jwt',
      nonce: c_nonce,
      clientId: 'wallet-dev',
      signer: { method: 'jwk', alg: 'ES256', publicJwk: holder.jwk },
    });
    const res = await wallet.retrieveCredentials({
      issuerMetadata,
      accessToken: accessTokenResponse.access_token,
      credentialConfigurationId: 'eu.europa.ec.eudi.pid.1.sd-jwt',
      proofs: { jwt: [proof.jwt] },
    });
    const cred = (res.credentialResponse as { credentials: { credential: string }[] }).credentials[0]!.credential;
    const payload = JSON.parse(Buffer.from(cred.split('.')[1]!, 'base64url').toString()) as { vct: string; cnf: { jwk: unknown } };
    expect(payload.vct).toBe('urn:eudi:pid:1');
    expect(payload.cnf.jwk).toEqual(holder.jwk);
    // Verified by @sd-jwt/sd-jwt-vc: the names come from the offer, the e-mail from alice's account.
    const x5c = (JSON.parse(Buffer.from(cred.split('.')[0]!, 'base64url').toString()) as { x5c: string[] }).x5c;
    const pub = new crypto.X509Certificate(Buffer.from(x5c[0]!, 'base64')).publicKey;
    const verifier = new SDJwtVcInstance({
      hasher: digest,
      verifier: (data: string, sig: string) =>
        crypto.verify('sha256', Buffer.from(data), { key: pub, dsaEncoding: 'ieee-p1363' }, Buffer.from(sig, 'base64url')),
    });
    const v = await verifier.verify(cred);
    const claims = (await verifier.decode(cred).then((d) => d.getClaims(digest))) as Record<string, unknown>;
    expect(v.payload.vct).toBe('urn:eudi:pid:1');
    expect(claims).toMatchObject({ given_name: 'Erika', family_name: 'Mustermann', birthdate: '1984-01-26', email: alice.email });
  });

  it('sign-in: an offer bound to an account refuses another account (access_denied to the wallet), the named one gets its code', async () => {
    const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: false, user: 'bob' });
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: { authorization_code: { issuer_state: string } } };
    const start = async (): Promise<string> => {
      const p = pkce();
      const res = await par({
        response_type: 'code',
        client_id: 'wallet-dev',
        redirect_uri: REDIRECT,
        code_challenge: p.challenge,
        code_challenge_method: 'S256',
        issuer_state: o.grants.authorization_code.issuer_state,
        state: 'st',
      });
      const { request_uri } = (await res.json()) as { request_uri: string };
      return `/vci/authorize?client_id=wallet-dev&request_uri=${encodeURIComponent(request_uri)}`;
    };
    const asAlice = new URL(await authorizeThrough(new TestBrowser(srv, host), await start(), alice));
    expect(asAlice.searchParams.get('error')).toBe('access_denied');
    expect(asAlice.searchParams.get('state')).toBe('st');
    expect(asAlice.searchParams.get('code')).toBeNull();
    const asBob = new URL(await authorizeThrough(new TestBrowser(srv, host), await start(), bob));
    expect(asBob.searchParams.get('code')).toMatch(/^wac_/);
    // create-offer refuses a binding on a pre-authorized offer, and an unknown account.
    for (const body of [
      { claims: CLAIMS, pre_authorized: true, user: 'bob' },
      { claims: CLAIMS, pre_authorized: false, user: 'nobody' },
    ]) {
      const r = await srv.fetch('/vci.ashx?create-offer', { method: 'POST', json: body, headers: { 'X-Service-Admin-Signature': srv.hmac('create-offer') } });
      expect(r.status).toBe(400);
    }
  });

  it('sign-in: the callback only finishes in the browser that started it; a wrong password stays at the sign-in page', async () => {
    const p = pkce();
    const res = await par({
      response_type: 'code',
      client_id: 'wallet-dev',
      redirect_uri: REDIRECT,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      issuer_state: await issuerState(),
    });
    const { request_uri } = (await res.json()) as { request_uri: string };
    const victim = new TestBrowser(srv, host);
    // The attacker starts the flow and hands the sign-in link to someone else.
    const started = await srv.fetch(`/vci/authorize?client_id=wallet-dev&request_uri=${encodeURIComponent(request_uri)}`);
    const loginUrl = started.headers.get('location')!;
    let { res: page } = await victim.follow(await victim.get(loginUrl));
    const html = await page.text();
    const hidden = (n: string) => new RegExp(`name="${n}" value="([^"]*)"`).exec(html)![1]!;
    const wrong = await victim.post('/oidc.ashx/login', { i: hidden('i'), csrf: hidden('csrf'), username: alice.username, password: 'not her password' });
    expect(wrong.status).not.toBe(302);
    const ok = await victim.post('/oidc.ashx/login', { i: hidden('i'), csrf: hidden('csrf'), username: alice.username, password: alice.password });
    expect(ok.status).toBe(302);
    const back = new URL(ok.headers.get('location')!, `http://${host}`);
    expect(back.pathname).toBe('/vci/callback');
    page = await victim.get(back.toString());
    expect(await errorOf(page)).toEqual({ status: 400, error: 'access_denied' });
  });

  it('PAR refuses a client outside the whitelist (invalid_client), no PKCE or plain (invalid_request), no issuer_state', async () => {
    const p = pkce();
    const base = {
      response_type: 'code',
      redirect_uri: REDIRECT,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      issuer_state: await issuerState(),
    };
    expect(await errorOf(await par({ ...base, client_id: 'evil-wallet' }))).toEqual({ status: 401, error: 'invalid_client' });
    const { code_challenge: _c, ...noPkce } = base;
    expect(await errorOf(await par({ ...noPkce, client_id: 'wallet-dev' }))).toEqual({ status: 400, error: 'invalid_request' });
    expect(await errorOf(await par({ ...base, client_id: 'wallet-dev', code_challenge_method: 'plain' }))).toEqual({ status: 400, error: 'invalid_request' });
    const { issuer_state: _i, ...noState } = base;
    expect(await errorOf(await par({ ...noState, client_id: 'wallet-dev' }))).toEqual({ status: 400, error: 'invalid_request' });
    expect(await errorOf(await par({ ...base, client_id: 'wallet-dev', response_type: 'token' }))).toEqual({ status: 400, error: 'unsupported_response_type' });
  });

  it('authorize: a request_uri is single use and bound to its client_id', async () => {
    const p = pkce();
    const res = await par({
      response_type: 'code',
      client_id: 'wallet-dev',
      redirect_uri: REDIRECT,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      issuer_state: await issuerState(),
    });
    const { request_uri } = (await res.json()) as { request_uri: string };
    const url = (c: string) => `/vci.ashx?authorize&client_id=${c}&request_uri=${encodeURIComponent(request_uri)}`;
    expect(await errorOf(await srv.fetch(url('someone-else')))).toEqual({ status: 401, error: 'invalid_client' });
    // The mismatch spent it (one-time use).
    expect(await errorOf(await srv.fetch(url('wallet-dev')))).toEqual({ status: 400, error: 'invalid_request' });
  });

  it('token: the code is single use and consumed even when the exchange fails', async () => {
    const { code, verifier } = await codeFor();
    expect(await errorOf(await token({ code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: 'x'.repeat(43) }))).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
    expect(await errorOf(await token({ code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: verifier }))).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
  });

  it('token: a good exchange once, then invalid_grant', async () => {
    const { code, verifier } = await codeFor();
    const ok = await token({ code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: verifier });
    expect(ok.status).toBe(200);
    const t = (await ok.json()) as { access_token: string; token_type: string; c_nonce: string };
    expect(t.token_type).toBe('Bearer');
    expect(t.c_nonce).toBeTypeOf('string');
    expect(await errorOf(await token({ code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: verifier }))).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
  });

  it('token: redirect_uri must match byte for byte', async () => {
    const { code, verifier } = await codeFor();
    expect(await errorOf(await token({ code, client_id: 'wallet-dev', redirect_uri: 'https://wallet.example/cb?x=1&', code_verifier: verifier }))).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
    const c2 = await codeFor();
    expect(
      await errorOf(await token({ code: c2.code, client_id: 'wallet-dev', redirect_uri: 'https://WALLET.example/cb?x=1', code_verifier: c2.verifier })),
    ).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
  });

  it('token: code_verifier of 42 or 129 characters is invalid_request; client_id missing is invalid_client; another whitelisted client is invalid_grant', async () => {
    const a = await codeFor();
    expect(await errorOf(await token({ code: a.code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: 'a'.repeat(42) }))).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    const b = await codeFor();
    expect(await errorOf(await token({ code: b.code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: 'a'.repeat(129) }))).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    const c = await codeFor();
    expect(await errorOf(await token({ code: c.code, redirect_uri: REDIRECT, code_verifier: c.verifier }))).toEqual({ status: 401, error: 'invalid_client' });
    // Both were consumed.
    expect(await errorOf(await token({ code: c.code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: c.verifier }))).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
    fs.writeFileSync(whitelistFile(), JSON.stringify({ client_ids: ['wallet-dev', 'wallet-two'] }));
    clock.advance(5 * 60_000 + 1000);
    const d = await codeFor('wallet-two');
    expect(await errorOf(await token({ code: d.code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: d.verifier }))).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
  });
});

describe('wallet client whitelist file', () => {
  const parOf = async (clientId: string) => {
    const p = pkce();
    return par({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      issuer_state: await issuerState(),
    });
  };

  it('changes are picked up after the 5-minute cache, not before', async () => {
    fs.writeFileSync(whitelistFile(), JSON.stringify({ client_ids: ['wallet-dev'], _schema: 'https://example.org/schema', _notes: 'test' }));
    clock.advance(5 * 60_000 + 1000);
    expect((await parOf('wallet-dev')).status).toBe(201);
    fs.writeFileSync(whitelistFile(), JSON.stringify({ client_ids: ['wallet-new'] }));
    expect((await parOf('wallet-new')).status).toBe(401);
    clock.advance(4 * 60_000);
    expect((await parOf('wallet-new')).status).toBe(401);
    clock.advance(60_000 + 1000);
    expect((await parOf('wallet-new')).status).toBe(201);
    expect((await parOf('wallet-dev')).status).toBe(401);
  });

  it('a malformed, empty or extra-keyed file falls back to the default client and is not overwritten', async () => {
    for (const text of ['{not json', '', JSON.stringify({ client_ids: [] }), JSON.stringify({ client_ids: ['wallet-new'], extra: 1 })]) {
      fs.writeFileSync(whitelistFile(), text);
      clock.advance(5 * 60_000 + 1000);
      expect((await parOf('wallet-dev')).status).toBe(201);
      expect((await parOf('wallet-new')).status).toBe(401);
      expect(fs.readFileSync(whitelistFile(), 'utf8')).toBe(text);
    }
  });

  it('is per tenant', async () => {
    fs.writeFileSync(whitelistFile(), JSON.stringify({ client_ids: ['only-primary'] }));
    clock.advance(5 * 60_000 + 1000);
    const { tenant } = await srv.addTenant('second.example');
    const other = path.join(srv.dataDir, 'tenants', tenant.id, 'wallet-clients.json');
    const p = pkce();
    const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: false }, 'second.example');
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`, { host: 'second.example' })).json()) as {
      grants: { authorization_code: { issuer_state: string } };
    };
    const form = {
      response_type: 'code',
      redirect_uri: REDIRECT,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      issuer_state: o.grants.authorization_code.issuer_state,
    };
    const r1 = await srv.fetch('/vci.ashx?par', { method: 'POST', host: 'second.example', body: new URLSearchParams({ ...form, client_id: 'only-primary' }) });
    expect(r1.status).toBe(401);
    expect(JSON.parse(fs.readFileSync(other, 'utf8'))).toMatchObject({ client_ids: ['wallet-dev'] });
    // The primary tenant's issuer_state is not valid on the second tenant.
    const r2 = await srv.fetch('/vci.ashx?par', {
      method: 'POST',
      host: 'second.example',
      body: new URLSearchParams({ ...form, client_id: 'wallet-dev', issuer_state: await issuerState() }),
    });
    expect(r2.status).toBe(400);
  });
});
