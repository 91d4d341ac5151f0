import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { until } from '../../support/until.ts';
import { adminToken } from '../admin/helpers.ts';
import { saveClient } from '../oidc/helpers.ts';
import { adminCall, registerClient } from '../rp-ca/helpers.ts';
import { CLAIMS, createOffer } from '../wallet-issuer/support.ts';
import { axe, dialogShown, go, launchChromium } from './support.ts';

/**
 * Accessibility of the whole console and of the pages the server renders around it: axe-core finds
 * no critical and no serious violation on any page or dialog, light and dark, on a desktop and on a
 * 390x844 phone (where every page must also fit the screen, with whole badge labels and nothing
 * sticking out of the header). One language per test file (console-axe.test.ts English,
 * console-axe-de.test.ts German), so vitest runs the two side by side.
 *
 * One browser; each combination signs in once (checking the sign-in page first), visits every
 * console page once and opens that page's dialogs in place (then closes them with Escape), opens a
 * call's detail from the calls list, and last visits the provider's own pages in the same session
 * (consent, account choice, passkeys, an invitation, a message, sign-out) and the wallet pages
 * (a presentation's QR page, a credential offer, the wallet sign-in's answer page). The appliance
 * holds one row of everything a page shows with buttons (a webhook with its Pause button, a
 * scheduled call, a finished call with its transcript, a trunk and a route, a user, a certificate,
 * a second tenant, a backup archive), so the rows' controls and their confirmations are checked
 * too, not only empty pages.
 */
const PAGES = ['', 'calls', 'chat', 'transcripts', 'telephony', 'users', 'webhooks', 'audit', 'trust', 'certificates', 'tenants', 'backups'];
/** The dialogs each page opens, by the test id of the control that opens them. */
const DIALOGS: Record<string, string[]> = {
  calls: ['place-call'],
  chat: ['chat-new'],
  users: ['user-toggle'],
  webhooks: ['webhook-pause', 'webhook-edit'],
  tenants: ['tenant-remove'],
  backups: ['backup-restore'],
};
const TOKEN = 'axe-test-bridge-token-0123456789abc';
const RP_CALLBACK = 'http://127.0.0.1:9/cb';

/** Waits until the page's queries have answered (the live feed keeps one request open, so no networkidle). */
async function settled(page: Page): Promise<void> {
  await expect.poll(() => page.locator('.mantine-Loader-root').count(), { timeout: 10_000 }).toBe(0);
}

/** What a 390x844 console page must not have: sideways scrolling, badges cut short, header controls sticking out of the header. */
function phoneProblems(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(`(() => {
    const out = [];
    if (document.documentElement.scrollWidth > window.innerWidth) out.push('scrolls sideways: ' + document.documentElement.scrollWidth + 'px');
    for (const e of document.querySelectorAll('main .mantine-Badge-label')) if (e.scrollWidth > e.clientWidth + 1) out.push('badge cut: ' + e.textContent);
    const header = document.querySelector('header');
    if (!header) return out;
    const box = header.getBoundingClientRect();
    for (const e of document.querySelectorAll('header *')) {
      const r = e.getBoundingClientRect();
      if (r.width > 0 && (r.bottom > box.bottom + 1 || r.right > window.innerWidth + 1)) out.push('sticks out of the header: ' + e.tagName + ' ' + (e.textContent || '').slice(0, 30));
    }
    return out;
  })()`);
}

export function axeSweep(locale: 'en-US' | 'de-DE'): void {
  let s: TestServer;
  let base: string;
  let browser: Browser;
  let finishedCall: string;
  let claimUrl: string;
  let offerId: string;
  let vpSession: string;
  const lang = locale.slice(0, 2);

  beforeAll(async () => {
    // The bridge answers while a call is placed and ends with its transcript, then stops: the
    // pages show a bridge that does not answer (and the LOTL address refuses), and a call's detail
    // has a transcript.
    const fake = new FakeBridge(TOKEN, '');
    await fake.start();
    s = await startTestServer({
      overrides: {
        plugins: {
          telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN } },
          lotl: { lotlUrl: 'http://127.0.0.1:9/eu-lotl.xml', fetchTimeoutMs: 2000 },
        },
      },
    });
    base = `http://localhost:${s.port}`;
    fake.callbackUrl = `${s.url}/internal/bridge/events`;
    const v1 = (method: string, p: string, json: unknown) => s.fetch(`/api.ashx/v1${p}`, { method, key: s.adminKey, json });
    const trunk = await adminCall(s, 'POST', '/signal.ashx?trunks=save', 'trunks-save', { json: { id: 'main', name: 'Main', host: '127.0.0.1' } });
    expect(trunk.status, await trunk.clone().text()).toBe(200);
    const route = await v1('POST', '/outbound-routes', { match: '+49*', trunkIds: ['main'] });
    expect(route.status, await route.clone().text()).toBeLessThan(300);
    const placed = await v1('POST', '/calls', {
      phone: '+4930123456',
      displayName: 'Dr. Example',
      systemPrompt: 'Confirm the appointment.',
      apiKey: 'AIza-axe-test-key',
    });
    expect(placed.status, await placed.clone().text()).toBeLessThan(300);
    finishedCall = ((await placed.json()) as { callId: string }).callId;
    await until(() => fake.placed.some((p) => p.callId === finishedCall), 15_000, 'the call placed on the bridge');
    const end = await fake.emit(FakeBridge.ended(finishedCall, 'finished', { trunkId: `${s.primary.id}.main` }));
    expect(end.body.applied, JSON.stringify(end.body)).toBe(true);
    await fake.stop();

    await s.appliance.core.users.add(s.primary, { name: 'erin', role: 'user', password: 'erin password 12' });
    const next = new Date(Date.now() + 7 * 86400_000).toISOString();
    const scheduled = await v1('POST', '/calls', {
      phone: '+4930123456',
      systemPrompt: 'Confirm the appointment.',
      scheduleAtUtc: next,
      apiKey: 'AIza-axe-test-key',
    });
    expect(scheduled.status, await scheduled.clone().text()).toBeLessThan(300);
    s.appliance.core.tenants.add('branch.axe.test', 'Branch office');
    // Backups are an administrator's OIDC session's (not an ak_ key's).
    const token = await adminToken(s, `localhost:${s.port}`, 'admin', s.adminPassword);
    const backup = await s.fetch('/api.ashx/v1/backups', { method: 'POST', host: `localhost:${s.port}`, key: token, json: {} });
    expect(backup.status, await backup.clone().text()).toBe(201);
    const hook = await adminCall(s, 'POST', '/signal.ashx?webhooks=add', 'webhooks-add', { json: { url: 'https://crm.example/hook', events: ['call.ended'] } });
    expect(hook.status, await hook.clone().text()).toBeLessThan(300);
    await registerClient(s, 'verifier.axe.test');
    const cert = await adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', { json: { client_id: 'verifier.axe.test', days: 30 } });
    expect(cert.status, await cert.clone().text()).toBeLessThan(300);

    // The provider's pages: a relying party that asks for consent, an invited account, a credential offer.
    const host = `localhost:${s.port}`;
    await saveClient(s, host, { client_id: 'crm.axe.test', client_name: 'Office CRM', redirect_uris: [RP_CALLBACK], grant_types: ['authorization_code'] });
    await s.appliance.core.users.add(s.primary, { name: 'fritz', role: 'user', email: 'fritz@example.test' });
    const json = JSON.stringify({ user: 'fritz' });
    const inv = await s.fetch('/signal.ashx?oidc-invite=1', {
      method: 'POST',
      host,
      json: { user: 'fritz' },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-invite', host, json.length) },
    });
    expect(inv.status, await inv.clone().text()).toBe(200);
    const claim = new URL(((await inv.json()) as { claim_url: string }).claim_url);
    claimUrl = claim.pathname + claim.search;
    offerId = (await createOffer(s, { claims: CLAIMS, pre_authorized: true })).offer_id!;
    const vp = await s.fetch('/oidc.ashx?action=vp-start&preset=pid', { host });
    expect(vp.status, await vp.clone().text()).toBe(200);
    vpSession = ((await vp.json()) as { session_id: string }).session_id;
    browser = await launchChromium();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await s?.stop();
  });

  const authorize = (prompt: string) =>
    `/oauth2/v1/authorize?${new URLSearchParams({ response_type: 'code', client_id: 'crm.axe.test', redirect_uri: RP_CALLBACK, scope: 'openid profile email', state: 'axe', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256', prompt }).toString()}`;

  /** The server-rendered pages, each by its address (after the console: leaving it drops its tokens), with what shows it is the page meant. */
  const providerPages = (): [string, string, string][] => [
    ['consent', authorize('consent'), '#consent-form, form[action*="consent"]'],
    ['account choice', authorize('select_account'), 'form[action*="select-account"]'],
    ['passkeys', '/passkeys.html', 'h1'],
    ['invitation', claimUrl, 'input#password'],
    ['expired link message', '/oidc.ashx/maglink-finish?t=axe-not-a-token', 'h1'],
    ['sign-out', '/oauth2/v1/logout', 'form'],
    ['wallet QR page', `/oidc.ashx/vp-qr?session_id=${vpSession}`, '#qr'],
    ['credential offer page', `/vci.ashx?offer-page=${offerId}`, 'h1'],
    ['wallet sign-in answer', `/oidc.ashx/wallet-login/return?session_id=${vpSession}&response_code=axe-code`, 'h1'],
  ];

  describe(`axe (and the phone layout) on every page and dialog, ${locale}`, { timeout: 300_000 }, () => {
    for (const scheme of ['light', 'dark'] as const) {
      for (const [size, viewport] of [
        ['desktop', { width: 1280, height: 800 }],
        ['phone', { width: 390, height: 844 }],
      ] as const) {
        it(`${locale}, ${scheme}, ${size}`, async () => {
          const phone = size === 'phone';
          const ctx = await browser.newContext({ locale, colorScheme: scheme, viewport, isMobile: phone, hasTouch: phone });
          const page = await ctx.newPage();
          const found: string[] = [];
          /** A server-rendered page: axe, its language, and on a phone no sideways scrolling. */
          const providerCheck = async (name: string) => {
            for (const v of await axe(page)) found.push(`${name}: ${v}`);
            const htmlLang = await page.evaluate<string>('document.documentElement.lang');
            if (htmlLang !== lang) found.push(`${name}: <html lang="${htmlLang}">, the browser asked for ${lang}`);
            if (phone) for (const x of await phoneProblems(page)) found.push(`${name}: ${x}`);
          };

          // The sign-in page, with the wallet's sign-in block.
          await page.goto(`${base}/`);
          await page.waitForURL(/\/login\.html/);
          await page.locator('#username').waitFor();
          await providerCheck('sign-in page');
          await page.locator('#username').fill('admin');
          await page.locator('#password').fill(s.adminPassword);
          await page.locator('#password-form button[type="submit"]').click();
          await page.waitForURL(/\/console\/$/);
          await page.getByTestId('calls-today').waitFor();
          expect(await page.evaluate<string>('document.documentElement.lang || navigator.language')).toMatch(new RegExp(`^${lang}`));

          for (const p of PAGES) {
            await go(page, p);
            await settled(page);
            for (const v of await axe(page)) found.push(`/console/${p}: ${v}`);
            // On a phone every page fits the screen: nothing scrolls sideways, no badge is cut to "S...".
            if (phone) for (const x of await phoneProblems(page)) found.push(`/console/${p}: ${x}`);
            for (const id of DIALOGS[p] ?? []) {
              const opener = page.getByTestId(id).last();
              await opener.waitFor({ timeout: 10_000 });
              await opener.click();
              const dialog = page.getByRole('dialog');
              await dialog.waitFor();
              await dialogShown(page);
              for (const v of await axe(page)) found.push(`/console/${p} dialog of ${id}: ${v}`);
              await page.keyboard.press('Escape');
              await dialog.waitFor({ state: 'detached' });
            }
            if (p === 'calls') {
              // A call's detail, reached as an operator does: from its row in the list; its transcript shown.
              await page.locator(`main a[href="/console/calls/${finishedCall}"]`).first().click();
              await page.waitForURL(new RegExp(`/console/calls/${finishedCall}$`));
              await page.getByText('Oh hi, yes, Tuesday works.').waitFor();
              await settled(page);
              for (const v of await axe(page)) found.push(`/console/calls/${finishedCall}: ${v}`);
              if (phone) for (const x of await phoneProblems(page)) found.push(`/console/calls/${finishedCall}: ${x}`);
            }
          }

          for (const [name, url, marker] of providerPages()) {
            await page.goto(base + url);
            await page.locator(marker).first().waitFor({ timeout: 10_000 });
            await providerCheck(name);
          }
          expect(found).toEqual([]);
          await ctx.close();
        });
      }
    }
  });
}
