import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDataDirDb, runCli } from '../support/cli.ts';
import { scratchDirs } from '../support/cleanup.ts';
import { openCore, type CoreServices } from '../../server/core.ts';
import { builtinPlugins } from '../../plugins/index.ts';
import { type ArchiveError, CHUNK_BYTES, keyFromRecoveryKey, newRecoveryKey } from '../../server/backup/archive.ts';
import { createArchive, type CreatedArchive } from '../../server/backup/create.ts';
import { stageRestore } from '../../server/backup/restore.ts';
import type { SnapshotVia } from '../../server/backup/create-worker.ts';

/**
 * The store's snapshot by its pages (create-worker.ts: the file itself under a held read
 * transaction, once a checkpoint left nothing in the log): made while this thread keeps
 * committing pairs of rows (WAL, autocheckpoints running), the restored database holds every
 * pair acknowledged before the backup began, only whole pairs, ids without a gap, and passes
 * `integrity_check`; the same for the fallback (`VACUUM INTO`, what the previous code always
 * wrote). An archive written by the previous code (commit e64c54d, a committed fixture) restores
 * through the CLI; a changed or cut archive of the new snapshot is refused and stages nothing.
 */
const dir = scratchDirs('sovcomms-backup-pages-');
const FIXTURE = path.resolve(import.meta.dirname, '../fixtures/backup/v1-vacuum-e64c54d.sovbak');
const BULK_ROWS = 3000;
let dataDir: string;
let core: CoreServices;
const recoveryKey = newRecoveryKey();
const key = keyFromRecoveryKey(recoveryKey);
const made = new Map<SnapshotVia, CreatedArchive & { acked: number }>();

beforeAll(() => {
  dataDir = dir();
  core = openCore({ dataDir, env: {}, overrides: { log: { level: 'silent' } } });
  core.db.exec('CREATE TABLE pair_a (id INTEGER PRIMARY KEY, v BLOB NOT NULL); CREATE TABLE pair_b (id INTEGER PRIMARY KEY, a INTEGER NOT NULL)');
  core.db.exec('CREATE TABLE bulk (id INTEGER PRIMARY KEY, v BLOB NOT NULL)');
  // ~25 MB, so the copy spans many chunks and the writers below commit while it runs.
  const ins = core.db.prepare('INSERT INTO bulk (v) VALUES (?)');
  core.db.transaction(() => {
    for (let i = 0; i < BULK_ROWS; i++) ins.run(crypto.randomBytes(8192));
  })();
  fs.mkdirSync(path.join(dataDir, 'tenants', 'x'), { recursive: true });
  fs.writeFileSync(path.join(dataDir, 'tenants', 'x', 'note.bin'), crypto.randomBytes(3 * CHUNK_BYTES + 17));
}, 60_000);
afterAll(() => {
  core?.db.close();
});

/** Commits a pair (a row in each table, one transaction) every millisecond or so until `stop`; `acked()` counts the committed ones. */
function writeLoad(): { stop: () => Promise<void>; acked: () => number } {
  let stopped = false;
  let acked = 0;
  const insA = core.db.prepare('INSERT INTO pair_a (v) VALUES (?)');
  const insB = core.db.prepare('INSERT INTO pair_b (a) VALUES (?)');
  const pair = core.db.transaction(() => insB.run(insA.run(crypto.randomBytes(6000)).lastInsertRowid));
  const loop = (async () => {
    while (!stopped) {
      pair();
      acked++;
      await sleep(1);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
    acked: () => acked,
  };
}

async function restore(file: string): Promise<string> {
  const target = path.join(dir(), 'restored');
  const staged = await stageRestore(file, target, { recoveryKey }, await builtinPlugins());
  return staged.dir;
}

function checkRestored(restored: string, acked: number): void {
  readDataDirDb(restored, (db) => {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const a = db.prepare('SELECT COUNT(*) AS n, COALESCE(MAX(id), 0) AS max FROM pair_a').get() as { n: number; max: number };
    const b = db.prepare('SELECT COUNT(*) AS n FROM pair_b WHERE a IN (SELECT id FROM pair_a)').get() as { n: number };
    // Every pair acknowledged before the backup began; whole pairs only; no gap (one moment's state).
    expect(a.n).toBeGreaterThanOrEqual(acked);
    expect(a.max).toBe(a.n);
    expect(b.n).toBe(a.n);
    expect((db.prepare('SELECT COUNT(*) AS n FROM pair_b').get() as { n: number }).n).toBe(a.n);
    expect((db.prepare('SELECT COUNT(*) AS n FROM bulk').get() as { n: number }).n).toBe(BULK_ROWS);
  });
  expect(fs.readFileSync(path.join(restored, 'tenants', 'x', 'note.bin')).equals(fs.readFileSync(path.join(dataDir, 'tenants', 'x', 'note.bin')))).toBe(true);
}

describe('a backup while this thread keeps writing, restored', { timeout: 120_000 }, () => {
  for (const via of ['pages', 'vacuum'] as const) {
    it(`${via === 'pages' ? 'the pages snapshot' : 'the fallback, VACUUM INTO'}: every acknowledged pair, whole, integrity_check ok`, async () => {
      const load = writeLoad();
      await sleep(50);
      const acked = load.acked();
      expect(acked).toBeGreaterThan(0);
      let m: CreatedArchive;
      try {
        m = await createArchive({
          db: core.db,
          dataDir,
          keys: core.keys,
          key,
          toDir: path.join(dir(), 'out'),
          now: Date.now(),
          build: 'test',
          snapshotVia: via === 'vacuum' ? 'vacuum' : undefined,
        });
      } finally {
        await load.stop();
      }
      expect(m.via).toBe(via);
      // Writes went on during the backup (the writers never waited for it).
      expect(load.acked()).toBeGreaterThan(acked);
      made.set(via, { ...m, acked });
      checkRestored(await restore(m.file), acked);
    });
  }
});

describe('an archive of the previous code (e64c54d, VACUUM INTO snapshot) restores', { timeout: 120_000 }, () => {
  it('through the CLI, with its passphrase: tenant, user and file there, integrity_check ok', async () => {
    const target = path.join(dir(), 'from-fixture');
    const r = await runCli(['backup', 'restore', FIXTURE, '--passphrase-stdin'], { dataDir: target, stdin: 'fixture passphrase v1\n', timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    readDataDirDb(target, (db) => {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(db.prepare("SELECT COUNT(*) AS n FROM users WHERE name = 'fixture-user'").get()).toEqual({ n: 1 });
      expect(db.prepare("SELECT COUNT(*) AS n FROM tenant_hosts WHERE host = 'fixture.example'").get()).toEqual({ n: 1 });
    });
    expect(fs.readFileSync(path.join(target, 'tenants', 'x', 'fixture-note.txt'), 'utf8')).toBe('a file of the previous format\n');
  });
});

describe('a changed or cut archive of the pages snapshot is refused, nothing staged', { timeout: 120_000 }, () => {
  const cases: [string, (b: Buffer) => Buffer, ArchiveError['code']][] = [
    [
      'a flipped byte inside the database entry',
      (b) => {
        b[Math.floor(b.length / 3)]! ^= 0x40;
        return b;
      },
      'damaged',
    ],
    ['cut in the middle', (b) => b.subarray(0, Math.floor(b.length / 2)), 'truncated'],
    ['cut after a whole chunk', (b) => b.subarray(0, cutAtChunk(b)), 'truncated'],
  ];
  for (const [name, mutate, code] of cases)
    it(name, async () => {
      const m = made.get('pages');
      expect(m).toBeDefined();
      const f = path.join(dir(), 'changed.sovbak');
      fs.writeFileSync(f, mutate(Buffer.from(fs.readFileSync(m!.file))));
      const target = path.join(dir(), 'target');
      await expect(restore(f)).rejects.toMatchObject({ code });
      expect(fs.existsSync(target)).toBe(false);
      expect(fs.readdirSync(path.dirname(target)).filter((n) => n.includes('.restore-'))).toEqual([]);
    });
});

/** The offset just after the archive's second chunk (header, then chunk := u32 length | ciphertext | tag). */
function cutAtChunk(b: Buffer): number {
  let pos = 12 + b.readUInt32BE(8);
  for (let i = 0; i < 2; i++) pos += 4 + (b.readUInt32BE(pos) & 0x7fff_ffff) + 16;
  return pos;
}
