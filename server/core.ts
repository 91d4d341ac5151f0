import crypto from 'node:crypto';
import { loadConfig, type CoreConfig } from './config.ts';
import { openStore, type DB } from './store/db.ts';
import { migrate, sqlMigrations } from './store/migrate.ts';
import { KeyService, SecretSettings } from './keys.ts';
import { TenantService } from './tenancy.ts';
import { UserService, generatePassword } from './users.ts';
import { AuthService } from './auth.ts';
import { JobQueue } from './jobs.ts';
import { EventBus } from './events.ts';
import { RateLimiter } from './http/rate-limit.ts';
import { createLogger, type Logger } from './log.ts';
import { systemClock, type Clock } from './clock.ts';
import type { AnyPlugin, AuditInput, AuditWriter } from './plugin.ts';
import type { Tenant } from './tenancy.ts';
import type { DestinationStream } from 'pino';
import { BACKUP_FAILED, BackupService, backupFailedSchema } from './backup/service.ts';

/*
 * The core without HTTP: the store, keys and services that the server and every CLI command open
 * alike. Apart from server/app.ts (which re-exports it) so a CLI command loads none of Express,
 * the routes or the live feed.
 */

export const CORE_MIGRATIONS = sqlMigrations(import.meta.url);

export interface ApplianceOptions {
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  /** Highest config layer (CLI flags, tests). */
  overrides?: Record<string, unknown>;
  /** Plugins to load; default: every built-in plugin. */
  plugins?: AnyPlugin[];
  clock?: Clock;
  logDestination?: DestinationStream;
  /** The master key from the host process (Electron's OS key store). */
  masterKey?: Buffer;
  /** Told once, on the first start, the generated admin password (printed, never logged). */
  onFirstRun?: (info: { host: string; user: string; password: string }) => void;
}

/** Everything both the server and the CLI need: store, keys and the core services. */
export interface CoreServices {
  config: CoreConfig;
  db: DB;
  keys: KeyService;
  secrets: SecretSettings;
  tenants: TenantService;
  users: UserService;
  auth: AuthService;
  jobs: JobQueue;
  events: EventBus;
  limiter: RateLimiter;
  clock: Clock;
  log: Logger;
  audit: DelegatingAudit;
  /** Backups: on demand, scheduled, their state (server/backup). */
  backups: BackupService;
}

/** ctx.audit: forwards to the writer the audit plugin provides; logs when there is none. */
export class DelegatingAudit implements AuditWriter {
  target: AuditWriter | undefined;
  constructor(private readonly log: Logger) {}
  write(tenant: Tenant, entry: AuditInput): void {
    if (this.target) return this.target.write(tenant, entry);
    this.log.info({ audit: entry.event, tenant: tenant.host }, 'audit event (no audit plugin)');
  }
}

export function openCore(opts: ApplianceOptions): CoreServices {
  const config = loadConfig({ dataDir: opts.dataDir, env: opts.env, overrides: opts.overrides });
  const log = createLogger({ level: config.log.level, destination: opts.logDestination });
  const db = openStore(config.dataDir, { busyTimeoutMs: config.store.busyTimeoutMs });
  try {
    migrate(db, 'core', CORE_MIGRATIONS, opts.clock);
  } catch (e) {
    db.close();
    throw e;
  }
  const clock = opts.clock ?? systemClock;
  const keys = KeyService.load(config.dataDir, { env: opts.env, provided: opts.masterKey });
  const secrets = new SecretSettings(db, keys);
  const tenants = new TenantService(db, config.dataDir, clock);
  const users = new UserService(db, clock);
  const auth = new AuthService(db, secrets, (id) => tenants.byId(id)?.isPrimary ?? false, undefined, { clock });
  const nodeId = secrets.getOrCreate('node-id', () => crypto.randomBytes(6).toString('hex'));
  const jobs = new JobQueue(db, clock, log.child({ part: 'jobs' }), { pollMs: config.jobs.pollMs, leaseMs: config.jobs.leaseMs, nodeId });
  const events = new EventBus(db, clock, log.child({ part: 'events' }));
  // The core's own event: a failed backup reaches the primary tenant's webhooks like any plugin's.
  events.declare('core', BACKUP_FAILED, backupFailedSchema);
  const audit = new DelegatingAudit(log);
  const backups = new BackupService({ db, dataDir: config.dataDir, keys, secrets, clock, log: log.child({ part: 'backup' }), events, jobs, tenants, audit });
  return { config, db, keys, secrets, tenants, users, auth, jobs, events, limiter: new RateLimiter(), clock, log, audit, backups };
}

/** First start: primary tenant, first admin with a generated password, admin HMAC secret. */
export async function bootstrap(core: CoreServices): Promise<{ host: string; user: string; password: string } | undefined> {
  core.auth.adminSecret();
  if (core.tenants.list().length) {
    // Tenants made with the CLI before the first start: a primary without any account would
    // leave the appliance with no administrator, so it gets its first admin now.
    const primary = core.tenants.primary();
    if (!primary || core.users.list(primary).length) return undefined;
    const password = generatePassword();
    await core.users.add(primary, { name: 'admin', role: 'admin', password });
    return { host: primary.host, user: 'admin', password };
  }
  const tenant = core.tenants.add(core.config.primaryHost, 'Primary', { primary: true, hmacV1: true });
  const password = generatePassword();
  await core.users.add(tenant, { name: 'admin', role: 'admin', password });
  return { host: tenant.host, user: 'admin', password };
}

/** Every built-in plugin (the CLI loads only those a command needs: plugins/index.ts). */
export async function loadBuiltinPlugins(): Promise<AnyPlugin[]> {
  const { builtinPlugins } = await import('../plugins/index.ts');
  return builtinPlugins();
}
