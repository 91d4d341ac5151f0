import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import {
  AppError,
  type AppEvent,
  BUILD,
  type Clock,
  ConflictError,
  type EventBus,
  InputError,
  type JobQueue,
  type KeyService,
  type Logger,
  NotFoundError,
  PermanentFailure,
  RetryAt,
  type RunningJob,
  type Tenant,
  type TenantService,
} from '../../server/sdk.ts';
import { cachingResolver, mergePolicy, refusal, systemResolver, type NetworkPolicy, type Resolver } from './net-policy.ts';
import type { DeliveryRow, SubscriptionRow, WebhookRepo } from './repo.ts';
import type { DeliveryItem, SubscriptionItem, WebhooksConfig } from './schemas.ts';
import type { OutboundAnswer } from './api.ts';
import { exchange, newSecret, retryAfterMs, send } from './sender.ts';

export const QUEUE = 'webhook-delivery';
/** Spec "Limits": 4 attempts, retries after 5 s, 30 s, 120 s. */
export const MAX_ATTEMPTS = 4;
export const BACKOFF_MS = [5_000, 30_000, 120_000] as const;
/** Spec "States and transitions / Webhook subscription": paused after 20 consecutive failures. */
export const AUTO_PAUSE_AFTER = 20;
export const TEST_EVENT = 'webhook.test';
/** The live-feed notice of a changed delivery row (see `changed`). */
export const DELIVERY_NOTICE = 'webhook.delivery';

/** A declared event as a subscriber sees it (GET /api.ashx/v1/webhooks/events). */
export interface EventInfo {
  name: string;
  plugin: string;
  description: string;
}

/** Whether a subscription's entry (an event name, or `*` for every event) covers this event. */
export function eventMatches(pattern: string, name: string): boolean {
  return pattern === '*' || pattern === name;
}

export function backoffMs(failedAttempt: number): number {
  return BACKOFF_MS[Math.min(Math.max(failedAttempt, 1), BACKOFF_MS.length) - 1]!;
}

export interface WebhookDeps {
  repo: WebhookRepo;
  keys: KeyService;
  clock: Clock;
  events: EventBus;
  jobs: JobQueue;
  tenants: TenantService;
  log: Logger;
  config: WebhooksConfig;
  /** DNS for the address check; tests swap in a fixed table. */
  resolve?: Resolver;
  /** Trusted CAs for https receivers (Node's roots plus `caFile`), when `caFile` is set. */
  ca?: string[];
}

const iso = (ms: number) => new Date(ms).toISOString();
const sealAad = (id: string) => `webhook:${id}`;

export function toItem(r: SubscriptionRow): SubscriptionItem {
  return {
    id: r.id,
    url: r.url,
    events: JSON.parse(r.events) as string[],
    active: r.active === 1,
    createdAtUtc: r.created_at,
    createdBy: r.created_by,
    lastFiredUtc: r.last_fired_at,
    failures: r.failures,
  };
}

/**
 * Subscriptions, the fan-out of events into deliveries, and the delivery job.
 *
 * Flow: the EventBus hands every event to `fanOut` inside the dispatcher's transaction; it writes
 * one delivery row per matching active subscription of the event's tenant (state `queued`) and
 * admits up to `perSubscriptionConcurrency` of a subscription's deliveries to the job queue
 * (state `pending`, one job each). A finished delivery admits the next one in the same
 * transaction. So a dead receiver holds at most its own few admitted jobs, never the queue's
 * total concurrency, and never delays another subscription.
 */
export class WebhookService {
  readonly #resolve: Resolver;
  readonly #agents = {
    // Bounded by the job queue's concurrency, not here; idle sockets close before most receivers' 5 s keep-alive.
    http: new http.Agent({ keepAlive: true, keepAliveMsecs: 1000, maxFreeSockets: 64, timeout: 4000 }),
    https: new https.Agent({ keepAlive: true, keepAliveMsecs: 1000, maxFreeSockets: 64, timeout: 4000 }),
  };
  /** Attempt outcomes waiting for the next group commit (see `commit`). */
  #outcomes: { fn: () => void; resolve: () => void; reject: (e: unknown) => void }[] = [];
  /** Parsed `events` column by its JSON text (the fan-out reads it for every event). */
  readonly #eventLists = new Map<string, string[]>();
  /** Opened secrets by subscription id and sealed value (a changed row opens anew). */
  readonly #secrets = new Map<string, { sealed: string; secret: string }>();

  constructor(private readonly d: WebhookDeps) {
    this.#resolve = cachingResolver(d.resolve ?? systemResolver, d.config.dnsCacheMs, () => d.clock.now());
  }

  /** The merged policy per tenant, rebuilt when the tenant's host names change. */
  readonly #policies = new Map<string, { hosts: string; policy: NetworkPolicy }>();

  get repo(): WebhookRepo {
    return this.d.repo;
  }

  /** Closes kept-alive connections (plugin stop). */
  close(): void {
    this.#agents.http.destroy();
    this.#agents.https.destroy();
    this.#secrets.clear();
  }

  /**
   * Group commit: the outcomes of attempts that finish in the same turn of the event loop are
   * written in one IMMEDIATE transaction (one WAL append instead of one per delivery; the commit
   * was the largest single CPU cost per delivery). The promise settles after the commit: the
   * job ends, and the queue marks it done, only once its outcome is durable, exactly as with a
   * transaction of its own. If any outcome throws, the whole batch rolls back and each outcome
   * runs again in a transaction of its own, so only the failing one sees its error and nothing
   * of it is half-written (cheaper than a savepoint per outcome in the common case).
   */
  private commit(fn: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#outcomes.push({ fn, resolve, reject });
      if (this.#outcomes.length === 1) setImmediate(() => this.flushOutcomes());
    });
  }

  /** Built once: better-sqlite3's transaction() wraps a function anew on every call. */
  #batchTx?: (batch: { fn: () => void }[]) => void;
  #oneTx?: (fn: () => void) => void;

  private flushOutcomes(): void {
    const batch = this.#outcomes;
    this.#outcomes = [];
    const db = this.d.repo.db;
    this.#batchTx ??= (
      (t) => (b: { fn: () => void }[]) =>
        t.immediate(b)
    )(
      db.transaction((b: { fn: () => void }[]) => {
        for (const o of b) o.fn();
      }),
    );
    this.#oneTx ??= (
      (t) => (fn: () => void) =>
        t.immediate(fn)
    )(db.transaction((fn: () => void) => fn()));
    try {
      this.#batchTx(batch);
    } catch {
      for (const o of batch) {
        try {
          this.#oneTx(o.fn);
          o.resolve();
        } catch (e) {
          o.reject(e);
        }
      }
      return;
    }
    for (const o of batch) o.resolve();
  }

  private eventsOf(json: string): string[] {
    let e = this.#eventLists.get(json);
    if (!e) {
      e = JSON.parse(json) as string[];
      if (this.#eventLists.size > 10_000) this.#eventLists.clear();
      this.#eventLists.set(json, e);
    }
    return e;
  }

  private secretOf(sub: Pick<SubscriptionRow, 'id' | 'secret_sealed'>): string {
    const hit = this.#secrets.get(sub.id);
    if (hit && hit.sealed === sub.secret_sealed) return hit.secret;
    const secret = this.d.keys.openString(sub.secret_sealed, sealAad(sub.id));
    if (this.#secrets.size > 10_000) this.#secrets.clear();
    this.#secrets.set(sub.id, { sealed: sub.secret_sealed, secret });
    return secret;
  }

  /** Defaults, then the overrides of any of the tenant's host names. */
  policyFor(tenant: Tenant): NetworkPolicy {
    // Cached: every attempt asks, and the address verdicts are memoised per policy object.
    const hosts = tenant.hosts.join(' ');
    const hit = this.#policies.get(tenant.id);
    if (hit && hit.hosts === hosts) return hit.policy;
    const c = this.d.config;
    const own = tenant.hosts.map((h) => c.tenants[h]).filter(Boolean);
    const policy = Object.freeze(mergePolicy(c, ...own));
    if (this.#policies.size > 10_000) this.#policies.clear();
    this.#policies.set(tenant.id, { hosts, policy });
    return policy;
  }

  /** OUTBOUND (api.ts): one GET under the tenant's address policy, connected as a delivery is. */
  async outboundGet(tenant: Tenant, url: string, o: { accept: string; timeoutMs: number; maxBytes: number }): Promise<OutboundAnswer> {
    const r = await exchange(
      url,
      { method: 'GET', headers: { Accept: o.accept, 'User-Agent': `sovcomms/${BUILD}` } },
      { policy: this.policyFor(tenant), timeoutMs: o.timeoutMs, maxResponseBytes: o.maxBytes, resolve: this.#resolve, ca: this.d.ca },
    );
    if (r.status === null) this.d.log.info({ tenant: tenant.host, address: r.address, reason: r.error }, 'outbound request got no response');
    return { status: r.status, body: r.body, ...(r.refused ? { refused: true } : {}) };
  }

  // ---- subscriptions -----------------------------------------------------------------------

  /** http(s) only, no credentials in the URL, and an address the tenant's policy allows. */
  async checkUrl(tenant: Tenant, raw: string): Promise<string> {
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new InputError('url: not an absolute URL', 'invalid_url', { field: 'url' });
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new InputError('url: only http and https URLs are accepted', 'invalid_url', { field: 'url' });
    if (u.username || u.password) {
      throw new InputError('url: credentials in the URL are not accepted; receivers authenticate deliveries by their signature', 'invalid_url', {
        field: 'url',
      });
    }
    u.hash = '';
    const policy = this.policyFor(tenant);
    const host = u.hostname.replace(/^\[|\]$/g, '');
    let addrs: { address: string }[] = [];
    if (net.isIP(host)) addrs = [{ address: host }];
    else {
      // A name that does not resolve now is accepted (an on-prem DNS may be down); every delivery checks again.
      let timer: NodeJS.Timeout | undefined;
      try {
        // Bounded: a slow DNS must not hold the admin request; the delivery checks again anyway.
        addrs = await Promise.race([
          this.#resolve(host),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('DNS timeout')), 3000);
          }),
        ]);
      } catch {
        addrs = [];
      } finally {
        clearTimeout(timer);
      }
    }
    const reasons = addrs.map((a) => refusal(a.address, policy));
    if (addrs.length && reasons.every((r) => r !== null)) {
      // Which address a name resolved to, and why it is refused, stays in the operator's log.
      this.d.log.info({ tenant: tenant.host, host, reasons: [...new Set(reasons)] }, 'webhook URL refused by the network policy');
      throw new InputError("url: the target's address is not allowed by this tenant's network policy", 'address_refused', { field: 'url' });
    }
    return u.toString();
  }

  /**
   * The events a subscription may name: every event a plugin declares (name, plugin, one-line
   * description), sorted by name. A subscription names some of these, or `*` for all.
   */
  catalog(): EventInfo[] {
    return this.d.events.catalog().map(({ name, plugin, description }) => ({ name, plugin, description }));
  }

  /**
   * Refuses (400 `unknown_event`, naming the known names) a subscription to an event no plugin
   * declares: a typo would be accepted and never fire. `*` stays valid. Checked where a
   * subscription's events are set (API, CLI, console); stored subscriptions are never re-checked,
   * so one naming an event of a plugin since switched off keeps working.
   */
  checkEvents(names: readonly string[]): void {
    const known = this.d.events.declared();
    const unknown = names.filter((n) => !known.some((k) => eventMatches(n, k)));
    if (!unknown.length) return;
    throw new InputError(
      `events: ${unknown.map((n) => JSON.stringify(n)).join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not an event any plugin declares; known: *, ${known.join(', ')}`,
      'unknown_event',
      { field: 'events', unknown, known: ['*', ...known] },
    );
  }

  async add(tenant: Tenant, input: { url: string; events: string[] }, createdBy: string): Promise<{ item: SubscriptionItem; secret: string }> {
    this.checkEvents(input.events);
    const url = await this.checkUrl(tenant, input.url);
    if (this.d.repo.count(tenant) >= this.d.config.maxSubscriptions) {
      throw new AppError(409, 'too_many_subscriptions', `a tenant has at most ${this.d.config.maxSubscriptions} webhook subscriptions`);
    }
    const id = crypto.randomBytes(8).toString('hex');
    const secret = newSecret();
    this.d.repo.insert(tenant, {
      id,
      url,
      events: JSON.stringify(input.events),
      secret_sealed: this.d.keys.seal(secret, sealAad(id)),
      created_at: iso(this.d.clock.now()),
      created_by: createdBy.slice(0, 200),
    });
    return { item: toItem(this.d.repo.get(tenant, id)!), secret };
  }

  list(tenant: Tenant, page?: { limit: number; offset: number }): { items: SubscriptionItem[]; total: number } {
    const { rows, total } = this.d.repo.list(tenant, page);
    return { items: rows.map(toItem), total };
  }

  get(tenant: Tenant, id: string): SubscriptionItem {
    const r = this.d.repo.get(tenant, id);
    if (!r) throw new NotFoundError(`no webhook subscription ${id}`);
    return toItem(r);
  }

  remove(tenant: Tenant, id: string): SubscriptionItem {
    const item = this.get(tenant, id);
    // Deliveries cascade; their jobs find no row and finish without sending.
    this.d.repo.remove(tenant, id);
    return item;
  }

  /** An operator's pause (the console's): treated exactly like the automatic one until a resume. */
  pause(tenant: Tenant, id: string): SubscriptionItem {
    this.get(tenant, id);
    this.d.repo.pause(tenant, id);
    return this.get(tenant, id);
  }

  /** Re-activation (the spec leaves it open): active again, tally reset, waiting deliveries admitted. */
  resume(tenant: Tenant, id: string): SubscriptionItem {
    this.get(tenant, id);
    this.d.repo.db
      .transaction(() => {
        this.d.repo.resume(tenant, id);
        this.changed(tenant.id, id);
        this.admit(id);
      })
      .immediate();
    return this.get(tenant, id);
  }

  /** Test-fire: a `webhook.test` event for this one subscription, through the normal path. */
  testFire(tenant: Tenant, id: string, requestedBy: string): { eventId: number } {
    const sub = this.get(tenant, id);
    if (!sub.active) throw new ConflictError('subscription_paused', `webhook subscription ${id} is paused; resume it first`);
    const eventId = this.d.events.emit(tenant.id, TEST_EVENT, {
      subscriptionId: id,
      message: 'Test delivery from the admin surface',
      requestedBy: requestedBy.slice(0, 200),
    });
    return { eventId };
  }

  // ---- delivery log ------------------------------------------------------------------------

  /**
   * Tells the console's live feed that a delivery row changed (a notice, not an event: it is
   * neither stored nor delivered to webhooks, which would feed on itself). Without a deliveryId,
   * several rows of the subscription changed at once. Called inside the transaction of the change.
   */
  private changed(tenantId: string, subscriptionId: string, deliveryId?: string, state?: DeliveryRow['state']): void {
    this.d.events.notify(tenantId, DELIVERY_NOTICE, { subscriptionId, ...(deliveryId ? { deliveryId } : {}), ...(state ? { state } : {}) });
  }

  deliveries(tenant: Tenant, subscriptionId: string, page: { limit: number; offset: number }): { items: DeliveryItem[]; total: number } {
    this.get(tenant, subscriptionId);
    const { rows, total } = this.d.repo.deliveries(tenant, subscriptionId, page);
    const attempts = this.d.repo.attempts(rows.map((r) => r.id));
    return {
      total,
      items: rows.map((r) => ({
        id: r.id,
        subscriptionId: r.subscription_id,
        eventId: r.event_id,
        event: r.event,
        state: r.state,
        attempts: r.attempts,
        createdAtUtc: r.created_at,
        nextTryUtc: r.next_try_at,
        lastStatus: r.last_status,
        lastError: r.last_error,
        finishedUtc: r.finished_at,
        log: attempts
          .filter((a) => a.delivery_id === r.id)
          .map((a) => ({
            attempt: a.attempt,
            startedUtc: a.started_at,
            durationMs: a.duration_ms,
            status: a.status,
            error: a.error,
            nextTryUtc: a.next_try_at,
          })),
      })),
    };
  }

  /** Manual redelivery of a finished delivery: same delivery id, attempts counted from 1 again. */
  redeliver(tenant: Tenant, deliveryId: string): { id: string; subscriptionId: string } {
    const d = this.d.repo.deliveryOf(tenant, deliveryId);
    if (!d) throw new NotFoundError(`no webhook delivery ${deliveryId}`);
    if (d.state === 'queued' || d.state === 'pending') throw new ConflictError('delivery_in_progress', `delivery ${deliveryId} is still ${d.state}`);
    const sub = this.get(tenant, d.subscription_id);
    if (!sub.active) throw new ConflictError('subscription_paused', `webhook subscription ${sub.id} is paused; resume it first`);
    this.d.repo.db
      .transaction(() => {
        this.d.repo.db.prepare("UPDATE webhook_deliveries SET state = 'queued', finished_at = NULL, next_try_at = NULL WHERE id = ?").run(d.id);
        this.changed(tenant.id, d.subscription_id, d.id, 'queued');
        this.admit(d.subscription_id);
      })
      .immediate();
    return { id: d.id, subscriptionId: d.subscription_id };
  }

  // ---- fan-out (EventBus consumer; synchronous, inside the dispatcher's transaction) ---------

  /** The tenant cache refreshes every 500 ms; a tenant the CLI added a moment ago is read anew. */
  private tenantById(id: string): Tenant | undefined {
    const t = this.d.tenants.byId(id);
    if (t) return t;
    this.d.tenants.reload();
    return this.d.tenants.byId(id);
  }

  fanOut(ev: AppEvent): void {
    const tenant = this.tenantById(ev.tenantId);
    if (!tenant) return;
    let subs = this.d.repo.activeFor(ev.tenantId);
    if (ev.name === TEST_EVENT) subs = subs.filter((s) => s.id === (ev.data as { subscriptionId?: unknown }).subscriptionId);
    else subs = subs.filter((s) => this.eventsOf(s.events).some((p) => eventMatches(p, ev.name)));
    if (!subs.length) return;
    const payload = JSON.stringify({ event: ev.name, tenant: tenant.host, ts: ev.ts, data: ev.data });
    const now = iso(this.d.clock.now());
    for (const s of subs) {
      const id = crypto.randomUUID();
      this.d.repo.insertDelivery({
        id,
        tenant_id: ev.tenantId,
        subscription_id: s.id,
        event_id: ev.id,
        event: ev.name,
        payload,
        created_at: now,
      });
      this.changed(ev.tenantId, s.id, id, 'queued');
      this.admit(s.id, s);
    }
  }

  /**
   * Moves queued deliveries of an active subscription into the job queue, up to its bound. Call
   * inside a transaction. `known` skips re-reading a subscription the caller just read;
   * `slots` skips counting when the caller knows how many slots it freed (a finished delivery).
   */
  admit(subscriptionId: string, known?: Pick<SubscriptionRow, 'tenant_id' | 'active'>, slots?: number): void {
    // Count first: during a backlog the fan-out calls this for every new row of a full
    // subscription, and the count (a covering index range) is cheaper than reading queued rows.
    const free = slots ?? this.d.config.perSubscriptionConcurrency - this.d.repo.admittedCount(subscriptionId);
    if (free <= 0) return;
    const queued = this.d.repo.oldestQueued(subscriptionId, free);
    if (!queued.length) return;
    const sub = known ?? this.d.repo.subscriptionById(subscriptionId);
    if (!sub || sub.active !== 1) return;
    const now = iso(this.d.clock.now());
    for (const q of queued) {
      // No dedupe key: admission and the row's move to `pending` commit together, so a row is admitted once.
      const jobId = this.d.jobs.enqueue(QUEUE, { deliveryId: q.id }, { tenantId: sub.tenant_id, maxAttempts: MAX_ATTEMPTS });
      this.d.repo.markPending(q.id, jobId, now);
      this.changed(sub.tenant_id, subscriptionId, q.id, 'pending');
    }
  }

  /**
   * Repairs what an interruption can leave behind: queued deliveries of active subscriptions with
   * free slots, and pending deliveries whose job no longer exists or has ended (e.g. lost data).
   */
  sweep(): void {
    const repo = this.d.repo;
    repo.db
      .transaction(() => {
        const orphans = repo.db.prepare("SELECT id, job_id FROM webhook_deliveries WHERE state = 'pending'").all() as { id: string; job_id: number | null }[];
        for (const o of orphans) {
          const job = o.job_id == null ? undefined : this.d.jobs.get(o.job_id);
          if (!job || job.state === 'done' || job.state === 'failed' || job.state === 'cancelled') {
            repo.db.prepare("UPDATE webhook_deliveries SET state = 'queued' WHERE id = ?").run(o.id);
          }
        }
        for (const sub of repo.subscriptionsWithQueued()) this.admit(sub);
      })
      .immediate();
  }

  prune(): number {
    if (!this.d.config.retentionDays) return 0;
    return this.d.repo.prune(iso(this.d.clock.now() - this.d.config.retentionDays * 86_400_000));
  }

  // ---- the delivery job --------------------------------------------------------------------

  async runJob(job: RunningJob<{ deliveryId: string }>): Promise<void> {
    const repo = this.d.repo;
    const clock = this.d.clock;
    const d = repo.deliveryForSend(job.data.deliveryId);
    // Already finished (a re-run after a crash between our commit and the queue's) or removed.
    if (!d || d.state !== 'pending') return;
    const tenant = this.tenantById(d.tenant_id);
    if (!tenant || d.active !== 1) {
      repo.finishDelivery(d.id, 'skipped', iso(clock.now()), 'subscription paused or removed');
      this.changed(d.tenant_id, d.subscription_id, d.id, 'skipped');
      return;
    }
    const subId = d.subscription_id;
    const secret = this.secretOf({ id: subId, secret_sealed: d.secret_sealed });
    // A crash during the 4th attempt makes the queue count a 5th; the header stays within the spec's 1..4.
    const attempt = Math.min(job.attempt, MAX_ATTEMPTS);
    const startedAt = clock.now();
    const sentAt = performance.now();
    const r = await send(
      { url: d.url, body: d.payload, event: d.event, deliveryId: d.id, attempt, secret, timestampSec: Math.floor(startedAt / 1000) },
      {
        policy: this.policyFor(tenant),
        timeoutMs: this.d.config.timeoutMs,
        maxResponseBytes: this.d.config.maxResponseBytes,
        signal: job.signal,
        resolve: this.#resolve,
        agents: this.#agents,
        ca: this.d.ca,
      },
    );
    const ok = r.status !== null && r.status >= 200 && r.status < 300;
    if (r.internal && !ok && !job.signal.aborted) {
      // A failure at an internal target is recorded a whole timeout after the attempt began,
      // whatever ended it: a closed port (2 ms), an HTTP error and a silent host (the timeout)
      // look alike to a tenant who watches the log change. The detail goes to the operator's log.
      this.d.log.info(
        { subscription: subId, tenant: tenant.host, address: r.address, status: r.status, reason: r.error, durationMs: r.durationMs, reply: snippet(r.body) },
        'webhook delivery to an internal address failed (the tenant sees no detail)',
      );
      await pause(this.d.config.timeoutMs - (performance.now() - sentAt), job.signal);
    }
    const now = clock.now();
    const base = {
      delivery_id: d.id,
      attempt,
      started_at: iso(startedAt),
      // An internal target's status and timing are not the tenant's to see: whole seconds, and
      // every failure (held to the timeout above) as long as the timeout.
      duration_ms: r.internal ? Math.ceil(Math.max(ok ? r.durationMs : this.d.config.timeoutMs, 1) / 1000) * 1000 : r.durationMs,
      status: r.internal ? null : r.status,
    };
    const tx = (fn: () => void): Promise<void> => this.commit(fn);
    const done = { at: iso(now) };

    if (ok) {
      await tx(() => {
        // The job's "done" commits with the outcome (one commit per delivery instead of two).
        job.complete?.();
        // recordAttempt is false when the subscription was removed while the request was out.
        if (!repo.recordAttempt({ ...base, error: null, next_try_at: null }, { state: 'delivered', ...done })) return;
        this.changed(d.tenant_id, subId, d.id, 'delivered');
        if (repo.succeeded(subId, done.at)) this.admit(subId, { tenant_id: d.tenant_id, active: 1 }, 1);
      });
      return;
    }
    if (job.signal.aborted) {
      // Shutdown, not the receiver's fault: no tally, run again at the next start.
      await tx(() => {
        repo.recordAttempt({ ...base, error: r.internal ? 'interrupted' : (r.error ?? 'interrupted'), next_try_at: done.at });
      });
      throw new RetryAt(now, 'interrupted by shutdown');
    }
    const error = r.internal ? INTERNAL_FAILED_TEXT : describeFailure(r);
    // The tenant's delivery log says only "refused" or "no response"; the reason (resolved
    // address, connection error) is for the operator's log, so a tenant admin cannot map the LAN.
    if (r.status === null && !r.internal)
      this.d.log.info({ subscription: subId, tenant: tenant.host, address: r.address, reason: r.error }, 'webhook delivery got no response');
    if (r.status === 410) {
      // 410 Gone: the receiver says the endpoint is gone for good; stop at once (issue 5 §2).
      await tx(() => {
        if (!repo.recordAttempt({ ...base, error, next_try_at: null }, { state: 'failed', ...done })) return;
        repo.disable(subId);
        repo.skipQueued(subId, done.at, 'subscription disabled by 410 Gone');
        this.changed(d.tenant_id, subId);
      });
      this.d.log.warn({ subscription: subId, tenant: tenant.host }, 'webhook receiver answered 410 Gone: subscription disabled');
      throw new PermanentFailure(error);
    }
    if (r.refused || job.attempt >= job.maxAttempts) {
      await tx(() => {
        if (!repo.recordAttempt({ ...base, error, next_try_at: null }, { state: 'failed', ...done })) return;
        this.changed(d.tenant_id, subId, d.id, 'failed');
        if (repo.failed(subId, AUTO_PAUSE_AFTER)) {
          repo.skipQueued(subId, done.at, `subscription paused after ${AUTO_PAUSE_AFTER} consecutive failed deliveries`);
          this.changed(d.tenant_id, subId);
          this.d.log.warn({ subscription: subId, tenant: tenant.host }, 'webhook subscription paused after consecutive failures');
        } else this.admit(subId, undefined, 1);
      });
      throw new PermanentFailure(error);
    }
    let delay = backoffMs(job.attempt);
    // 429 / 503 with Retry-After (RFC 9110 §10.2.3, RFC 6585 §4): the receiver names the time.
    if (r.status === 429 || r.status === 503) {
      const ra = retryAfterMs(r.headers['retry-after'], now);
      if (ra !== undefined) delay = Math.min(ra, this.d.config.maxRetryAfterSec * 1000);
    }
    const at = now + delay;
    await tx(() => {
      if (repo.recordAttempt({ ...base, error, next_try_at: iso(at) })) this.changed(d.tenant_id, subId, d.id, 'pending');
    });
    throw new RetryAt(at, error);
  }
}

/** Delivery-log texts for attempts without an answer: one per kind, never an address or an error code. */
export const REFUSED_TEXT = 'target address refused by the network policy';
export const NO_RESPONSE_TEXT = 'no response from the target (unreachable, connection refused or timed out)';

/**
 * The one text of every failed attempt at an internal target (net-policy isInternal), whether it
 * got an HTTP error, no answer or a timeout: its status, reply and timing would map the LAN.
 */
export const INTERNAL_FAILED_TEXT = 'failed (the target is on an internal network; the appliance log has the detail)';

function snippet(body: string): string {
  return body.replace(/\s+/g, ' ').trim().slice(0, 200);
}

function describeFailure(r: { status: number | null; body: string; refused?: boolean }): string {
  if (r.status === null) return r.refused ? REFUSED_TEXT : NO_RESPONSE_TEXT;
  const text = snippet(r.body);
  const what = r.status >= 300 && r.status < 400 ? `HTTP ${r.status} (redirects are not followed)` : `HTTP ${r.status}`;
  return text ? `${what}: ${text}` : what;
}

/** Waits `ms` (nothing when not positive); a shutdown ends the wait at once. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

export type { DeliveryRow };
