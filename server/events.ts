import { zodMessage } from './errors.ts';
import type { z } from 'zod';
import type { DB } from './store/db.ts';
import type { Clock } from './clock.ts';
import type { Logger } from './log.ts';

export interface AppEvent<T = Record<string, unknown>> {
  id: number;
  tenantId: string;
  name: string;
  data: T;
  /** ISO 8601 UTC. */
  ts: string;
}

/**
 * A passing state change for live views (`EventBus.notify`): never stored, never replayed, never
 * delivered to webhooks. For changes too frequent or too minor to be events of their own (a
 * webhook delivery's attempts); a view that missed some while disconnected reloads instead.
 */
export interface Notice {
  tenantId: string;
  /** A declared-style identifier (`plugin.thing`): it is written into an SSE frame. */
  name: string;
  data: Record<string, unknown>;
}

/**
 * A plugin's `events` with a one-line description each (the console's event picker and
 * `/openapi.json` `webhooks` show it): `text` must name every event, so a new event without its
 * line does not compile. Returns the same schemas, described.
 */
export function describeEvents<E extends Record<string, z.ZodType>>(text: { readonly [K in keyof E]: string }, events: E): E {
  return Object.fromEntries(Object.entries(events).map(([name, schema]) => [name, schema.describe(text[name]!)])) as E;
}

/** A declared event (EventBus.catalog). */
export interface DeclaredEvent {
  name: string;
  plugin: string;
  /** The data schema `emit` validates against. */
  schema: z.ZodType;
  description: string;
}

const NOTICE_NAME = /^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$/;

/**
 * A durable consumer. `handle` runs inside the same transaction that advances the consumer's
 * cursor, so what it writes (jobs, rows) and "this event was seen" commit together: a crash never
 * loses an event and never handles one twice. It must therefore be synchronous database work;
 * slow work goes into a job.
 */
export interface EventConsumer {
  name: string;
  /** Which events (names, or '*'). */
  events: string[] | '*';
  handle(ev: AppEvent): void;
  /** Where a consumer seen for the first time starts: 'now' (default) or 'beginning'. */
  from?: 'now' | 'beginning';
}

/**
 * The event bus: `emit` writes to the outbox table (call it inside the transaction that changes
 * state), a dispatcher hands new rows to durable consumers, and in-memory listeners are told
 * after commit for things that are fine to miss (live UI updates).
 */
export class EventBus {
  readonly #schemas = new Map<string, { plugin: string; schema: z.ZodType }>();
  readonly #consumers = new Map<string, EventConsumer>();
  readonly #listeners = new Set<(ev: AppEvent) => void>();
  readonly #noticeListeners = new Set<(n: Notice) => void>();
  #timer: NodeJS.Timeout | undefined;
  #started = false;
  #stopping = false;
  #scheduled = false;

  constructor(
    private readonly db: DB,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly pollMs = 500,
  ) {}

  declare(plugin: string, name: string, schema: z.ZodType): void {
    const prev = this.#schemas.get(name);
    if (prev && prev.plugin !== plugin) throw new Error(`event ${name} declared by both ${prev.plugin} and ${plugin}`);
    this.#schemas.set(name, { plugin, schema });
  }

  declared(): string[] {
    return [...this.#schemas.keys()].sort();
  }

  /**
   * Every declared event with its declaring plugin, data schema and description (the schema's
   * `.describe()`), sorted by name: the source of `/openapi.json`'s `webhooks` and of the event
   * names a webhook subscription may name.
   */
  catalog(): DeclaredEvent[] {
    return this.declared().map((name) => {
      const { plugin, schema } = this.#schemas.get(name)!;
      return { name, plugin, schema, description: schema.description ?? '' };
    });
  }

  /** Records an event. Validates against the declaring plugin's schema; unknown names are a bug. */
  emit(tenantId: string, name: string, data: Record<string, unknown>): number {
    const decl = this.#schemas.get(name);
    if (!decl) throw new Error(`event ${name} is not declared by any plugin`);
    // Bad event data is a bug in the emitting plugin, not bad client input: a plain Error (500),
    // never a ZodError that the error middleware would render as 400.
    const checked = decl.schema.safeParse(data);
    if (!checked.success) throw new Error(`event ${name}: invalid data: ${zodMessage(checked.error)}`);
    const parsed = checked.data as Record<string, unknown>;
    const r = this.db
      .prepare('INSERT INTO events (tenant_id, name, data, ts) VALUES (?, ?, ?, ?)')
      .run(tenantId, name, JSON.stringify(parsed), new Date(this.clock.now()).toISOString());
    this.wake();
    return Number(r.lastInsertRowid);
  }

  subscribe(c: EventConsumer): void {
    if (this.#consumers.has(c.name)) throw new Error(`event consumer ${c.name} registered twice`);
    this.#consumers.set(c.name, c);
    const start = c.from === 'beginning' ? 0 : this.maxId();
    this.db.prepare('INSERT OR IGNORE INTO event_consumers (name, last_id) VALUES (?, ?)').run(c.name, start);
    this.wake();
  }

  /** Non-durable listener, told after dispatch. Returns an unsubscribe function. */
  listen(fn: (ev: AppEvent) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /**
   * Tells live listeners of a passing change (see Notice). Synchronous and cheap when nobody
   * listens; call it inside the transaction that makes the change: the listeners only queue
   * bytes, and nothing can read the database before that synchronous transaction commits.
   */
  notify(tenantId: string, name: string, data: Record<string, unknown>): void {
    if (!this.#noticeListeners.size) return;
    if (!NOTICE_NAME.test(name)) throw new Error(`notice name ${JSON.stringify(name)} is not an identifier`);
    for (const l of this.#noticeListeners) {
      try {
        l({ tenantId, name, data });
      } catch (e) {
        this.log.warn({ err: e, notice: name }, 'notice listener failed');
      }
    }
  }

  /** Hears notices from now on. Returns an unsubscribe function. */
  onNotice(fn: (n: Notice) => void): () => void {
    this.#noticeListeners.add(fn);
    return () => this.#noticeListeners.delete(fn);
  }

  start(): void {
    this.#started = true;
    // Live listeners hear what happens from now on, not the history already in the table.
    if (this.#lastListened === -1) this.#lastListened = this.maxId();
    this.wake();
  }

  wake(): void {
    if (!this.#started || this.#stopping || this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.dispatch();
    });
  }

  private maxId(): number {
    return (this.db.prepare('SELECT COALESCE(MAX(id), 0) AS m FROM events').get() as { m: number }).m;
  }

  /** Hands every consumer its new events, in id order, a batch per transaction. */
  dispatch(): void {
    if (this.#timer) clearTimeout(this.#timer);
    let more = false;
    try {
      for (const c of this.#consumers.values()) {
        // One consumer failing (a poison event) must not hold back the others.
        try {
          more = this.dispatchTo(c, 200) || more;
          this.#failing.delete(c.name);
        } catch (e) {
          const msg = (e as Error)?.message ?? String(e);
          // Logged when it starts failing or the reason changes, not on every poll.
          if (this.#failing.get(c.name) !== msg) this.log.error({ err: e, consumer: c.name }, 'event consumer failed; will retry');
          this.#failing.set(c.name, msg);
        }
      }
      const maxId = this.maxId();
      if (this.#listeners.size && maxId > this.#lastListened) {
        const rows = this.db.prepare('SELECT * FROM events WHERE id > ? ORDER BY id LIMIT 500').all(this.#lastListened) as EventRow[];
        for (const r of rows) {
          this.#lastListened = r.id;
          const ev = toEvent(r);
          for (const l of this.#listeners) {
            try {
              l(ev);
            } catch (e) {
              this.log.warn({ err: e }, 'event listener failed');
            }
          }
        }
      } else if (!this.#listeners.size) {
        this.#lastListened = maxId;
      }
    } catch (e) {
      this.log.error({ err: e }, 'event dispatch failed');
    }
    if (this.#stopping) return;
    if (more) this.wake();
    this.#timer = setTimeout(() => this.dispatch(), this.pollMs);
    this.#timer.unref();
  }

  #lastListened = -1;
  readonly #failing = new Map<string, string>();

  private dispatchTo(c: EventConsumer, batch: number): boolean {
    const run = this.db.transaction(() => {
      const cur = (this.db.prepare('SELECT last_id FROM event_consumers WHERE name = ?').get(c.name) as { last_id: number }).last_id;
      const rows = this.db.prepare('SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?').all(cur, batch) as EventRow[];
      if (!rows.length) return false;
      for (const r of rows) {
        if (c.events === '*' || c.events.includes(r.name)) c.handle(toEvent(r));
      }
      this.db.prepare('UPDATE event_consumers SET last_id = ? WHERE name = ?').run(rows[rows.length - 1]!.id, c.name);
      return rows.length === batch;
    });
    return run.immediate();
  }

  stop(): void {
    this.#stopping = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  /** Deletes events every consumer has passed and that are older than `keepMs`. */
  prune(keepMs: number): number {
    const minCursor = (this.db.prepare('SELECT MIN(last_id) AS m FROM event_consumers').get() as { m: number | null }).m ?? this.maxId();
    const cutoff = new Date(this.clock.now() - keepMs).toISOString();
    return this.db.prepare('DELETE FROM events WHERE id <= ? AND ts < ?').run(minCursor, cutoff).changes;
  }
}

interface EventRow {
  id: number;
  tenant_id: string;
  name: string;
  data: string;
  ts: string;
}

function toEvent(r: EventRow): AppEvent {
  return { id: r.id, tenantId: r.tenant_id, name: r.name, data: JSON.parse(r.data) as Record<string, unknown>, ts: r.ts };
}
