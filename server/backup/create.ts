import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { DB } from '../store/db.ts';
import type { KeyService } from '../keys.ts';
import { ArchiveWriter, ARCHIVE_EXT, CHUNK_BYTES, type BackupKey } from './archive.ts';
import { DB_ENTRY, entryHead, filesToArchive, KIND_END } from './contents.ts';

export interface CreateInput {
  db: DB;
  dataDir: string;
  keys: KeyService;
  key: BackupKey;
  /** Folder the archive goes to (made 0700 when missing). */
  toDir: string;
  now: number;
  build: string;
  /**
   * Pages per step of the online backup. In the server a few thousand (each step is a short
   * synchronous copy, requests run between steps, and writes by the server's own connection
   * reach the copy as they happen); 'all' in a CLI process, where one step holds one read
   * snapshot (WAL: the server keeps writing) instead of restarting at each write of another
   * connection.
   */
  stepPages: number | 'all';
}

export interface CreatedArchive {
  file: string;
  name: string;
  bytes: number;
  files: number;
  ms: number;
}

/** `sovcomms-20261128-064500Z-1a2b.sovbak`: sorts by time; the suffix keeps two in a second apart. */
export function archiveName(now: number): string {
  const t = new Date(now).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `sovcomms-${t}Z-${crypto.randomBytes(2).toString('hex')}${ARCHIVE_EXT}`;
}

/** Schema version of the core and of each plugin in a database (the archive's header records them). */
export function schemaVersions(db: DB): Record<string, number> {
  const rows = db.prepare('SELECT plugin, MAX(version) AS v FROM schema_migrations GROUP BY plugin ORDER BY plugin').all() as { plugin: string; v: number }[];
  return Object.fromEntries(rows.map((r) => [r.plugin, r.v]));
}

/**
 * One consistent archive of a running appliance: first a snapshot of the database through
 * SQLite's online backup API (into the data dir's tmp/, 0600), then the data dir's files. Files
 * after the snapshot: a chat upload is renamed into place after its row commits, so every row in
 * the snapshot finds its file. Written to `<name>.part` and renamed when complete and synced: an
 * archive under its final name is always whole.
 */
export async function createArchive(input: CreateInput): Promise<CreatedArchive> {
  const started = performance.now();
  fs.mkdirSync(input.toDir, { recursive: true, mode: 0o700 });
  const scratch = path.join(input.dataDir, 'tmp');
  fs.mkdirSync(scratch, { recursive: true, mode: 0o700 });
  const snapshot = path.join(scratch, `backup-${crypto.randomBytes(6).toString('hex')}.db`);
  const name = archiveName(input.now);
  const final = path.join(input.toDir, name);
  const part = `${final}.part`;
  // The copy holds every secret the store holds (sealed) and every hash: owner only, from birth.
  fs.closeSync(fs.openSync(snapshot, 'wx', 0o600));
  let out: number | undefined;
  try {
    const step = input.stepPages === 'all' ? 0x7fffffff : input.stepPages;
    await input.db.backup(snapshot, { progress: () => step });
    let schema: Record<string, number>;
    const snap = new Database(snapshot, { readonly: true });
    try {
      schema = schemaVersions(snap);
    } finally {
      snap.close();
    }
    out = fs.openSync(part, 'wx', 0o600);
    const w = ArchiveWriter.open(out, input.key, { created: new Date(input.now).toISOString(), build: input.build, schema }, (k) => input.keys.wrapFor(k));
    await copyFile(w, snapshot, DB_ENTRY);
    const files = filesToArchive(input.dataDir, [input.toDir]);
    let count = 1;
    for (const rel of files) if (await copyFile(w, path.join(input.dataDir, ...rel.split('/')), rel)) count++;
    w.write(Buffer.from([KIND_END]));
    w.finish();
    fs.fsyncSync(out);
    fs.closeSync(out);
    out = undefined;
    fs.renameSync(part, final);
    syncDir(input.toDir);
    return { file: final, name, bytes: w.bytes, files: count, ms: performance.now() - started };
  } catch (e) {
    if (out !== undefined) fs.closeSync(out);
    fs.rmSync(part, { force: true });
    throw e;
  } finally {
    fs.rmSync(snapshot, { force: true });
  }
}

/**
 * Appends one file as an entry, read through one descriptor up to the size it had when opened
 * (a file replaced meanwhile is read whole from the old inode). Gone since the listing: skipped.
 */
async function copyFile(w: ArchiveWriter, abs: string, rel: string): Promise<boolean> {
  let fd: number;
  try {
    fd = fs.openSync(abs, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  try {
    const size = fs.fstatSync(fd).size;
    w.write(entryHead(rel, size));
    const buf = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, Math.max(size, 1)));
    let done = 0;
    while (done < size) {
      const n = fs.readSync(fd, buf, 0, Math.min(buf.length, size - done), done);
      if (n === 0) throw new Error(`${rel} shrank while it was archived`);
      w.write(buf.subarray(0, n));
      done += n;
      await maybeYield(n);
    }
    await maybeYield(256);
    return true;
  } finally {
    fs.closeSync(fd);
  }
}

/** Bytes copied and encrypted between two turns of the event loop (many small files count too). */
const YIELD_BYTES = 4 * CHUNK_BYTES;
let sinceYield = 0;

/** A few megabytes (a few milliseconds) per turn of the loop, then requests run. */
async function maybeYield(bytes: number): Promise<void> {
  sinceYield += bytes;
  if (sinceYield < YIELD_BYTES) return;
  sinceYield = 0;
  await new Promise<void>((r) => setImmediate(r));
}

/** Makes a rename durable (POSIX: the directory entry is data of the directory). */
export function syncDir(dir: string): void {
  try {
    const fd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Some file systems refuse fsync on a directory; the rename itself still happened.
  }
}
