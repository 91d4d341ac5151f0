import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminToken } from '../admin/helpers.ts';
import { registerClient } from '../rp-ca/helpers.ts';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { startSipp, type SippRun } from '../../support/sipp.ts';
import { GeminiLiveFake } from '../../support/gemini-live-fake.ts';
import { until } from '../../support/until.ts';
import { SNAPSHOT } from '../lotl/support.ts';
import { ARTEFACTS, axe, confirmDialog, dashboard, go, launchChromium, signInWithPassword as signIn, watched } from './support.ts';

/**
 * The operator console in Chromium against the real appliance: sign-in through its own OIDC
 * provider (password and passkey), every page without a console error, a failed request or a
 * serious accessibility violation, and the main flows end to end. Screenshots of every page in
 * both themes go to test-artifacts/console/ (review artefacts, not committed).
 */
const PAGES = ['', 'calls', 'chat', 'transcripts', 'telephony', 'users', 'webhooks', 'audit', 'trust', 'certificates', 'tenants'];

let s: TestServer;
let base: string;
let browser: Browser;
let engine: GeminiLiveFake;
const sipps: SippRun[] = [];
let receiver: http.Server;
const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];

beforeAll(async () => {
  process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
  engine = new GeminiLiveFake({
    apiKey: 'AIza-console-key',
    script: [{ say: 'Hello from the practice.', audioMs: 1500 }, { hear: 'Hi', ms: 300 }, { tool: 'end_call' }],
  });
  await engine.start();
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      // A slow receiver keeps a delivery pending long after its event has been pushed.
      setTimeout(() => res.writeHead(200).end('ok'), req.url === '/slow-hook' ? 2000 : 0);
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const rtp = 44000 + 2 * Math.floor(Math.random() * 4000);
  s = await startTestServer({
    overrides: {
      plugins: {
        webhooks: { allowLoopback: true },
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${rtp}-${rtp + 99}`, readyTimeoutMs: 20_000 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
          ringTimeoutSec: 10,
        },
      },
    },
  });
  base = `http://localhost:${s.port}`;
  await s.appliance.core.users.add(s.primary, { name: 'bob', role: 'admin', password: 'bob password 12' });
  await s.appliance.core.users.add(s.primary, { name: 'carol', role: 'user', password: 'carol password 12' });
  browser = await launchChromium();
  fs.mkdirSync(ARTEFACTS, { recursive: true });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  for (const x of sipps) await x.stop();
  await engine?.stop();
  await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
  delete process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC;
});

/** Signs in as `user` (the admin by default) on this test's appliance. */
function signInWithPassword(page: Page, user = 'admin', password = s.adminPassword): Promise<void> {
  return signIn(page, base, user, password);
}

describe('console served by the appliance', () => {
  it('GET / redirects to /console/, index.html has a strict CSP, hashed assets are immutable, nothing outside the build is served', async () => {
    const root = await s.fetch('/', { key: null, headers: {} });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/console/');
    const index = await s.fetch('/console/', { key: null });
    expect(index.status).toBe(200);
    const csp = index.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const html = await index.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    const asset = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const a = await s.fetch(asset, { key: null, headers: { 'Accept-Encoding': 'gzip' } });
    expect(a.status).toBe(200);
    expect(a.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(a.headers.get('content-type')).toMatch(/^text\/javascript/);
    // A client-side route gets the app; a missing asset is a 404; traversal reaches nothing.
    expect((await s.fetch('/console/calls/oac-000000000000', { key: null })).status).toBe(200);
    expect((await s.fetch('/console/assets/nope.js', { key: null })).status).toBe(404);
    for (const p of ['/console/..%2f..%2fpackage.json', '/console/%2e%2e/%2e%2e/package.json', '/console/assets/..%2f..%2f..%2fdata%2fmaster.key']) {
      const r = await s.fetch(p, { key: null });
      expect(await r.text()).not.toMatch(/"name": "sovcomms"|"dependencies"/);
    }
  });
});

describe('console in Chromium', { timeout: 120_000 }, () => {
  it('password sign-in (authorization code + PKCE), every page in both themes: no console error, no failed request, no serious axe violation', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const ctx = await browser.newContext({ colorScheme: scheme });
      const { page, w } = await watched(ctx);
      await signInWithPassword(page);
      // Tokens live in memory only: nothing in storage.
      expect(await page.evaluate<string>('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })')).not.toMatch(
        /eyJ|access_token|refresh/,
      );
      await expect.poll(() => page.getByTestId('live-badge').textContent()).toBe('Live');
      // The dashboard says where the master key is kept (the desktop shell's OS key store, or the file).
      await expect.poll(() => page.getByTestId('master-key-store').textContent()).toBe('data/master.key (0600)');
      for (const p of PAGES) {
        await go(page, p);
        // Let the page's queries settle (the live feed keeps one request open, so no networkidle).
        await expect.poll(() => page.locator('.mantine-Loader-root').count(), { timeout: 10_000 }).toBe(0);
        expect(await axe(page), `axe on /console/${p} (${scheme})`).toEqual([]);
        await page.screenshot({ path: path.join(ARTEFACTS, `${p || 'dashboard'}-${scheme}.png`), fullPage: true });
      }
      expect(w.errors).toEqual([]);
      await ctx.close();
    }
  });

  it('German is complete and switchable; dates follow the chosen locale', async () => {
    const ctx = await browser.newContext({ locale: 'de-DE' });
    const { page } = await watched(ctx);
    await signInWithPassword(page);
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Übersicht');
    await page.getByLabel('Sprache').selectOption('en');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent()).toBe('Dashboard');
    await ctx.close();
  });

  it("the dashboard shows the setup checklist until done: each item's state, a link to its form, and where SIP listens", async () => {
    const ctx = await browser.newContext();
    const { page, w } = await watched(ctx);
    await signInWithPassword(page);
    await page.getByTestId('setup-checklist').waitFor();
    await expect.poll(() => page.getByTestId('setup-engine-key').textContent()).toContain('to do');
    expect(await page.getByTestId('setup-backup-target').textContent()).toContain('to do');
    expect(await page.getByTestId('setup-sip-lan').textContent()).toContain('only this machine reaches it');
    expect(await page.getByTestId('sip-listens').textContent()).toMatch(/^SIP listens on: UDP\/TCP 127\.0\.0\.1:\d+ \(this machine only/);
    expect(await axe(page), 'axe on the dashboard with the checklist').toEqual([]);
    await page.getByTestId('setup-trunk-registered').getByRole('link', { name: 'Open the form' }).click();
    await expect.poll(() => page.getByRole('tab', { selected: true }).textContent()).toBe('Trunks');
    await go(page, '');
    await page.getByTestId('setup-default-trunk').getByRole('link', { name: 'Open the form' }).click();
    await expect.poll(() => page.getByRole('tab', { selected: true }).textContent()).toBe('Settings');
    expect(w.errors).toEqual([]);
    await ctx.close();
    // The checklist in the dark theme reads as well (axe's contrast checks).
    const dark = await browser.newContext({ colorScheme: 'dark' });
    const d = await watched(dark);
    await signInWithPassword(d.page);
    await d.page.getByTestId('setup-checklist').waitFor();
    await expect.poll(() => d.page.getByTestId('sip-listens').count()).toBe(1);
    expect(await axe(d.page), 'axe on the dashboard with the checklist (dark)').toEqual([]);
    await dark.close();
  });

  it('mints an API key (shown once, copyable), which works until revoked in the console', async () => {
    const ctx = await browser.newContext();
    const { page, w } = await watched(ctx);
    await signInWithPassword(page);
    await go(page, 'users');
    await page.getByRole('tab', { name: 'API keys' }).click();
    await page.getByLabel('Key name').fill('console-test');
    await page.getByTestId('mint-key').click();
    const key = (await page.getByTestId('once-secret').textContent())!;
    expect(key).toMatch(/^ak_/);
    expect((await s.fetch('/api.ashx/v1/calls', { key })).status).toBe(200);
    await page.getByRole('row').filter({ hasText: 'console-test' }).getByRole('button', { name: 'Revoke' }).click();
    await confirmDialog(page, 'console-test');
    await until(async () => (await s.fetch('/api.ashx/v1/calls', { key })).status === 401, 5000, 'key refused after revoke');
    expect(w.errors.filter((e) => !e.includes('HTTP 401'))).toEqual([]);
    await ctx.close();
  });

  it('adds a webhook (secret shown once), test-fires it to a local receiver and shows the delivery', async () => {
    const ctx = await browser.newContext();
    const { page, w } = await watched(ctx);
    await signInWithPassword(page);
    await go(page, 'webhooks');
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/slow-hook`;
    await page.getByLabel('Receiver URL').fill(url);
    await page.getByRole('button', { name: 'Add webhook' }).click();
    expect(await page.getByTestId('once-secret').textContent()).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'Send test' }).click();
    // The row appears while the receiver is still answering, then turns delivered by itself: the
    // page does not poll, each change of the row is pushed on the live feed.
    const deliveries = async () => (await page.getByTestId('deliveries').textContent()) ?? '';
    const states = async () => Promise.all((await page.getByTestId('deliveries').locator('[data-state]').all()).map((x) => x.getAttribute('data-state')));
    await expect.poll(states, { timeout: 10_000 }).toContain('pending');
    await until(() => received.find((r) => r.body.includes('webhook.test')), 15_000, 'test delivery at the receiver');
    await expect.poll(states, { timeout: 10_000 }).toContain('delivered');
    expect(await deliveries()).toContain('Delivered');
    expect(w.errors).toEqual([]);
    await ctx.close();
  });

  it('shows a field error from the API at the field (bad URL), not a silent failure', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signInWithPassword(page);
    await go(page, 'webhooks');
    await page.getByLabel('Receiver URL').fill('not a url');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await expect.poll(async () => page.locator('[id$="-error"]').first().textContent(), { timeout: 5000 }).toMatch(/url/i);
    await ctx.close();
  });

  it('imports the real EU trusted lists (a tar of the snapshot) and shows the anchors', async () => {
    const dir = tempDir('console-tl-');
    const tar = path.join(dir, 'lists.tar');
    execFileSync('tar', ['-cf', tar, '-C', SNAPSHOT, ...fs.readdirSync(SNAPSHOT).filter((f) => f.endsWith('.xml'))]);
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signInWithPassword(page);
    await go(page, 'trust');
    interface Manifest {
      as_of: string | null;
      lists: { territory: string; stale: boolean }[];
    }
    const status = async () => (await (await s.fetch('/lotl.ashx?status')).json()) as Manifest;
    const before = (await status()).as_of;
    const chooser = page.waitForEvent('filechooser');
    await page.getByTestId('import-lists').click();
    await (await chooser).setFiles(tar);
    await expect.poll(async () => Number(await page.getByTestId('anchor-count').textContent()), { timeout: 60_000 }).toBeGreaterThan(0);
    // The dashboard names the lists past their NextUpdate (or says none), from the same status,
    // read once this import run has ended (the anchor count shows while lists are still stored).
    await expect.poll(async () => (await status()).as_of, { timeout: 60_000 }).not.toBe(before);
    const manifest = await status();
    const stale = manifest.lists.filter((l) => l.stale).map((l) => l.territory);
    await dashboard(page);
    await expect.poll(async () => page.getByTestId('lotl-stale').textContent()).toBe(stale.length ? stale.join(', ') : 'none');
    await ctx.close();
  });

  it('issues an RP certificate (key shown once) and revokes it; the CRL lists it', async () => {
    const ctx = await browser.newContext();
    const { page, w } = await watched(ctx);
    await signInWithPassword(page);
    // The CA issues only for a registered OIDC client of the tenant.
    await registerClient(s, 'verifier.office.test');
    await go(page, 'certificates');
    await page.getByLabel('client_id').fill('verifier.office.test');
    await page.getByTestId('issue-cert').click();
    expect(await page.getByTestId('once-secret').textContent()).toContain('PRIVATE KEY');
    // The list also holds the appliance's own TLS certificate (tls:localhost): revoke the one just issued.
    const revoke = page.getByRole('row').filter({ hasText: 'verifier.office.test' }).getByRole('button', { name: 'Revoke' });
    await revoke.click();
    await confirmDialog(page, 'verifier.office.test');
    await expect.poll(async () => (await page.locator('table').textContent()) ?? '').toContain('Revoked');
    // The dashboard shows the CA: its key in software here, ready, with the counts.
    await dashboard(page);
    await expect.poll(async () => page.getByTestId('ca-key-store').textContent()).toBe('software (sealed)');
    expect(await page.getByTestId('ca-key-ready').textContent()).toBe('ready');
    // Issued counts the appliance's own TLS certificate too (the SIP TLS listener asks the CA for it at start).
    await expect.poll(async () => page.getByText(/^[12] certificates? issued, 1 revoked$/).count()).toBe(1);
    expect(w.errors).toEqual([]);
    await ctx.close();
  });

  it('two trunks to SIPp, an outbound route reordered, a call placed from the form goes live and ends without a reload', async () => {
    const ctx = await browser.newContext();
    const { page, w } = await watched(ctx);
    await signInWithPassword(page);
    await go(page, 'telephony');
    const run = await startSipp({ scenario: 'answer-play-pcap', calls: 1, timeoutSec: 40 });
    sipps.push(run);
    for (const [name, port] of [
      ['spare', 5],
      ['carrier', run.port],
    ] as const) {
      await page.getByLabel(/^Name/).fill(name);
      await page.getByLabel(/^Host/).fill('127.0.0.1');
      await page.getByLabel('Port', { exact: true }).fill(String(port));
      await page.getByRole('button', { name: 'Save' }).click();
      await expect.poll(async () => (await page.locator('table').textContent()) ?? '').toContain(`127.0.0.1:${port}`);
    }
    const trunks = (
      (await (await s.fetch('/signal.ashx?trunks=list', { key: null, headers: { 'X-Service-Admin-Signature': s.hmac('trunks-list') } })).json()) as {
        trunks: { id: string; port: number }[];
      }
    ).trunks;
    const spare = trunks.find((t) => t.port === 5)!.id;
    const carrier = trunks.find((t) => t.port === run.port)!.id;
    await page.getByRole('tab', { name: 'Outbound routes' }).click();
    await page.getByLabel('Dial prefix').fill('+49*');
    await page.getByRole('combobox', { name: 'Trunks' }).click({ force: true });
    await page.getByRole('option', { name: spare }).click();
    await page.getByRole('option', { name: carrier }).click();
    await page.keyboard.press('Escape');
    await page.getByTestId('add-route').click();
    await expect.poll(async () => page.getByTestId('route-+49*').getByTestId('route-trunk').allTextContents()).toEqual([spare, carrier]);
    await page.getByRole('button', { name: `Move ${carrier} up` }).click();
    await expect.poll(async () => page.getByTestId('route-+49*').getByTestId('route-trunk').allTextContents()).toEqual([carrier, spare]);
    const route = (await (await s.fetch(`/api.ashx/v1/outbound-routes/${encodeURIComponent('+49*')}`, { key: s.adminKey })).json()) as { trunkIds: string[] };
    expect(route.trunkIds).toEqual([carrier, spare]);
    // And by dragging: the spare trunk dropped onto the first place.
    const rows = page.getByTestId('route-+49*').getByTestId('route-trunk-row');
    await rows.nth(1).dragTo(rows.nth(0));
    await expect.poll(async () => page.getByTestId('route-+49*').getByTestId('route-trunk').allTextContents()).toEqual([spare, carrier]);
    // Back to carrier first for the call below.
    await rows.nth(1).dragTo(rows.nth(0));
    await expect
      .poll(
        async () =>
          ((await (await s.fetch(`/api.ashx/v1/outbound-routes/${encodeURIComponent('+49*')}`, { key: s.adminKey })).json()) as { trunkIds: string[] })
            .trunkIds,
      )
      .toEqual([carrier, spare]);

    await page.getByRole('tab', { name: 'Settings' }).click();
    await page.getByLabel('AI engine API key').fill('AIza-console-key');
    await page.getByRole('button', { name: 'Save' }).click();
    await expect.poll(async () => (await page.getByText('A key is stored').count()) > 0).toBe(true);

    await go(page, 'calls');
    await page.getByTestId('place-call').click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Phone number').fill('+4930123456');
    await dialog.getByLabel('Instructions for the AI').fill('Confirm the appointment.');
    await page.getByRole('button', { name: 'Call now' }).click();
    // The list changes by itself (live feed): no reload, no click.
    await expect.poll(async () => page.locator('[data-status]').first().getAttribute('data-status'), { timeout: 40_000 }).toBe('ended-success');
    expect(w.errors).toEqual([]);
    await ctx.close();
  });

  it('passkey sign-in (virtual authenticator) through the same pages, and sign-out ends the session', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    await signInWithPassword(page, 'bob', 'bob password 12');
    await page.getByRole('link', { name: 'My passkeys' }).click();
    await page.getByRole('button', { name: /Register a passkey/ }).click();
    await expect.poll(() => page.locator('#passkey-status').textContent(), { timeout: 15_000 }).toBe('Passkey registered.');
    await page.goto(`${base}/console/`);
    await page.getByTestId('calls-today').waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    // RP-initiated logout ends the provider's session: back at the console, sign-in is asked for again.
    await page.waitForURL(/\/login\.html/, { timeout: 15_000 });
    await page
      .getByRole('button', { name: /passkey/i })
      .first()
      .click();
    await page.waitForURL(/\/console\//);
    await expect.poll(() => page.getByTestId('signed-in-user').textContent(), { timeout: 15_000 }).toContain('bob');
    await ctx.close();
  });

  it("a super-admin switches tenant: the users page shows and changes that tenant's users (role, password reset shown once), and switches back", async () => {
    const { tenant } = await s.addTenant('branch.test');
    await s.appliance.core.users.add(tenant, { name: 'dora', role: 'user', password: 'dora password 12' });
    const branch = `branch.test:${s.port}`;
    const ctx = await browser.newContext();
    const { page, w } = await watched(ctx);
    await signInWithPassword(page);
    await go(page, 'users');
    await page.getByRole('row').filter({ hasText: 'carol' }).waitFor();
    await page.getByTestId('tenant-switcher').selectOption('branch.test');
    await page.getByRole('row').filter({ hasText: 'dora' }).waitFor();
    expect(await page.getByRole('row').filter({ hasText: 'carol' }).count()).toBe(0);
    // The role change lands in the branch tenant.
    await page.getByLabel('Role of dora').selectOption('admin');
    await confirmDialog(page, 'dora');
    const branchAdmin = await adminToken(s, branch, 'admin', 'correct horse battery');
    const roleOfDora = async () =>
      ((await (await s.fetch('/api.ashx/v1/users', { host: branch, key: branchAdmin })).json()) as { data: { name: string; role: string }[] }).data.find(
        (u) => u.name === 'dora',
      )?.role;
    await until(async () => (await roleOfDora()) === 'admin', 5000, 'dora is admin');
    // A generated password, shown once, signs dora in on the branch host.
    await page.getByRole('button', { name: 'Reset password of dora' }).click();
    await confirmDialog(page, 'dora');
    const password = (await page.getByTestId('once-secret').textContent())!;
    expect(password.length).toBeGreaterThanOrEqual(12);
    await adminToken(s, branch, 'dora', password);
    // Back on the own tenant: its users again.
    await page.getByTestId('tenant-switcher').selectOption('localhost');
    await page.getByRole('row').filter({ hasText: 'carol' }).waitFor();
    expect(w.errors).toEqual([]);
    await ctx.close();
  });

  it('an account with role user is offered no admin page (the API would answer 403) and sees no error', async () => {
    const ctx = await browser.newContext();
    const { page, w } = await watched(ctx);
    await page.goto(`${base}/`);
    await page.getByLabel('User name or e-mail').fill('carol');
    await page.getByLabel('Password').fill('carol password 12');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByText('Welcome, carol').waitFor();
    expect(await page.locator('nav a[href="/console/calls"]').count()).toBe(0);
    expect(await axe(page)).toEqual([]);
    expect(w.errors).toEqual([]);
    await ctx.close();
  });

  it('chat: two users in two browsers exchange messages and a file live through the console pages', async () => {
    const ctxC = await browser.newContext({ acceptDownloads: true });
    const ctxB = await browser.newContext({ acceptDownloads: true });
    const { page: carol, w: wc } = await watched(ctxC);
    const { page: bob, w: wb } = await watched(ctxB);
    await carol.goto(`${base}/`);
    await carol.getByLabel('User name or e-mail').fill('carol');
    await carol.getByLabel('Password').fill('carol password 12');
    await carol.getByRole('button', { name: 'Sign in', exact: true }).click();
    await carol.getByText('Welcome, carol').waitFor();
    await go(carol, 'chat');
    await signInWithPassword(bob, 'bob', 'bob password 12');
    await go(bob, 'chat');
    await expect.poll(() => carol.getByTestId('chat-socket').textContent()).toBe('Live');
    await expect.poll(() => bob.getByTestId('chat-socket').textContent()).toBe('Live');

    await carol.getByRole('button', { name: 'New conversation' }).click();
    await carol.getByLabel('Colleague (login)').fill('bob');
    await carol.getByLabel('First message').fill('Hello Bob <b>not bold</b>');
    await carol.getByRole('button', { name: 'Start' }).click();
    // Bob's list shows the new thread with an unread badge, pushed over his socket.
    await bob.getByTestId('thread-carol').waitFor({ timeout: 15_000 });
    expect(await bob.getByTestId('thread-carol').textContent()).toContain('1');
    await bob.getByTestId('thread-carol').click();
    await expect.poll(() => bob.getByTestId('chat-message').allTextContents()).toEqual(['Hello Bob <b>not bold</b>']);
    await bob.getByLabel('Message').fill('Hi Carol');
    await bob.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => carol.getByTestId('chat-message').allTextContents(), { timeout: 15_000 }).toEqual(['Hello Bob <b>not bold</b>', 'Hi Carol']);

    await carol.getByTestId('chat-upload').setInputFiles({ name: 'minutes.txt', mimeType: 'text/plain', buffer: Buffer.from('the minutes of the meeting') });
    await bob.getByTestId('chat-file').waitFor({ timeout: 15_000 });
    const dl = bob.waitForEvent('download');
    await bob.getByTestId('chat-file').click();
    const file = await dl;
    expect(file.suggestedFilename()).toBe('minutes.txt');
    expect(fs.readFileSync((await file.path())!, 'utf8')).toBe('the minutes of the meeting');
    expect(wc.errors).toEqual([]);
    expect(wb.errors).toEqual([]);
    await ctxC.close();
    await ctxB.close();
  });

  it('a lost connection shows a banner and recovers by itself', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signInWithPassword(page);
    await expect.poll(() => page.getByTestId('live-badge').textContent()).toBe('Live');
    // The server drops the stream and refuses reconnects for a while: the banner shows; then it recovers.
    await page.route('**/api.ashx/v1/events', (r) => r.abort());
    s.appliance.live!.closeAll();
    await expect.poll(() => page.getByTestId('offline-banner').count(), { timeout: 30_000 }).toBe(1);
    await page.unroute('**/api.ashx/v1/events');
    await expect.poll(() => page.getByTestId('live-badge').textContent(), { timeout: 30_000 }).toBe('Live');
    await ctx.close();
  });
});
