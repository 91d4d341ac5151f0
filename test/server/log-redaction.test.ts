import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { probePlugin, withBuiltins } from './fixtures/test-plugins.ts';

/**
 * Secrets never reach the log: requests carrying credentials, bodies with passwords, and a
 * careless plugin logging whole objects go through the real server; then the captured log
 * output is grepped for every secret value.
 */
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ plugins: await withBuiltins(probePlugin), overrides: { log: { level: 'debug' } } });
});
afterAll(async () => {
  await s?.stop();
});

describe('log redaction', () => {
  it('no secret value appears anywhere in the log output', async () => {
    const secrets = {
      bodyPassword: 'body-pw-Aa11',
      newPassword: 'body-newpw-Bb22',
      accessToken: 'body-at-Cc33',
      refreshToken: 'body-rt-Dd44',
      clientSecret: 'body-cs-Ee55',
      snakeSecret: 'body-snake-Ff66',
      deepPassword: 'body-deep-Gg77',
      arrayToken: 'body-array-Hh88',
      queryCode: 'query-code-Ii99',
      queryToken: 'query-token-Jj00',
      pin: 'body-pin-4321',
      privateKey: '-----BEGIN PRIVATE KEY-----Kk11',
    };
    const body = {
      username: 'visible-user',
      password: secrets.bodyPassword,
      newPassword: secrets.newPassword,
      accessToken: secrets.accessToken,
      refresh_token: secrets.refreshToken,
      clientSecret: secrets.clientSecret,
      client_secret: secrets.snakeSecret,
      pin: secrets.pin,
      private_key: secrets.privateKey,
      profile: { settings: { credentials: { password: secrets.deepPassword } } },
      tokens: [{ token: secrets.arrayToken }],
    };
    // A careless plugin route logs the whole body, its own secrets and the request's Authorization.
    const r1 = await s.fetch(`/api.ashx/v1/probe/log?code=${secrets.queryCode}&access_token=${secrets.queryToken}`, {
      method: 'POST',
      key: s.adminKey,
      json: body,
    });
    expect(r1.status).toBe(200);
    // Failed requests: a bad key, a bad admin signature, a rejected body, a handler crash.
    await s.fetch('/api.ashx/v1/auditlog', { key: 'ak_unknownKeyValue_Ll22' });
    await s.fetch('/signal.ashx?test=echo', { method: 'POST', headers: { 'X-Service-Admin-Signature': 'ab'.repeat(32) } });
    await s.fetch('/signal.ashx?test=echo', { method: 'POST', headers: { 'X-Service-Admin-Signature': s.hmac('test-echo') } });
    await s.fetch('/api.ashx/v1/probe/items', { method: 'POST', key: s.adminKey, json: { name: '', count: 1, password: secrets.bodyPassword } });
    await s.fetch('/api.ashx/v1/probe/crash', { key: s.adminKey, headers: { Cookie: 'sid=cookie-Mm33' } });
    await new Promise<void>((r) => s.appliance.core.log.flush(() => r()));

    const log = s.logs.text();
    // The log is not empty: the requests and the plugin's lines are there, redacted.
    expect(log).toContain('probe got a body');
    expect(log).toContain('visible-user');
    expect(log).toContain('[redacted]');
    expect(log).toMatch(/"path":"\/api\.ashx\/v1\/probe\/log"/);
    const all = [
      ...Object.values(secrets),
      s.adminKey,
      'ak_unknownKeyValue_Ll22',
      s.hmac('test-echo'),
      'ab'.repeat(32),
      'cookie-Mm33',
      'plugin-pw-Zq81',
      'plugin-token-Yp42',
      'plugin-apikey-Xo33',
      'plugin-cs-Wn24',
      'plugin-secret-Vm15',
      s.appliance.core.auth.adminSecret(),
    ];
    for (const secret of all) expect(log, `secret ${secret} leaked into the log`).not.toContain(secret);
    // The key's hash prefix is not the key, but the key itself must not appear in parts either.
    expect(log).not.toContain(s.adminKey.slice(3, 20));
  });
});
