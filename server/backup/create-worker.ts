/**
 * The backup's own thread (createArchive in create.ts): a snapshot of the store through a
 * connection of its own, then the archive's body (the snapshot and the data dir's files, read in
 * chunks, encrypted and written) with blocking calls that hold up nothing but this thread. The
 * server's event loop only waits for the answer, so requests go on as before.
 *
 *   main → { op: 'snapshot' }                      ← { ok: 'snapshot', schema, via }
 *   main → { op: 'write', head, body, part, ... }  ← { ok: 'written', bytes, files }
 *   any failure                                    ← { error }
 */
import fs from 'node:fs';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { ArchiveWriter, writeAll, type ArchiveBodyKeys } from './archive.ts';
import { DB_ENTRY, entryHead, filesToArchive, KIND_END } from './contents.ts';
import { schemaVersions } from './create.ts';

export interface CreateWorkerData {
  entry: string;
  /** Loaded before the TypeScript loader (worker-boot.mjs). */
  preload?: string[];
  /** The live store (the server keeps writing it: WAL). */
  dbFile: string;
  /**
   * A descriptor on the live store's file, opened once per process by the caller and never closed
   * (create.ts: storeFd): read with pread when the snapshot is taken from the file itself.
   */
  dbFd: number;
  /** Where the fallback snapshot goes (made empty, 0600, by the caller). */
  snapshot: string;
  /** 'vacuum': the fallback at once (tests, the bench). */
  via?: SnapshotVia;
}

/** How the store's snapshot was taken: its pages read from the file under a held read transaction, or `VACUUM INTO` (the fallback). */
export type SnapshotVia = 'pages' | 'vacuum';

export type ToCreateWorker =
  | { op: 'snapshot' }
  | {
      op: 'write';
      part: string;
      head: Uint8Array;
      body: { stream: Uint8Array; prefix: Uint8Array; aad: Uint8Array; headBytes: number };
      dataDir: string;
      exclude: string[];
    };

export type FromCreateWorker =
  { ok: 'snapshot'; schema: Record<string, number>; via: SnapshotVia } | { ok: 'written'; bytes: number; files: number } | { error: string; code?: string };

const data = workerData as CreateWorkerData;
const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** The read transaction that holds the snapshot from the 'snapshot' answer until the store's pages are archived. */
let held: { db: Database.Database; bytes: number } | undefined;

/** Tries of the pages snapshot before the fallback, and the pause between two (a writer committed in the window). */
const PAGES_TRIES = 200;
const PAGES_PAUSE_MS = 5;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * The store's snapshot, by its pages: one read transaction on this thread's own connection, held
 * until the database entry is written, during which the store's file is read as it is, with no
 * second copy (what `sqlite3 .backup` costs: the database read once, written once).
 *
 * Why the file alone is the snapshot (WAL mode; SQLite's wal.c, walCheckpoint and walTryBeginRead):
 *  1. `PRAGMA data_version` (v1), then a PASSIVE checkpoint on this connection that reports every
 *     frame of the log copied back (log == checkpointed), then BEGIN and a read (the snapshot, at
 *     log frame M) and `data_version` again (v2). v1 == v2 means no connection committed between
 *     the two reads (a commit changes the WAL-index header, and this connection's next read
 *     transaction then resets its cache and counts a new data version), so M is the frame the
 *     checkpoint saw, and every frame up to M is in the database file: the file's pages 1..page_count
 *     are this snapshot.
 *  2. While the read transaction is open the file does not change: a checkpoint copies a frame
 *     back only up to the smallest read mark of a reader in slots 1-4 (ours is M, all copied
 *     already), and only with an exclusive lock on slot 0, which a reader of the file alone (slot
 *     0) holds shared; the log is restarted only when no reader holds slots 1-4 and all is copied
 *     back, which changes nothing in the file. Writers meanwhile only append to the log.
 *  Otherwise (v1 != v2, or frames not yet copied back because a reader of the server holds an
 *  older mark) it tries again after a pause, and after PAGES_TRIES falls back to `VACUUM INTO`.
 */
function snapshotPages(src: Database.Database): boolean {
  for (let i = 0; i < PAGES_TRIES; i++) {
    if (i) Atomics.wait(pause, 0, 0, PAGES_PAUSE_MS);
    const v1 = src.pragma('data_version', { simple: true }) as number;
    const [ck] = src.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
    if (!ck || ck.busy !== 0 || ck.log !== ck.checkpointed) continue;
    src.exec('BEGIN');
    const v2 = src.pragma('data_version', { simple: true }) as number;
    if (v2 === v1) {
      const pages = src.pragma('page_count', { simple: true }) as number;
      const size = src.pragma('page_size', { simple: true }) as number;
      held = { db: src, bytes: pages * size };
      return true;
    }
    src.exec('ROLLBACK');
  }
  return false;
}

/**
 * The fallback snapshot: `VACUUM INTO` on this thread's own connection, one read transaction
 * (WAL: the server's writes go on meanwhile, and every write acknowledged before it began is in
 * it), never restarted by those writes as a stepped online backup would be. It writes a compact,
 * complete database; with synchronous=OFF on this connection the scratch copy is never forced to
 * the disk, and is deleted once read into the archive.
 */
function snapshot(): { schema: Record<string, number>; via: SnapshotVia } {
  const src = new Database(data.dbFile, { fileMustExist: true });
  try {
    src.pragma('busy_timeout = 5000');
    if (data.via !== 'vacuum' && snapshotPages(src)) return { schema: schemaVersions(src), via: 'pages' };
    src.pragma('synchronous = OFF');
    src.prepare('VACUUM INTO ?').run(data.snapshot);
  } finally {
    if (!held) src.close();
  }
  const snap = new Database(data.snapshot, { readonly: true });
  try {
    return { schema: schemaVersions(snap), via: 'vacuum' };
  } finally {
    snap.close();
  }
}

/** The database entry from the held snapshot: the store's file, pages 1..page_count, read through the caller's descriptor. */
function copyHeld(w: ArchiveWriter, h: NonNullable<typeof held>): void {
  w.write(entryHead(DB_ENTRY, h.bytes));
  let at = 0;
  const got = w.fill(h.bytes, (buf, off, max) => {
    const n = fs.readSync(data.dbFd, buf, off, max, at);
    at += n;
    return n;
  });
  if (got < h.bytes) throw new Error(`${DB_ENTRY} is shorter than its snapshot's page count`);
}

function write(m: Extract<ToCreateWorker, { op: 'write' }>): { bytes: number; files: number } {
  const out = fs.openSync(m.part, 'wx', 0o600);
  try {
    writeAll(out, buf(m.head));
    const keys: ArchiveBodyKeys = { stream: buf(m.body.stream), prefix: buf(m.body.prefix), aad: buf(m.body.aad), headBytes: m.body.headBytes };
    const w = new ArchiveWriter(out, keys);
    const flusher = new EarlyWriteback(out);
    w.onWrite = (bytes) => flusher.wrote(bytes);
    if (held) {
      copyHeld(w, held);
      // The files come after the snapshot (create.ts); the store's writers never waited on it.
      held.db.exec('COMMIT');
      held.db.close();
      held = undefined;
    }
    // Unlinked once open: read through the descriptor, and gone with it even if this thread dies.
    else copyFile(w, data.snapshot, DB_ENTRY, () => fs.rmSync(data.snapshot, { force: true }));
    let files = 1;
    for (const rel of filesToArchive(m.dataDir, m.exclude)) if (copyFile(w, path.join(m.dataDir, ...rel.split('/')), rel)) files++;
    w.write(Buffer.from([KIND_END]));
    w.finish();
    fs.fsyncSync(out);
    return { bytes: w.bytes, files };
  } finally {
    fs.closeSync(out);
  }
}

/**
 * Appends one file as an entry, read through one descriptor up to the size it had when opened
 * (a file replaced meanwhile is read whole from the old inode), a chunk at a time. Gone since the
 * listing: skipped.
 */
function copyFile(w: ArchiveWriter, abs: string, rel: string, opened?: () => void): boolean {
  let fd: number;
  try {
    fd = fs.openSync(abs, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  try {
    opened?.();
    const size = fs.fstatSync(fd).size;
    w.write(entryHead(rel, size));
    let at = 0;
    const got = w.fill(size, (buf, off, max) => {
      const n = fs.readSync(fd, buf, off, max, at);
      at += n;
      return n;
    });
    if (got < size) throw new Error(`${rel} shrank while it was archived`);
    return true;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Starts the disk on the archive while this thread goes on encrypting: every WRITEBACK_BYTES an
 * fdatasync on the thread pool, not awaited (at most one at a time). Without it the kernel holds
 * the whole archive in the page cache and the final fsync writes a gigabyte after the CPU work,
 * instead of beside it.
 */
const WRITEBACK_BYTES = 64 * 1024 * 1024;
class EarlyWriteback {
  #since = 0;
  #busy = false;

  constructor(private readonly fd: number) {}

  wrote(bytes: number): void {
    this.#since += bytes;
    if (this.#since < WRITEBACK_BYTES || this.#busy) return;
    this.#since = 0;
    this.#busy = true;
    // Its outcome does not matter: the final fsyncSync reports any failure.
    fs.fdatasync(this.fd, () => (this.#busy = false));
  }
}

parentPort!.on('message', (m: ToCreateWorker) => {
  const reply = (r: FromCreateWorker) => parentPort!.postMessage(r);
  const fail = (e: unknown) => {
    const err = e as NodeJS.ErrnoException;
    // The errno shape survives the thread boundary, so reasonOf() still names code, call and path.
    reply({ error: err?.code && err.syscall ? `${err.code}: ${err.syscall} ${err.path ?? ''}`.trim() : (err?.message ?? String(e)), code: err?.code });
  };
  try {
    reply(m.op === 'snapshot' ? { ok: 'snapshot', ...snapshot() } : { ok: 'written', ...write(m) });
  } catch (e) {
    fail(e);
  }
});
