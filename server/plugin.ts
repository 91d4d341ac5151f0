import type { z } from 'zod';
import type { DB } from './store/db.ts';
import type { Migration } from './store/migrate.ts';
import type { CoreConfig } from './config.ts';
import type { Logger } from './log.ts';
import type { TenantService, Tenant } from './tenancy.ts';
import type { UserService } from './users.ts';
import type { AuthService } from './auth.ts';
import type { KeyService, SecretSettings } from './keys.ts';
import type { JobQueue } from './jobs.ts';
import type { EventBus } from './events.ts';
import type { RateLimiter } from './http/rate-limit.ts';
import type { Clock } from './clock.ts';
import type { RouteRegistrar } from './http/route.ts';

/** One audit entry as a plugin writes it (spec "Audit entry"). `extra` is a key=value tail. */
export interface AuditInput {
  event: string;
  user?: string;
  ip?: string;
  ua?: string;
  extra?: Record<string, string | number | boolean | null | undefined> | string;
  /**
   * An unauthenticated failure anyone can repeat (a wrong password, a refused sign-in): the
   * entries with the same event, user, address and extra within a minute of the first are one
   * row, whose extra ends in `count=N` once it repeats, so a guessing run cannot flood the log.
   */
  aggregate?: boolean;
}

export interface AuditWriter {
  write(tenant: Tenant, entry: AuditInput): void;
}

export interface Paths {
  dataDir: string;
  /**
   * A path under `data/tenants/<tenant-id>/`. Segments must be server-derived names (ids,
   * hashes); anything with a separator or dot-segment throws, so traversal is impossible.
   */
  tenantFile(tenant: Tenant, ...segments: string[]): string;
}

/** The only door from a plugin into the core (ARCHITECTURE.md "The plugin contract"). */
export interface PluginContext<C = unknown> {
  readonly name: string;
  readonly config: C;
  readonly core: CoreConfig;
  readonly db: DB;
  readonly tenants: TenantService;
  readonly users: UserService;
  readonly log: Logger;
  readonly audit: AuditWriter;
  readonly events: EventBus;
  readonly jobs: JobQueue;
  readonly keys: KeyService;
  readonly secrets: SecretSettings;
  readonly auth: AuthService;
  readonly rateLimit: RateLimiter;
  readonly clock: Clock;
  readonly paths: Paths;
  /**
   * Resolves once the HTTP server listens, with its URL (plugins that hand their own address to a
   * child process, like the telephony bridge's callback URL). Absent outside the server (CLI).
   */
  readonly listening?: Promise<{ url: string; port: number }>;
  /** Offers a service to plugins that depend on this one (call it from `setup`). */
  provide<T>(ref: ServiceRef<T>, impl: T): void;
  /**
   * A service a declared dependency (`dependsOn`) provided; throws when none did or when the
   * provider is not a declared dependency (so start order guarantees it exists).
   */
  use<T>(ref: ServiceRef<T>): T;
  /** Same, or undefined when no plugin provides it (optional integrations, no dependency needed). */
  tryUse<T>(ref: ServiceRef<T>): T | undefined;
}

/** What a CLI command of a plugin gets: the store and services, no HTTP. */
export interface CliContext {
  readonly dataDir: string;
  readonly core: CoreConfig;
  /** This plugin's validated settings. */
  readonly config: unknown;
  readonly db: DB;
  readonly tenants: TenantService;
  readonly users: UserService;
  readonly auth: AuthService;
  readonly keys: KeyService;
  readonly secrets: SecretSettings;
  readonly jobs: JobQueue;
  readonly events: EventBus;
  readonly audit: AuditWriter;
  readonly clock: Clock;
  readonly paths: Paths;
  readonly log: Logger;
  out(line: string): void;
  err(line: string): void;
  /** Reads all of standard input (for --password-stdin, --pin-stdin). */
  readStdin(): Promise<string>;
}

/** A `sovcomms` command of a plugin; `S` is what the plugin's `setup` built (the same as the server's). */
export interface CliCommand<S = never> {
  summary: string;
  /** One usage line a subcommand, shown by `sovcomms help`. */
  usage: string[];
  /**
   * What changes data, and so is audited when it succeeds (as `cli-<command>-<first argument>`,
   * actor `cli:<OS user>`): the subcommands that do (`['add', 'remove']`; one under a group as
   * `'trust add'`), `true` for a command that changes data whatever its arguments, `false` for one
   * that only reads.
   */
  changes: boolean | readonly string[];
  /**
   * Options whose values the audit row records (targets and labels, never passwords, keys or
   * secrets); the positional arguments are recorded as `target`.
   */
  audited?: readonly string[];
  /**
   * The command checks names against every plugin's declared events (`webhook add`), so the CLI
   * declares them all, loading each manifest (their setup still runs only for the command's own).
   * Like `changes`: `true` for every subcommand, or the subcommands that check (`['add']`), so a
   * read (`webhook list`) does not load all twelve manifests.
   */
  allEvents?: boolean | readonly string[];
  /** Returns the exit code: 0 ok, 1 failure, 2 usage. Throw UsageError for bad arguments. */
  run(args: string[], ctx: CliContext, services: S): Promise<number>;
}

export { UsageError } from './cli-args.ts';

/**
 * A typed reference to a service one plugin provides and others use (`ctx.provide(ref, impl)`,
 * `ctx.use(ref)`): the name is for messages and uniqueness, the type parameter carries the
 * interface, so no caller names a string or casts.
 */
export interface ServiceRef<T> {
  readonly name: string;
  /** Phantom: never set, only carries T. */
  readonly __type?: (t: T) => T;
}

export function defineService<T>(name: string): ServiceRef<T> {
  return { name };
}

export interface PluginHealth {
  status: 'ok' | 'degraded';
  reason?: string;
  detail?: Record<string, unknown>;
}

/**
 * One metric family a plugin reports at scrape time (`GET /metrics`, server/metrics.ts). The host
 * prefixes the name with `sovcomms_`. Labels take a bounded set of values (a call kind, an
 * outcome, a state, a grant type): never a tenant, user, call, trunk or host name, whose count
 * grows with the installation.
 */
/**
 * Label values from the store (an outcome, a status) kept to a bounded set: names of the usual
 * shape pass, at most `max` of them (the most frequent); the rest are summed as `other`.
 */
export function boundedCounts(rows: { label: string | null; n: number }[], max = 16): { label: string; n: number }[] {
  const ok = (l: string | null): l is string => typeof l === 'string' && /^[A-Za-z][A-Za-z0-9_.-]{0,39}$/.test(l);
  const sorted = [...rows].sort((a, b) => b.n - a.n);
  const out: { label: string; n: number }[] = [];
  let other = 0;
  for (const r of sorted) {
    if (ok(r.label) && out.length < max) out.push({ label: r.label, n: r.n });
    else other += r.n;
  }
  if (other) out.push({ label: 'other', n: other });
  return out;
}

export interface MetricFamily {
  name: string;
  help: string;
  /** `counter`: a running total (read from the store or counted since start); `gauge`: a level now. */
  type: 'counter' | 'gauge';
  labelNames?: readonly string[];
  samples: { labels?: Record<string, string>; value: number }[];
}

/**
 * A plugin's manifest (ARCHITECTURE.md "The plugin contract"). The order of things: the host
 * validates `config`, applies `migrations`, declares `events`, then calls `setup` once, in
 * dependency order, in the server and in the CLI alike; everything after receives what `setup`
 * returned (`S`), so services are built once and nothing holds a half-built `let service`.
 * `setup` builds objects and provides services; it starts nothing (no timers, sockets or child
 * processes): that is `start`'s, which only the server calls.
 */
export interface PluginManifest<C extends z.ZodType = z.ZodType, S = unknown> {
  name: string;
  description: string;
  /** Plugins that must be set up and started first ('core' is implicit). */
  dependsOn?: string[];
  /** Readiness waits for required plugins (default true). */
  required?: boolean;
  migrations?: Migration[];
  /** Settings under `plugins.<name>` in config.json. */
  config?: C;
  /** Events this plugin emits, with their data schemas. */
  events?: Record<string, z.ZodType>;
  /** Builds the plugin's services; may `ctx.provide` them and `ctx.use` its dependencies'. */
  setup?(ctx: PluginContext<z.infer<C>>): S | Promise<S>;
  /** Registers handlers (server only). */
  routes?(r: RouteRegistrar, services: NoInfer<S>, ctx: PluginContext<z.infer<C>>): void;
  /** `sovcomms <command> ...` commands this plugin adds, run on the same services. */
  cli?: Record<string, CliCommand<S>>;
  /** Background work: job queues (`ctx.jobs.define`), consumers, timers, child processes. */
  start?(services: NoInfer<S>, ctx: PluginContext<z.infer<C>>): Promise<void> | void;
  stop?(services: NoInfer<S>): Promise<void> | void;
  /** Diagnostics for /readyz and `doctor`. */
  health?(services: NoInfer<S>): PluginHealth;
  /** Its metric families for `GET /metrics`, read at each scrape (started plugins only). */
  metrics?(services: NoInfer<S>, ctx: PluginContext<z.infer<C>>): MetricFamily[];
}

/** Defines a plugin; `C` comes from `config`, `S` from what `setup` returns (only there: the rest are NoInfer). */
export function definePlugin<C extends z.ZodType = z.ZodType, S = undefined>(m: PluginManifest<C, S>): PluginManifest<C, S> {
  if (!/^[a-z][a-z0-9-]*$/.test(m.name)) throw new Error(`invalid plugin name ${m.name}`);
  return m;
}

/** A manifest of any settings and services, as the host holds them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the host is generic over every plugin's own C and S; each manifest is checked where it is defined
export type AnyPlugin = PluginManifest<any, any>;
