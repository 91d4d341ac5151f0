import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { until } from '../../support/until.ts';
import { adminToken } from '../admin/helpers.ts';
import { adminCall, registerClient } from '../rp-ca/helpers.ts';
import { axe, confirmDialog, dialogShown, go, launchChromium, signInWithPassword, watched } from './support.ts';

/**
 * The console as a new office administrator meets it (issue "every task safe, clear and live, on a
 * phone too"), in Chromium against the real appliance: a 390x844 phone, the keyboard, named
 * confirmations, the calls date filter in local days, the trusted-list state after a failed
 * refresh, and German words for what the API sends as codes. The telephony bridge is a remote one
 * that does not answer and the LOTL's address refuses connections: what is tested is what the
 * console shows of it.
 */
let s: TestServer;
let base: string;
let browser: Browser;
let bearer: string;
const PHONE = { width: 390, height: 844 };

beforeAll(async () => {
  s = await startTestServer({
    overrides: {
      plugins: {
        telephony: { bridge: { mode: 'remote', url: 'http://127.0.0.1:9/', token: 'office-test-bridge-token-0123456789' } },
        lotl: { lotlUrl: 'http://127.0.0.1:9/eu-lotl.xml', fetchTimeoutMs: 2000 },
      },
    },
  });
  base = `http://localhost:${s.port}`;
  await s.appliance.core.users.add(s.primary, { name: 'erin', role: 'user', password: 'erin password 12' });
  // Two calls scheduled for next week, created now: one stays "scheduled", one is cancelled (an
  // outcome of today, counted once on the dashboard's chart).
  const next = new Date(Date.now() + 7 * 86400_000).toISOString();
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    const r = await s.fetch('/api.ashx/v1/calls', {
      method: 'POST',
      key: s.adminKey,
      body: JSON.stringify({ phone: '+4930123456', systemPrompt: 'Confirm the appointment.', scheduleAtUtc: next, apiKey: 'AIza-office-test-key' }),
      headers: { 'Content-Type': 'application/json' },
    });
    expect(r.status, await r.clone().text()).toBeLessThan(300);
    ids.push(((await r.json()) as { callId: string }).callId);
  }
  const cancel = await s.fetch(`/api.ashx/v1/calls/${ids[1]}/hangup`, { method: 'POST', key: s.adminKey });
  expect(cancel.status, await cancel.clone().text()).toBeLessThan(300);
  // One RP certificate: the dashboard counts it ("1 certificate").
  await registerClient(s, 'verifier.office.test');
  const cert = await adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', { json: { client_id: 'verifier.office.test', days: 30 } });
  expect(cert.status, await cert.clone().text()).toBeLessThan(300);
  bearer = await adminToken(s, `127.0.0.1:${s.port}`, 'admin', s.adminPassword);
  browser = await launchChromium();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

const signIn = (page: Page, user = 'admin', password = s.adminPassword) => signInWithPassword(page, base, user, password);

// Code run in the page is written as strings: this project's type-check has no DOM types outside renderer/.

/** Elements of the header that stick out of it (below its bottom or past the screen's right edge). */
function headerOverflow(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(`(() => {
    const header = document.querySelector('header').getBoundingClientRect();
    return [...document.querySelectorAll('header *')]
      .filter((e) => {
        const r = e.getBoundingClientRect();
        return r.width > 0 && (r.bottom > header.bottom + 1 || r.right > window.innerWidth + 1);
      })
      .map((e) => e.tagName + ' ' + (e.textContent ?? '').slice(0, 30));
  })()`);
}

/** The focused element: its data-testid, else its tag name. */
function focused(page: Page): Promise<string> {
  return page.evaluate<string>(`document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName ?? ''`);
}

/** An attribute of the focused element, or its text (`text`). */
function focusedAttr(page: Page, name: string): Promise<string | null> {
  return page.evaluate<string | null>(
    name === 'text' ? `document.activeElement?.textContent ?? null` : `document.activeElement?.getAttribute(${JSON.stringify(name)}) ?? null`,
  );
}

/** Whether the control with this label is within the screen (a closed menu slides it off to the left). */
async function onScreen(page: Page, label: string): Promise<boolean> {
  const box = await page.getByLabel(label).boundingBox();
  return !!box && box.x + box.width > 0 && box.x < PHONE.width;
}

/** Badge labels cut short (an ellipsis instead of the whole word). */
function cutBadges(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(
    `[...document.querySelectorAll('main .mantine-Badge-label')].filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent ?? '')`,
  );
}

describe('console on a phone', { timeout: 180_000 }, () => {
  for (const [locale, scheme, words] of [
    ['en-US', 'light', { menu: 'Main menu', language: 'Language', close: 'Close', scheduled: 'Scheduled', active: 'Active' }],
    ['de-DE', 'dark', { menu: 'Hauptmenü', language: 'Sprache', close: 'Schließen', scheduled: 'Geplant', active: 'Aktiv' }],
  ] as const) {
    it(`390x844, ${locale}, ${scheme}: one header row with its controls in the menu, dialogs open, tables as cards with whole labels, axe clean`, async () => {
      const ctx = await browser.newContext({ viewport: PHONE, locale, colorScheme: scheme, isMobile: true, hasTouch: true });
      const { page, w } = await watched(ctx);
      await signIn(page);
      expect(await headerOverflow(page)).toEqual([]);
      // Language, account and sign-out live in the menu behind the burger.
      expect(await onScreen(page, words.language)).toBe(false);
      await page.getByRole('button', { name: words.menu }).click();
      await expect.poll(() => onScreen(page, words.language)).toBe(true);
      expect(await axe(page), `axe with the menu open (${locale}, ${scheme})`).toEqual([]);
      await page.getByRole('button', { name: words.menu }).click();

      await go(page, 'calls');
      await expect.poll(() => page.getByTestId('cards').locator('[data-status="scheduled"]').textContent()).toBe(words.scheduled);
      expect(await cutBadges(page)).toEqual([]);
      expect(await axe(page), `axe on calls (${locale}, ${scheme})`).toEqual([]);
      // "Place a call" is reachable by a tap and opens its dialog, whose close button has a name.
      await page.getByTestId('place-call').tap();
      const dialog = page.getByRole('dialog');
      await dialog.waitFor();
      await dialogShown(page);
      expect(await axe(page), `axe on the place-call dialog (${locale}, ${scheme})`).toEqual([]);
      await dialog.getByRole('button', { name: words.close }).tap();
      await dialog.waitFor({ state: 'detached' });

      await go(page, 'users');
      await expect.poll(() => page.getByTestId('cards').getByText(words.active, { exact: true }).count()).toBeGreaterThan(0);
      expect(await cutBadges(page)).toEqual([]);
      expect(await axe(page), `axe on users (${locale}, ${scheme})`).toEqual([]);
      // Nothing is wider than the screen: no sideways scrolling.
      expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(PHONE.width);
      expect(w.errors.filter((e) => !e.includes('trunks=list') && !e.includes('HTTP 502'))).toEqual([]);
      await ctx.close();
    });
  }
});

describe('console calls filter', { timeout: 120_000 }, () => {
  it('reads From and To as whole days in the local time zone, the To day included', async () => {
    // Far from UTC: a date read as UTC midnight would miss the calls of the local day.
    const ctx = await browser.newContext({ timezoneId: 'America/Los_Angeles' });
    const { page } = await watched(ctx);
    await signIn(page);
    await go(page, 'calls');
    const today = await page.evaluate(() => new Date().toLocaleDateString('sv'));
    const yesterday = await page.evaluate(() => new Date(Date.now() - 86400_000).toLocaleDateString('sv'));
    const rows = () => page.locator('tbody [data-status]').count();
    await expect.poll(rows).toBe(2);
    await page.getByLabel('From').fill(today);
    await page.getByLabel('To').fill(today);
    await expect.poll(rows).toBe(2);
    await page.getByLabel('To').fill(yesterday);
    await page.getByLabel('From').fill(yesterday);
    await expect.poll(rows).toBe(0);
    await ctx.close();
  });
});

describe('console by keyboard', { timeout: 120_000 }, () => {
  it('a skip link first, focus on the heading after navigation, named dialogs without a second banner, Enter submits, focus lands sensibly after submit', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const ctx = await browser.newContext({ colorScheme: scheme });
      const { page } = await watched(ctx);
      await signIn(page);
      await page.keyboard.press('Tab');
      expect(await focused(page)).toBe('skip-link');
      await page.keyboard.press('Enter');
      expect(await focused(page)).toBe('H1');

      // From the menu into a page: focus is on its heading, not left in the menu.
      await go(page, 'users');
      await expect.poll(() => focusedAttr(page, 'text')).toBe('Users & access');

      // A dialog: its close button is named, its header is no banner landmark.
      await go(page, 'calls');
      await page.getByTestId('place-call').click();
      await page.getByRole('dialog').waitFor();
      expect(await page.getByRole('dialog').getByRole('button', { name: 'Close' }).count()).toBe(1);
      expect(await page.getByRole('banner').count()).toBe(1);
      await page.keyboard.press('Escape');

      // Enter in a form without a visible submit focus: the API key is minted, and focus goes to its copy button.
      await go(page, 'users');
      await page.getByRole('tab', { name: 'API keys' }).click();
      await page.getByLabel('Key name').fill(`keyboard-${scheme}`);
      await page.getByLabel('Key name').press('Enter');
      await page.getByTestId('once-secret').waitFor();
      await expect.poll(() => focusedAttr(page, 'text')).toBe('Copy');

      // A refused submit: focus returns to the field the API names, never to <body>.
      await go(page, 'webhooks');
      await page.getByLabel('Receiver URL').fill('not a url');
      await page.getByLabel('Receiver URL').press('Enter');
      await expect.poll(() => focusedAttr(page, 'aria-invalid')).toBe('true');
      expect(await axe(page), `axe with a field error (${scheme})`).toEqual([]);
      await ctx.close();
    }
  });
});

describe('console confirmations', { timeout: 120_000 }, () => {
  it('disabling, resetting a password, changing a role, revoking a key and pausing a webhook each ask first, naming the item', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signIn(page);
    const erin = async () =>
      ((await (await s.fetch('/api.ashx/v1/users', { key: bearer })).json()) as { data: { name: string; role: string; status: string }[] }).data.find(
        (u) => u.name === 'erin',
      )!;
    await go(page, 'users');
    const row = page.getByRole('row').filter({ hasText: 'erin' });
    // Cancelled: nothing changes.
    await row.getByRole('button', { name: 'Disable' }).click();
    await confirmDialog(page, 'erin', 'cancel');
    expect((await erin()).status).toBe('active');
    await row.getByRole('button', { name: 'Disable' }).click();
    await confirmDialog(page, 'erin');
    await until(async () => (await erin()).status === 'disabled', 5000, 'erin disabled');
    await row.getByRole('button', { name: 'Enable' }).click();
    await until(async () => (await erin()).status === 'active', 5000, 'erin enabled again without a question');

    await page.getByLabel('Role of erin').selectOption('admin');
    await confirmDialog(page, /erin.*Administrator/, 'cancel');
    expect((await erin()).role).toBe('user');
    expect(await page.getByLabel('Role of erin').inputValue()).toBe('user');
    await page.getByLabel('Role of erin').selectOption('admin');
    await confirmDialog(page, 'erin');
    await until(async () => (await erin()).role === 'admin', 5000, 'erin is admin');

    await page.getByRole('button', { name: 'Reset password of erin' }).click();
    await confirmDialog(page, 'erin');
    expect((await page.getByTestId('once-secret').textContent())!.length).toBeGreaterThanOrEqual(12);

    await page.getByRole('tab', { name: 'API keys' }).click();
    await page.getByLabel('Key name').fill('crm-connector');
    await page.getByTestId('mint-key').click();
    const key = (await page.getByTestId('once-secret').textContent())!;
    await page.getByRole('row').filter({ hasText: 'crm-connector' }).getByRole('button', { name: 'Revoke' }).click();
    await confirmDialog(page, 'crm-connector', 'cancel');
    expect((await s.fetch('/api.ashx/v1/calls', { key })).status).toBe(200);
    await page.getByRole('row').filter({ hasText: 'crm-connector' }).getByRole('button', { name: 'Revoke' }).click();
    await confirmDialog(page, 'crm-connector');
    await until(async () => (await s.fetch('/api.ashx/v1/calls', { key })).status === 401, 5000, 'key refused after revoke');

    await go(page, 'webhooks');
    await page.getByLabel('Receiver URL').fill('https://crm.office.test/hook');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.getByTestId('once-secret').waitFor();
    await page.getByRole('row').filter({ hasText: 'crm.office.test' }).getByRole('button', { name: 'Pause' }).click();
    await confirmDialog(page, 'https://crm.office.test/hook');
    await expect.poll(() => page.getByRole('row').filter({ hasText: 'crm.office.test' }).getByRole('button', { name: 'Resume' }).count()).toBe(1);
    await ctx.close();
  });

  it("a user's mail language is chosen in the users table (no question: nothing is lost), and back to the request's", async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signIn(page);
    const erin = async () =>
      ((await (await s.fetch('/api.ashx/v1/users', { key: bearer })).json()) as { data: { name: string; language: string | null }[] }).data.find(
        (u) => u.name === 'erin',
      )!;
    await go(page, 'users');
    expect(await page.getByLabel('Mail language of erin').inputValue()).toBe('');
    await page.getByLabel('Mail language of erin').selectOption('de');
    await until(async () => (await erin()).language === 'de', 5000, 'erin gets German mails');
    await page.getByLabel('Mail language of erin').selectOption('');
    await until(async () => (await erin()).language === null, 5000, "erin's mails follow the request again");
    await ctx.close();
  });

  it('"My passkeys" leads back to the console, and the header names the tenant, not the address typed', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    // 127.0.0.1 is no tenant's host name: the primary tenant answers it.
    await signInWithPassword(page, `http://127.0.0.1:${s.port}`, 'admin', s.adminPassword);
    const tenants = (await (await s.fetch('/api.ashx/v1/tenants', { key: bearer })).json()) as { data: { name: string; host: string; primary: boolean }[] };
    const primary = tenants.data.find((x) => x.primary)!;
    await expect.poll(() => page.getByTestId('signed-in-user').textContent()).toBe(`admin · ${primary.name || primary.host}`);
    await page.getByRole('link', { name: 'My passkeys' }).click();
    await page.waitForURL(/\/passkeys\.html/);
    await page.getByRole('link', { name: 'Back to the console' }).click();
    await page.getByTestId('calls-today').waitFor({ timeout: 15_000 });
    await ctx.close();
  });
});

describe('console trusted lists', { timeout: 120_000 }, () => {
  it('a refresh that could not fetch the LOTL is shown as failed with why in words, not as current; with auto-refresh off no "Next refresh" is shown', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signIn(page);
    await go(page, 'trust');
    await page.getByTestId('auto-refresh-off').waitFor();
    expect(await page.getByText('Next refresh').count()).toBe(0);
    await page.getByRole('button', { name: 'Refresh now' }).click();
    await page.getByTestId('trust-refresh-failed').waitFor({ timeout: 30_000 });
    const states = await page.getByTestId('list-state').allTextContents();
    expect(states.length).toBeGreaterThan(0);
    expect(states).not.toContain('Current');
    expect(states).toContain('Refresh failed');
    // Why, in words (the LOTL could not be fetched), not a code or the English detail alone.
    const reasons = await page.getByTestId('list-reason').allTextContents();
    expect(reasons.length).toBeGreaterThan(0);
    for (const r of reasons) expect(['The list could not be fetched', 'The list did not arrive in time']).toContain(r);
    expect(await axe(page)).toEqual([]);
    await ctx.close();
  });
});

describe('console in German', { timeout: 120_000 }, () => {
  it('roles, states, plugin states and audit names in words, "1 Zertifikat", the chart in German with whole counts, API errors in German at their field', async () => {
    // The browser speaks English; the UI is switched to German: the chart must follow the UI.
    const ctx = await browser.newContext({ locale: 'en-US' });
    const { page } = await watched(ctx);
    await signIn(page);
    await page.getByLabel('Language').selectOption('de');
    await expect.poll(() => page.getByText('1 Zertifikat ausgestellt, 0 widerrufen').count()).toBe(1);
    await expect.poll(() => page.getByText('webhooks: in Ordnung').count()).toBe(1);
    // The chart: hours as German times (no AM/PM), counts as whole numbers.
    await expect.poll(() => page.locator('.recharts-xAxis-tick-labels text').count(), { timeout: 10_000 }).toBeGreaterThan(0);
    for (const x of await page.locator('.recharts-xAxis-tick-labels text').allTextContents()) expect(x).toMatch(/^\d{2}:\d{2}$/);
    const ticks = await page.locator('.recharts-yAxis-tick-labels text').allTextContents();
    expect(ticks.length).toBeGreaterThan(0);
    for (const y of ticks) expect(y).toMatch(/^\d+$/);

    await go(page, 'users');
    const row = page.getByRole('row').filter({ hasText: 'admin' }).first();
    expect(await row.getByLabel('Rolle von admin').locator('option:checked').textContent()).toBe('Admin');
    expect(await row.textContent()).toContain('Aktiv');
    await go(page, 'audit');
    await expect.poll(() => page.getByRole('cell', { name: 'Angemeldet', exact: true }).count()).toBeGreaterThan(0);
    expect(await page.getByRole('cell', { name: 'login-ok', exact: true }).count()).toBe(0);

    // An API refusal in German at its field (from the error code, not the English description),
    // gone as soon as the field is changed.
    await go(page, 'webhooks');
    const url = page.getByLabel('Empfänger-URL');
    await url.fill('not a url');
    await page.getByRole('button', { name: 'Webhook hinzufügen' }).click();
    await expect.poll(() => url.getAttribute('aria-invalid')).toBe('true');
    const message = page.locator(`#${await url.getAttribute('id')}-error`);
    expect(await message.textContent()).toMatch(/^Keine gültige Adresse/);
    expect(await page.getByText(/absolute URL|not an absolute/).count()).toBe(0);
    await url.pressSequentially('x');
    await expect.poll(() => url.getAttribute('aria-invalid')).not.toBe('true');
    expect(await message.count()).toBe(0);
    await ctx.close();
  });
});
