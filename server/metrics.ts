import crypto from 'node:crypto';
import type * as PromClient from 'prom-client';
import type { Counter, Gauge, Metric, Registry } from 'prom-client';
import type { DB } from './store/db.ts';
import type { Logger } from './log.ts';
import type { MetricFamily } from './plugin.ts';
import { sha256Hex } from './keys.ts';

/**
 * `GET /metrics` in the Prometheus text format, through prom-client: the process (RSS, event loop
 * lag, GC, from prom-client's default collectors), HTTP requests by route template and status with
 * latency, the job queue and event backlog from the store, and each plugin's families
 * (PluginManifest.metrics) read at scrape time. Every label takes a bounded set of values: the
 * route template (never the raw path), a status class... never a tenant, user or call id.
 *
 * prom-client itself (~11 MB of resident memory) is loaded at the first scrape, not at start: an
 * appliance nobody scrapes never carries it. HTTP requests are counted from the start (HttpSeries,
 * below, needs no library), so the first scrape has every request made before it; the default
 * collectors (GC, event loop lag) start with that first scrape, and process CPU, RSS and start
 * time are read from the process whenever they start.
 */
export const METRICS_PREFIX = 'sovcomms_';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** prom-client's classes and functions, once loaded. */
type Prom = typeof PromClient;

/** What prom-client's Registry answers as its content type (text format 0.0.4), before it is loaded. */
const PROM_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export class Metrics {
  #prom: { lib: Prom; registry: Registry } | undefined;
  #loading: Promise<{ lib: Prom; registry: Registry }> | undefined;
  readonly #http = new HttpSeries();
  readonly #plugin = new Map<string, Gauge | Counter>();
  readonly #broken = new Set<string>();

  constructor(
    private readonly db: DB,
    private readonly log: Logger,
    private readonly pluginFamilies: () => MetricFamily[],
  ) {}

  /** The registry, or undefined until the first scrape loaded prom-client. */
  get registry(): Registry | undefined {
    return this.#prom?.registry;
  }

  /** prom-client and the registry: loaded by the first scrape (one load, however many scrape at once). */
  #load(): Promise<{ lib: Prom; registry: Registry }> {
    this.#loading ??= import('prom-client').then(
      (lib) => {
        this.#prom = { lib, registry: this.#build(lib) };
        return this.#prom;
      },
      (e: unknown) => {
        this.#loading = undefined; // the next scrape tries again
        throw e;
      },
    );
    return this.#loading;
  }

  #build(lib: Prom): Registry {
    const { Gauge, Registry, collectDefaultMetrics } = lib;
    const db = this.db;
    const r = new Registry();
    collectDefaultMetrics({ register: r, prefix: METRICS_PREFIX, eventLoopMonitoringPrecision: 20 });
    // Requests and their latency are kept by HttpSeries (a Map lookup and an array increment per
    // request) and handed to the registry as two families read at scrape time; prom-client's own
    // Counter and Histogram hash their label objects on every observation.
    r.registerMetric(this.#http.requestsFamily(`${METRICS_PREFIX}http_requests_total`, 'HTTP requests by route template, method and status'));
    r.registerMetric(
      this.#http.latencyFamily(
        `${METRICS_PREFIX}http_request_duration_seconds`,
        'HTTP request latency by route template and method (until the response is closed)',
      ),
    );
    const db2 = db;
    new Gauge({
      name: `${METRICS_PREFIX}jobs`,
      help: 'Jobs in the durable queue by queue and state (queued, running, failed...)',
      labelNames: ['queue', 'state'],
      registers: [r],
      collect() {
        this.reset();
        const rows = db2.prepare('SELECT queue, state, COUNT(*) AS n FROM jobs GROUP BY queue, state').all() as { queue: string; state: string; n: number }[];
        for (const row of rows) this.set({ queue: row.queue, state: row.state }, row.n);
      },
    });
    new Gauge({
      name: `${METRICS_PREFIX}events_stored`,
      help: 'Events in the outbox (kept a week after every consumer passed them)',
      registers: [r],
      collect() {
        this.set((db2.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }).n);
      },
    });
    return r;
  }

  /** One finished request. `route` is the matched route's template, or a fixed word (`unmatched`). */
  observe(route: string, method: string, status: number, seconds: number): void {
    this.#http.observe(route, METHODS.has(method) ? method : 'OTHER', status, seconds);
  }

  /** The text exposition, plugin families read now. */
  async render(): Promise<string> {
    const p = await this.#load();
    this.refreshPlugins(p);
    return p.registry.metrics();
  }

  get contentType(): string {
    return this.#prom?.registry.contentType ?? PROM_CONTENT_TYPE;
  }

  private refreshPlugins({ lib, registry }: { lib: Prom; registry: Registry }): void {
    const { Counter, Gauge } = lib;
    let families: MetricFamily[];
    try {
      families = this.pluginFamilies();
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'plugin metrics failed');
      return;
    }
    for (const f of families) {
      const name = METRICS_PREFIX + f.name;
      if (this.#broken.has(name)) continue;
      try {
        let m = this.#plugin.get(name);
        if (!m) {
          const opts = { name, help: f.help, labelNames: [...(f.labelNames ?? [])], registers: [registry] };
          m = f.type === 'counter' ? new Counter(opts) : new Gauge(opts);
          this.#plugin.set(name, m);
        }
        m.reset();
        for (const s of f.samples) {
          const v = Number.isFinite(s.value) ? s.value : 0;
          // A counter read from the store is a running total: set by incrementing from zero.
          if (m instanceof Counter) m.inc(s.labels ?? {}, Math.max(0, v));
          else m.set(s.labels ?? {}, v);
        }
      } catch (e) {
        // A family whose shape changed (another label set) would throw at every scrape: say it once.
        this.#broken.add(name);
        this.log.warn({ metric: name, err: (e as Error).message }, 'metric family left out');
      }
    }
  }

  /** The registry's metric objects (tests); undefined before the first scrape. */
  get(name: string): Metric | undefined {
    return this.#prom?.registry.getSingleMetric(name);
  }
}

/**
 * The scrape token (for a Prometheus that holds no admin credential): only its SHA-256 is stored, in
 * the core's settings (shown once, like API keys); a presented token is hashed and compared in
 * constant time.
 */
export const SCRAPE_TOKEN_SETTING = 'metrics:scrape-token-sha256';

export class ScrapeTokens {
  constructor(private readonly db: DB) {}

  /** A new token (the previous one stops working at once); returned once, never stored. */
  rotate(): string {
    const token = `ms_${crypto.randomBytes(32).toString('base64url')}`;
    this.db
      .prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value')
      .run(SCRAPE_TOKEN_SETTING, sha256Hex(token));
    return token;
  }

  /** True when there was one. */
  revoke(): boolean {
    return this.db.prepare('DELETE FROM settings WHERE key = ?').run(SCRAPE_TOKEN_SETTING).changes > 0;
  }

  configured(): boolean {
    return this.stored() !== undefined;
  }

  check(presented: string): boolean {
    const want = this.stored();
    if (!want) return false;
    const got = crypto.createHash('sha256').update(presented).digest();
    const exp = Buffer.from(want, 'hex');
    return exp.length === got.length && crypto.timingSafeEqual(got, exp);
  }

  private stored(): string | undefined {
    return (this.db.prepare('SELECT value FROM settings WHERE key = ?').get(SCRAPE_TOKEN_SETTING) as { value: string } | undefined)?.value;
  }
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** One (route, method) latency series: counts per bucket (not cumulative), sum and count. */
interface LatencySeries {
  readonly labels: { route: string; method: string };
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/** One (route, method, status) request counter. */
interface StatusCount {
  readonly labels: { route: string; method: string; status: string };
  n: number;
}

/** A (route, method) pair's latency and its counters by status. */
interface RouteSeries extends LatencySeries {
  readonly byStatus: Map<number, StatusCount>;
}

/** A value line of a family as prom-client's Registry formats it (its `getForPromString` shape). */
interface FamilyValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
  sharedLabels?: Record<string, string>;
}

/**
 * The HTTP request counter and latency histogram, kept in plain Maps and exposed to prom-client's
 * Registry as two families in its own format (name, help, type, values from getForPromString;
 * get() for the JSON form), so the text is what Counter and Histogram wrote.
 */
class HttpSeries {
  /**
   * route → method → series. The callers' route templates and methods are constant strings, whose
   * hashes V8 keeps: a lookup per request builds no key string (a joined key was hashed anew for
   * every request). The status is a number key.
   */
  readonly #byRoute = new Map<string, Map<string, RouteSeries>>();
  /** The series in the order they first appeared, the order the text lists them. */
  readonly #counts: StatusCount[] = [];
  readonly #latency: RouteSeries[] = [];

  observe(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.#byRoute.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.#byRoute.set(route, byMethod);
    }
    let l = byMethod.get(method);
    if (!l) {
      l = { labels: { route, method }, buckets: new Float64Array(LATENCY_BUCKETS.length), sum: 0, count: 0, byStatus: new Map() };
      byMethod.set(method, l);
      this.#latency.push(l);
    }
    const c = l.byStatus.get(status);
    if (c) c.n++;
    else {
      const added = { labels: { route, method, status: String(status) }, n: 1 };
      l.byStatus.set(status, added);
      this.#counts.push(added);
    }
    l.sum += seconds;
    l.count++;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (seconds <= LATENCY_BUCKETS[i]!) {
        l.buckets[i]!++;
        break;
      }
    }
  }

  requestsFamily(name: string, help: string): Metric {
    return family(name, help, 'counter', () => this.#counts.map((c) => ({ labels: c.labels, value: c.n })));
  }

  latencyFamily(name: string, help: string): Metric {
    return family(name, help, 'histogram', () => {
      const out: FamilyValue[] = [];
      for (const l of this.#latency) {
        let acc = 0;
        LATENCY_BUCKETS.forEach((le, i) => {
          acc += l.buckets[i]!;
          out.push({ labels: { le }, value: acc, metricName: `${name}_bucket`, sharedLabels: l.labels });
        });
        out.push(
          { labels: { le: '+Inf' }, value: l.count, metricName: `${name}_bucket`, sharedLabels: l.labels },
          { labels: {}, value: l.sum, metricName: `${name}_sum`, sharedLabels: l.labels },
          { labels: {}, value: l.count, metricName: `${name}_count`, sharedLabels: l.labels },
        );
      }
      return out;
    });
  }
}

/** A family object the Registry formats like its own metrics (it reads name, type and values). */
function family(name: string, help: string, type: 'counter' | 'histogram', values: () => FamilyValue[]): Metric {
  const forText = () => ({ name, help, type, aggregator: 'sum' as const, values: values() });
  const m = {
    name,
    help,
    type,
    aggregator: 'sum',
    getForPromString: () => Promise.resolve(forText()),
    // The JSON form (Registry.getMetricsAsJSON): shared labels folded into each value's labels.
    get: () => {
      const d = forText();
      return Promise.resolve({ ...d, values: d.values.map((v) => ({ value: v.value, metricName: v.metricName, labels: { ...v.sharedLabels, ...v.labels } })) });
    },
    reset: () => undefined,
  };
  // The Registry takes any object of this shape; prom-client's Metric type names its own classes.
  return m as unknown as Metric;
}
