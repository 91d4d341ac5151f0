/**
 * The backup's own thread (createArchive in create.ts): a snapshot of the store through a
 * connection of its own, then the archive's body (the snapshot and the data dir's files, read in
 * chunks, encrypted and written) with blocking calls that hold up nothing but this thread. The
 * server's event loop only waits for the answer, so requests go on as before.
 *
 *   main → { op: 'snapshot' }                      ← { ok: 'snapshot', schema }
 *   main → { op: 'write', head, body, part, ... }  ← { ok: 'written', bytes, files }
 *   any failure                                    ← { error }
 */
import fs from 'node:fs';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { ArchiveWriter, CHUNK_BYTES, writeAll, type ArchiveBodyKeys } from './archive.ts';
import { DB_ENTRY, entryHead, filesToArchive, KIND_END } from './contents.ts';
import { schemaVersions } from './create.ts';

export interface CreateWorkerData {
  entry: string;
  /** The live store (the server keeps writing it: WAL). */
  dbFile: string;
  /** Where the snapshot goes (made empty, 0600, by the caller). */
  snapshot: string;
}

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
  { ok: 'snapshot'; schema: Record<string, number> } | { ok: 'written'; bytes: number; files: number } | { error: string; code?: string };

const data = workerData as CreateWorkerData;
const buf = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/**
 * The store's snapshot: `VACUUM INTO` on this thread's own connection, one read transaction (WAL:
 * the server's writes go on meanwhile, and every write acknowledged before it began is in it),
 * never restarted by those writes as a stepped online backup would be. It writes a compact,
 * complete database (rowids kept, free pages left out); with synchronous=OFF on this connection
 * the scratch copy is never forced to the disk: it lives in the page cache until the archive (the
 * one file that is synced) is written, and is deleted before the kernel would write it back, so
 * the disk sees the data once, as `sqlite3 .backup` writes it once.
 */
function snapshot(): Record<string, number> {
  const src = new Database(data.dbFile, { fileMustExist: true });
  try {
    src.pragma('busy_timeout = 5000');
    src.pragma('synchronous = OFF');
    src.prepare('VACUUM INTO ?').run(data.snapshot);
  } finally {
    src.close();
  }
  const snap = new Database(data.snapshot, { readonly: true });
  try {
    return schemaVersions(snap);
  } finally {
    snap.close();
  }
}

function write(m: Extract<ToCreateWorker, { op: 'write' }>): { bytes: number; files: number } {
  const out = fs.openSync(m.part, 'wx', 0o600);
  try {
    writeAll(out, buf(m.head));
    const keys: ArchiveBodyKeys = { stream: buf(m.body.stream), prefix: buf(m.body.prefix), aad: buf(m.body.aad), headBytes: m.body.headBytes };
    const w = new ArchiveWriter(out, keys);
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    const flusher = new EarlyWriteback(out);
    w.onWrite = (bytes) => flusher.wrote(bytes);
    // Unlinked once open: read through the descriptor, and gone with it even if this thread dies.
    copyFile(w, chunk, data.snapshot, DB_ENTRY, () => fs.rmSync(data.snapshot, { force: true }));
    let files = 1;
    for (const rel of filesToArchive(m.dataDir, m.exclude)) if (copyFile(w, chunk, path.join(m.dataDir, ...rel.split('/')), rel)) files++;
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
function copyFile(w: ArchiveWriter, chunk: Buffer, abs: string, rel: string, opened?: () => void): boolean {
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
    let done = 0;
    while (done < size) {
      const n = fs.readSync(fd, chunk, 0, Math.min(chunk.length, size - done), done);
      if (n === 0) throw new Error(`${rel} shrank while it was archived`);
      w.write(chunk.subarray(0, n));
      done += n;
    }
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
    reply(m.op === 'snapshot' ? { ok: 'snapshot', schema: snapshot() } : { ok: 'written', ...write(m) });
  } catch (e) {
    fail(e);
  }
});
