import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { until } from '../../support/until.ts';
import { adm, j } from '../telephony/helpers.ts';
import { adminToken } from '../admin/helpers.ts';
import { adminCall, registerClient } from '../rp-ca/helpers.ts';
import { axe, confirmDialog, go, launchChromium, signInWithPassword, watched } from './support.ts';

/**
 * The console's office tasks in Chromium against the real appliance: a failed call's cause, a
 * scheduled call (refused in the past, shown with its time, cancelled as such), named
 * confirmations that say what depends on a trunk, editing trunks, numbers, routes, OIDC clients
 * and webhooks, the whitelist, API keys for another user, RP certificates as PEM and the CSV
 * exports. The bridge is a remote one that does not answer: what is tested is the console.
 */
let s: TestServer;
let base: string;
const V1 = '/api.ashx/v1';

beforeAll(async () => {
  s = await startTestServer({
    overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: 'http://127.0.0.1:9/', token: 'edit-test-bridge-token-0123456789' } } } },
  });
  base = `http://localhost:${s.port}`;
  await s.appliance.core.users.add(s.primary, { name: 'erin', role: 'user', password: 'erin password 12' });
  expect((await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { engineApiKey: 'AIza-edit-test-key' })).status).toBe(200);
}, 90_000);
let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

const signIn = (page: Page) => signInWithPassword(page, base, 'admin', s.adminPassword);
const db = () => s.appliance.core.db;
/** What a download saved, as text. */
async function downloaded(page: Page, click: () => Promise<void>): Promise<{ name: string; text: string }> {
  const [d] = await Promise.all([page.waitForEvent('download'), click()]);
  return { name: d.suggestedFilename(), text: fs.readFileSync((await d.path())!, 'utf8') };
}

describe('calls', { timeout: 180_000 }, () => {
  for (const [locale, w] of [
    [
      'en',
      {
        past: 'This time is in the past',
        cancel: 'Cancel call',
        scheduledFor: 'Scheduled for',
        cause: 'Cause',
        busy: 'The line was busy (SIP 486).',
        calls: 'Calls',
      },
    ],
    [
      'de',
      {
        past: 'Dieser Zeitpunkt liegt in der Vergangenheit',
        cancel: 'Anruf absagen',
        scheduledFor: 'Geplant für',
        cause: 'Ursache',
        busy: 'Die Leitung war besetzt (SIP 486).',
        calls: 'Anrufe',
      },
    ],
  ] as const) {
    it(`${locale}: a past time is refused at its field; a scheduled call shows its time in the notice, the list and the detail, and is cancelled after a question; a failed call shows its cause`, async () => {
      const ctx = await browser.newContext({ locale: locale === 'de' ? 'de-DE' : 'en-US', timezoneId: 'Europe/Berlin' });
      const { page } = await watched(ctx);
      await signIn(page);
      await go(page, 'calls');
      const phone = locale === 'de' ? '+4930700002' : '+4930700001';
      await page.getByTestId('place-call').click();
      const dialog = page.getByRole('dialog');
      await dialog.getByRole('textbox').first().fill(phone);
      await dialog.locator('textarea').fill('Confirm the appointment.');
      await dialog.locator('input[type="datetime-local"]').fill('2020-01-01T10:00');
      await dialog.locator('input[type="datetime-local"]').press('Enter');
      await expect.poll(() => dialog.getByText(w.past).count()).toBe(1);
      expect(await dialog.locator('input[type="datetime-local"]').getAttribute('aria-invalid')).toBe('true');
      expect((await j(s.fetch(`${V1}/calls?phone=${encodeURIComponent(phone)}`, { key: s.adminKey }))).body.total).toBe(0);

      // Tomorrow at 09:30 in Berlin: the notice names the time, not "placed".
      const tomorrow = await page.evaluate<string>(`new Date(Date.now() + 86400000).toLocaleDateString('sv')`);
      await dialog.locator('input[type="datetime-local"]').fill(`${tomorrow}T09:30`);
      await dialog.locator('button[type="submit"]').click();
      await dialog.waitFor({ state: 'detached' });
      const when = await page.evaluate<string>(
        `new Date(${JSON.stringify(`${tomorrow}T09:30`)}).toLocaleString(${JSON.stringify(locale)}, { dateStyle: 'medium', timeStyle: 'medium' })`,
      );
      await expect.poll(() => page.getByText(when).count()).toBeGreaterThan(0);
      const row = page.getByRole('row').filter({ hasText: phone });
      await expect.poll(() => row.textContent()).toContain(when);
      const id = (await j(s.fetch(`${V1}/calls?phone=${encodeURIComponent(phone)}`, { key: s.adminKey }))).body.data[0].callId as string;

      await row.getByRole('button', { name: `${w.cancel} ${id}` }).click();
      // The question names the number and the time, in whatever order the language puts them.
      const esc = (x: string) => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      await confirmDialog(page, new RegExp(`^(?=.*${esc(phone)})(?=.*${esc(when)})`), 'cancel');
      expect((await j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey }))).body.status).toBe('scheduled');
      await page.getByRole('link', { name: id }).click();
      await expect.poll(() => page.getByTestId('scheduled-for').textContent()).toBe(when);
      expect(await axe(page), `axe on a scheduled call (${locale})`).toEqual([]);
      await page.goBack();
      await page.getByRole('button', { name: `${w.cancel} ${id}` }).click();
      await confirmDialog(page, phone);
      await until(async () => (await j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey }))).body.status === 'cancelled', 5000, 'cancelled');

      // A failed call: its recorded cause, and a SIP answer in words with the raw status below.
      db()
        .prepare(`UPDATE tel_calls SET status = 'ended-failed-final', ended_reason = 'failed', error_detail = ? WHERE call_id = ?`)
        .run('SIP 486 Busy Here', id);
      await page.goto(`${base}/console/calls/${id}`).catch(() => undefined);
      await page.waitForURL(/\/console\/calls\//);
      await page.getByTestId('call-cause').waitFor({ timeout: 20_000 });
      expect(await page.getByTestId('sip-problem').textContent()).toBe(w.busy);
      expect(await page.getByTestId('sip-raw').textContent()).toBe('SIP 486 Busy Here');
      db().prepare(`UPDATE tel_calls SET error_detail = ? WHERE call_id = ?`).run('AI engine connection failed: connect ECONNREFUSED 127.0.0.1:9', id);
      await page.reload();
      await page.getByTestId('call-cause').waitFor({ timeout: 20_000 });
      expect(await page.getByTestId('call-cause').textContent()).toContain('AI engine connection failed: connect ECONNREFUSED 127.0.0.1:9');
      expect(await page.getByRole('rowheader', { name: w.cause }).count()).toBe(1);
      await ctx.close();
    });
  }

  it('the calls, transcripts and audit pages export their filter as CSV', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signIn(page);
    await go(page, 'calls');
    await page.getByLabel('Phone number').first().fill('+4930700001');
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    const calls = await downloaded(page, () => page.getByTestId('export-csv').click());
    expect(calls.name).toBe('calls.csv');
    const lines = calls.text
      .replace(/^\uFEFF/, '')
      .trim()
      .split('\r\n');
    expect(lines[0]).toMatch(/^callId,status,phone,/);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain(`'+4930700001`);
    await go(page, 'transcripts');
    expect((await downloaded(page, () => page.getByTestId('export-csv').click())).text).toContain('callId,callerSource,startedUtc');
    await go(page, 'audit');
    await page.getByLabel('Event').fill('login-ok');
    await page.waitForTimeout(500);
    const audit = (await downloaded(page, () => page.getByTestId('export-csv').click())).text
      .replace(/^\uFEFF/, '')
      .trim()
      .split('\r\n');
    expect(audit[0]).toBe('ts,event,user,ip,ua,extra');
    expect(audit.length).toBeGreaterThan(1);
    for (const r of audit.slice(1)) expect(r).toContain(',login-ok,');
    await ctx.close();
  });
});

describe('telephony', { timeout: 180_000 }, () => {
  it('deleting a trunk names the routes that use it (en, de), then takes it out of them; trunks, routes and numbers are edited; a deleted trunk is marked', async () => {
    for (const id of ['sipgate', 'backup', 'spare']) await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id, name: id, host: '127.0.0.1' });
    await j(s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: '+49*', trunkIds: ['sipgate', 'backup'] } }));
    await j(s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: 'global', trunkIds: ['sipgate'] } }));

    const de = await browser.newContext({ locale: 'de-DE' });
    const { page: pde } = await watched(de);
    await signIn(pde);
    await go(pde, 'telephony');
    await pde.getByRole('row').filter({ hasText: 'sipgate' }).getByRole('button', { name: 'Löschen' }).click();
    await confirmDialog(pde, 'Er wird von 2 ausgehenden Routen genutzt: +49*, global', 'cancel');
    await de.close();

    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signIn(page);
    await go(page, 'telephony');
    await page.getByRole('row').filter({ hasText: 'sipgate' }).getByRole('button', { name: 'Delete' }).click();
    await confirmDialog(page, 'Delete the trunk sipgate? It is used by 2 outbound routes: +49*, global.');
    await until(async () => (await j(s.fetch(`${V1}/outbound-routes`, { key: s.adminKey }))).body.data.length === 1, 5000, 'routes after the delete');
    expect((await j(s.fetch(`${V1}/outbound-routes`, { key: s.adminKey }))).body.data).toEqual([{ match: '+49*', trunkIds: ['backup'] }]);

    // Edit: the CLI's settings in the form; the id stays.
    await page.getByRole('button', { name: 'Edit backup' }).click();
    await page.getByLabel('Caller ID').fill('+4930999000');
    await page.getByLabel('Max. concurrent calls').fill('3');
    await page.getByLabel('Find the server by DNS SRV').check();
    expect(await axe(page), 'axe on the trunk form while editing').toEqual([]);
    await page.getByRole('button', { name: 'Save changes' }).click();
    await until(
      async () => {
        const t = (
          (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body.trunks as {
            id: string;
            callerId: string;
            maxConcurrentCalls: number;
            dnsSrv: boolean;
          }[]
        ).find((x) => x.id === 'backup')!;
        return t.callerId === '+4930999000' && t.maxConcurrentCalls === 3 && t.dnsSrv;
      },
      5000,
      'trunk edited',
    );

    // Routes: a trunk added to a route from the console; a trunk the route lists but that is gone is marked.
    db().prepare(`INSERT INTO tel_outbound_routes (tenant_id, position, match, trunk_ids) VALUES (?, 99, '+33*', '["ghost"]')`).run(s.primary.id);
    await page.getByRole('tab', { name: 'Outbound routes' }).click();
    await page.getByLabel('Add a trunk to +49*').selectOption('spare');
    await until(
      async () => (await j(s.fetch(`${V1}/outbound-routes/%2B49%2A`, { key: s.adminKey }))).body.trunkIds.join() === 'backup,spare',
      5000,
      'trunk added',
    );
    await expect.poll(() => page.getByTestId('route-+33*').getByTestId('route-trunk-deleted').count()).toBe(1);
    expect(await page.getByTestId('route-+49*').getByTestId('route-trunk-deleted').count()).toBe(0);
    expect(await axe(page), 'axe on the outbound routes').toEqual([]);

    // Numbers: voice, language, visibility and max duration from the console.
    await adm(s, '/signal.ashx?numbers=save', 'numbers-save', { number: '+4930888', name: 'Front desk', systemPrompt: 'Greet.' });
    await page.getByRole('tab', { name: 'Numbers' }).click();
    await page.getByRole('button', { name: 'Edit +4930888' }).click();
    await page.getByLabel('Voice').selectOption('Puck');
    await page.getByRole('textbox', { name: 'Language' }).fill('de-DE');
    await page.getByLabel('Visibility').selectOption('public');
    await page.getByLabel('Max. call length (s)').fill('600');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await until(
      async () => {
        const n = ((await j(adm(s, '/signal.ashx?numbers=list', 'numbers-list'))).body.numbers as Record<string, unknown>[]).find(
          (x) => x.number === '+4930888',
        )!;
        return n.voice === 'Puck' && n.language === 'de-DE' && n.visibility === 'public' && n.maxDurationSec === 600 && n.systemPrompt === 'Greet.';
      },
      5000,
      'number edited',
    );
    await ctx.close();
  });

  it('the whitelist: add errors shown, a second add re-comments, entries removed after a question', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signIn(page);
    await go(page, 'telephony');
    await page.getByRole('tab', { name: 'PSTN whitelist' }).click();
    const number = page.getByRole('textbox', { name: 'Number', exact: true });
    await number.fill('12ab');
    await number.press('Enter');
    await expect.poll(() => number.getAttribute('aria-invalid')).toBe('true');
    await number.fill('+4930111222');
    await page.getByLabel('Comment').fill('first');
    await page.getByLabel('Comment').press('Enter');
    await page.getByText('+4930111222 was added to the whitelist').waitFor();
    await page.getByLabel('Comment').fill('reception');
    await page.getByLabel('Comment').press('Enter');
    await page.getByText('+4930111222 was already listed; its comment was updated').waitFor();
    await expect.poll(() => page.getByRole('row').filter({ hasText: '+4930111222' }).textContent()).toContain('reception');
    await page.getByRole('button', { name: 'Remove +4930111222' }).click();
    await confirmDialog(page, '+4930111222');
    await until(
      async () => !((await j(adm(s, '/signal.ashx?whitelist=list', 'whitelist-list'))).body as { number: string }[]).some((x) => x.number === '+4930111222'),
      5000,
      'removed',
    );
    await ctx.close();
  });
});

describe('users, webhooks and certificates', { timeout: 180_000 }, () => {
  it('an OIDC client with a bad redirect URI shows it at that field (a missing one says what to do) and is edited in place; a key is minted for another user; a webhook URL is edited', async () => {
    const ctx = await browser.newContext();
    const { page } = await watched(ctx);
    await signIn(page);
    await go(page, 'users');
    await page.getByRole('tab', { name: 'OIDC clients' }).click();
    await page.getByLabel('client_id').fill('crm-app');
    await page.getByLabel('Redirect URI').fill('http://crm.example/cb');
    await page.getByLabel('Redirect URI').press('Enter');
    await expect.poll(() => page.getByLabel('Redirect URI').getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByText(/use https \(http only on loopback\)/).count()).toBe(1);
    await page.getByLabel('Redirect URI').fill('https://crm.example/cb');
    await page.getByLabel('Redirect URI').press('Enter');
    await page.getByTestId('once-secret').waitFor();
    await page.getByRole('button', { name: 'Edit crm-app' }).click();
    await page.getByLabel('Redirect URI').fill('https://crm.example/callback');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.getByRole('row').filter({ hasText: 'crm-app' }).textContent()).toContain('https://crm.example/callback');
    const clients = (await j(adminCall(s, 'GET', '/signal.ashx?oidc-clients=1', 'oidc-clients'))).body as {
      client_id: string;
      redirect_uris: string[];
      has_secret: boolean;
    }[];
    expect(clients.find((c) => c.client_id === 'crm-app')).toMatchObject({ redirect_uris: ['https://crm.example/callback'], has_secret: true });
    // Without any redirect URI the API names redirect_uris (no index): the field says what to do, not "not an allowed URI".
    await page.getByRole('button', { name: 'Edit crm-app' }).click();
    await page.getByLabel('Redirect URI').fill('');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Add a redirect URI: sign-in with a code (or the implicit flow) needs at least one.').waitFor();
    expect(await page.getByLabel('Redirect URI').getAttribute('aria-invalid')).toBe('true');
    await page.getByRole('button', { name: 'Cancel editing' }).click();

    await page.getByRole('tab', { name: 'API keys' }).click();
    await page.getByLabel('Key name').fill('erins-connector');
    await page.getByLabel('For user').selectOption('erin');
    await page.getByTestId('mint-key').click();
    await page.getByTestId('once-secret').waitFor();
    const listed = await j(s.fetch(`${V1}/apikeys`, { key: await adminToken(s, `127.0.0.1:${s.port}`, 'admin', s.adminPassword) }));
    const keys = listed.body.data as { name: string; userName: string }[];
    expect(keys, JSON.stringify(listed.body)).toBeDefined();
    expect(keys.find((k) => k.name === 'erins-connector')?.userName).toBe('erin');

    await go(page, 'webhooks');
    await page.getByLabel('Receiver URL').fill('https://crm.example/hook');
    await page.getByLabel('Receiver URL').press('Enter');
    await page.getByTestId('once-secret').waitFor();
    await page.getByRole('button', { name: 'Edit https://crm.example/hook' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Receiver URL').fill('https://crm.example/hook2');
    await dialog.getByRole('button', { name: 'Save changes' }).click();
    await dialog.waitFor({ state: 'detached' });
    await expect.poll(() => page.getByRole('row').filter({ hasText: 'https://crm.example/hook2' }).count()).toBe(1);
    // The row's orange Pause button reads at 4.5:1 or better on its tint (root.tsx LIGHT_TEXT).
    expect(await axe(page), 'axe on the webhooks page with its Pause and edit buttons').toEqual([]);
    await ctx.close();
  });

  it('an RP certificate: refused for an unregistered client at its field; issued, its certificate shown and downloaded as PEM', async () => {
    const ctx = await browser.newContext({ locale: 'de-DE' });
    const { page } = await watched(ctx);
    await signIn(page);
    await go(page, 'certificates');
    await page.getByLabel('client_id').fill('unknown-verifier.example');
    await page.getByLabel('client_id').press('Enter');
    await expect.poll(() => page.getByLabel('client_id').getAttribute('aria-invalid')).toBe('true');
    await registerClient(s, 'verifier.office.example');
    await page.getByLabel('client_id').fill('verifier.office.example');
    await page.getByLabel('client_id').press('Enter');
    await page.getByTestId('issued-cert').waitFor();
    const pem = (await page.getByTestId('issued-cert-pem').textContent())!;
    expect(pem).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect((await page.getByTestId('once-secret').textContent())!).toMatch(/PRIVATE KEY/);
    const file = await downloaded(page, () => page.getByRole('button', { name: 'Zertifikat herunterladen (PEM)' }).click());
    expect(file.name).toMatch(/^rp-cert-[0-9a-f]+\.pem$/);
    expect(file.text.trim()).toBe(pem.trim());
    expect(await axe(page), 'axe on the issued certificate').toEqual([]);
    await ctx.close();
  });
});
