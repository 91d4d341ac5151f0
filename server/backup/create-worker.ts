/**
 * The backup's own thread (createArchive in create.ts): the online backup of the store through a
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
 * SQLite's online backup API on this thread's connection, all pages in one step: one read
 * snapshot of the store (WAL: the server's writes go on meanwhile, and every write acknowledged
 * before it began is in it), never restarted by those writes.
 */
async function snapshot(): Promise<Record<string, number>> {
  const src = new Database(data.dbFile, { fileMustExist: true });
  try {
    src.pragma('busy_timeout = 5000');
    await src.backup(data.snapshot, { progress: () => 0x7fffffff });
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
    copyFile(w, chunk, data.snapshot, DB_ENTRY);
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
function copyFile(w: ArchiveWriter, chunk: Buffer, abs: string, rel: string): boolean {
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

parentPort!.on('message', (m: ToCreateWorker) => {
  const reply = (r: FromCreateWorker) => parentPort!.postMessage(r);
  const fail = (e: unknown) => {
    const err = e as NodeJS.ErrnoException;
    // The errno shape survives the thread boundary, so reasonOf() still names code, call and path.
    reply({ error: err?.code && err.syscall ? `${err.code}: ${err.syscall} ${err.path ?? ''}`.trim() : (err?.message ?? String(e)), code: err?.code });
  };
  if (m.op === 'snapshot') snapshot().then((schema) => reply({ ok: 'snapshot', schema }), fail);
  else {
    try {
      reply({ ok: 'written', ...write(m) });
    } catch (e) {
      fail(e);
    }
  }
});
