import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemClock, type Clock } from '../clock.ts';
import { MigrationError } from '../errors.ts';
import Database from 'better-sqlite3';
import type { DB } from './db.ts';

/** One numbered step of a plugin's schema. `sql` runs as a script; `up` for data migrations. */
export interface Migration {
  version: number;
  name: string;
  sql?: string;
  up?: (db: DB) => void;
}

/**
 * Lists `NNNN-name.sql` files from a plugin's `migrations/` folder beside its index.ts; a file is
 * read when its step runs (every plugin's module calls this as it loads, and on a store that is
 * up to date no step runs). Usage: `migrations: sqlMigrations(import.meta.url)`.
 */
export function sqlMigrations(moduleUrl: string, folder = 'migrations'): Migration[] {
  const dir = path.join(path.dirname(fileURLToPath(moduleUrl)), folder);
  let files: string[];
  try {
    files = fs.readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return files
    .filter((f) => /^\d{4}-[a-z0-9-]+\.sql$/.test(f))
    .sort()
    .map((f) => ({
      version: Number(f.slice(0, 4)),
      name: f.replace(/\.sql$/, ''),
      get sql() {
        return fs.readFileSync(path.join(dir, f), 'utf8');
      },
    }));
}

function ensureTable(db: DB): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    plugin TEXT NOT NULL,
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL,
    PRIMARY KEY (plugin, version)
  ) STRICT`);
}

/**
 * Each part's schema version in a data dir's store as it is on disk, read without changing
 * anything (the file opened read-only; none yet: an empty map). Read before a command opens the
 * store, whose opening applies what is pending: `sovcomms doctor` reports from it what was pending.
 */
export function schemaVersionsOnDisk(dataDir: string): Map<string, number> {
  const file = path.join(dataDir, 'appliance.db');
  const out = new Map<string, number>();
  if (!fs.existsSync(file)) return out;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
    if (!table) return out;
    for (const r of db.prepare('SELECT plugin, MAX(version) AS v FROM schema_migrations GROUP BY plugin').all() as { plugin: string; v: number }[])
      out.set(r.plugin, r.v);
    return out;
  } finally {
    db.close();
  }
}

export function appliedVersion(db: DB, plugin: string): number {
  ensureTable(db);
  const row = db.prepare('SELECT MAX(version) AS v FROM schema_migrations WHERE plugin = ?').get(plugin) as { v: number | null };
  return row.v ?? 0;
}

/**
 * Applies the pending migrations of one plugin, all in one transaction (Signal-Desktop's runner):
 * versions must be strictly increasing, a database already past the newest known version is
 * refused (it was written by a newer appliance), and a failing step rolls back every step of
 * this run and names itself.
 */
export function migrate(db: DB, plugin: string, migrations: Migration[], clock: Clock = systemClock): { applied: string[] } {
  ensureTable(db);
  let prev = 0;
  for (const m of migrations) {
    if (!Number.isInteger(m.version) || m.version <= prev) {
      throw new MigrationError(`${plugin}/${m.name}`, `version ${m.version} is not above ${prev}: versions must be monotonic`);
    }
    prev = m.version;
  }
  const newest = prev;
  const current = appliedVersion(db, plugin);
  if (current > newest) {
    throw new MigrationError(`${plugin}/${current}`, `the database is at version ${current}, newer than this appliance knows (${newest}); refusing to start`);
  }
  const pending = migrations.filter((m) => m.version > current);
  if (!pending.length) return { applied: [] };
  const record = db.prepare('INSERT INTO schema_migrations (plugin, version, name, applied_at) VALUES (?, ?, ?, ?)');
  const run = db.transaction(() => {
    for (const m of pending) {
      try {
        if (m.sql) db.exec(m.sql);
        m.up?.(db);
      } catch (e) {
        throw new MigrationError(`${plugin}/${m.name}`, (e as Error).message, { cause: e });
      }
      record.run(plugin, m.version, m.name, new Date(clock.now()).toISOString());
    }
  });
  run.immediate();
  return { applied: pending.map((m) => m.name) };
}
