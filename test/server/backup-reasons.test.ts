import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { adminToken, j } from '../plugins/admin/helpers.ts';

/**
 * The console's backup errors name their cause (`reason`, server/errors.ts ERROR_REASONS), so the
 * operator reads "not a backup archive" or "the backup folder cannot be written" in their own
 * language, not the generic code's sentence: a refused upload, a backup whose target is no folder.
 */
const V1 = '/api.ashx/v1';
let s: TestServer;
let host: string;
let token: string;

beforeAll(async () => {
  s = await startTestServer();
  host = `localhost:${s.port}`;
  token = await adminToken(s, host, 'admin', s.adminPassword);
});
afterAll(async () => {
  await s?.stop();
});

describe('backup errors carry their reason', () => {
  it('an uploaded file that is no archive: 400 invalid_archive, reason not_an_archive; a cut-off one: truncated', async () => {
    const restore = async (bytes: Buffer) => {
      const up = await j(
        s.fetch(`${V1}/backups/upload`, { method: 'POST', host, key: token, headers: { 'content-type': 'application/octet-stream' }, body: bytes }),
      );
      expect(up.status, JSON.stringify(up.body)).toBe(201);
      return j(s.fetch(`${V1}/backups/${up.body.name}/restore`, { method: 'POST', host, key: token, json: { passphrase: 'a long passphrase' } }));
    };
    const junk = await restore(Buffer.from('these are not the bytes of an archive'.repeat(20)));
    expect(junk.status).toBe(400);
    expect(junk.body).toMatchObject({ error: 'invalid_archive', reason: 'not_an_archive' });
    // A real archive of this appliance, cut in half.
    const made = await j(s.fetch(`${V1}/backups`, { method: 'POST', host, key: token, json: { passphrase: 'a long passphrase' } }));
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const whole = fs.readFileSync(path.join(s.dataDir, 'backups', made.body.name as string));
    const cut = await restore(whole.subarray(0, Math.floor(whole.length / 2)));
    expect(cut.status).toBe(400);
    expect(cut.body).toMatchObject({ error: 'invalid_archive', reason: 'truncated' });
    const wrong = await j(s.fetch(`${V1}/backups/${made.body.name}/restore`, { method: 'POST', host, key: token, json: { passphrase: 'another passphrase' } }));
    expect(wrong.body).toMatchObject({ error: 'invalid_archive', reason: 'wrong_key' });
  });

  it('a backup target that cannot be written: 503 backup_failed, reason not_writable', async () => {
    const target = path.join(s.dataDir, 'backups');
    fs.rmSync(target, { recursive: true, force: true });
    fs.writeFileSync(target, 'a file where the backup folder should be');
    try {
      const r = await j(s.fetch(`${V1}/backups`, { method: 'POST', host, key: token, json: { passphrase: 'a long passphrase' } }));
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ error: 'backup_failed', reason: 'not_writable' });
    } finally {
      fs.rmSync(target, { force: true });
    }
  });
});
