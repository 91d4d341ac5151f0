import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SMTPServer } from 'smtp-server';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import * as oidc from 'openid-client';
import type { AddressInfo } from 'node:net';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { rp, saveClient } from './helpers.ts';

const CB = 'http://127.0.0.1:9/cb';
const alice = { username: 'alice', password: 'alice password 1', email: 'alice@example.test' };

let s: TestServer;
let A: string;
let smtp: SMTPServer;
const mails: { to: string; text: string }[] = [];
let browser: Browser;
let secret: string;

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, cb) {
      let raw = '';
      stream.on('data', (c: Buffer) => {
        raw += c.toString('utf8');
      });
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address).join(','), text: raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=') });
        cb();
      });
    },
  });
  await new Promise<void>((res) => smtp.listen(0, '127.0.0.1', () => res()));
  const smtpPort = (smtp.server.address() as AddressInfo).port;
  s = await startTestServer({ overrides: { plugins: { oidc: { smtp: { url: `smtp://127.0.0.1:${smtpPort}?ignoreTLS=true`, from: 'login@office.test' } } } } });
  A = `localhost:${s.port}`;
  await s.appliance.core.users.add(s.primary, { name: alice.username, role: 'user', password: alice.password, email: alice.email });
  secret = (await saveClient(s, A, { client_id: 'webapp', client_name: 'Web App', redirect_uris: [CB], grant_types: ['authorization_code', 'refresh_token'] }))
    .client_secret!;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.stop();
  await new Promise<void>((res) => smtp.close(() => res()));
});

/** The RP's callback never reaches a server: the browser's request to it is caught here. */
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

async function start(ctx: BrowserContext) {
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
  const page = await ctx.newPage();
  const back = await catchCallback(page);
  const finish = async () => {
    const url = new URL(await back());
    // Let the browser's navigation to the callback finish before the test navigates again.
    await page.waitForURL('http://127.0.0.1:9/**');
    return oidc.authorizationCodeGrant(c, url, { pkceCodeVerifier: verifier, expectedState: state });
  };
  return { page, url, finish };
}

async function waitMail(to: string, n: number): Promise<string> {
  for (let i = 0; i < 300 && mails.filter((m) => m.to === to).length < n; i++) await new Promise((r) => setTimeout(r, 50));
  const m = mails.filter((x) => x.to === to)[n - 1];
  if (!m) throw new Error('no mail arrived');
  return /(http:\/\/\S+\/oidc\.ashx\/\S+)/.exec(m.text)![1]!;
}

describe('sign-in pages in Chromium', () => {
  it('password sign-in and consent through the code flow', async () => {
    const ctx = await browser.newContext();
    const { page, url, finish } = await start(ctx);
    await page.goto(url.href);
    await expect(page.title()).resolves.toContain('Sign in');
    await page.getByLabel('User name or e-mail').fill(alice.username);
    await page.getByLabel('Password').fill(alice.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('button', { name: 'Allow' }).click();
    const tokens = await finish();
    expect(tokens.claims()!.preferred_username).toBe('alice');
    const cookies = await ctx.cookies();
    const sid = cookies.find((c) => c.name === 'sc_sid')!;
    expect(sid.httpOnly).toBe(true);
    expect(sid.sameSite).toBe('Lax');
    await ctx.close();
  });

  it('registers a passkey with the virtual authenticator, signs in with it, and fails without user verification', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    // Sign in with the password (no pending authorization), then register.
    await page.goto(`http://${A}/login.html`);
    await page.getByLabel('User name or e-mail').fill(alice.username);
    await page.getByLabel('Password').fill(alice.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.goto(`http://${A}/passkeys.html`);
    await page.getByRole('button', { name: /Register a passkey/ }).click();
    await expect.poll(() => page.locator('#passkey-status').textContent(), { timeout: 15_000 }).toBe('Passkey registered.');
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    expect(credentials[0]!.isResidentCredential).toBe(true);
    await ctx.clearCookies();

    const c = await rp(s, A, 'webapp', secret, oidc.ClientSecretBasic(secret));
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(c, {
      redirect_uri: CB,
      scope: 'openid profile',
      state: 'pk',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const back = await catchCallback(page);
    await page.goto(url.href);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    // Consent was given in the previous test for this client and user: straight back to the client.
    const backUrl = new URL(await back());
    await page.waitForURL('http://127.0.0.1:9/**');
    const tokens = await oidc.authorizationCodeGrant(c, backUrl, { pkceCodeVerifier: verifier, expectedState: 'pk' });
    expect(tokens.claims()!.amr).toEqual(['hwk', 'user']);

    await ctx.clearCookies();
    await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: false });
    await page.goto(url.href);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await expect.poll(() => page.locator('#passkey-status').textContent(), { timeout: 15_000 }).toMatch(/failed/);
    const log = await (await s.fetch('/api.ashx/v1/auditlog?event=passkey', { host: A, key: s.adminKey })).text();
    expect(log).toContain('passkey-signin-start');
    expect(log).toContain('passkey-signin-ok');
    await ctx.close();
  });

  it('a forged Host header cannot make the appliance mail a link to another site (recovery of the primary tenant)', async () => {
    // The attacker's own browser session: the login page and the recovery form, with Host pointing at them.
    const evil = 'attacker.example';
    const victim = { name: 'victim', email: 'victim@office.test' };
    await s.appliance.core.users.add(s.primary, { name: victim.name, role: 'admin', password: 'victim password 1', email: victim.email });
    const login = await s.fetch('/login.html', { host: evil });
    expect(login.status).toBe(200);
    const cookieHeader = (login.headers.get('set-cookie') ?? '')
      .split(/,(?=\s*\w+=)/)
      .map((c) => c.split(';')[0]!.trim())
      .join('; ');
    const csrf = /name="csrf" value="([^"]+)"/.exec(await login.text())![1]!;
    const before = mails.length;
    const r = await s.fetch('/oidc.ashx/maglink', {
      method: 'POST',
      host: evil,
      headers: { cookie: cookieHeader },
      body: new URLSearchParams({ csrf, email: victim.email, purpose: 'recover' }),
    });
    expect(r.status).toBe(200);
    await expect.poll(() => mails.slice(before).some((m) => m.to.includes(victim.email)), { timeout: 10_000 }).toBe(true);
    const text = mails.slice(before).find((m) => m.to.includes(victim.email))!.text;
    expect(text).toContain(`http://localhost:${s.port}/oidc.ashx/recover-finish?t=`);
    expect(text).not.toContain(evil);
    // A Host with userinfo (`a:@b`) or a path is refused outright.
    for (const bad of [`localhost:@${evil}`, `localhost:${s.port}@${evil}`, `${evil}/x`, 'localhost:99999']) {
      const res = await s.fetch('/login.html', { host: bad });
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
    }
  });

  it('magic link and recovery mail arrive over SMTP and finish the sign-in in the browser', async () => {
    const ctx = await browser.newContext();
    const { page, url, finish } = await start(ctx);
    await page.goto(url.href);
    await page.getByLabel('Or get a sign-in link by e-mail').fill(alice.email);
    await page.getByRole('button', { name: 'E-mail me a link' }).click();
    await expect.poll(() => page.locator('h1').textContent(), { timeout: 15_000 }).toBe('Check your mail');
    const link = await waitMail(alice.email, 1);
    expect(link).toContain('/oidc.ashx/maglink-finish?t=');
    await page.goto(link);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const tokens = await finish();
    expect(tokens.claims()!.amr).toEqual(['email']);
    // The link is single use.
    await page.goto(link);
    await expect.poll(() => page.locator('h1').textContent(), { timeout: 15_000 }).toBe('Link expired');

    const second = await start(ctx);
    await ctx.clearCookies();
    await second.page.goto(second.url.href);
    await second.page.getByLabel('Or get a sign-in link by e-mail').fill(alice.email);
    await second.page.getByRole('button', { name: 'Forgot password' }).click();
    const rlink = await waitMail(alice.email, 2);
    await second.page.goto(rlink);
    await second.page.getByLabel(/New password/).fill('a brand new password');
    await second.page.getByRole('button', { name: 'Save and sign in' }).click();
    await second.finish();
    const log = await (await s.fetch('/api.ashx/v1/auditlog', { host: A, key: s.adminKey })).text();
    for (const e of ['maglink-start', 'maglink-finish', 'recover-start', 'recover-finish']) expect(log).toContain(`"${e}"`);
    alice.password = 'a brand new password';
    await ctx.close();
  });
});

describe('invitation claim', () => {
  it('an invited account is claimed once through claim-info and claim', async () => {
    await s.appliance.core.users.add(s.primary, { name: 'carol', role: 'user', email: 'carol@example.test' });
    const json = JSON.stringify({ user: 'carol' });
    const inv = await s.fetch('/signal.ashx?oidc-invite=1', {
      method: 'POST',
      host: A,
      json: { user: 'carol' },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-invite', A, json.length) },
    });
    expect(inv.status).toBe(200);
    const { claim_url, mailed } = (await inv.json()) as { claim_url: string; mailed: boolean };
    expect(mailed).toBe(true);
    const t = new URL(claim_url).searchParams.get('t')!;
    // Before claiming, a password sign-in is refused and logged as pending.
    const early = await s.fetch('/oidc.ashx/token', {
      method: 'POST',
      host: A,
      body: new URLSearchParams({ grant_type: 'password', client_id: 'sovcomms-console', username: 'carol', password: 'whatever pass 1' }),
    });
    expect(early.status).toBe(400);
    const info = await s.fetch(`/oidc.ashx/claim-info?t=${t}`, { host: A });
    expect(await info.json()).toMatchObject({ user: 'carol', email: 'carol@example.test' });
    const claim = await s.fetch('/oidc.ashx/claim', { method: 'POST', host: A, json: { t, password: 'carol password 1' } });
    expect(claim.status).toBe(200);
    const again = await s.fetch('/oidc.ashx/claim', { method: 'POST', host: A, json: { t, password: 'carol password 2' } });
    expect(again.status).toBe(404);
    const tok = await s.fetch('/oidc.ashx/token', {
      method: 'POST',
      host: A,
      body: new URLSearchParams({ grant_type: 'password', client_id: 'sovcomms-console', username: 'carol', password: 'carol password 1' }),
    });
    expect(tok.status).toBe(200);
    const log = await (await s.fetch('/api.ashx/v1/auditlog', { host: A, key: s.adminKey })).text();
    for (const e of ['claim-info', 'claim', 'login-claim-pending']) expect(log).toContain(`"${e}"`);
  });
});
