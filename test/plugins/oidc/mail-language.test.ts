import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { startSmtp } from '../../support/smtp.ts';
import { adminToken } from '../admin/helpers.ts';

/**
 * The provider's mails (sign-in link, recovery, invitation) are written in the language of the
 * request that sends them: the sign-in page's (its authorization request's ui_locales, the
 * console's language cookie, Accept-Language) or the administrator's. Subject and body change
 * language; the link does not.
 */
let s: TestServer;
let A: string;
let smtp: Awaited<ReturnType<typeof startSmtp>>;

beforeAll(async () => {
  smtp = await startSmtp();
  const smtpPort = smtp.port;
  s = await startTestServer({ overrides: { plugins: { oidc: { smtp: { url: `smtp://127.0.0.1:${smtpPort}?ignoreTLS=true`, from: 'login@office.test' } } } } });
  A = `localhost:${s.port}`;
}, 60_000);
afterAll(async () => {
  await s?.stop();
  await smtp?.stop();
});

interface Mail {
  subject: string;
  body: string;
  contentLanguage: string | undefined;
}

/** RFC 2047 encoded words (B and Q) of a header, decoded. */
function decodeWords(v: string): string {
  return v.replace(/\?=\s+=\?/g, '?==?').replace(/=\?utf-8\?([BQ])\?([^?]*)\?=/gi, (_, enc: string, t: string) =>
    enc.toUpperCase() === 'B'
      ? Buffer.from(t, 'base64').toString('utf8')
      : Buffer.from(
          t.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (__, h: string) => String.fromCharCode(parseInt(h, 16))),
          'latin1',
        ).toString('utf8'),
  );
}

/** A single-part text mail as the relay received it: its decoded subject, body and Content-Language. */
function parse(data: string): Mail {
  const [head = '', ...rest] = data.split(/\r?\n\r?\n/);
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) headers.set(line.slice(0, i).toLowerCase(), line.slice(i + 1).trim());
  }
  let body = rest.join('\n\n');
  const cte = (headers.get('content-transfer-encoding') ?? '7bit').toLowerCase();
  if (cte === 'base64') body = Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  else if (cte === 'quoted-printable')
    body = Buffer.from(
      body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16))),
      'latin1',
    ).toString('utf8');
  return { subject: decodeWords(headers.get('subject') ?? ''), body: body.replace(/\r\n/g, '\n'), contentLanguage: headers.get('content-language') };
}

async function mailTo(to: string, before: number): Promise<Mail> {
  await expect.poll(() => smtp.mails.slice(before).some((m) => m.to.join(',') === to), { timeout: 15_000 }).toBe(true);
  return parse(smtp.mails.slice(before).find((m) => m.to.join(',') === to)!.data);
}

/** Asks for a sign-in or recovery link on the login page, as a browser speaking `acceptLanguage` does. */
async function requestLink(email: string, purpose: 'maglink' | 'recover', acceptLanguage: string): Promise<{ mail: Mail; page: string }> {
  const login = await s.fetch('/login.html', { host: A, headers: { 'Accept-Language': acceptLanguage } });
  expect(login.status).toBe(200);
  const cookie = (login.headers.get('set-cookie') ?? '')
    .split(/,(?=\s*\w+=)/)
    .map((c) => c.split(';')[0]!.trim())
    .join('; ');
  const csrf = /name="csrf" value="([^"]+)"/.exec(await login.text())![1]!;
  const before = smtp.mails.length;
  const r = await s.fetch('/oidc.ashx/maglink', {
    method: 'POST',
    host: A,
    headers: { cookie, 'Accept-Language': acceptLanguage },
    body: new URLSearchParams({ csrf, email, purpose }),
  });
  expect(r.status).toBe(200);
  return { mail: await mailTo(email, before), page: await r.text() };
}

const link = (m: Mail) => /(http:\/\/\S+)/.exec(m.body)?.[1];

describe('sign-in and recovery mails', () => {
  it('a German browser gets a German sign-in mail, an English one an English mail, with the same kind of link', async () => {
    await s.appliance.core.users.add(s.primary, { name: 'greta', role: 'user', password: 'greta password 1', email: 'greta@example.test' });
    const de = await requestLink('greta@example.test', 'maglink', 'de-DE,de;q=0.9,en;q=0.5');
    expect(de.page).toContain('Bitte E-Mails prüfen');
    expect(de.mail.subject).toBe('Bei Primary anmelden');
    expect(de.mail.body).toContain('Mit diesem Link melden Sie sich bei Primary an (15 Minuten gültig, nur einmal):');
    expect(de.mail.body).toContain('Wenn Sie ihn nicht angefordert haben, ignorieren Sie diese E-Mail.');
    expect(de.mail.body).not.toMatch(/ with this link|ignore this mail/);
    expect(de.mail.contentLanguage).toBe('de');
    expect(link(de.mail)).toMatch(new RegExp(`^http://localhost:${s.port}/oidc\\.ashx/maglink-finish\\?t=[\\w-]{43}$`));

    const en = await requestLink('greta@example.test', 'maglink', 'en-US,en;q=0.9');
    expect(en.mail.subject).toBe('Sign in to Primary');
    expect(en.mail.body).toContain('Sign in to Primary with this link (valid 15 minutes, once):');
    expect(en.mail.body).toContain('If you did not ask for it, ignore this mail.');
    expect(en.mail.contentLanguage).toBe('en');
    expect(link(en.mail)).toMatch(new RegExp(`^http://localhost:${s.port}/oidc\\.ashx/maglink-finish\\?t=[\\w-]{43}$`));
    // Each link still signs in: the German one opens its (German) landing page.
    const landing = await s.fetch(new URL(link(de.mail)!).pathname + new URL(link(de.mail)!).search, { host: A, headers: { 'Accept-Language': 'de' } });
    expect(landing.status).toBe(200);
    expect(await landing.text()).toContain('Anmeldung abschließen');
  });

  it('the recovery mail follows the language too', async () => {
    await s.appliance.core.users.add(s.primary, { name: 'hugo', role: 'user', password: 'hugo password 12', email: 'hugo@example.test' });
    const de = await requestLink('hugo@example.test', 'recover', 'de');
    expect(de.mail.subject).toBe('Passwort für Primary zurücksetzen');
    expect(de.mail.body).toContain('Mit diesem Link wählen Sie ein neues Passwort für Primary');
    expect(link(de.mail)).toMatch(/\/oidc\.ashx\/recover-finish\?t=[\w-]{43}$/);
    const en = await requestLink('hugo@example.test', 'recover', 'en');
    expect(en.mail.subject).toBe('Reset your password for Primary');
    expect(en.mail.body).toContain('Choose a new password for Primary with this link (valid 15 minutes, once):');
    expect(link(en.mail)).toMatch(/\/oidc\.ashx\/recover-finish\?t=[\w-]{43}$/);
  });
});

describe('invitation mail', () => {
  async function invite(user: string, headers: Record<string, string>): Promise<{ claimUrl: string; mail: Mail }> {
    const json = JSON.stringify({ user });
    const before = smtp.mails.length;
    const r = await s.fetch('/signal.ashx?oidc-invite=1', {
      method: 'POST',
      host: A,
      json: { user },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-invite', A, json.length), ...headers },
    });
    expect(r.status, await r.clone().text()).toBe(200);
    const out = (await r.json()) as { claim_url: string; mailed: boolean };
    expect(out.mailed).toBe(true);
    return { claimUrl: out.claim_url, mail: await mailTo(`${user}@example.test`, before) };
  }

  it("is written in the inviting administrator's language (console cookie, else Accept-Language); the claim link is the one answered", async () => {
    await s.appliance.core.users.add(s.primary, { name: 'ida', role: 'user', email: 'ida@example.test' });
    await s.appliance.core.users.add(s.primary, { name: 'jon', role: 'user', email: 'jon@example.test' });
    await s.appliance.core.users.add(s.primary, { name: 'kai', role: 'user', email: 'kai@example.test' });
    const de = await invite('ida', { 'Accept-Language': 'de-DE' });
    expect(de.mail.subject).toBe('Ihr Konto bei Primary');
    expect(de.mail.body).toContain('Mit diesem Link setzen Sie das Passwort Ihres Kontos ida bei Primary (7 Tage gültig, nur einmal):');
    expect(de.mail.contentLanguage).toBe('de');
    expect(link(de.mail)).toBe(de.claimUrl);
    const en = await invite('jon', { 'Accept-Language': 'en-GB' });
    expect(en.mail.subject).toBe('Your account on Primary');
    expect(en.mail.body).toContain('Set your password for your account jon on Primary with this link (valid 7 days, once):');
    expect(link(en.mail)).toBe(en.claimUrl);
    // The console's language cookie (the operator's choice in the console) wins over the browser's header.
    const cookie = await invite('kai', { 'Accept-Language': 'en-US', cookie: 'sovcomms.lang=de' });
    expect(cookie.mail.subject).toBe('Ihr Konto bei Primary');
  });
});

describe("the account's own mail language", () => {
  const V1 = '/api.ashx/v1';
  let token: string;
  beforeAll(async () => {
    token = await adminToken(s, A, 'admin', s.adminPassword);
  });
  const api = async (method: string, p: string, json: unknown) => {
    const r = await s.fetch(`${V1}${p}`, { method, host: A, key: token, json });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

  it('a German user gets German mails from an English browser; null follows the request again', async () => {
    const made = await api('POST', '/users', { name: 'lena', role: 'user', password: 'lena password 12', email: 'lena@example.test', language: 'de' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.language).toBe('de');
    const de = await requestLink('lena@example.test', 'recover', 'en-US,en;q=0.9');
    expect(de.page).toContain('Check your mail');
    expect(de.mail.subject).toBe('Passwort für Primary zurücksetzen');
    expect(de.mail.contentLanguage).toBe('de');
    const cleared = await api('PATCH', `/users/${made.body.id as string}`, { language: null });
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
    expect(cleared.body).toMatchObject({ language: null, role: 'user' });
    expect((await requestLink('lena@example.test', 'maglink', 'en-US')).mail.subject).toBe('Sign in to Primary');
  });

  it("an invitation follows the invitee's language set by PATCH, not the administrator's", async () => {
    const made = await api('POST', '/users', { name: 'mila', role: 'user', email: 'mila@example.test' });
    expect(made.status).toBe(201);
    expect(made.body.language).toBeNull();
    const set = await api('PATCH', `/users/${made.body.id as string}`, { language: 'de' });
    expect(set.body).toMatchObject({ language: 'de' });
    expect((await api('PATCH', `/users/${made.body.id as string}`, { language: 'fr' })).status).toBe(400);
    const json = JSON.stringify({ user: 'mila' });
    const before = smtp.mails.length;
    const r = await s.fetch('/signal.ashx?oidc-invite=1', {
      method: 'POST',
      host: A,
      json: { user: 'mila' },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-invite', A, json.length), 'Accept-Language': 'en-US' },
    });
    expect(r.status).toBe(200);
    const mail = await mailTo('mila@example.test', before);
    expect(mail.subject).toBe('Ihr Konto bei Primary');
    expect(mail.contentLanguage).toBe('de');
  });
});
