import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** What the console's Chromium tests share: the browser, a watched page, sign-in, menu navigation, axe. */
export const ARTEFACTS = path.resolve(import.meta.dirname, '../../../test-artifacts/console');
const AXE = fs.readFileSync(path.resolve(import.meta.dirname, '../../../node_modules/axe-core/axe.min.js'), 'utf8');

/** The system's Chromium, never a downloaded one. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

export interface Watch {
  errors: string[];
}

/** A page whose console errors and failed requests are collected (aborted navigations aside). */
export async function watched(ctx: BrowserContext): Promise<{ page: Page; w: Watch }> {
  const page = await ctx.newPage();
  const w: Watch = { errors: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') w.errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => w.errors.push(`pageerror: ${e.message}`));
  page.on('requestfailed', (r) => {
    const why = r.failure()?.errorText ?? '';
    // The live feed is aborted on purpose when a page goes away.
    if (!why.includes('ERR_ABORTED')) w.errors.push(`failed: ${r.url()} ${why}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) w.errors.push(`HTTP ${r.status()} ${r.url()}`);
  });
  return { page, w };
}

/** Signs in on the provider's login page and waits for the first screen (`home`: an admin's dashboard, or a user's welcome). */
export async function signInWithPassword(page: Page, base: string, user: string, password: string, home: 'admin' | 'user' = 'admin'): Promise<void> {
  await page.goto(`${base}/`);
  await page.waitForURL(/\/login\.html/);
  // The page speaks the browser's language (German for a de-DE browser): its fields are found by their ids.
  await page.locator('#username').fill(user);
  await page.locator('#password').fill(password);
  await page.locator('#password-form button[type="submit"]').click();
  await page.waitForURL(/\/console\/$/);
  if (home === 'admin') await page.getByTestId('calls-today').waitFor();
  else await page.getByRole('heading', { level: 1 }).waitFor();
}

/** In-app navigation (the side menu, opened first on a phone): tokens live in memory, so a reload would sign in again. */
export async function go(page: Page, to: string): Promise<void> {
  const menu = page.getByTestId('menu-button');
  if (await menu.isVisible()) await menu.click();
  await page.locator(`nav a[href="/console/${to}"]`).click();
  await page.waitForURL(new RegExp(`/console/${to}$`));
  await page.getByRole('heading', { level: 1 }).waitFor();
}

export async function dashboard(page: Page): Promise<void> {
  await go(page, '');
  await page.getByTestId('lotl-state').waitFor();
}

/** axe-core's serious and critical violations on the page as it is now. */
export async function axe(page: Page): Promise<string[]> {
  // Injected once per document (~0.15 s a time on CI): in-app navigation keeps the window and with
  // it axe, which is made to run many times on one page; a new document (page.goto) has none.
  if (!(await page.evaluate<boolean>('typeof window.axe?.run === "function"'))) await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    // @ts-expect-error axe is the global the injected script defines.
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return (r.violations as { id: string; impact: string; nodes: { target: string[]; any: { message: string }[] }[] }[]).map((v) => ({
      id: v.id,
      impact: v.impact,
      // Where, and for a contrast failure the colours and ratio axe measured.
      where: v.nodes.map((n) => n.target.join(' ') + (v.id === 'color-contrast' && n.any[0] ? ` [${n.any[0].message}]` : '')).join(' | '),
    }));
  });
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}) at ${v.where}`);
}

/** Answers the console's confirmation dialog, after checking it names what it is about. */
export async function confirmDialog(page: Page, names: string | RegExp, answer: 'confirm' | 'cancel' = 'confirm'): Promise<void> {
  const dialog = page.getByRole('dialog');
  await dialog.getByTestId('confirm-message').waitFor();
  const text = (await dialog.getByTestId('confirm-message').textContent()) ?? '';
  if (typeof names === 'string' ? !text.includes(names) : !names.test(text)) throw new Error(`confirmation "${text}" does not name ${String(names)}`);
  if (answer === 'cancel') await dialog.getByRole('button', { name: /^(Cancel|Abbrechen)$/ }).click();
  else await dialog.getByRole('button').last().click();
  await dialog.waitFor({ state: 'detached' });
}

/**
 * Waits until an open dialog has faded in (Mantine's transition): measured mid-fade, every text
 * in it has "low contrast" to axe. Shown means opaque and no transition or animation still running
 * in the document (the overlay's fade too), rather than a fixed quarter second on top.
 */
export async function dialogShown(page: Page): Promise<void> {
  await expect
    .poll(
      () =>
        page.evaluate<boolean>(
          `[...document.querySelectorAll('.mantine-Modal-content')].every((e) => getComputedStyle(e).opacity === '1') &&
           document.getAnimations().every((a) => a.playState !== 'running' || a.effect?.getComputedTiming().iterations === Infinity)`,
        ),
      { interval: 20 },
    )
    .toBe(true);
}
