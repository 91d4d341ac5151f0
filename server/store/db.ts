import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

export type DB = Database.Database;

export interface OpenStoreOptions {
  busyTimeoutMs?: number;
  readonly?: boolean;
}

/**
 * Opens `<data-dir>/appliance.db` with the settings the whole appliance relies on: WAL (readers
 * never block the writer, so the CLI can change data while the server runs), foreign keys,
 * a busy timeout, and synchronous=NORMAL (durable at each checkpoint, safe against corruption).
 */
export function openStore(dataDir: string, opts: OpenStoreOptions = {}): DB {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (!opts.readonly) restrictToOwner(dataDir, 0o700);
  const file = path.join(dataDir, 'appliance.db');
  const db = new Database(file, { readonly: opts.readonly ?? false });
  db.pragma(`busy_timeout = ${Math.max(0, Math.floor(opts.busyTimeoutMs ?? 5000))}`);
  if (!opts.readonly) db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = NORMAL');
  // SQLite creates its files with the process umask (often 0644): the store holds sealed secrets,
  // hashes and call records, so only the owner reads it, whatever the umask or an older install left.
  if (!opts.readonly) for (const f of [file, `${file}-wal`, `${file}-shm`]) restrictToOwner(f, 0o600);
  return db;
}

/**
 * Takes group and other permissions off a path this process owns (a data dir made by hand or by
 * an older version with 0755 left the database readable by every local user). A path owned by
 * someone else is left alone: `sovcomms doctor` reports it.
 */
export function restrictToOwner(p: string, mode: number): void {
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    return;
  }
  if ((st.mode & 0o077) === 0) return;
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) return;
  try {
    fs.chmodSync(p, mode);
  } catch {
    // A file system without modes (some mounts): doctor says so.
  }
}

/** Starts the periodic WAL checkpoint; returns a function that stops it. */
export function startCheckpoints(db: DB, everyMs: number, onError: (e: unknown) => void): () => void {
  const t = setInterval(() => {
    try {
      db.pragma('wal_checkpoint(PASSIVE)');
    } catch (e) {
      onError(e);
    }
  }, everyMs);
  t.unref();
  return () => clearInterval(t);
}

/** Runs `fn` inside an IMMEDIATE transaction (takes the write lock up front, no upgrade deadlock). */
export function tx<T>(db: DB, fn: () => T): T {
  return db.transaction(fn).immediate();
}
