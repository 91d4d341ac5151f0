import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { adminToken, j } from '../plugins/admin/helpers.ts';

/**
 * Secrets at rest (issue 18 "What must be true" 5): a run creates one of every secret the
 * appliance handles, then the captured log, the database file, its WAL and every other file under
 * the data dir are searched for each of them in clear. Only their sealed or hashed forms may be
 * there; master.key (the one key that must be readable) and the database are 0600, the data dir 0700.
 */
let s: TestServer;
const secrets: Record<string, string> = {};

beforeAll(async () => {
  s = await startTestServer({ keepDataDir: true });
  const host = `localhost:${s.port}`;
  const token = await adminToken(s, host, 'admin', s.adminPassword);
  const as = (p: string, json: unknown) => j(s.fetch(p, { method: 'POST', host, key: token, json }));
  secrets['admin password'] = s.adminPassword;
  secrets['API key'] = (await as('/signal.ashx?apikey-create=1', { name: 'at-rest' })).body.key;
  secrets['user password'] = 'user password at rest 42';
  expect((await as('/api.ashx/v1/users', { name: 'atrest', role: 'user', password: secrets['user password'] })).status).toBe(201);
  secrets['client secret'] = (
    await as('/signal.ashx?oidc-clients-save=1', {
      client_id: 'at-rest-client',
      redirect_uris: ['https://rp.example/cb'],
      token_endpoint_auth_method: 'client_secret_basic',
    })
  ).body.client_secret;
  secrets['webhook secret'] = (await as('/signal.ashx?webhooks=add', { url: 'http://10.1.2.3/hook', events: '*' })).body.secret;
  secrets['trunk password'] = 'trunk-password-at-rest-77';
  expect(
    (await as('/signal.ashx?trunks=save', { id: 'rest', name: 'rest', host: '10.1.2.4', username: 'u', password: secrets['trunk password'] })).status,
  ).toBe(200);
  secrets['engine API key'] = 'AIza-engine-key-at-rest-0123456789';
  expect((await as('/signal.ashx?telephony=settings-save', { engineApiKey: secrets['engine API key'] })).status).toBe(200);
  // The CA issues only for a registered client of the tenant.
  expect((await as('/signal.ashx?oidc-clients-save=1', { client_id: 'rest-verifier', redirect_uris: ['https://rest-verifier/cb'] })).status).toBe(200);
  const cert = await as('/rp-cert.ashx?issue', { client_id: 'rest-verifier', include_key: true });
  if (cert.status === 200 && cert.body.private_key) {
    // A line from the middle of the PEM body: the key material itself.
    const lines = (cert.body.private_key as string).split('\n').filter((l) => l && !l.startsWith('-----'));
    secrets['RP private key'] = lines[Math.floor(lines.length / 2)]!;
  }
  secrets['admin HMAC secret'] = s.appliance.core.auth.adminSecret();
  // A token exchange and a use of each credential, so the log has had every chance to see them.
  await j(s.fetch('/api.ashx/v1/calls', { host, key: secrets['API key'] }));
  await s.stop();
}, 60_000);

afterAll(() => {
  if (s) fs.rmSync(s.dataDir, { recursive: true, force: true });
});

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? files(p) : e.isFile() ? [p] : [];
  });
}

describe('secrets at rest', () => {
  it('none of them in clear in the log, the database, its WAL or any other file of the data dir', () => {
    expect(Object.keys(secrets).length).toBeGreaterThanOrEqual(9);
    for (const [name, v] of Object.entries(secrets)) expect(v, name).toMatch(/.{12,}/);
    const found: string[] = [];
    const log = s.logs.text();
    for (const [name, v] of Object.entries(secrets)) if (log.includes(v)) found.push(`${name} in the log`);
    for (const f of files(s.dataDir)) {
      if (path.basename(f) === 'master.key') continue;
      const bytes = fs.readFileSync(f);
      for (const [name, v] of Object.entries(secrets)) if (bytes.includes(Buffer.from(v, 'utf8'))) found.push(`${name} in ${path.relative(s.dataDir, f)}`);
    }
    expect(found).toEqual([]);
  });

  it('master.key and the database are 0600, the data dir 0700', () => {
    const mode = (p: string) => fs.statSync(p).mode & 0o777;
    expect(mode(s.dataDir)).toBe(0o700);
    expect(mode(path.join(s.dataDir, 'master.key'))).toBe(0o600);
    const db = fs.readdirSync(s.dataDir).find((f) => f.endsWith('.db'))!;
    expect(mode(path.join(s.dataDir, db))).toBe(0o600);
  });
});
