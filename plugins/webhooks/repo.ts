import type Database from 'better-sqlite3';
import type { DB, Tenant } from '../../server/sdk.ts';
export interface SubscriptionRow {
  id: string;
  tenant_id: string;
  url: string;
  events: string;
  active: number;
  secret_sealed: string;
  created_at: string;
  created_by: string;
  last_fired_at: string | null;
  failures: number;
}

export type DeliveryState = 'queued' | 'pending' | 'delivered' | 'failed' | 'skipped';

export interface DeliveryRow {
  id: string;
  tenant_id: string;
  subscription_id: string;
  event_id: number;
  event: string;
  payload: string;
  state: DeliveryState;
  attempts: number;
  created_at: string;
  next_try_at: string | null;
  last_status: number | null;
  last_error: string | null;
  finished_at: string | null;
  job_id: number | null;
}

export interface AttemptRow {
  delivery_id: string;
  attempt: number;
  started_at: string;
  duration_ms: number;
  status: number | null;
  error: string | null;
  next_try_at: string | null;
}

/**
 * SQL of the webhooks plugin. Methods that serve a tenant's request take the Tenant first; the
 * delivery job and the event fan-out work by id on rows they found through a tenant-scoped row.
 */
// Positional parameters of any type: each call site binds its own columns.
type Statement = Database.Statement;

export class WebhookRepo {
  readonly #stmts = new Map<string, Statement>();

  constructor(readonly db: DB) {}

  /** Prepared once per SQL text: compiling a statement costs more than running these ones. */
  private q(sql: string): Statement {
    let s = this.#stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.#stmts.set(sql, s);
    }
    return s;
  }

  // ---- subscriptions (tenant-scoped) -------------------------------------------------------

  insert(tenant: Tenant, r: Omit<SubscriptionRow, 'tenant_id' | 'active' | 'last_fired_at' | 'failures'>): void {
    this.q('INSERT INTO webhook_subscriptions (id, tenant_id, url, events, secret_sealed, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      r.id,
      tenant.id,
      r.url,
      r.events,
      r.secret_sealed,
      r.created_at,
      r.created_by,
    );
  }

  get(tenant: Tenant, id: string): SubscriptionRow | undefined {
    return this.q('SELECT * FROM webhook_subscriptions WHERE tenant_id = ? AND id = ?').get(tenant.id, id) as SubscriptionRow | undefined;
  }

  list(tenant: Tenant, page?: { limit: number; offset: number }): { rows: SubscriptionRow[]; total: number } {
    const total = (this.q('SELECT COUNT(*) AS n FROM webhook_subscriptions WHERE tenant_id = ?').get(tenant.id) as { n: number }).n;
    const rows = this.q('SELECT * FROM webhook_subscriptions WHERE tenant_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?').all(
      tenant.id,
      page?.limit ?? -1,
      page?.offset ?? 0,
    ) as SubscriptionRow[];
    return { rows, total };
  }

  /** Changes the receiver URL and the events; the secret, state and delivery log stay. */
  update(tenant: Tenant, id: string, r: Pick<SubscriptionRow, 'url' | 'events'>): boolean {
    return this.q('UPDATE webhook_subscriptions SET url = ?, events = ? WHERE tenant_id = ? AND id = ?').run(r.url, r.events, tenant.id, id).changes > 0;
  }

  count(tenant: Tenant): number {
    return (this.q('SELECT COUNT(*) AS n FROM webhook_subscriptions WHERE tenant_id = ?').get(tenant.id) as { n: number }).n;
  }

  remove(tenant: Tenant, id: string): boolean {
    return this.q('DELETE FROM webhook_subscriptions WHERE tenant_id = ? AND id = ?').run(tenant.id, id).changes > 0;
  }

  pause(tenant: Tenant, id: string): boolean {
    return this.q('UPDATE webhook_subscriptions SET active = 0 WHERE tenant_id = ? AND id = ?').run(tenant.id, id).changes > 0;
  }

  resume(tenant: Tenant, id: string): boolean {
    return this.q('UPDATE webhook_subscriptions SET active = 1, failures = 0 WHERE tenant_id = ? AND id = ?').run(tenant.id, id).changes > 0;
  }

  /** Active subscriptions of the event's own tenant, for the fan-out. */
  activeFor(tenantId: string): SubscriptionRow[] {
    return this.q('SELECT * FROM webhook_subscriptions WHERE tenant_id = ? AND active = 1').all(tenantId) as SubscriptionRow[];
  }

  // ---- delivery state (by id, inside the job) ------------------------------------------------

  subscriptionById(id: string): SubscriptionRow | undefined {
    return this.q('SELECT * FROM webhook_subscriptions WHERE id = ?').get(id) as SubscriptionRow | undefined;
  }

  /** The delivery and what sending it needs of its subscription, in one read. */
  deliveryForSend(id: string): (DeliveryRow & { url: string; active: number; secret_sealed: string }) | undefined {
    return this.q(
      `SELECT d.*, s.url, s.active, s.secret_sealed FROM webhook_deliveries d
          JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE d.id = ?`,
    ).get(id) as (DeliveryRow & { url: string; active: number; secret_sealed: string }) | undefined;
  }

  delivery(id: string): DeliveryRow | undefined {
    return this.q('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as DeliveryRow | undefined;
  }

  deliveryOf(tenant: Tenant, id: string): DeliveryRow | undefined {
    return this.q('SELECT * FROM webhook_deliveries WHERE tenant_id = ? AND id = ?').get(tenant.id, id) as DeliveryRow | undefined;
  }

  insertDelivery(r: Pick<DeliveryRow, 'id' | 'tenant_id' | 'subscription_id' | 'event_id' | 'event' | 'payload' | 'created_at'>): void {
    this.q(
      "INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, event_id, event, payload, state, created_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)",
    ).run(r.id, r.tenant_id, r.subscription_id, r.event_id, r.event, r.payload, r.created_at);
  }

  admittedCount(subscriptionId: string): number {
    return (this.q("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE subscription_id = ? AND state = 'pending'").get(subscriptionId) as { n: number }).n;
  }

  oldestQueued(subscriptionId: string, n: number): { id: string }[] {
    return this.q("SELECT id FROM webhook_deliveries WHERE subscription_id = ? AND state = 'queued' ORDER BY created_at, rowid LIMIT ?").all(
      subscriptionId,
      n,
    ) as { id: string }[];
  }

  /** Subscriptions with queued deliveries: the start-up sweep admits what a crash left waiting. */
  subscriptionsWithQueued(): string[] {
    return (
      this.q(
        "SELECT DISTINCT d.subscription_id AS id FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE d.state = 'queued' AND s.active = 1",
      ).all() as { id: string }[]
    ).map((r) => r.id);
  }

  markPending(id: string, jobId: number, nextTry: string | null): void {
    this.q("UPDATE webhook_deliveries SET state = 'pending', job_id = ?, next_try_at = ?, finished_at = NULL WHERE id = ?").run(jobId, nextTry, id);
  }

  /**
   * One attempt's outcome: the delivery row first (only while it is still pending; false when it
   * was removed or finished meanwhile, and then nothing is written), then the attempt log row.
   * `final` also ends the delivery in the same statement.
   */
  recordAttempt(a: AttemptRow, final?: { state: 'delivered' | 'failed'; at: string }): boolean {
    const changed = this.q(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = ?, last_error = ?, next_try_at = ?,
            state = COALESCE(?, state), finished_at = COALESCE(?, finished_at) WHERE id = ? AND state = 'pending'`,
    ).run(a.status, a.error, a.next_try_at, final?.state ?? null, final?.at ?? null, a.delivery_id).changes;
    if (!changed) return false;
    this.q('INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status, error, next_try_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      a.delivery_id,
      a.attempt,
      a.started_at,
      a.duration_ms,
      a.status,
      a.error,
      a.next_try_at,
    );
    return true;
  }

  finishDelivery(id: string, state: 'delivered' | 'failed' | 'skipped', at: string, error?: string): void {
    this.q(
      "UPDATE webhook_deliveries SET state = ?, finished_at = ?, next_try_at = NULL, last_error = COALESCE(?, last_error) WHERE id = ? AND state IN ('queued', 'pending')",
    ).run(state, at, error ?? null, id);
  }

  /** Paused or 410: what was still waiting is skipped (visible in the log, redeliverable). */
  skipQueued(subscriptionId: string, at: string, reason: string): void {
    this.q("UPDATE webhook_deliveries SET state = 'skipped', finished_at = ?, last_error = ? WHERE subscription_id = ? AND state = 'queued'").run(
      at,
      reason,
      subscriptionId,
    );
  }

  /** A success: tally reset, lastFiredUtc set. Returns whether the subscription is (still) active. */
  succeeded(subscriptionId: string, at: string): boolean {
    const r = this.q('UPDATE webhook_subscriptions SET failures = 0, last_fired_at = ? WHERE id = ? RETURNING active').get(at, subscriptionId) as
      { active: number } | undefined;
    return r?.active === 1;
  }

  /**
   * One more failed delivery, counted only while active, so the tally stops at exactly `limit`
   * even when several deliveries fail at once. Returns true when this call paused it.
   */
  failed(subscriptionId: string, limit: number): boolean {
    const r = this.q(
      'UPDATE webhook_subscriptions SET failures = failures + 1, active = CASE WHEN failures + 1 >= ? THEN 0 ELSE 1 END WHERE id = ? AND active = 1 RETURNING active',
    ).get(limit, subscriptionId) as { active: number } | undefined;
    return r !== undefined && r.active === 0;
  }

  /** 410 Gone: the receiver asked us to stop. */
  disable(subscriptionId: string): void {
    this.q('UPDATE webhook_subscriptions SET active = 0, failures = failures + 1 WHERE id = ? AND active = 1').run(subscriptionId);
  }

  // ---- delivery log (tenant-scoped) --------------------------------------------------------

  deliveries(tenant: Tenant, subscriptionId: string, page: { limit: number; offset: number }): { rows: DeliveryRow[]; total: number } {
    const total = (
      this.q('SELECT COUNT(*) AS n FROM webhook_deliveries WHERE tenant_id = ? AND subscription_id = ?').get(tenant.id, subscriptionId) as { n: number }
    ).n;
    const rows = this.q(
      'SELECT * FROM webhook_deliveries WHERE tenant_id = ? AND subscription_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?',
    ).all(tenant.id, subscriptionId, page.limit, page.offset) as DeliveryRow[];
    return { rows, total };
  }

  attempts(deliveryIds: string[]): AttemptRow[] {
    if (!deliveryIds.length) return [];
    // Not cached: the IN list's length varies with the page.
    return this.db
      .prepare(
        `SELECT delivery_id, attempt, started_at, duration_ms, status, error, next_try_at FROM webhook_attempts
                WHERE delivery_id IN (${deliveryIds.map(() => '?').join(',')}) ORDER BY id`,
      )
      .all(...deliveryIds) as AttemptRow[];
  }

  prune(beforeIso: string): number {
    return this.q("DELETE FROM webhook_deliveries WHERE state IN ('delivered', 'failed', 'skipped') AND finished_at < ?").run(beforeIso).changes;
  }

  /** Deliveries waiting by state, and paused subscriptions (for /readyz and `doctor`). */
  health(): { backlog: Record<string, number>; pausedSubscriptions: number } {
    const counts = this.db.prepare("SELECT state, COUNT(*) AS n FROM webhook_deliveries WHERE state IN ('queued', 'pending') GROUP BY state").all() as {
      state: string;
      n: number;
    }[];
    const paused = (this.db.prepare('SELECT COUNT(*) AS n FROM webhook_subscriptions WHERE active = 0').get() as { n: number }).n;
    return { backlog: Object.fromEntries(counts.map((c) => [c.state, c.n])), pausedSubscriptions: paused };
  }
}
