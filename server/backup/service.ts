import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { DB } from '../store/db.ts';
import type { KeyService, SecretSettings } from '../keys.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { EventBus } from '../events.ts';
import type { JobQueue } from '../jobs.ts';
import type { TenantService } from '../tenancy.ts';
import type { AuditWriter } from '../plugin.ts';
import { BUILD } from '../build-info.ts';
import type { BackupKey, KdfParams } from './archive.ts';
import { ARCHIVE_EXT, ArchiveError } from './archive-error.ts';
import type { CreatedArchive } from './create.ts';

/** The job queue scheduled backups run on (the core's job runner). */
export const BACKUP_QUEUE = 'core.backup';
/** The webhook event of a failed backup, emitted for the primary tenant (its super-admins). */
export const BACKUP_FAILED = 'backup.failed';
export const backupFailedSchema = z
  .object({
    trigger: z.enum(['schedule', 'cli', 'api']).describe('what started it: the schedule, the CLI or the API'),
    target: z.string().describe('the folder the archive was to go to'),
    reason: z.string().describe('why it failed (paths and causes, never a secret)'),
    at: z.string().describe('when it failed (ISO 8601)'),
  })
  .describe('A backup of the appliance failed (scheduled, from the CLI or the API); sent to the primary tenant.');

export type BackupTrigger = 'schedule' | 'cli' | 'api';

export interface BackupSchedule {
  everyMs: number;
  keep: number;
  target: string;
  createdAt: number;
}

/**
 * The backup state, one shape for every reader: the dashboard and its setup checklist
 * (`GET /api.ashx/v1/backups/status`), `/readyz`, and `sovcomms doctor`.
 */
export interface BackupState {
  /** A schedule is set. */
  configured: boolean;
  schedule: { every: string; everyMs: number; keep: number; target: string } | null;
  /** Where `backup create` writes without --to. */
  defaultTarget: string;
  lastSuccess: { at: string; file: string; bytes: number; trigger: BackupTrigger } | null;
  lastFailure: { at: string; reason: string; trigger: BackupTrigger } | null;
  /** The next scheduled run (ISO), null without a schedule. */
  nextRun: string | null;
  /** 'ok', 'failing' (the last scheduled run failed), 'overdue' (no success within two periods), 'unconfigured'. */
  health: 'ok' | 'failing' | 'overdue' | 'unconfigured';
}

interface RunRow {
  trigger: BackupTrigger;
  target: string;
  started_at: number;
  finished_at: number;
  ok: 0 | 1;
  file: string | null;
  bytes: number | null;
  error: string | null;
}

/** `24h`, `30m`, `7d`, `90s` → ms; at least a minute. */
export function parseEvery(text: string): number {
  const m = /^(\d+)\s*(s|m|h|d)$/.exec(text.trim());
  if (!m) throw new Error(`"${text}" is not a period (e.g. 24h, 30m, 7d)`);
  const ms = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  if (ms < 60_000) throw new Error('backups run at most once a minute');
  return ms;
}

export function formatEvery(ms: number): string {
  // Hours up to two days (the operator's "24h" stays "24h"), days beyond.
  if (ms % 3_600_000 === 0 && ms < 2 * 86_400_000) return `${ms / 3_600_000}h`;
  for (const [u, n] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
  ] as const)
    if (ms % n === 0) return `${ms / n}${u}`;
  return `${Math.round(ms / 1000)}s`;
}

export function defaultTarget(dataDir: string): string {
  return path.join(dataDir, 'backups');
}

/**
 * The backup state from the database: the one function the dashboard, /readyz and `doctor` read
 * (whichever process made the backups: the server's job, the CLI).
 */
export function readBackupState(db: DB, dataDir: string, now: number): BackupState {
  const s = readSchedule(db);
  const last = (ok: 0 | 1) => db.prepare('SELECT * FROM backup_runs WHERE ok = ? ORDER BY finished_at DESC, id DESC LIMIT 1').get(ok) as RunRow | undefined;
  const success = last(1);
  const failure = last(0);
  const next = s ? nextRunAt(db, s) : null;
  let health: BackupState['health'] = 'unconfigured';
  if (s) {
    const lastSched = db.prepare("SELECT ok FROM backup_runs WHERE trigger = 'schedule' ORDER BY finished_at DESC, id DESC LIMIT 1").get() as
      { ok: 0 | 1 } | undefined;
    const since = success?.finished_at ?? s.createdAt;
    health = lastSched?.ok === 0 ? 'failing' : now - since > 2 * s.everyMs + 60_000 ? 'overdue' : 'ok';
  }
  return {
    configured: !!s,
    schedule: s ? { every: formatEvery(s.everyMs), everyMs: s.everyMs, keep: s.keep, target: s.target } : null,
    defaultTarget: defaultTarget(dataDir),
    lastSuccess: success ? { at: iso(success.finished_at), file: success.file ?? '', bytes: success.bytes ?? 0, trigger: success.trigger } : null,
    lastFailure: failure ? { at: iso(failure.finished_at), reason: failure.error ?? 'unknown', trigger: failure.trigger } : null,
    nextRun: next === null ? null : iso(next),
    health,
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function readSchedule(db: DB): BackupSchedule | undefined {
  const r = db.prepare('SELECT every_ms, keep, target, created_at FROM backup_schedule WHERE id = 1').get() as
    { every_ms: number; keep: number; target: string; created_at: number } | undefined;
  return r ? { everyMs: r.every_ms, keep: r.keep, target: r.target, createdAt: r.created_at } : undefined;
}

/** The next scheduled run: a period after the last scheduled run began, or after the schedule was set. */
function nextRunAt(db: DB, s: BackupSchedule): number {
  const r = db.prepare("SELECT MAX(started_at) AS t FROM backup_runs WHERE trigger = 'schedule' AND started_at >= ?").get(s.createdAt) as { t: number | null };
  return (r.t ?? s.createdAt) + s.everyMs;
}

export interface ArchiveListing {
  name: string;
  file: string;
  bytes: number;
  /** When it was made (from its header), else the file's time. */
  created: string;
  /** complete: a whole archive; partial: being written or left by a crash; unreadable: not an archive of ours. */
  state: 'complete' | 'partial' | 'unreadable';
  protection: 'passphrase' | 'recovery-key' | null;
  schema: Record<string, number> | null;
}

/** The archives in a folder, newest first, each with its time, size and state. */
export async function listArchives(dir: string): Promise<ArchiveListing[]> {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const out: ArchiveListing[] = [];
  for (const name of names) {
    if (!name.endsWith(ARCHIVE_EXT) && !name.endsWith(`${ARCHIVE_EXT}.part`)) continue;
    const file = path.join(dir, name);
    const st = fs.statSync(file);
    if (!st.isFile()) continue;
    const base = { name, file, bytes: st.size, created: st.mtime.toISOString() };
    if (name.endsWith('.part')) {
      out.push({ ...base, state: 'partial', protection: null, schema: null });
      continue;
    }
    const fh = await fsp.open(file, 'r');
    try {
      // The archive reader is loaded by the first listing: few commands and starts read an archive.
      const { readHeader } = await import('./archive.ts');
      const { header } = await readHeader(fh);
      out.push({
        ...base,
        created: header.created,
        state: 'complete',
        protection: header.kdf.alg === 'scrypt' ? 'passphrase' : 'recovery-key',
        schema: header.schema,
      });
    } catch (e) {
      if (!(e instanceof ArchiveError)) throw e;
      out.push({ ...base, state: 'unreadable', protection: null, schema: null });
    } finally {
      await fh.close();
    }
  }
  return out.sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : a.name < b.name ? 1 : -1));
}

export interface BackupDeps {
  db: DB;
  dataDir: string;
  keys: KeyService;
  secrets: SecretSettings;
  clock: Clock;
  log: Logger;
  events: EventBus;
  jobs: JobQueue;
  tenants: TenantService;
  audit: AuditWriter;
}

const SECRET_NAME = 'backup-key';
const storedKeySchema = z.object({ kdf: z.unknown(), key: z.string() });

/**
 * Backups of this appliance: made on demand (CLI, console) or by the schedule on the core's job
 * runner, recorded in `backup_runs`, and pruned to the schedule's `keep`. A failure is an audit
 * row and a `backup.failed` event of the primary tenant (webhooks), besides the run's row.
 */
export class BackupService {
  #running: Promise<CreatedArchive> | undefined;

  constructor(private readonly d: BackupDeps) {}

  state(): BackupState {
    return readBackupState(this.d.db, this.d.dataDir, this.d.clock.now());
  }

  schedule(): BackupSchedule | undefined {
    return readSchedule(this.d.db);
  }

  /** Sets the schedule and the key its archives are made with (sealed with the master key). */
  setSchedule(s: { everyMs: number; keep: number; target: string }, key: BackupKey): void {
    const now = this.d.clock.now();
    this.d.db.transaction(() => {
      this.d.db
        .prepare(
          `INSERT INTO backup_schedule (id, every_ms, keep, target, created_at) VALUES (1, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET every_ms = excluded.every_ms, keep = excluded.keep, target = excluded.target, created_at = excluded.created_at`,
        )
        .run(s.everyMs, s.keep, path.resolve(s.target), now);
      this.d.secrets.set(SECRET_NAME, JSON.stringify({ kdf: key.kdf, key: key.key.toString('base64') }));
      this.cancelPending();
      this.ensureNext();
    })();
  }

  clearSchedule(): boolean {
    return this.d.db.transaction(() => {
      const had = this.d.db.prepare('DELETE FROM backup_schedule WHERE id = 1').run().changes > 0;
      this.d.db.prepare("DELETE FROM settings WHERE key = 'secret:' || ?").run(SECRET_NAME);
      this.cancelPending();
      return had;
    })();
  }

  private cancelPending(): void {
    this.d.db.prepare("UPDATE jobs SET state = 'cancelled', finished_at = ? WHERE queue = ? AND state = 'pending'").run(this.d.clock.now(), BACKUP_QUEUE);
  }

  /** Enqueues the next scheduled run (idempotent: one job per due time). */
  ensureNext(): void {
    const s = readSchedule(this.d.db);
    if (!s) return;
    const due = nextRunAt(this.d.db, s);
    // The schedule's own time in the key: a schedule set again gets new jobs, not its cancelled ones.
    this.d.jobs.enqueue(BACKUP_QUEUE, { due }, { runAt: due, dedupeKey: `backup-${s.createdAt}-${due}`, maxAttempts: 1 });
  }

  /** The key scheduled archives (and console backups without a passphrase) are made with. */
  storedKey(): BackupKey | undefined {
    const raw = this.d.secrets.get(SECRET_NAME);
    if (!raw) return undefined;
    const v = storedKeySchema.parse(JSON.parse(raw));
    return { kdf: v.kdf as KdfParams, key: Buffer.from(v.key, 'base64') };
  }

  /**
   * Makes one archive and records the run. One at a time per process: a second request while one
   * runs waits for it and fails with a clear reason rather than copying the store twice at once.
   */
  async create(o: { key: BackupKey; to?: string; trigger: BackupTrigger }): Promise<CreatedArchive> {
    if (this.#running) throw new ArchiveError('unsupported', 'a backup is already running in this process');
    const target = path.resolve(o.to ?? this.schedule()?.target ?? defaultTarget(this.d.dataDir));
    const started = this.d.clock.now();
    // The writer (and its worker thread) is loaded by the first backup: every CLI command and
    // every start builds this service, few of them make an archive.
    const p = import('./create.ts').then(({ createArchive }) =>
      createArchive({
        db: this.d.db,
        dataDir: this.d.dataDir,
        keys: this.d.keys,
        key: o.key,
        toDir: target,
        now: started,
        build: BUILD,
      }),
    );
    this.#running = p;
    try {
      const made = await p;
      this.record({ trigger: o.trigger, target, started, ok: true, file: made.name, bytes: made.bytes });
      // The CLI says so itself; the server's log keeps the record of its own (scheduled, console) backups.
      if (o.trigger !== 'cli') this.d.log.info({ backup: made.name, bytes: made.bytes, ms: Math.round(made.ms), trigger: o.trigger }, 'backup made');
      return made;
    } catch (e) {
      this.failed(o.trigger, target, started, e);
      throw e;
    } finally {
      this.#running = undefined;
    }
  }

  private record(r: { trigger: BackupTrigger; target: string; started: number; ok: boolean; file?: string; bytes?: number; error?: string }): void {
    this.d.db
      .prepare('INSERT INTO backup_runs (trigger, target, started_at, finished_at, ok, file, bytes, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
      .run(r.trigger, r.target, r.started, this.d.clock.now(), r.ok ? 1 : 0, r.file ?? null, r.bytes ?? null, r.error ?? null);
  }

  /** A failed backup: its run row, an audit row and the `backup.failed` event, in one transaction. */
  private failed(trigger: BackupTrigger, target: string, started: number, e: unknown): void {
    const reason = reasonOf(e);
    this.d.log.error({ trigger, target, reason }, 'backup failed');
    try {
      this.d.db.transaction(() => {
        this.record({ trigger, target, started, ok: false, error: reason });
        const primary = this.d.tenants.primary();
        if (primary) {
          this.d.events.emit(primary.id, BACKUP_FAILED, { trigger, target, reason, at: iso(this.d.clock.now()) });
          this.d.audit.write(primary, {
            event: 'backup-failed',
            user: trigger === 'schedule' ? 'system' : trigger,
            extra: { target, reason: reason.slice(0, 200) },
          });
        }
      })();
    } catch (err) {
      this.d.log.error({ err }, 'backup failure not recorded');
    }
  }

  /** The scheduled job: make an archive with the stored key, prune to `keep`, enqueue the next. */
  async runScheduled(): Promise<void> {
    const s = this.schedule();
    if (!s) return;
    try {
      const key = this.storedKey();
      if (!key) {
        this.failed('schedule', s.target, this.d.clock.now(), new Error('the schedule has no key (set it again with sovcomms backup schedule)'));
        return;
      }
      try {
        await this.create({ key, to: s.target, trigger: 'schedule' });
      } catch {
        return; // recorded by create
      }
      this.prune(s);
    } finally {
      this.ensureNext();
    }
  }

  /** Retention: the newest `keep` complete archives of the target stay; older ones and stale partials go. */
  prune(s: { keep: number; target: string }): string[] {
    const removed: string[] = [];
    let names: string[];
    try {
      names = fs.readdirSync(s.target);
    } catch {
      return removed;
    }
    // Only names this appliance gives its archives: a folder shared with other files keeps them.
    const ours = names.filter((n) => /^sovcomms-\d{8}-\d{6}Z-[0-9a-f]{4}\.sovbak$/.test(n)).sort();
    for (const n of ours.slice(0, Math.max(0, ours.length - s.keep))) {
      fs.rmSync(path.join(s.target, n), { force: true });
      removed.push(n);
    }
    if (removed.length) this.d.log.info({ removed: removed.length, keep: s.keep }, 'old backups removed');
    return removed;
  }
}

/** A failure's reason for the operator: the cause, never a secret (archives hold none in clear). */
export function reasonOf(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err?.code && err.syscall) return `${err.code}: ${err.syscall} ${err.path ?? ''}`.trim();
  return (err?.message ?? String(e)).slice(0, 500);
}
