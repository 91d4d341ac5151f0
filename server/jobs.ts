import crypto from 'node:crypto';
import type { z } from 'zod';
import { zodMessage } from './errors.ts';
import type { DB } from './store/db.ts';
import type { Clock } from './clock.ts';
import type { Logger } from './log.ts';
import type { Statement } from 'better-sqlite3';

/**
 * One durable job queue over the `jobs` table (the Signal-Desktop JobQueue idea): every queue
 * declares its payload schema, how to run a job and how often to try. Jobs are leased with an
 * expiry, so a crashed runner's work is picked up again; a finished job is never run again.
 * Delivery is at-least-once: a handler whose effect must not repeat makes it idempotent (a
 * dedupe key, or a state check inside its own transaction).
 */
export interface JobDefinition<T> {
  /** The queue's name (unique per appliance; stored with every job). */
  name: string;
  /** The payload's schema: a job whose data does not match fails at once with the reason (never a cast). */
  schema: z.ZodType<T>;
  run(job: RunningJob<T>): Promise<void>;
  maxAttempts?: number;
  /** Delay before attempt `n + 1` after `n` failed attempts (default exponential, 1 s .. 1 h). */
  backoffMs?(attempt: number): number;
  /** How many jobs of this queue run at once in this process (default 4). */
  concurrency?: number;
  leaseMs?: number;
}

export interface RunningJob<T> {
  id: number;
  queue: string;
  tenantId: string | null;
  data: T;
  /** 1 for the first attempt. */
  attempt: number;
  maxAttempts: number;
  dedupeKey: string | null;
  signal: AbortSignal;
  /**
   * Optional: marks the job done inside the caller's own (open) transaction, the one that
   * records the job's effect, so the queue does not commit a separate "done" after `run`
   * returns (one commit per job less; the webhooks plugin measured that commit as its largest
   * per-delivery cost). Call it at most once, and only from a `run` that then returns normally;
   * if that transaction rolls back, `run` must throw (the queue then retries as usual).
   */
  complete?(): void;
}

export interface EnqueueOptions {
  tenantId?: string | null;
  runAt?: number;
  /** Unique per queue: enqueueing an existing key returns the existing job (idempotent). */
  dedupeKey?: string;
  maxAttempts?: number;
}

/** Throw from `run` to try again at a chosen time (e.g. a receiver's Retry-After). */
export class RetryAt extends Error {
  constructor(
    readonly at: number,
    message = 'retry requested',
  ) {
    super(message);
  }
}

/** Throw from `run` to stop retrying at once. */
export class PermanentFailure extends Error {}

export interface JobRow {
  id: number;
  queue: string;
  tenant_id: string | null;
  dedupe_key: string | null;
  data: string;
  state: string;
  run_at: number;
  attempts: number;
  max_attempts: number;
  lease_owner: string | null;
  lease_until: number | null;
  last_error: string | null;
  created_at: number;
  finished_at: number | null;
}

export class JobQueue {
  readonly #defs = new Map<string, JobDefinition<unknown>>();
  readonly #running = new Map<string, Set<Promise<void>>>();
  readonly #aborts = new Set<AbortController>();
  /** Ids this process is running now: never claimed again beside themselves (lease expiry). */
  readonly #runningIds = new Set<number>();
  #timer: NodeJS.Timeout | undefined;
  #started = false;
  #stopping = false;
  #polling = false;
  #repoll = false;
  readonly owner: string;

  constructor(
    private readonly db: DB,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly opts: { pollMs: number; leaseMs: number; nodeId: string },
  ) {
    this.owner = `${opts.nodeId}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`;
  }

  readonly #stmts = new Map<string, Statement>();

  /** Statements are prepared once: the queue runs them for every job. */
  private stmt(sql: string): Statement {
    let st = this.#stmts.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.#stmts.set(sql, st);
    }
    return st;
  }

  define<T>(def: JobDefinition<T>): void {
    if (this.#defs.has(def.name)) throw new Error(`job queue ${def.name} defined twice`);
    this.#defs.set(def.name, def as JobDefinition<unknown>);
    this.#running.set(def.name, new Set());
    if (this.#started) this.kick();
  }

  /** Inserts a job; call inside the caller's transaction to make state change and job atomic. */
  enqueue(queue: string, data: unknown, o: EnqueueOptions = {}): number {
    const now = this.clock.now();
    const def = this.#defs.get(queue);
    const maxAttempts = o.maxAttempts ?? def?.maxAttempts ?? 5;
    if (o.dedupeKey) {
      const existing = this.stmt('SELECT id FROM jobs WHERE queue = ? AND dedupe_key = ?').get(queue, o.dedupeKey) as { id: number } | undefined;
      if (existing) return existing.id;
    }
    // ON CONFLICT: another process may insert the same key between the check above and here.
    const r = this.stmt(
      `INSERT INTO jobs (queue, tenant_id, dedupe_key, data, run_at, max_attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                         ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING`,
    ).run(queue, o.tenantId ?? null, o.dedupeKey ?? null, JSON.stringify(data), o.runAt ?? now, maxAttempts, now);
    if (r.changes === 0 && o.dedupeKey) {
      return (this.stmt('SELECT id FROM jobs WHERE queue = ? AND dedupe_key = ?').get(queue, o.dedupeKey) as { id: number }).id;
    }
    if (this.#started) queueMicrotask(() => this.kick());
    return Number(r.lastInsertRowid);
  }

  /** Cancels a pending job by dedupe key (scheduled calls); a running job is left to finish. */
  cancel(queue: string, dedupeKey: string): boolean {
    const r = this.stmt("UPDATE jobs SET state = 'cancelled', finished_at = ? WHERE queue = ? AND dedupe_key = ? AND state = 'pending'").run(
      this.clock.now(),
      queue,
      dedupeKey,
    );
    return r.changes > 0;
  }

  /** Moves a pending job to a new time (e.g. reschedule). */
  reschedule(queue: string, dedupeKey: string, runAt: number): boolean {
    return this.stmt("UPDATE jobs SET run_at = ? WHERE queue = ? AND dedupe_key = ? AND state = 'pending'").run(runAt, queue, dedupeKey).changes > 0;
  }

  get(id: number): JobRow | undefined {
    return this.stmt('SELECT * FROM jobs WHERE id = ?').get(id) as JobRow | undefined;
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    // Jobs this node leased before a crash or kill are ours to run again now, not after the lease.
    this.stmt("UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_until = NULL WHERE state = 'running' AND lease_owner LIKE ?").run(
      `${this.opts.nodeId}:%`,
    );
    this.schedule(0);
  }

  /** Polls now (after enqueue, or when a test advanced its clock). */
  kick(): void {
    if (!this.#started || this.#stopping) return;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.poll(), ms);
    this.#timer.unref();
  }

  private async poll(): Promise<void> {
    if (this.#polling) {
      this.#repoll = true;
      return;
    }
    this.#polling = true;
    try {
      do {
        this.#repoll = false;
        this.claimAndRun();
      } while (this.#repoll && !this.#stopping);
    } catch (e) {
      this.log.error({ err: e }, 'job poll failed');
    } finally {
      this.#polling = false;
      if (!this.#stopping) this.schedule(this.nextDelay());
    }
  }

  private nextDelay(): number {
    const row = this.stmt("SELECT MIN(run_at) AS t FROM jobs WHERE state = 'pending'").get() as { t: number | null };
    if (row.t == null) return this.opts.pollMs;
    return Math.max(10, Math.min(this.opts.pollMs, row.t - this.clock.now()));
  }

  private claimAndRun(): void {
    const now = this.clock.now();
    for (const [queue, def] of this.#defs) {
      const running = this.#running.get(queue)!;
      const free = (def.concurrency ?? 4) - running.size;
      if (free <= 0) continue;
      const lease = def.leaseMs ?? this.opts.leaseMs;
      const rows = this.stmt(
        `UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = ?, lease_until = ?
           WHERE id IN (SELECT id FROM jobs WHERE queue = ? AND
                          ((state = 'pending' AND run_at <= ?) OR (state = 'running' AND lease_until < ?))
                          AND id NOT IN (SELECT value FROM json_each(?))
                        ORDER BY run_at, id LIMIT ?)
           RETURNING *`,
      ).all(this.owner, now + lease, queue, now, now, JSON.stringify([...this.#runningIds]), free) as JobRow[];
      for (const row of rows) {
        const p = this.runOne(def, row).finally(() => {
          running.delete(p);
          this.kick();
        });
        running.add(p);
      }
    }
  }

  private async runOne(def: JobDefinition<unknown>, row: JobRow): Promise<void> {
    const ac = new AbortController();
    this.#aborts.add(ac);
    this.#runningIds.add(row.id);
    // Heartbeat: a job may run longer than its lease; renewing it keeps other runners from taking
    // over a job that is alive (the lease only expires when its runner is gone).
    const lease = def.leaseMs ?? this.opts.leaseMs;
    const heartbeat = setInterval(
      () => {
        try {
          this.stmt("UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_owner = ? AND state = 'running'").run(this.clock.now() + lease, row.id, this.owner);
        } catch (e) {
          this.log.warn({ err: e, job: row.id }, 'job lease renewal failed');
        }
      },
      Math.max(50, Math.floor(lease / 3)),
    );
    heartbeat.unref();
    try {
      let raw: unknown;
      try {
        raw = JSON.parse(row.data);
      } catch (e) {
        this.finish(row, 'failed', `bad job data: ${(e as Error).message}`);
        return;
      }
      const parsed = def.schema.safeParse(raw);
      if (!parsed.success) {
        this.finish(row, 'failed', `bad job data: ${zodMessage(parsed.error)}`);
        this.log.warn({ queue: row.queue, job: row.id, error: zodMessage(parsed.error) }, 'job data does not match its schema');
        return;
      }
      const data = parsed.data;
      let completed = false;
      await def.run({
        id: row.id,
        queue: row.queue,
        tenantId: row.tenant_id,
        data,
        attempt: row.attempts,
        maxAttempts: row.max_attempts,
        dedupeKey: row.dedupe_key,
        signal: ac.signal,
        complete: () => {
          this.finish(row, 'done', null);
          completed = true;
        },
      });
      if (!completed) this.finish(row, 'done', null);
    } catch (e) {
      const msg = (e as Error)?.message ?? String(e);
      if (e instanceof PermanentFailure || row.attempts >= row.max_attempts) {
        this.finish(row, 'failed', msg);
        this.log.warn({ queue: row.queue, job: row.id, attempt: row.attempts, error: msg }, 'job failed for good');
      } else {
        const at = e instanceof RetryAt ? e.at : this.clock.now() + (def.backoffMs?.(row.attempts) ?? defaultBackoff(row.attempts));
        this.stmt("UPDATE jobs SET state = 'pending', run_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?").run(
          at,
          msg.slice(0, 2000),
          row.id,
          this.owner,
        );
        this.log.debug({ queue: row.queue, job: row.id, attempt: row.attempts, error: msg }, 'job will retry');
      }
    } finally {
      clearInterval(heartbeat);
      this.#runningIds.delete(row.id);
      this.#aborts.delete(ac);
    }
  }

  private finish(row: JobRow, state: 'done' | 'failed', error: string | null): void {
    this.stmt('UPDATE jobs SET state = ?, finished_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?').run(
      state,
      this.clock.now(),
      error?.slice(0, 2000) ?? null,
      row.id,
      this.owner,
    );
  }

  /** Stops claiming, waits up to `drainMs` for running jobs, then aborts the rest (they are re-run later). */
  async shutdown(drainMs = 5000): Promise<void> {
    this.#stopping = true;
    if (this.#timer) clearTimeout(this.#timer);
    const all = [...this.#running.values()].flatMap((s) => [...s]);
    if (!all.length) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((r) => {
      timer = setTimeout(r, drainMs);
    });
    await Promise.race([Promise.allSettled(all), timeout]);
    clearTimeout(timer);
    for (const ac of this.#aborts) ac.abort(new Error('shutting down'));
    await Promise.race([Promise.allSettled(all), new Promise((r) => setTimeout(r, 1000))]);
    // Whatever is still leased by us goes back to pending: it runs again at the next start.
    this.stmt("UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_until = NULL WHERE state = 'running' AND lease_owner = ?").run(this.owner);
  }

  /** Housekeeping: drop finished jobs older than `keepMs`. */
  prune(keepMs: number): number {
    return this.stmt("DELETE FROM jobs WHERE state IN ('done', 'failed', 'cancelled') AND finished_at < ?").run(this.clock.now() - keepMs).changes;
  }
}

function defaultBackoff(attempt: number): number {
  return Math.min(3_600_000, 1000 * 2 ** Math.min(attempt, 12));
}
