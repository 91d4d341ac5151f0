import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { answerTextKey, WALLET_TEXTS } from '../../../plugins/wallet-verifier/page-text.ts';
import { CLAIMS, createOffer } from '../wallet-issuer/support.ts';

/**
 * The wallet's pages speak the provider's page language (the console's cookie, then
 * Accept-Language, as /login.html): the login page's wallet block and its script's status lines,
 * the QR page, the wallet sign-in's answer page and the issuer's credential offer page.
 */
let s: TestServer;
let session: string;

beforeAll(async () => {
  s = await startTestServer();
  const vp = await s.fetch('/oidc.ashx?action=vp-start&preset=pid');
  expect(vp.status, await vp.clone().text()).toBe(200);
  session = ((await vp.json()) as { session_id: string }).session_id;
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

const get = async (p: string, h: Record<string, string>) => {
  const r = await s.fetch(p, { headers: h });
  return { status: r.status, lang: r.headers.get('content-language'), html: await r.text() };
};

describe('wallet pages in the page language', () => {
  it('German and English have the same words, none empty', () => {
    expect(Object.keys(WALLET_TEXTS.de).sort()).toEqual(Object.keys(WALLET_TEXTS.en).sort());
    for (const [k, v] of Object.entries(WALLET_TEXTS.de)) expect(v.trim(), k).not.toBe('');
  });

  it("the login page's wallet block follows the page, with its script's status lines", async () => {
    const de = await get('/login.html', { 'Accept-Language': 'de-DE' });
    expect(de.html).toContain('<html lang="de">');
    expect(de.html).toContain('<h2 id="wallet-signin-title">Mit Ihrer EU-Wallet anmelden</h2>');
    expect(de.html).toContain('data-t-waiting="Warte auf Ihre Wallet…"');
    expect(de.html).not.toContain('Sign in with your EU wallet');
    const en = await get('/login.html', { 'Accept-Language': 'en-US', cookie: 'sovcomms.lang=en' });
    expect(en.html).toContain('Sign in with your EU wallet');
    expect(en.html).toContain('data-t-continueAs="Continue as"');
  });

  it('the QR page and the answer page; the console cookie wins over Accept-Language', async () => {
    const qr = await get(`/oidc.ashx/vp-qr?session_id=${session}`, { 'Accept-Language': 'en', cookie: 'sovcomms.lang=de' });
    expect(qr.status).toBe(200);
    expect(qr.lang).toBe('de');
    expect(qr.html).toContain('<html lang="de">');
    expect(qr.html).toContain('<h1>EU-Wallet vorlegen</h1>');
    expect(qr.html).toContain('aria-label="QR-Code der Wallet-Anfrage"');
    // A sign-in the login page started (its session has a login secret), answered with a wrong code.
    const started = await s.fetch('/oidc.ashx/wallet-login/start', { method: 'POST', json: {} });
    expect(started.status, await started.clone().text()).toBe(200);
    const login = ((await started.json()) as { session_id: string }).session_id;
    const answer = await get(`/oidc.ashx/wallet-login/return?session_id=${login}&response_code=nope`, { 'Accept-Language': 'de' });
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.html).toContain('<html lang="de">');
    // A sentence of what happened and what to do; the code only as a small technical detail, never the English description.
    expect(answer.html).toContain('<p id="wallet-return-message">Dieser Anmeldelink ist ungültig oder wurde schon verwendet.');
    expect(answer.html).toContain('<p id="wallet-return-detail"><small>Technische Angabe: access_denied (link_invalid)</small></p>');
    expect(answer.html).not.toContain('not valid');
    const en = await get(`/oidc.ashx/wallet-login/return?session_id=${login}&response_code=nope`, { 'Accept-Language': 'en' });
    expect(en.html).toContain('<html lang="en">');
    expect(en.html).toContain('This sign-in link is not valid or was already used. Start signing in again.');
    expect(en.html).toContain('<small>Technical detail: access_denied (link_invalid)</small>');
    // A presentation session that is no sign-in (vp-start) is as unknown to this page as a made-up one.
    const unknown = await get(`/oidc.ashx/wallet-login/return?session_id=${session}&response_code=nope`, { 'Accept-Language': 'de' });
    expect(unknown.status).toBe(404);
    expect(unknown.html).toContain('Diese Anmeldung ist hier nicht bekannt (oder schon lange beendet).');
    expect(unknown.html).toContain('Technische Angabe: not_found');
    // A link the wallet mangled or cut short: refused by the query check before the handler, and
    // still a page in the person's language (it was JSON), with the page's headers.
    for (const q of ['', `?session_id=${login}`, `?session_id=${'x'.repeat(65)}&response_code=a`, `?session_id=a&session_id=b&response_code=c`]) {
      const r = await s.fetch(`/oidc.ashx/wallet-login/return${q}`, { headers: { 'Accept-Language': 'de' } });
      const html = await r.text();
      expect(r.status, q).toBe(400);
      expect(r.headers.get('content-type'), q).toMatch(/^text\/html/);
      expect(r.headers.get('content-language'), q).toBe('de');
      expect(r.headers.get('content-security-policy'), q).toContain("default-src 'none'");
      expect(r.headers.get('cache-control'), q).toContain('no-store');
      expect(html, q).toContain('<p id="wallet-return-message">Dieser Anmeldelink ist unvollständig oder beschädigt.');
      expect(html, q).toContain('Technische Angabe: invalid_request');
      expect(html, q).not.toContain('invalid query parameter');
    }
    const cut = await get('/oidc.ashx/wallet-login/return?response_code=a', { 'Accept-Language': 'en' });
    expect(cut.html).toContain('This sign-in link is incomplete or damaged. Start signing in again.');
  });

  it('every refusal the answer page can show has its own sentence, in German and English', () => {
    const cases: [string, string | undefined, string][] = [
      ['access_denied', 'link_invalid', 'answerLinkInvalid'],
      ['access_denied', 'no_account', 'answerNoAccount'],
      ['not_found', undefined, 'answerUnknown'],
      ['not_found', 'account_inactive', 'answerInactive'],
      ['session_finished', undefined, 'answerFinished'],
      ['session_expired', undefined, 'answerExpired'],
      ['invalid_request', undefined, 'answerLinkIncomplete'],
      ['rate_limited', undefined, 'answerTooMany'],
      ['server_error', undefined, 'answerFailed'],
    ];
    for (const [code, reason, key] of cases) expect(answerTextKey(code, reason), `${code} ${reason}`).toBe(key);
    const keys = new Set(cases.map((c) => c[2]));
    for (const lang of ['de', 'en'] as const) {
      const said = [...keys].map((k) => WALLET_TEXTS[lang][k as keyof (typeof WALLET_TEXTS)['en']]);
      expect(new Set(said).size, lang).toBe(keys.size);
    }
    expect(WALLET_TEXTS.de.answerNoAccount).toMatch(/^Mit der PID, die Ihre Wallet vorgelegt hat/);
  });

  it("the issuer's credential offer page", async () => {
    const offer = (await createOffer(s, { claims: CLAIMS, pre_authorized: true })).offer_id!;
    const de = await get(`/vci.ashx?offer-page=${offer}`, { 'Accept-Language': 'de-AT' });
    expect(de.status).toBe(200);
    expect(de.lang).toBe('de');
    expect(de.html).toContain('<html lang="de">');
    expect(de.html).toContain('Scannen Sie diesen Code mit Ihrer Wallet, um Ihren Nachweis zu erhalten.');
    const en = await get(`/vci.ashx?offer-page=${offer}`, { 'Accept-Language': 'fr, en;q=0.5' });
    expect(en.html).toContain('Scan this code with your wallet to receive your credential.');
  });
});
