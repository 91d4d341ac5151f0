/**
 * "Sign in with your EU wallet" on /login.html, end to end in Chromium: an OIDC client starts the
 * code flow, the login page shows the QR code and the same-device link, the test acts as the
 * wallet (resolves request_uri with @openid4vc/openid4vp, presents a PID made with @sd-jwt,
 * encrypts the response), the page polls, completes the sign-in and the code flow finishes.
 */
import crypto from 'node:crypto';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
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
  // An account of this tenant whose holder attacks another person's sign-in.
  await s.appliance.core.users.add(s.primary, { name: 'max.attacker', role: 'user', password: 'max password 12', email: 'max@example.test' });
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

/** An OIDC client's code flow in a browser context, up to the login page's wallet block showing its deep link. */
async function loginPageLink(ctx: BrowserContext, client = { id: 'webapp', secret: () => secret }) {
  const c = await rp(s, A, client.id, client.secret(), oidc.ClientSecretBasic(client.secret()));
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const url = oidc.buildAuthorizationUrl(c, {
    redirect_uri: CB,
    scope: 'openid profile',
    state,
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
  });
  const page = await ctx.newPage();
  await page.goto(url.href);
  await page.waitForURL(/\/login\.html\?i=/);
  await page.getByRole('button', { name: 'Sign in with your EU wallet' }).click();
  const a = page.getByRole('link', { name: 'Open the wallet on this device' });
  await a.waitFor({ state: 'visible' });
  return { c, verifier, state, page, link: (await a.getAttribute('href'))! };
}

/** The element's text, once it matches (the page gets there by polling). */
const shows = (l: Locator, want: string | RegExp) =>
  expect.poll(async () => (await l.textContent()) ?? '', { timeout: 15_000 }).toMatch(typeof want === 'string' ? new RegExp(`^${want}$`) : want);

const pathOf = (u: string) => new URL(u).pathname + new URL(u).search;
const signedIn = async (ctx: BrowserContext) => (await ctx.cookies()).some((k) => k.name === 'sc_sid');

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
    // Polled with evaluate (the DevTools protocol's, which the page's CSP does not govern): a string
    // given to waitForFunction is compiled in the page, which script-src 'self' refuses.
    await expect
      .poll(() =>
        page.evaluate<boolean>("(() => { const i = document.getElementById('wallet-signin-qr'); return !!i && i.complete && i.naturalWidth > 0; })()"),
      )
      .toBe(true);
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

    // Cross-device: the wallet's browser (another device, no cookie of this sign-in) is told to
    // finish on the page; the page shows whose PID arrived and signs in when the person confirms.
    expect(verified.redirect_uri).toMatch(/\/oidc\.ashx\/wallet-login\/return\?session_id=.+&response_code=/);
    const phone = await s.fetch(new URL(verified.redirect_uri).pathname + new URL(verified.redirect_uri).search, { host: A });
    expect(phone.status).toBe(200);
    expect(await phone.text()).toContain('confirm your name there');
    await shows(page.locator('#wallet-signin-name'), 'Erika Mustermann');
    expect((await ctx.cookies()).some((k) => k.name === 'sc_sid')).toBe(false);
    await page.getByRole('button', { name: 'Continue as Erika Mustermann' }).click();
    // The authorization continues to consent and back to the client.
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

  it("Chromium, same-device: the wallet's redirect_uri opened in the browser that started signs it in without a confirmation", async () => {
    // A client of its own, so that its consent is asked (webapp's was given in the first test).
    const other = (await saveClient(s, A, { client_id: 'sameapp', client_name: 'Same App', redirect_uris: [CB], grant_types: ['authorization_code'] }))
      .client_secret!;
    const ctx = await browser.newContext();
    const { c, verifier, state, page, link } = await loginPageLink(ctx, { id: 'sameapp', secret: () => other });
    const verified = await body(await walletAnswers(link));
    expect(verified.status).toBe('verified');
    // The wallet opens its redirect_uri in this device's browser (a new tab; no initiating site).
    const tab = await ctx.newPage();
    const back = await catchCallback(tab);
    await tab.goto(verified.redirect_uri);
    await tab.getByRole('button', { name: 'Allow' }).click();
    const tokens = await oidc.authorizationCodeGrant(c, new URL(await back()), { pkceCodeVerifier: verifier, expectedState: state });
    expect(tokens.claims()!.preferred_username).toBe('erika.mustermann');
    // The code was for one use; the first page learns the sign-in happened elsewhere.
    expect((await s.fetch(pathOf(verified.redirect_uri), { host: A })).status).toBe(403);
    await shows(page.locator('#wallet-signin-status'), /Signed in, in the window your wallet opened/);
    await ctx.close();
  });

  it("login CSRF: an attacker who saw the QR code presents its own PID into the victim's session; the victim's browser is not signed in without confirming", async () => {
    const victim = await browser.newContext();
    const { page, link } = await loginPageLink(victim);
    // The attacker resolves the same deep link (vp-request) first and presents its own PID.
    const attack = await body(await walletAnswers(link, { given_name: 'Max', family_name: 'Attacker' }));
    expect(attack.status).toBe('verified');
    // It sends the victim's browser to its redirect_uri from its own site: the SameSite=Strict
    // binding cookie does not come along, so that browser is told to confirm on the page instead.
    const lure = await victim.newPage();
    await lure.route('http://attacker.test/**', (route) =>
      route.fulfill({ status: 200, contentType: 'text/html', body: `<a id="go" href="${attack.redirect_uri}">prize</a>` }),
    );
    await lure.goto('http://attacker.test/');
    await lure.click('#go');
    await shows(lure.locator('#wallet-return-message'), /confirm your name there/);
    expect(await signedIn(victim)).toBe(false);
    // The code is spent: the attacker's own browser gets nothing from it either.
    expect((await s.fetch(pathOf(attack.redirect_uri), { host: A })).status).toBe(403);
    // The victim's page shows whose PID arrived; the victim declines.
    await shows(page.locator('#wallet-signin-name'), 'Max Attacker');
    await shows(page.locator('#wallet-signin-account'), 'max.attacker');
    expect(await signedIn(victim)).toBe(false);
    await page.getByRole('button', { name: 'This is not me' }).click();
    await shows(page.locator('#wallet-signin-status'), /Not signed in/);
    expect(await signedIn(victim)).toBe(false);
    expect(page.url()).toMatch(/\/login\.html\?i=/);
    await victim.close();
  });

  it('complete: only with the page secret, only after verification and the name shown, only once; a PID with no account is refused', async () => {
    const st = await body(await post('/oidc.ashx/wallet-login/start', {}));
    expect(st.login_secret).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    const early = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: st.login_secret });
    expect(early.status).toBe(409);
    expect((await walletAnswers(st.openid4vp_url)).status).toBe(200);
    expect((await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`, { host: A }))).status).toBe('verified');
    const wrong = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: 'x'.repeat(43) });
    expect(wrong.status).toBe(403);
    expect((await post('/oidc.ashx/wallet-login/review', { session_id: st.session_id, login_secret: 'x'.repeat(43) })).status).toBe(403);
    // Not before the page has shown whose PID it is.
    const unreviewed = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: st.login_secret });
    expect(unreviewed.status).toBe(409);
    const review = await post('/oidc.ashx/wallet-login/review', { session_id: st.session_id, login_secret: st.login_secret });
    expect(await body(review)).toEqual({ name: 'Erika Mustermann', account: 'erika.mustermann' });
    const ok = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: st.login_secret });
    expect(ok.status).toBe(200);
    expect((await body(ok)).redirect).toBe('/passkeys.html');
    expect(ok.headers.get('set-cookie')).toMatch(/sc_sid=/);
    const again = await post('/oidc.ashx/wallet-login/complete', { session_id: st.session_id, login_secret: st.login_secret });
    expect(again.status).toBe(409);

    const st2 = await body(await post('/oidc.ashx/wallet-login/start', {}));
    expect((await walletAnswers(st2.openid4vp_url, { given_name: 'Max' })).status).toBe(200);
    const none = await post('/oidc.ashx/wallet-login/review', { session_id: st2.session_id, login_secret: st2.login_secret });
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
