import path from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';

/**
 * The console's words for what the API refuses (renderer/src/lib/errors.ts): where the API names
 * the refused field or the bound it hit, the operator reads a sentence about that, in English and
 * German, not the code's one generic text; the English error_description is never shown for them.
 */
// The renderer's modules, loaded once the browser globals they read exist; by a computed path and
// typed here, because the server's tsconfig (which checks the tests) has no DOM library for them.
interface Issue {
  code: string;
  origin?: string;
  minimum?: number;
}
let errorText: (e: unknown) => string;
let ApiError: new (status: number, code: string, message: string, field?: string, issue?: Issue, extra?: Record<string, unknown>) => Error;
let i18n: { changeLanguage(l: string): Promise<unknown> };
const load = (p: string): Promise<Record<string, unknown>> =>
  import(path.resolve(import.meta.dirname, '../../renderer/src', p)) as Promise<Record<string, unknown>>;

beforeAll(async () => {
  // The modules read the browser's language and origin when loaded.
  vi.stubGlobal('localStorage', { getItem: () => 'en', setItem: () => undefined, removeItem: () => undefined });
  vi.stubGlobal('navigator', { language: 'en-US' });
  vi.stubGlobal('document', { documentElement: {}, cookie: '' });
  vi.stubGlobal('location', { origin: 'http://localhost', pathname: '/console/', search: '' });
  errorText = (await load('lib/errors.ts')).errorText as typeof errorText;
  ApiError = (await load('api/client.ts')).ApiError as typeof ApiError;
  i18n = (await load('i18n.ts')).default as typeof i18n;
});

const inBoth = async (e: unknown): Promise<{ en: string; de: string }> => {
  await i18n.changeLanguage('en');
  const en = errorText(e);
  await i18n.changeLanguage('de');
  const de = errorText(e);
  await i18n.changeLanguage('en');
  return { en, de };
};

describe('errorText', () => {
  it('invalid_client_metadata names what is wrong by the field the API refused', async () => {
    const grant = new ApiError(400, 'invalid_client_metadata', 'grant_types: client_credentials needs an authenticated client', 'grant_types');
    expect(await inBoth(grant)).toEqual({
      en: 'Client credentials need a client that authenticates: choose an authentication method other than “none”.',
      de: 'Client Credentials brauchen einen Client, der sich authentisiert: eine andere Authentisierungsmethode als „none“ wählen.',
    });
    const key = new ApiError(400, 'invalid_client_metadata', 'jwks.keys[2]: kty must be RSA, EC or OKP', 'jwks.keys[2]');
    const t = await inBoth(key);
    expect(t.en).toBe("Key 3 of the client's JWKS is not accepted: only public RSA, EC or OKP keys, without private parts.");
    expect(t.de).toMatch(/^Schlüssel 3 im JWKS des Clients/);
    // The API's dotted form of the same path reads the same.
    expect(errorText(new ApiError(400, 'invalid_client_metadata', 'x', 'jwks.keys.2'))).toBe(t.en);
    expect((await inBoth(new ApiError(400, 'invalid_client_metadata', 'jwks: need keys', 'jwks'))).de).toBe(
      'Private Key JWT und JWT Bearer brauchen die öffentlichen Schlüssel des Clients (JWKS).',
    );
    // Without a field there is nothing more precise than the code's text.
    expect(await inBoth(new ApiError(400, 'invalid_client_metadata', 'sovcomms-console is built in and cannot be changed'))).toEqual({
      en: "The client's settings are not valid.",
      de: 'Die Einstellungen des Clients sind ungültig.',
    });
  });

  it('a redirect URI missing altogether is not told as a bad one', async () => {
    const none = await inBoth(new ApiError(400, 'invalid_redirect_uri', 'redirect_uris: at least one is required', 'redirect_uris'));
    expect(none.en).toBe('Add a redirect URI: sign-in with a code (or the implicit flow) needs at least one.');
    expect(none.de).toMatch(/^Bitte eine Redirect-URI angeben/);
    const bad = await inBoth(new ApiError(400, 'invalid_redirect_uri', 'redirect_uris[0]: must be absolute', 'redirect_uris[0]'));
    expect(bad.en).toMatch(/^Not an allowed redirect URI/);
  });

  it("an origin's form is said; tenant_limit says which limit and its number, with plural forms", async () => {
    expect((await inBoth(new ApiError(400, 'invalid_origin', 'origin: scheme, host and port only', 'origin'))).de).toMatch(
      /^Den Ursprung nur als Schema, Host und Port angeben/,
    );
    const trunks = new ApiError(409, 'tenant_limit', 'a tenant has at most 50 trunks', undefined, undefined, { cap: 'trunks', limit: 50 });
    expect(await inBoth(trunks)).toEqual({
      en: 'This tenant may have at most 50 trunks (telephony setting limits.trunks).',
      de: 'Dieser Mandant darf höchstens 50 Trunks haben (Telefonie-Einstellung limits.trunks).',
    });
    const one = new ApiError(409, 'tenant_limit', 'a tenant has at most 1 numbers', undefined, undefined, { cap: 'numbers', limit: 1 });
    expect((await inBoth(one)).de).toBe('Dieser Mandant darf höchstens 1 Rufnummer haben (Telefonie-Einstellung limits.numbers).');
    // A cap the console has no words for keeps the code's text.
    expect(errorText(new ApiError(409, 'tenant_limit', 'x', undefined, undefined, { cap: 'rooms', limit: 3 }))).toBe('This tenant has reached its limit.');
  });

  it("a generic code with the API's reason says the cause, in German too, with its parameters", async () => {
    const key = new ApiError(400, 'invalid_archive', 'wrong passphrase or recovery key', undefined, undefined, { reason: 'wrong_key' });
    expect(await inBoth(key)).toEqual({
      en: 'The passphrase or recovery key does not open this archive.',
      de: 'Passphrase oder Wiederherstellungsschlüssel öffnen dieses Archiv nicht.',
    });
    const sip = new ApiError(409, 'conflict', 'the SIP user name 201 is taken', undefined, undefined, { reason: 'sip_user_taken', name: '201' });
    expect((await inBoth(sip)).de).toBe('Der SIP-Benutzername 201 ist schon vergeben.');
    const csr = new ApiError(400, 'invalid_csr', 'csr: its signature does not verify', 'csr', undefined, { reason: 'bad_signature' });
    expect((await inBoth(csr)).de).toMatch(/^Die Signatur der Zertifikatsanforderung stimmt nicht/);
    const bridge = new ApiError(502, 'bridge_error', 'x', undefined, undefined, { reason: 'failed', operation: 'POST /rooms', bridge_status: 500 });
    expect((await inBoth(bridge)).de).toBe('Die Telefonie-Bridge ist an der Anfrage gescheitert (POST /rooms: 500); Einzelheiten stehen in ihrem Protokoll.');
    // A reason the console does not know yet (a newer server) keeps the code's text, not the English description.
    expect(errorText(new ApiError(400, 'invalid_archive', 'x', undefined, undefined, { reason: 'from_the_future' }))).toBe(
      'Not a backup archive of this appliance.',
    );
  });

  it('every reason the API declares has words in English and German', async () => {
    const { ERROR_REASONS } = (await import('../../server/errors.ts')) as { ERROR_REASONS: Record<string, readonly string[]> };
    const missing: string[] = [];
    for (const lng of ['en', 'de']) {
      await i18n.changeLanguage(lng);
      for (const [code, reasons] of Object.entries(ERROR_REASONS)) {
        for (const reason of reasons) {
          const text = errorText(
            new ApiError(400, code, 'english', undefined, undefined, { reason, name: 'n', limit: 2, operation: 'op', bridge_status: 500 }),
          );
          if (text === 'english' || text === errorText(new ApiError(400, code, 'english'))) missing.push(`${lng} ${code}.${reason}`);
        }
      }
    }
    await i18n.changeLanguage('en');
    expect(missing).toEqual([]);
  });

  it('the zod issue still comes first, and a code without a precise text keeps its own', async () => {
    const e = new ApiError(400, 'invalid_request', 'invalid field name: too small', 'name', { code: 'too_small', origin: 'string', minimum: 1 });
    expect(await inBoth(e)).toEqual({ en: 'Required.', de: expect.any(String) as string });
    expect(errorText(new ApiError(409, 'trunk_in_use', 'routes use it', 'trunk'))).toBe('Outbound routes still use this trunk.');
  });
});
