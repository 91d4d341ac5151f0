import { describe, expect, it } from 'vitest';
import { createLogger } from '../../server/log.ts';
import { LogCapture } from '../support/server.ts';

/**
 * Redaction by path, not by bare name: the appliance's own `code` (a child's exit status, an
 * error's code) and `key` (the CA's key kind) stay readable, while every secret the logger hid
 * before is still hidden where a client's data carries it.
 */
async function logged(obj: Record<string, unknown>): Promise<{ line: Record<string, unknown>; text: string }> {
  const c = new LogCapture();
  const log = createLogger({ level: 'info', destination: c });
  log.info(obj, 'probe');
  await new Promise<void>((r) => log.flush(() => r()));
  await new Promise((r) => setImmediate(r));
  return { line: JSON.parse(c.lines[0]!) as Record<string, unknown>, text: c.text() };
}

/** Every key name the logger censored before paths replaced bare names (server/log.ts history). */
const BEFORE = [
  'authorization',
  'cookie',
  'set-cookie',
  'x-service-admin-signature',
  'password',
  'passwd',
  'secret',
  'client_secret',
  'clientSecret',
  'apiKey',
  'api_key',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'code_verifier',
  'pin',
  'privateKey',
  'private_key',
  'key',
  'masterKey',
  'signingSecret',
  'assertion',
  'pre-authorized_code',
  'code',
  // and the spellings the name pattern caught
  'newPassword',
  'passphrase',
  'X-Service-Admin-Signature',
  'otp',
  'puk',
  'refreshToken',
];
const SHORT = new Set(['pin', 'key', 'code', 'otp', 'puk']);

describe('log redaction by path', () => {
  it("the supervisor's exit code, an error's code and the CA's key kind are logged as they are", async () => {
    const a = await logged({ code: 3, signal: null, reason: 'sip_port_in_use' });
    expect(a.line).toMatchObject({ code: 3, signal: null });
    const err = Object.assign(new Error('bind EADDRINUSE 127.0.0.1:5060'), { code: 'EADDRINUSE' });
    const b = await logged({ err });
    expect(b.text).toContain('"code":"EADDRINUSE"');
    const c = await logged({ tenant: 'a.example', key: 'pkcs11', generation: 2 });
    expect(c.line).toMatchObject({ key: 'pkcs11', generation: 2 });
  });

  it('every secret hidden before is still hidden in what a client sent: body, query, form, params, headers, at any depth', async () => {
    for (const name of BEFORE) {
      for (const carrier of ['body', 'query', 'form', 'params', 'headers']) {
        const v = `v-${carrier}-${name}-9q`;
        const deep = `d-${carrier}-${name}-8r`;
        const arr = `a-${carrier}-${name}-7s`;
        const { text } = await logged({
          [carrier]: { [name]: v, nested: { more: { [name]: deep } }, list: [{ [name]: arr }] },
          req: { [carrier]: { [name]: v } },
        });
        for (const s of [v, deep, arr]) expect(text, `${carrier}.${name}`).not.toContain(s);
        expect(text).toContain('[redacted]');
      }
    }
  });

  it('secret names (not the short ones) stay hidden anywhere: top level, nested, in arrays', async () => {
    for (const name of BEFORE.filter((n) => !SHORT.has(n))) {
      const v = `top-${name}-6t`;
      const { text } = await logged({ [name]: v, a: { b: { c: { d: { [name]: v } } } }, list: [{ [name]: v }] });
      expect(text, name).not.toContain(v);
    }
    const { text } = await logged({ tx_code: '123456', offer: { 'pre-authorized_code': 'pac-5u' }, user_code: 'WDJB-MJHT' });
    for (const s of ['123456', 'pac-5u', 'WDJB-MJHT']) expect(text).not.toContain(s);
  });
});
