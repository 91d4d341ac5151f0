/**
 * "Sign in with your EU wallet" on /login.html, end to end in Chromium: an OIDC client starts the
 * code flow, the login page shows the QR code and the same-device link, the test acts as the
 * wallet (resolves request_uri with @openid4vc/openid4vp, presents a PID made with @sd-jwt,
 * encrypts the response), the page polls, completes the sign-in and the code flow finishes.
 */
import crypto from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { rp, saveClient } from '../oidc/helpers.ts';
import { adminCall, body, VERIFIER_OVERRIDES } from './helpers.ts';
import { issuePid, makeHolder, makeIssuerCa, presentPid, walletClient, type Holder, type TestCa } from './wallet.ts';

const CB = 'http://127.0.0.1:9/cb';
let s: TestServer;
let A: string;
let ca: TestCa;
let holder: Holder;
let rpCaDer: Buffer;
let browser: Browser;
let secret: string;

beforeAll(async () => {
  s = await startTestServer({ overrides: VERIFIER_OVERRIDES });
  A = `localhost:${s.port}`;
  ca = await makeIssuerCa();
  holder = await makeHolder();
  expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem }, A)).status).toBe(200);
  rpCaDer = Buffer.from(await (await s.fetch('/rp-cert.ashx?ca&format=der', { host: A })).arrayBuffer());
  // Tenant policy (default match-user): the PID of Erika Mustermann signs in the account erika.mustermann.
  await s.appliance.core.users.add(s.primary, { name: 'erika.mustermann', role: 'user', password: 'erika password 1', email: 'erika@example.test' });
  secret = (await saveClient(s, A, { client_id: 'webapp', client_name: 'Web App', redirect_uris: [CB], grant_types: ['authorization_code'] })).client_secret!;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

/** The wallet: resolves the deep link, presents the PID bound to the request, encrypts and posts the response. */
async function walletAnswers(deepLink: string, claims?: Record<string, unknown>): Promise<Response> {
  const wallet = walletClient(rpCaDer);
  const parsed = wallet.parseOpenid4vpAuthorizationRequest({ authorizationRequest: deepLink });
  const resolved = await wallet.resolveOpenId4vpAuthorizationRequest({ authorizationRequestPayload: parsed.params as never });
  const req = resolved.authorizationRequestPayload as { client_id: string; nonce: string; response_uri: string };
  const token = await presentPid(await issuePid(ca, holder, claims ? { extraPayload: claims } : {}), holder, { aud: req.client_id, nonce: req.nonce });
  const resp = await wallet.createOpenid4vpAuthorizationResponse({
    authorizationRequestPayload: resolved.authorizationRequestPayload,
    authorizationResponsePayload: { vp_token: { pid_sd_jwt: [token] } },
    jarm: {
      encryption: { nonce: crypto.randomBytes(16).toString('base64url') },
      serverMetadata: {
        authorization_signing_alg_values_supported: [],
        authorization_encryption_alg_values_supported: ['ECDH-ES'],
        authorization_encryption_enc_values_supported: ['A128GCM', 'A256GCM'],
      },
    },
  });
  const submitted = await wallet.submitOpenid4vpAuthorizationResponse({
    authorizationRequestPayload: resolved.authorizationRequestPayload as { response_uri: string },
    authorizationResponsePayload: resp.authorizationResponsePayload,
    jarm: resp.jarm,
  });
  return submitted.response;
}

async function catchCallback(page: Page): Promise<() => Promise<string>> {
  let resolve!: (u: string) => void;
  const p = new Promise<string>((r) => {
    resolve = r;
  });
  await page.route('http://127.0.0.1:9/**', async (route) => {
    resolve(route.request().url());
    await route.fulfill({ status: 200, contentType: 'text/plain', body: 'back at the client' });
  });
  return () => p;
}

const post = (path: string, json: unknown, headers: Record<string, string> = {}) =>
  s.fetch(path, { method: 'POST', host: A, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(json) });

describe('wallet sign-in on the login page', () => {
  it('Chromium: login page QR code and link -> the wallet presents -> the page signs in and the code flow completes', async () => {
    const c = await rp(s, A, 'webapp', secret, oidc.ClientSecretBasic(secret));
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = oidc.buildAuthorizationUrl(c, {
      redirect_uri: CB,
      scope: 'openid profile',
      state,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    const back = await catchCallback(page);
    const loginResp = page.waitForResponse((x) => x.url().includes('/login.html'));
    await page.goto(url.href);
    await page.waitForURL(/\/login\.html\?i=/);
    // Strict CSP: scripts only from this origin, none inline.
    expect((await loginResp).headers()['content-security-policy']).toMatch(/script-src 'self';/);
    await expect(page.getByRole('heading', { name: 'Sign in with your EU wallet' }).isVisible()).resolves.toBe(true);
    await page.getByRole('button', { name: 'Sign in with your EU wallet' }).click();

    // Cross-device: the QR code image (an SVG of the deep link) loads; same-device: the link is the deep link.
    const qr = page.getByAltText('QR code of the wallet request');
    await qr.waitFor({ state: 'visible' });
    // The image has loaded (it is an SVG of the deep link).
    await page.waitForFunction("(() => { const i = document.getElementById('wallet-signin-qr'); return !!i && i.complete && i.naturalWidth > 0; })()");
    const link = await page.getByRole('link', { name: 'Open the wallet on this device' }).getAttribute('href');
    expect(link).toMatch(/^openid4vp:\/\/\?client_id=x509_hash%3A.+&request_uri=/);
    const svg = await (await s.fetch(new URL((await qr.getAttribute('src'))!).pathname + new URL((await qr.getAttribute('src'))!).search, { host: A })).text();
    expect(svg).toMatch(/^<svg/);

    // The test is the wallet.
    const r = await walletAnswers(link!);
    expect(r.status).toBe(200);
    const verified = await body(r);
    expect(verified.status).toBe('verified');
    expect(verified.sso_assertion).toBeUndefined();

    // The page completes the sign-in; the authorization continues to consent and back to the client.
    await page.getByRole('button', { name: 'Allow' }).click();
    const cbUrl = new URL(await back());
    await page.waitForURL('http://127.0.0.1:9/**');
    const tokens = await oidc.authorizationCodeGrant(c, cbUrl, { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.claims()!.preferred_username).toBe('erika.mustermann');
    expect((await ctx.cookies()).some((k) => k.name === 'sc_sid')).toBe(true);
    expect(errors).toEqual([]);

    // The session is completed; its public result never shows the PID (its id was in the QR code).
    const sid = new URL(decodeURIComponent(/request_uri=([^&]+)/.exec(link!)![1]!)).searchParams.get('session_id')!;
    const res = await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${sid}`, { host: A }));
    expect(res).toMatchObject({ status: 'completed', session_id: sid, presentation: {} });
    const ev = await body(await adminCall(s, 'GET', '/signal.ashx?list-vp-events&limit=20', 'list-vp-events', undefined, A));
    const mine = ev.events.filter((e: { extra: string }) => e.extra.includes(`session=${sid}`)).map((e: { event: string }) => e.event);
    expect(mine.slice(0, 3)).toEqual(['vp-completed', 'vp-sso-minted', 'vp-verify-result']);
    await ctx.close();
  });

  it('complete: only with the page secret, only after verification, only once; a PID with no account is refused', async () => {
    const st = await body(await post('/oidc.ashx/wallet-login/start', {}));
    expect(st.login_secret).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    const early = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: st.login_secret });
    expect(early.status).toBe(409);
    expect((await walletAnswers(st.openid4vp_url)).status).toBe(200);
    expect((await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`, { host: A }))).status).toBe('verified');
    const wrong = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: 'x'.repeat(43) });
    expect(wrong.status).toBe(403);
    const ok = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: st.login_secret });
    expect(ok.status).toBe(200);
    expect((await body(ok)).redirect).toBe('/passkeys.html');
    expect(ok.headers.get('set-cookie')).toMatch(/sc_sid=/);
    const again = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: st.login_secret });
    expect(again.status).toBe(409);

    const st2 = await body(await post('/oidc.ashx/wallet-login/start', {}));
    expect((await walletAnswers(st2.openid4vp_url, { given_name: 'Max' })).status).toBe(200);
    const none = await post('/oidc.ashx/wallet-login/complete', { session_id: st2.session_id, login_secret: st2.login_secret });
    expect(none.status).toBe(403);
    expect((await body(none)).error).toBe('access_denied');
    expect((await post('/oidc.ashx/wallet-login/complete', { session_id: 'nope', login_secret: 'x' })).status).toBe(404);
  });

  it('a relying party redeeming the sso_assertion makes the session completed', async () => {
    const st = await body(await s.fetch('/oidc.ashx?action=vp-start&preset=pid', { host: A }));
    const r = await body(await walletAnswers(st.openid4vp_url));
    expect(r.sso_assertion).toMatch(/^vpa_/);
    expect((await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`, { host: A }))).status).toBe('verified');
    await saveClient(s, A, {
      client_id: 'sso-rp',
      client_name: 'SSO RP',
      redirect_uris: [CB],
      grant_types: ['urn:sovcomms:params:oauth:grant-type:sso_assertion'],
    }).then(async (cl) => {
      const tok = await s.fetch('/oauth2/v1/token', {
        method: 'POST',
        host: A,
        headers: { authorization: `Basic ${Buffer.from(`sso-rp:${cl.client_secret}`).toString('base64')}` },
        body: new URLSearchParams({ grant_type: 'urn:sovcomms:params:oauth:grant-type:sso_assertion', assertion: r.sso_assertion, scope: 'openid' }),
      });
      expect(tok.status).toBe(200);
    });
    // The one who started the session reads the claims with its result key.
    const polled = await body(
      await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`, { host: A, headers: { 'X-Sovcomms-Result-Key': st.result_key } }),
    );
    expect(polled.status).toBe('completed');
    expect(polled.presentation.format).toBe('dc+sd-jwt');
  });

  it('the QR page allows its own style block by hash and nothing else; the QR image allows nothing at all', async () => {
    const st = await body(await s.fetch('/oidc.ashx?action=vp-start&preset=pid', { host: A }));
    const page = await s.fetch(`/oidc.ashx/vp-qr?session_id=${st.session_id}`, { host: A });
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/);
    const text = await page.text();
    expect(text).toContain('<svg');
    expect(text).not.toContain('<script');
    const svg = await s.fetch(`/oidc.ashx/vp-qr.svg?session_id=${st.session_id}`, { host: A });
    expect(svg.status).toBe(200);
    expect(svg.headers.get('content-security-policy')).not.toContain('unsafe-inline');
  });
});
