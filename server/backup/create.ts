import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { DB } from '../store/db.ts';
import type { KeyService } from '../keys.ts';
import { ArchiveWriter, ARCHIVE_EXT, type BackupKey } from './archive.ts';
import type { CreateWorkerData, FromCreateWorker, SnapshotVia, ToCreateWorker } from './create-worker.ts';

export interface CreateInput {
  db: DB;
  dataDir: string;
  keys: KeyService;
  key: BackupKey;
  /** Folder the archive goes to (made 0700 when missing). */
  toDir: string;
  now: number;
  build: string;
  /** Only 'vacuum' forces the fallback snapshot (tests and the backup bench compare the two); the default tries the pages first. */
  snapshotVia?: SnapshotVia;
}

export interface CreatedArchive {
  file: string;
  name: string;
  bytes: number;
  files: number;
  ms: number;
  /** How the store's snapshot was taken (create-worker.ts): 'pages' normally, 'vacuum' when the writers never left a window. */
  via: SnapshotVia;
  /** Where the time went (ms): the thread's start and the snapshot, then the archive's body (copy, encryption, fsync). */
  phases: { snapshot: number; body: number };
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
 * A read-only descriptor on a store's file, opened once per process and file and never closed.
 * Closing any descriptor of a file drops every POSIX advisory lock this process holds on it
 * (fcntl semantics), SQLite's locks of the server's own connections included; so the backup
 * thread reads the store through this one, which stays open as long as the process does.
 */
const storeFds = new Map<string, { fd: number; ino: number; dev: number }>();
function storeFd(file: string): number {
  const abs = path.resolve(file);
  const st = fs.statSync(abs);
  const had = storeFds.get(abs);
  if (had && had.ino === st.ino && had.dev === st.dev) return had.fd;
  // A store replaced under the same name (a restore): the old descriptor is left open, never closed (see above).
  const fd = fs.openSync(abs, 'r');
  const now = fs.fstatSync(fd);
  storeFds.set(abs, { fd, ino: now.ino, dev: now.dev });
  return fd;
}

/**
 * One consistent archive of a running appliance: first a snapshot of the database in one read
 * transaction (its pages read from the store's file while that transaction holds them, or
 * `VACUUM INTO` the data dir's tmp/ as a fallback: create-worker.ts), then the data dir's files. Files
 * after the snapshot: a chat upload is renamed into place after its row commits, so every row in
 * the snapshot finds its file. Written to `<name>.part` and renamed when complete and synced: an
 * archive under its final name is always whole.
 *
 * The copying, encrypting and writing run on a thread of their own (create-worker.ts, with its
 * own connection to the store); this thread only wraps the master key into the header (the key
 * never leaves it) and renames the result. A backup of a gigabyte thus costs the server's
 * requests no turn of the event loop.
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
  const thread = new CreateThread({ dbFile: input.db.name, dbFd: storeFd(input.db.name), snapshot, via: input.snapshotVia });
  try {
    const { schema, via } = await thread.ask({ op: 'snapshot' }, 'snapshot');
    const snapshotAt = performance.now();
    const { head, body } = ArchiveWriter.head(input.key, { created: new Date(input.now).toISOString(), build: input.build, schema }, (k) =>
      input.keys.wrapFor(k),
    );
    const made = await thread.ask({ op: 'write', part, head, body, dataDir: input.dataDir, exclude: [input.toDir] }, 'written');
    fs.renameSync(part, final);
    syncDir(input.toDir);
    const end = performance.now();
    return {
      file: final,
      name,
      bytes: made.bytes,
      files: made.files,
      ms: end - started,
      via,
      phases: { snapshot: snapshotAt - started, body: end - snapshotAt },
    };
  } catch (e) {
    fs.rmSync(part, { force: true });
    throw e;
  } finally {
    // Not awaited: the answer is in, and the thread's teardown (its loader too, under tsx) is no
    // part of the backup's time. Its connection was closed once the store's pages were copied.
    thread.close().catch(() => undefined);
    fs.rmSync(snapshot, { force: true });
  }
}

/** A failure on the backup's thread, with the errno code it had there (ENOSPC, EACCES: reasonOf). */
class ThreadError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/** One backup's thread: a request, its answer, in turn. */
class CreateThread {
  readonly #w: Worker;
  #waiting: { want: string; resolve: (m: FromCreateWorker) => void; reject: (e: Error) => void } | undefined;
  #dead: Error | undefined;

  constructor(job: Omit<CreateWorkerData, 'entry'>) {
    const boot = new URL('../worker-boot.mjs', import.meta.url);
    const entry = new URL(`./create-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
    const data: CreateWorkerData = { entry, preload: ['better-sqlite3', 'zod'], ...job };
    this.#w = new Worker(boot, { workerData: data, name: 'backup' });
    this.#w.on('message', (m: FromCreateWorker) => {
      const w = this.#waiting;
      this.#waiting = undefined;
      if (!w) return;
      if ('error' in m) w.reject(new ThreadError(m.error, m.code));
      else if (m.ok !== w.want) w.reject(new Error(`the backup thread answered ${m.ok}, not ${w.want}`));
      else w.resolve(m);
    });
    const fail = (e: Error) => {
      this.#dead ??= e;
      this.#waiting?.reject(e);
      this.#waiting = undefined;
    };
    this.#w.on('error', fail);
    this.#w.on('exit', (code) => fail(new Error(`the backup thread exited (${code})`)));
  }

  ask<K extends 'snapshot' | 'written'>(m: ToCreateWorker, want: K): Promise<Extract<FromCreateWorker, { ok: K }>> {
    if (this.#dead) return Promise.reject(this.#dead);
    return new Promise((resolve, reject) => {
      this.#waiting = { want, resolve: resolve as (m: FromCreateWorker) => void, reject };
      this.#w.postMessage(m);
    });
  }

  async close(): Promise<void> {
    this.#dead ??= new Error('the backup thread was closed');
    await this.#w.terminate();
  }
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
