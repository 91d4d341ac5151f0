import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { LANGS, PAGE_TEXTS, pageLang } from '../../../plugins/oidc/page-text.ts';
import { PAGES_DIR } from '../../../plugins/oidc/pages.ts';
import { TestBrowser, hidden } from './helpers.ts';

/**
 * The provider's own pages (sign-in, consent, sign-out, passkeys, e-mail links, messages) in the
 * operator's language: the authorization request's ui_locales first, then the console's language
 * cookie, then Accept-Language; English when none of them names a language the pages speak.
 */
let s: TestServer;
let host: string;

beforeAll(async () => {
  s = await startTestServer();
  host = `localhost:${s.port}`;
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

function authorizeUrl(extra: Record<string, string> = {}): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: 'sovcomms-console',
    redirect_uri: `http://${host}/console/callback`,
    scope: 'openid profile',
    state: 's1',
    code_challenge: 'a'.repeat(43),
    code_challenge_method: 'S256',
    ...extra,
  });
  return `/oauth2/v1/authorize?${q.toString()}`;
}

describe('pageLang', () => {
  const req = (h: { cookie?: string; 'accept-language'?: string }) => ({ headers: h });
  it('takes ui_locales first, then the console cookie, then Accept-Language by q-value; English otherwise', () => {
    expect(pageLang(req({ 'accept-language': 'en-US', cookie: 'sovcomms.lang=en' }), 'fr de-AT')).toBe('de');
    expect(pageLang(req({ 'accept-language': 'de-DE', cookie: 'x=1; sovcomms.lang=en' }))).toBe('en');
    expect(pageLang(req({ 'accept-language': 'fr-FR, en;q=0.5, de;q=0.8' }))).toBe('de');
    expect(pageLang(req({ 'accept-language': 'de;q=0, en;q=0.1' }))).toBe('en');
    expect(pageLang(req({ 'accept-language': 'fr', cookie: 'sovcomms.lang=xx' }))).toBe('en');
    expect(pageLang(req({}))).toBe('en');
  });
});

describe('every page template asks only for words both languages have', () => {
  it('each {{t_key}} of resources/login exists in English and German, and no German text is empty', () => {
    const missing: string[] = [];
    for (const f of fs.readdirSync(PAGES_DIR).filter((n) => n.endsWith('.html'))) {
      for (const m of fs.readFileSync(path.join(PAGES_DIR, f), 'utf8').matchAll(/\{\{t_(\w+)\}\}/g)) {
        for (const l of LANGS) if (!((m[1] ?? '') in PAGE_TEXTS[l])) missing.push(`${f}: ${l}.${m[1]}`);
      }
    }
    expect(missing).toEqual([]);
    for (const [k, v] of Object.entries(PAGE_TEXTS.de)) expect(v.trim(), k).not.toBe('');
  });
});

describe('the sign-in pages in the chosen language', () => {
  it('ui_locales=de gives a German sign-in page whatever the browser says; a wrong password is answered in German', async () => {
    const b = new TestBrowser(s, host);
    const r = await b.get(authorizeUrl({ ui_locales: 'de' }));
    expect(r.status).toBe(302);
    const login = await b.get(r.headers.get('location')!);
    expect(login.headers.get('content-language')).toBe('de');
    const html = await login.text();
    expect(html).toContain('<html lang="de">');
    expect(html).toContain('Benutzername oder E-Mail');
    expect(html).toContain('Mit einem Passkey anmelden');
    expect(html).toContain('data-waiting="Warte auf Ihren Passkey…"');
    expect(html).not.toContain('Sign in with a passkey');
    const wrong = await b.post('/oidc.ashx/login', { i: hidden(html, 'i'), csrf: hidden(html, 'csrf'), username: 'admin', password: 'not the password' });
    expect(wrong.status).toBe(400);
    expect(await wrong.text()).toContain('Benutzername oder Passwort falsch.');
  });

  it("the console's language cookie, then Accept-Language, choose it without ui_locales", async () => {
    const de = await s.fetch('/login.html', { key: null, host, headers: { 'Accept-Language': 'de-DE,de;q=0.9,en;q=0.5' } });
    const deHtml = await de.text();
    expect(deHtml).toContain('<html lang="de">');
    expect(deHtml).toContain('Passwort vergessen');
    const en = await s.fetch('/login.html', { key: null, host, headers: { 'Accept-Language': 'de-DE', cookie: 'sovcomms.lang=en' } });
    const enHtml = await en.text();
    expect(enHtml).toContain('<html lang="en">');
    expect(enHtml).toContain('Forgot password');
    expect(enHtml).not.toContain('Passwort vergessen');
  });

  it('message pages, the e-mail link pages and sign-out speak German too', async () => {
    const headers = { 'Accept-Language': 'de' };
    const expired = await s.fetch('/oidc.ashx/recover-finish?t=nope', { key: null, host, headers });
    expect(expired.status).toBe(400);
    const text = await expired.text();
    expect(text).toContain('Link abgelaufen');
    expect(text).toContain('<html lang="de">');
    const out = await s.fetch('/oauth2/v1/logout', { key: null, host, headers });
    expect(await out.text()).toContain('Sie sind abgemeldet.');
    const mail = await s.fetch('/oidc.ashx/maglink', {
      key: null,
      host,
      method: 'POST',
      headers,
      body: new URLSearchParams({ csrf: 'forged', email: 'x@example.org', purpose: 'maglink' }),
    });
    expect(mail.status).toBe(403);
    expect(await mail.text()).toContain('Formular abgelaufen');
  });
});
