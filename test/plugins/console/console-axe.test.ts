import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminToken } from '../admin/helpers.ts';
import { adminCall, registerClient } from '../rp-ca/helpers.ts';
import { axe, dialogShown, go, launchChromium, signInWithPassword } from './support.ts';

/**
 * Accessibility of the whole console: axe-core finds no critical and no serious violation on any
 * page or dialog, in English and German, light and dark, on a desktop and on a 390x844 phone (where
 * every page must also fit the screen, with whole badge labels and nothing sticking out of the header).
 * One browser; each combination signs in once, visits every page once and opens that page's
 * dialogs in place (then closes them with Escape). The appliance holds one row of everything a
 * page shows with buttons (a webhook with its Pause button, a scheduled call,
 * a user, a certificate, a second tenant, a backup archive), so the rows' controls and their
 * confirmations (remove the tenant, restore the archive) are checked too, not only empty pages.
 */
let s: TestServer;
let base: string;
let browser: Browser;

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

beforeAll(async () => {
  s = await startTestServer({
    overrides: {
      plugins: {
        // A bridge that does not answer and a LOTL address that refuses: the pages show those states.
        telephony: { bridge: { mode: 'remote', url: 'http://127.0.0.1:9/', token: 'axe-test-bridge-token-0123456789abc' } },
        lotl: { lotlUrl: 'http://127.0.0.1:9/eu-lotl.xml', fetchTimeoutMs: 2000 },
      },
    },
  });
  base = `http://localhost:${s.port}`;
  await s.appliance.core.users.add(s.primary, { name: 'erin', role: 'user', password: 'erin password 12' });
  const next = new Date(Date.now() + 7 * 86400_000).toISOString();
  const call = await s.fetch('/api.ashx/v1/calls', {
    method: 'POST',
    key: s.adminKey,
    body: JSON.stringify({ phone: '+4930123456', systemPrompt: 'Confirm the appointment.', scheduleAtUtc: next, apiKey: 'AIza-axe-test-key' }),
    headers: { 'Content-Type': 'application/json' },
  });
  expect(call.status, await call.clone().text()).toBeLessThan(300);
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
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

/** Waits until the page's queries have answered (the live feed keeps one request open, so no networkidle). */
async function settled(page: Page): Promise<void> {
  await expect.poll(() => page.locator('.mantine-Loader-root').count(), { timeout: 10_000 }).toBe(0);
}

/** What a 390x844 page must not have: sideways scrolling, badges cut short, header controls sticking out of the header. */
function phoneProblems(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(`(() => {
    const out = [];
    if (document.documentElement.scrollWidth > window.innerWidth) out.push('scrolls sideways: ' + document.documentElement.scrollWidth + 'px');
    for (const e of document.querySelectorAll('main .mantine-Badge-label')) if (e.scrollWidth > e.clientWidth + 1) out.push('badge cut: ' + e.textContent);
    const header = document.querySelector('header').getBoundingClientRect();
    for (const e of document.querySelectorAll('header *')) {
      const r = e.getBoundingClientRect();
      if (r.width > 0 && (r.bottom > header.bottom + 1 || r.right > window.innerWidth + 1)) out.push('sticks out of the header: ' + e.tagName + ' ' + (e.textContent || '').slice(0, 30));
    }
    return out;
  })()`);
}

describe('axe (and the phone layout) on every page and dialog', { timeout: 300_000 }, () => {
  for (const locale of ['en-US', 'de-DE'] as const) {
    for (const scheme of ['light', 'dark'] as const) {
      for (const [size, viewport] of [
        ['desktop', { width: 1280, height: 800 }],
        ['phone', { width: 390, height: 844 }],
      ] as const) {
        it(`${locale}, ${scheme}, ${size}`, async () => {
          const phone = size === 'phone';
          const ctx = await browser.newContext({ locale, colorScheme: scheme, viewport, isMobile: phone, hasTouch: phone });
          const page = await ctx.newPage();
          await signInWithPassword(page, base, 'admin', s.adminPassword);
          expect(await page.evaluate<string>('document.documentElement.lang || navigator.language')).toMatch(locale === 'de-DE' ? /^de/ : /^en/);
          const found: string[] = [];
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
          }
          expect(found).toEqual([]);
          await ctx.close();
        });
      }
    }
  }
});
