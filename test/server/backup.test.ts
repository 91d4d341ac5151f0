import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDataDirDb, runCli } from '../support/cli.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { scratchDirs } from '../support/cleanup.ts';
import { until } from '../support/until.ts';
import { adminToken, j } from '../plugins/admin/helpers.ts';
import { openCore } from '../../server/core.ts';

/**
 * Backups end to end: an archive made by the running server while the API writes (users, chat
 * uploads), restored by the real CLI onto another data dir: every row and file acknowledged
 * before the backup began is there, `integrity_check` is ok, the master key came along (sealed
 * secrets open); a restore from the console is staged and applied at the next start. Refused
 * archives: backup-refused.test.ts; the CLI's create, list and schedule: backup-cli.test.ts.
 */
const dir = scratchDirs('sovcomms-backup-');
const V1 = '/api.ashx/v1';
const BULK_ROWS = 1200;
let s: TestServer;
let host: string;
let token: string;
let archive: string;
let recoveryKey: string;
const ackedBefore = { users: [] as string[], files: [] as string[] };
const ackedDuring = { users: [] as string[], files: [] as string[] };

function upload(bytes: Buffer, i: number): Promise<Response> {
  const boundary = `----bk${i}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f${i}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return s.fetch('/chat.ashx?op=upload&with=bob', {
    method: 'POST',
    host,
    key: token,
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    body,
  });
}

async function addUser(name: string): Promise<boolean> {
  const r = await s.fetch(`${V1}/users`, { method: 'POST', host, key: token, json: { name, role: 'user', password: 'a long enough password 1' } });
  return r.status === 201;
}

async function addFile(i: number): Promise<string | undefined> {
  const bytes = crypto.randomBytes(4096 + i * 97);
  const r = await upload(bytes, i);
  const sha = crypto.createHash('sha256').update(bytes).digest('hex');
  const body = (await r.json()) as { file?: { sha?: string } };
  return r.status === 200 && body.file?.sha === sha ? sha : undefined;
}

beforeAll(async () => {
  // Its own scratch dir (not the harness's): the restart below needs the data dir to outlive stop().
  s = await startTestServer({ dataDir: dir() });
  host = `localhost:${s.port}`;
  token = await adminToken(s, host, 'admin', s.adminPassword);
  await s.appliance.core.users.add(s.primary, { name: 'bob', role: 'user', password: 'bobs long password 1' });
  // Bulk, so the copy takes a while under the writes and the archive spans many chunks: ~10 MB
  // of rows (the size itself is not what is tested; the copy runs on its own thread).
  const db = s.appliance.core.db;
  db.exec('CREATE TABLE IF NOT EXISTS bulk (id INTEGER PRIMARY KEY, v BLOB NOT NULL)');
  const ins = db.prepare('INSERT INTO bulk (v) VALUES (?)');
  db.transaction(() => {
    for (let i = 0; i < BULK_ROWS; i++) ins.run(crypto.randomBytes(8192));
  })();
  for (let i = 0; i < 6; i++) {
    if (await addUser(`before${i}`)) ackedBefore.users.push(`before${i}`);
    const sha = await addFile(i);
    if (sha) ackedBefore.files.push(sha);
  }
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

describe('backup under a mixed write load, restored elsewhere', { timeout: 240_000 }, () => {
  it('the console API makes an archive while users and files are written', async () => {
    let stop = false;
    const writers = [
      (async () => {
        for (let i = 0; !stop; i++) if (await addUser(`during${i}`)) ackedDuring.users.push(`during${i}`);
      })(),
      (async () => {
        for (let i = 100; !stop; i++) {
          const sha = await addFile(i);
          if (sha) ackedDuring.files.push(sha);
        }
      })(),
    ];
    // Let the writers get going (a user and a file acknowledged), then back up in the middle of them.
    await until(() => ackedDuring.users.length > 0 && ackedDuring.files.length > 0, 60_000, 'a write acknowledged during the load');
    const made = await j(s.fetch(`${V1}/backups`, { method: 'POST', host, key: token, json: {} }));
    stop = true;
    await Promise.all(writers);
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.name).toMatch(/^sovcomms-\d{8}-\d{6}Z-[0-9a-f]{4}\.sovbak$/);
    recoveryKey = made.body.recoveryKey;
    expect(recoveryKey).toMatch(/^[A-Z2-7]{4}(-[A-Z2-7]{1,4}){12}$/);
    archive = path.join(s.dataDir, 'backups', made.body.name);
    expect(fs.statSync(archive).mode & 0o777).toBe(0o600);
    expect(ackedDuring.users.length + ackedDuring.files.length).toBeGreaterThan(0);
    // The secret went to the caller once, never to the log.
    expect(s.logs.text()).not.toContain(recoveryKey);
    const listed = await j(s.fetch(`${V1}/backups`, { host, key: token }));
    expect(listed.body.data[0]).toMatchObject({ name: made.body.name, state: 'complete', protection: 'recovery-key' });
    const status = await j(s.fetch(`${V1}/backups/status`, { host, key: token }));
    expect(status.body.lastSuccess).toMatchObject({ file: made.body.name, trigger: 'api' });
  });

  it('the archive holds no secret in clear: not the master key, not a sealed setting', () => {
    const bytes = fs.readFileSync(archive);
    const master = fs.readFileSync(path.join(s.dataDir, 'master.key'), 'utf8').trim();
    for (const needle of [Buffer.from(master, 'base64'), Buffer.from(master), Buffer.from('SQLite format 3'), Buffer.from('before0')])
      expect(bytes.includes(needle)).toBe(false);
  });

  it('downloads stream the archive byte for byte', async () => {
    const r = await s.fetch(`${V1}/backups/${path.basename(archive)}`, { host, key: token });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-disposition')).toContain('attachment');
    expect(Buffer.from(await r.arrayBuffer()).equals(fs.readFileSync(archive))).toBe(true);
    expect((await s.fetch(`${V1}/backups/..%2Fmaster.key`, { host, key: token })).status).toBe(400);
    // A personal API key is not a super-admin's console session: refused.
    expect((await s.fetch(`${V1}/backups/${path.basename(archive)}`, { host, key: s.adminKey })).status).toBe(403);
  });

  it('sovcomms backup restore puts every acknowledged row and file on a fresh data dir', async () => {
    const target = path.join(dir(), 'restored');
    const r = await runCli(['backup', 'restore', archive, '--recovery-key-stdin'], { dataDir: target, stdin: `${recoveryKey}\n`, timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/restored \d+ files/);
    expect(r.stdout + r.stderr).not.toContain(recoveryKey);
    readDataDirDb(target, (db) => {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const users = new Set((db.prepare('SELECT name FROM users').all() as { name: string }[]).map((u) => u.name));
      for (const u of ackedBefore.users) expect(users.has(u), u).toBe(true);
      // Whatever of the writes during the backup made it is whole: no user the server never acknowledged.
      for (const u of users) if (u.startsWith('during')) expect(ackedDuring.users).toContain(u);
      const files = (db.prepare('SELECT sha FROM chat_files').all() as { sha: string }[]).map((f) => f.sha);
      for (const sha of ackedBefore.files) expect(files).toContain(sha);
      // Every file a restored row names is there, byte for byte.
      const tenantId = s.primary.id;
      for (const sha of files) {
        const p = path.join(target, 'tenants', tenantId, 'chat', 'files', sha.slice(0, 2), sha);
        expect(crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')).toBe(sha);
      }
      expect((db.prepare('SELECT COUNT(*) AS n FROM bulk').get() as { n: number }).n).toBe(BULK_ROWS);
    });
    // The master key came along: the restored appliance opens the secrets it sealed.
    const restored = openCore({ dataDir: target, env: {} });
    try {
      expect(restored.auth.adminSecret()).toBe(s.appliance.core.auth.adminSecret());
    } finally {
      restored.db.close();
    }
    expect(fs.statSync(path.join(target, 'master.key')).mode & 0o777).toBe(0o600);
  });
});

describe('a restore from the console is staged and applied at the next start', { timeout: 240_000 }, () => {
  it('upload, refused with a wrong key (nothing staged), staged with the right one, applied on restart', async () => {
    const bytes = fs.readFileSync(archive);
    const up = await j(
      s.fetch(`${V1}/backups/upload`, { method: 'POST', host, key: token, headers: { 'content-type': 'application/octet-stream' }, body: bytes }),
    );
    expect(up.status, JSON.stringify(up.body)).toBe(201);
    expect(up.body).toMatchObject({ name: expect.stringMatching(/^upload-/), bytes: bytes.length });
    const wrong = await j(
      s.fetch(`${V1}/backups/${up.body.name}/restore`, {
        method: 'POST',
        host,
        key: token,
        json: { recoveryKey: 'AAAA-BBBB-CCCC-DDDD-EEEE-FFFF-GGGG-HHHH-IIII-JJJJ-KKKK-LLLL-MMMM' },
      }),
    );
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({ error: 'invalid_archive', error_description: expect.stringContaining('wrong passphrase or recovery key') });
    expect(fs.existsSync(path.join(s.dataDir, 'restore', 'next'))).toBe(false);
    const staged = await j(s.fetch(`${V1}/backups/${up.body.name}/restore`, { method: 'POST', host, key: token, json: { recoveryKey } }));
    expect(staged.status, JSON.stringify(staged.body)).toBe(200);
    expect(staged.body).toMatchObject({ staged: true, applyAt: 'next start' });
    expect((await j(s.fetch(`${V1}/backups`, { host, key: token }))).body.pendingRestore).toBe(true);
    // Written after the backup: gone once the restore is applied, kept with the previous data.
    expect(await addUser('afterbackup')).toBe(true);
    const dataDir = s.dataDir;
    await s.stop();
    s = await startTestServer({ dataDir });
    const names = (s.appliance.core.db.prepare('SELECT name FROM users').all() as { name: string }[]).map((u) => u.name);
    expect(names).not.toContain('afterbackup');
    for (const u of ackedBefore.users) expect(names).toContain(u);
    expect(s.appliance.core.db.pragma('integrity_check', { simple: true })).toBe('ok');
    const previous = fs.readdirSync(path.join(dataDir, 'restore')).filter((n) => n.startsWith('previous-'));
    expect(previous).toHaveLength(1);
    readDataDirDb(path.join(dataDir, 'restore', previous[0]!), (db) =>
      expect(db.prepare("SELECT COUNT(*) AS n FROM users WHERE name = 'afterbackup'").get()).toEqual({ n: 1 }),
    );
    expect(fs.existsSync(path.join(dataDir, 'restore', 'next'))).toBe(false);
    // The archives stayed where they were.
    expect(fs.existsSync(archive)).toBe(true);
  });
});
