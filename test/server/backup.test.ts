import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDataDirDb, runCli } from '../support/cli.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { scratchDirs } from '../support/cleanup.ts';
import { adminToken, j } from '../plugins/admin/helpers.ts';
import { openCore } from '../../server/core.ts';

/**
 * Backups end to end: an archive made by the running server while the API writes (users, chat
 * uploads), restored by the real CLI onto another data dir: every row and file acknowledged
 * before the backup began is there, `integrity_check` is ok, the master key came along (sealed
 * secrets open). Damaged, truncated and wrongly keyed archives are refused with a clear reason
 * and change nothing; the recovery key is the only secret ever printed, once.
 */
const dir = scratchDirs('sovcomms-backup-');
const V1 = '/api.ashx/v1';
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
  // Bulk, so the copy takes a while under the writes: ~24 MB of rows.
  const db = s.appliance.core.db;
  db.exec('CREATE TABLE IF NOT EXISTS bulk (id INTEGER PRIMARY KEY, v BLOB NOT NULL)');
  const ins = db.prepare('INSERT INTO bulk (v) VALUES (?)');
  db.transaction(() => {
    for (let i = 0; i < 3000; i++) ins.run(crypto.randomBytes(8192));
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
    // Let the writers get going, then back up in the middle of them.
    await new Promise((r) => setTimeout(r, 300));
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
      expect((db.prepare('SELECT COUNT(*) AS n FROM bulk').get() as { n: number }).n).toBe(3000);
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

/** A copy of `archive` changed by `mutate`, in a scratch dir. */
function variant(mutate: (b: Buffer) => Buffer): string {
  const f = path.join(dir(), 'variant.sovbak');
  fs.writeFileSync(f, mutate(Buffer.from(fs.readFileSync(archive))));
  return f;
}

function treeDigest(d: string): string {
  const h = crypto.createHash('sha256');
  const walk = (p: string) => {
    for (const n of fs.readdirSync(p).sort()) {
      const abs = path.join(p, n);
      if (fs.statSync(abs).isDirectory()) walk(abs);
      else h.update(abs).update(fs.readFileSync(abs));
    }
  };
  walk(d);
  return h.digest('hex');
}

describe('refused archives change nothing', { timeout: 240_000 }, () => {
  let existing: string;
  let digest: string;
  beforeAll(async () => {
    existing = path.join(dir(), 'existing');
    expect((await runCli(['tenant', 'add', 'keep.example'], { dataDir: existing })).code).toBe(0);
    digest = treeDigest(existing);
  }, 120_000);

  const cases: [string, () => string, string, RegExp][] = [
    ['a flipped byte in the middle', () => variant((b) => ((b[Math.floor(b.length / 2)]! ^= 0x01), b)), 'rk', /damaged or altered at chunk \d+/],
    ['a truncated archive', () => variant((b) => b.subarray(0, b.length - 100)), 'rk', /truncated/],
    ['an archive cut at a chunk boundary', () => variant((b) => cutAtLastChunk(b)), 'rk', /truncated: it ends after chunk \d+ without its final chunk/],
    ['bytes appended', () => variant((b) => Buffer.concat([b, Buffer.from('extra')])), 'rk', /bytes after its final chunk/],
    [
      'a changed header (schema versions)',
      () => variant((b) => Buffer.from(b.toString('latin1').replace('"core":4', '"core":3'), 'latin1')),
      'rk',
      /damaged or altered at chunk 0/,
    ],
    ['the wrong recovery key', () => archive, 'wrong', /wrong passphrase or recovery key/],
  ];
  for (const [what, file, secret, message] of cases) {
    it(`${what}: refused with a clear error, the existing data dir and a fresh one untouched`, async () => {
      const f = file();
      const key = secret === 'rk' ? recoveryKey : 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA';
      const onExisting = await runCli(['backup', 'restore', f, '--recovery-key-stdin', '--yes'], { dataDir: existing, stdin: key, timeoutMs: 120_000 });
      expect(onExisting.code).toBe(1);
      expect(onExisting.stderr).toMatch(message);
      expect(onExisting.stderr).toContain('unchanged');
      expect(onExisting.stderr).not.toMatch(/\n\s+at /);
      expect(treeDigest(existing)).toBe(digest);
      const fresh = path.join(dir(), 'fresh');
      const onFresh = await runCli(['backup', 'restore', f, '--recovery-key-stdin'], { dataDir: fresh, stdin: key, timeoutMs: 120_000 });
      expect(onFresh.code).toBe(1);
      expect(fs.existsSync(fresh)).toBe(false);
      expect(fs.readdirSync(path.dirname(fresh))).toEqual([]);
    });
  }

  it('an existing data dir is replaced only with --yes, and kept beside', async () => {
    const refused = await runCli(['backup', 'restore', archive, '--recovery-key-stdin'], { dataDir: existing, stdin: recoveryKey, timeoutMs: 120_000 });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--yes');
    expect(treeDigest(existing)).toBe(digest);
    const ok = await runCli(['backup', 'restore', archive, '--recovery-key-stdin', '--yes'], { dataDir: existing, stdin: recoveryKey, timeoutMs: 120_000 });
    expect(ok.code, ok.stderr).toBe(0);
    const kept = /kept at (\S+)/.exec(ok.stdout)![1]!;
    expect(treeDigest(kept).length).toBe(64);
    readDataDirDb(kept, (db) => expect(db.prepare("SELECT COUNT(*) AS n FROM tenant_hosts WHERE host = 'keep.example'").get()).toEqual({ n: 1 }));
    readDataDirDb(existing, (db) => expect(db.prepare("SELECT COUNT(*) AS n FROM tenant_hosts WHERE host = 'keep.example'").get()).toEqual({ n: 0 }));
  });
});

/** The archive less its last chunk: every byte before it intact, so only the missing final flag tells. */
function cutAtLastChunk(b: Buffer): Buffer {
  let pos = 12 + b.readUInt32BE(8);
  let last = pos;
  while (pos < b.length) {
    last = pos;
    pos += 4 + (b.readUInt32BE(pos) & 0x7fffffff) + 16;
  }
  return b.subarray(0, last);
}

describe('the CLI: passphrase, list, schedule; secrets printed once', { timeout: 240_000 }, () => {
  it('backup create --passphrase-stdin; restore with it; the passphrase is never printed', async () => {
    const d = dir();
    expect((await runCli(['tenant', 'add', 'pp.example'], { dataDir: d })).code).toBe(0);
    const pass = 'correct horse battery staple';
    const made = await runCli(['backup', 'create', '--passphrase-stdin', '--to', path.join(d, 'out')], { dataDir: d, stdin: `${pass}\n` });
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout + made.stderr).not.toContain(pass);
    expect(made.stdout).not.toMatch(/Recovery key/);
    const master = fs.readFileSync(path.join(d, 'master.key'), 'utf8').trim();
    expect(made.stdout + made.stderr).not.toContain(master);
    const list = await runCli(['backup', 'list', '--to', path.join(d, 'out'), '--json'], { dataDir: d });
    const items = JSON.parse(list.stdout) as { name: string; state: string; protection: string; bytes: number }[];
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ state: 'complete', protection: 'passphrase' });
    const file = path.join(d, 'out', items[0]!.name);
    const wrong = await runCli(['backup', 'restore', file, '--passphrase-stdin'], { dataDir: path.join(dir(), 'x'), stdin: 'not the passphrase' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('wrong passphrase or recovery key');
    const target = path.join(dir(), 'y');
    const ok = await runCli(['backup', 'restore', file, '--passphrase-stdin'], { dataDir: target, stdin: `${pass}\n` });
    expect(ok.code, ok.stderr).toBe(0);
    readDataDirDb(target, (db) => expect(db.prepare("SELECT COUNT(*) AS n FROM tenant_hosts WHERE host = 'pp.example'").get()).toEqual({ n: 1 }));
  });

  it('backup create without a passphrase prints the recovery key exactly once', async () => {
    const d = dir();
    const made = await runCli(['backup', 'create'], { dataDir: d });
    expect(made.code, made.stderr).toBe(0);
    const keys = (made.stdout + made.stderr).match(/[A-Z2-7]{4}(?:-[A-Z2-7]{1,4}){12}/g) ?? [];
    expect(keys).toHaveLength(1);
    // Not in the audit row of the change either.
    readDataDirDb(d, (db) => {
      const rows = db.prepare("SELECT * FROM audit_log WHERE event LIKE 'cli-backup%'").all();
      expect(rows.length).toBe(1);
      expect(JSON.stringify(rows)).not.toContain(keys[0]);
    });
  });

  it('backup schedule sets, shows and clears; the next run is a job of the server', async () => {
    const d = dir();
    const set = await runCli(['backup', 'schedule', '--every', '24h', '--keep', '14', '--to', path.join(d, 'sched'), '--passphrase-stdin'], {
      dataDir: d,
      stdin: 'a schedule passphrase',
    });
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/backups every 24h, keeping 14/);
    const shown = await runCli(['backup', 'schedule', 'show', '--json'], { dataDir: d });
    const st = JSON.parse(shown.stdout) as { configured: boolean; schedule: { every: string; keep: number }; nextRun: string; health: string };
    expect(st).toMatchObject({ configured: true, schedule: { every: '24h', keep: 14 }, health: 'ok' });
    readDataDirDb(d, (db) => {
      const job = db.prepare("SELECT run_at FROM jobs WHERE queue = 'core.backup' AND state = 'pending'").get() as { run_at: number };
      expect(new Date(job.run_at).toISOString()).toBe(st.nextRun);
      // The key is stored sealed, never the passphrase.
      const all = JSON.stringify(db.prepare('SELECT * FROM settings').all());
      expect(all).not.toContain('a schedule passphrase');
    });
    const cleared = await runCli(['backup', 'schedule', 'clear'], { dataDir: d });
    expect(cleared.stdout).toContain('cleared');
    readDataDirDb(d, (db) => {
      expect(db.prepare("SELECT COUNT(*) AS n FROM jobs WHERE queue = 'core.backup' AND state = 'pending'").get()).toEqual({ n: 0 });
      expect(db.prepare("SELECT COUNT(*) AS n FROM settings WHERE key = 'secret:backup-key'").get()).toEqual({ n: 0 });
    });
    expect((await runCli(['backup', 'schedule', '--every', '10s', '--keep', '1'], { dataDir: d })).code).toBe(2);
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
