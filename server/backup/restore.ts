import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { openCore } from '../core.ts';
import { hostServices, PluginHost } from '../plugin-host.ts';
import type { AnyPlugin } from '../plugin.ts';
import { ArchiveError, keyForHeader, openMasterKey, readChunks, readHeader, type ArchiveHeader } from './archive.ts';
import { DB_ENTRY, EntryReader } from './contents.ts';
import { syncDir } from './create.ts';

export interface ArchiveSecret {
  passphrase?: string;
  recoveryKey?: string;
}

export interface StagedRestore {
  /** A complete, verified, migrated data dir beside the target, not yet in its place. */
  dir: string;
  header: ArchiveHeader;
  files: number;
  /** Migrations the restored database needed to reach this appliance's schema (older archive). */
  migrated: string[];
}

/** What holds an appliance: anything in the folder but nothing at all (a fresh target is empty or absent). */
export function holdsData(dir: string): boolean {
  try {
    return fs.readdirSync(dir).length > 0;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

/**
 * Reads a whole archive into a new folder beside `target` (same file system, so the swap is a
 * rename), checking every chunk, the end mark, `PRAGMA integrity_check`, and then running the
 * normal migrations of the core and every plugin on the restored database. Nothing under
 * `target` is touched; on any failure the staging folder is deleted and the error says why.
 */
export async function stageRestore(file: string, target: string, secret: ArchiveSecret, plugins: AnyPlugin[]): Promise<StagedRestore> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(file, 'r');
  } catch (e) {
    throw new ArchiveError('not_an_archive', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const parent = path.dirname(path.resolve(target));
  fs.mkdirSync(parent, { recursive: true });
  const staging = path.join(parent, `.${path.basename(target)}.restore-${crypto.randomBytes(4).toString('hex')}`);
  let reader: EntryReader | undefined;
  try {
    const { header, aad, bodyAt } = await readHeader(fh);
    const key = await keyForHeader(header, secret);
    const master = openMasterKey(header, key);
    fs.mkdirSync(staging, { mode: 0o700 });
    reader = new EntryReader(staging);
    for await (const plain of readChunks(fh, header, aad, bodyAt, key)) reader.push(plain);
    reader.finish();
    if (reader.files[0] !== DB_ENTRY) throw new ArchiveError('damaged', 'archive without its database: damaged');
    fs.writeFileSync(path.join(staging, 'master.key'), master.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
    checkIntegrity(path.join(staging, DB_ENTRY));
    const migrated = migrateStaged(staging, master, plugins);
    return { dir: staging, header, files: reader.files.length, migrated };
  } catch (e) {
    reader?.abort();
    fs.rmSync(staging, { recursive: true, force: true });
    throw e;
  } finally {
    await fh.close();
  }
}

function checkIntegrity(dbFile: string): void {
  const db = new Database(dbFile, { readonly: true });
  try {
    const r = db.pragma('integrity_check', { simple: true });
    if (r !== 'ok') throw new ArchiveError('damaged', `the archived database fails integrity_check: ${String(r)}`);
  } finally {
    db.close();
  }
}

/** The normal start-up migrations, on the staged copy: an older archive comes forward here. */
function migrateStaged(dir: string, master: Buffer, plugins: AnyPlugin[]): string[] {
  const before = new Database(path.join(dir, DB_ENTRY), { readonly: true });
  let old: Map<string, number>;
  try {
    old = new Map(
      (before.prepare('SELECT plugin, version FROM schema_migrations').all() as { plugin: string; version: number }[]).map((r) => [
        `${r.plugin}/${r.version}`,
        1,
      ]),
    );
  } finally {
    before.close();
  }
  const core = openCore({ dataDir: dir, masterKey: master, overrides: { log: { level: 'silent' } } });
  try {
    const disabled = new Set(core.config.disabledPlugins);
    const host = new PluginHost(
      plugins.filter((p) => !disabled.has(p.name)),
      hostServices(core),
    );
    host.configure();
    host.migrateAll();
    const now = core.db.prepare('SELECT plugin, version, name FROM schema_migrations ORDER BY plugin, version').all() as {
      plugin: string;
      version: number;
      name: string;
    }[];
    core.db.pragma('wal_checkpoint(TRUNCATE)');
    return now.filter((r) => !old.has(`${r.plugin}/${r.version}`)).map((r) => `${r.plugin}/${r.name}`);
  } finally {
    core.db.close();
  }
}

/**
 * Puts a staged restore in place of `target`: a data dir already there is kept beside it as
 * `<target>.pre-restore-<time>` (renamed, not deleted: the operator removes it when satisfied).
 * Returns where the old one went, if anywhere.
 */
export function applyStaged(staged: StagedRestore, target: string, now: number): string | undefined {
  const abs = path.resolve(target);
  let kept: string | undefined;
  if (fs.existsSync(abs)) {
    if (holdsData(abs)) {
      kept = `${abs}.pre-restore-${new Date(now).toISOString().replace(/[-:]/g, '').slice(0, 15)}Z`;
      fs.renameSync(abs, kept);
    } else fs.rmdirSync(abs);
  }
  fs.renameSync(staged.dir, abs);
  syncDir(path.dirname(abs));
  return kept;
}

/** Where a restore staged from the console waits for the next start (inside the data dir, never archived). */
export function pendingRestoreDir(dataDir: string): string {
  return path.join(dataDir, 'restore', 'next');
}

/** Top-level names a pending restore leaves in place: its own folder and the archives. */
const KEEP_ON_SWAP = new Set(['restore', 'backups']);

/**
 * Applies a restore the console staged, at start before the store opens: the data dir's entries
 * move to `restore/previous-<time>/`, the staged ones into their place. A journal file
 * (`restore/applying`, naming the phase and the folder) makes it resumable: a crash in the middle
 * finishes the same moves at the following start. Returns the folder the old data went to.
 */
export function applyPendingRestore(dataDir: string, now: number): string | undefined {
  const next = pendingRestoreDir(dataDir);
  const journal = path.join(dataDir, 'restore', 'applying');
  let phase: { phase: 1 | 2; previous: string };
  if (fs.existsSync(journal)) phase = JSON.parse(fs.readFileSync(journal, 'utf8')) as { phase: 1 | 2; previous: string };
  else if (fs.existsSync(next)) {
    const previous = path.join(dataDir, 'restore', `previous-${new Date(now).toISOString().replace(/[-:]/g, '').slice(0, 15)}Z`);
    phase = { phase: 1, previous };
    writeJournal(journal, phase);
  } else return undefined;
  if (phase.phase === 1) {
    fs.mkdirSync(phase.previous, { recursive: true, mode: 0o700 });
    for (const n of fs.readdirSync(dataDir)) if (!KEEP_ON_SWAP.has(n)) fs.renameSync(path.join(dataDir, n), path.join(phase.previous, n));
    phase = { ...phase, phase: 2 };
    writeJournal(journal, phase);
  }
  if (fs.existsSync(next)) {
    for (const n of fs.readdirSync(next)) if (!KEEP_ON_SWAP.has(n)) fs.renameSync(path.join(next, n), path.join(dataDir, n));
    fs.rmSync(next, { recursive: true, force: true });
  }
  syncDir(dataDir);
  fs.rmSync(journal, { force: true });
  return phase.previous;
}

function writeJournal(file: string, v: unknown): void {
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(v), { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
  syncDir(path.dirname(file));
}
