import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { systemClock, type Clock } from './clock.ts';
import type { DB } from './store/db.ts';
import type { Statement } from 'better-sqlite3';
import { ConflictError, InputError, NotFoundError } from './errors.ts';
import { dataVersionOf, type DataVersion } from './store/data-version.ts';

/** A tenant as every handler sees it: resolved once per request from the Host header. */
export interface Tenant {
  readonly id: string;
  readonly name: string;
  /** The tenant's main host name; the spec's `tenant` field in responses. */
  readonly host: string;
  readonly hosts: readonly string[];
  readonly isPrimary: boolean;
  /**
   * The origin the operator configured for the tenant's signed and published URLs
   * (`sovcomms tenant set-origin`), or undefined for the default: the tenant's host name on the
   * scheme and port the appliance listens on. Never derived from a request.
   */
  readonly publicOrigin?: string;
  /**
   * Whether the spec's admin signature (`X-Service-Admin-Signature`, no body digest, no time) is
   * accepted. On for tenants made before it could be switched and for the primary tenant made at
   * first start (the spec's interface out of the box); off for tenants added later.
   */
  readonly hmacV1: boolean;
}

/**
 * A configured public origin: an absolute http(s) URL with a host and no user, path, query or
 * fragment (a path would make every derived address ambiguous). Returns its canonical origin.
 */
export function validateOrigin(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new InputError(`origin: not an absolute URL: ${JSON.stringify(raw.slice(0, 200))}`, 'invalid_origin', { field: 'origin' });
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:')
    throw new InputError('origin: only https:// or http:// origins', 'invalid_origin', { field: 'origin' });
  if (u.username || u.password) throw new InputError('origin: no user name or password in the origin', 'invalid_origin', { field: 'origin' });
  if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash || /[?#]/.test(raw.trim().replace(/\/$/, ''))) {
    throw new InputError('origin: scheme, host and port only (no path, query or fragment)', 'invalid_origin', { field: 'origin' });
  }
  validateHost(u.hostname);
  return u.origin;
}

/** Lower-cases a Host header value and strips the port (IPv6 literals keep their brackets). */
export function normalizeHost(raw: string | undefined | null): string {
  if (!raw) return '';
  let h = raw.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end > 0 ? h.slice(0, end + 1) : h;
  }
  const colon = h.lastIndexOf(':');
  if (colon >= 0 && h.indexOf(':') === colon) h = h.slice(0, colon);
  return h.replace(/\.$/, '');
}

/**
 * A Host header as RFC 9110 §7.2 / RFC 3986 §3.2.2 allow it: a DNS name or IPv4 address, or an
 * IPv6 literal in brackets, and an optional port; nothing else (no userinfo, no path, no second
 * colon). Throws 400 for anything else: `a.example:@attacker.example` once resolved to tenant A
 * and made links that pointed at the attacker.
 */
export function parseHostHeader(raw: string): { host: string; port: number | undefined } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?\.?)(?::(\d{1,5}))?$/.exec(raw.trim());
  const port = m?.[2] === undefined ? undefined : Number(m[2]);
  if (!m || (port !== undefined && (port < 1 || port > 65535)) || /\.\./.test(m[1]!)) {
    throw new InputError('malformed Host header: a host name or address and an optional port', 'invalid_request');
  }
  return { host: m[1]!.toLowerCase().replace(/\.$/, ''), port };
}

const HOST_RE = /^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*)$/;

export function validateHost(host: string): string {
  const h = normalizeHost(host);
  if (!h || h.length > 253 || !HOST_RE.test(h)) throw new InputError(`invalid host name: ${JSON.stringify(host)}`);
  return h;
}

/**
 * The tenant's public origin (ARCHITECTURE.md, Tenancy): the configured one; else the request's
 * host when it is one of the tenant's own host names or an IP address of this machine's own
 * interfaces (an office admin who types the appliance's LAN address reaches the appliance that
 * way, and so does every URL it is given); else the tenant's main host. Always the scheme and
 * port the appliance listens on. A Host header can therefore only name this appliance: never
 * another site, another port, or another address of the loopback network (127.0.0.77).
 */
// eslint-disable-next-line @typescript-eslint/no-redundant-type-constituents -- names the two values callers pass, for the reader
export function publicOriginOf(tenant: Tenant, proto: 'http' | 'https' | string, hostHeader: string | undefined, listeningPort: number): string {
  if (tenant.publicOrigin) return tenant.publicOrigin;
  // Answers per tenant object (a reload makes new ones), forgotten when the machine's addresses
  // are read again; a client's Host values are many, so at most 64 are kept.
  ownAddresses();
  // The last answer first: a client's requests ask the same question over and over.
  const l = lastOrigin;
  if (l !== undefined && l.tenant === tenant && l.at === own!.at && l.port === listeningPort && l.hostHeader === hostHeader && l.proto === proto)
    return l.origin;
  let cache = originCache.get(tenant);
  if (!cache || cache.at !== own!.at) {
    cache = { at: own!.at, answers: new Map() };
    originCache.set(tenant, cache);
  }
  const key = `${proto}|${listeningPort}|${hostHeader ?? ''}`;
  let origin = cache.answers.get(key);
  if (origin === undefined) {
    origin = defaultOrigin(tenant, proto, hostHeader, listeningPort);
    if (cache.answers.size >= 64) cache.answers.clear();
    cache.answers.set(key, origin);
  }
  lastOrigin = { tenant, proto, hostHeader, port: listeningPort, at: own!.at, origin };
  return origin;
}

const originCache = new WeakMap<Tenant, { at: number; answers: Map<string, string> }>();
let lastOrigin: { tenant: Tenant; proto: string; hostHeader: string | undefined; port: number; at: number; origin: string } | undefined;

function defaultOrigin(tenant: Tenant, proto: string, hostHeader: string | undefined, listeningPort: number): string {
  let host = tenant.host;
  if (hostHeader) {
    try {
      const h = parseHostHeader(hostHeader).host;
      if (tenant.hosts.includes(h) || ownAddresses().has(h)) host = h;
    } catch {
      // A malformed Host never selects anything: the main host name stands.
    }
  }
  const defaultPort = proto === 'https' ? 443 : 80;
  return `${proto}://${host}${listeningPort && listeningPort !== defaultPort ? `:${listeningPort}` : ''}`;
}

let own: { at: number; set: Set<string> } | undefined;

/** This machine's interface addresses as a Host names them (IPv6 in brackets), read at most every 30 s. */
function ownAddresses(): Set<string> {
  const now = performance.now();
  if (own && now - own.at < 30_000) return own.set;
  const set = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) {
      // Link-local IPv6 needs a zone, which a Host header cannot carry: not an address to publish.
      if (a.family === 'IPv6' && a.address.toLowerCase().startsWith('fe80:')) continue;
      set.add(a.family === 'IPv6' ? `[${a.address.toLowerCase()}]` : a.address);
    }
  }
  own = { at: now, set };
  return set;
}

interface TenantRow {
  id: string;
  name: string;
  is_primary: number;
  public_origin: string | null;
  hmac_v1: number;
}

/**
 * Tenants and their host names. Lookups are cached in memory and the cache is dropped whenever
 * the tenant tables change (the CLI may change them while the server runs: `data_version`
 * tells this connection that another one wrote).
 */
export class TenantService {
  #byHost = new Map<string, Tenant>();
  #byId = new Map<string, Tenant>();
  #primary: Tenant | undefined;
  #dataVersion = -1;
  #epoch = -1;
  #version: DataVersion | undefined;
  #epochStmt: Statement | undefined;
  /**
   * The last Host header resolve() answered and its tenant: a client (and most offices) sends the
   * same Host on every request, so its parse and lookup are made once per tenant set. reload()
   * forgets it, as it forgets the maps it was read from.
   */
  #lastHost: string | undefined;
  #lastTenant: Tenant | undefined;

  /** `dataDir` lets `remove` delete the tenant's files under `tenants/<id>/` too. */
  constructor(
    private readonly db: DB,
    private readonly dataDir?: string,
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Whether another connection (the CLI, while the server runs) changed the tenant tables:
   * PRAGMA data_version moves on any commit by another connection, and only then is tenant_epoch
   * read (moved by triggers on the tenant tables, migration 0005); only a moved epoch reloads.
   */
  private refreshIfStale(): void {
    this.#refreshAt((this.#version ??= dataVersionOf(this.db)).fresh());
  }

  /**
   * resolve() runs for every request, and the check above costs a few µs (a read transaction on
   * the WAL): it takes the connection's data_version as read once per turn of the event loop,
   * shared with the other caches of the connection (DataVersion, which says why that is exact
   * for requests).
   */
  private refreshOncePerTurn(): void {
    this.#refreshAt((this.#version ??= dataVersionOf(this.db)).current());
  }

  #refreshAt(v: number): void {
    if (v === this.#dataVersion && this.#primary) return;
    this.#dataVersion = v;
    if (this.readEpoch() === this.#epoch && this.#primary) return;
    this.reload();
  }

  private readEpoch(): number {
    this.#epochStmt ??= this.db.prepare('SELECT v FROM tenant_epoch WHERE id = 1').pluck();
    return (this.#epochStmt.get() as number | undefined) ?? -1;
  }

  /** Drops the cache; called after this connection changes tenants. */
  reload(): void {
    this.#epoch = this.readEpoch();
    this.#lastHost = undefined;
    this.#lastTenant = undefined;
    this.#byHost.clear();
    this.#byId.clear();
    this.#primary = undefined;
    const tenants = this.db.prepare('SELECT id, name, is_primary, public_origin, hmac_v1 FROM tenants').all() as TenantRow[];
    const hosts = this.db.prepare('SELECT host, tenant_id FROM tenant_hosts ORDER BY tenant_id, position, host').all() as { host: string; tenant_id: string }[];
    for (const t of tenants) {
      const hs = hosts.filter((h) => h.tenant_id === t.id).map((h) => h.host);
      const tenant: Tenant = Object.freeze({
        id: t.id,
        name: t.name,
        host: hs[0] ?? t.id,
        hosts: Object.freeze(hs),
        isPrimary: t.is_primary === 1,
        hmacV1: t.hmac_v1 === 1,
        ...(t.public_origin ? { publicOrigin: t.public_origin } : {}),
      });
      this.#byId.set(t.id, tenant);
      for (const h of hs) this.#byHost.set(h, tenant);
      if (tenant.isPrimary) this.#primary = tenant;
    }
  }

  /** The Host header picks the tenant; a missing or unknown Host falls back to the primary tenant. */
  resolve(hostHeader: string | undefined): Tenant {
    this.refreshOncePerTurn();
    if (hostHeader !== undefined && hostHeader === this.#lastHost) return this.#lastTenant!;
    // A malformed Host throws here, every time: only answers are remembered.
    const t = (hostHeader ? this.#byHost.get(parseHostHeader(hostHeader).host) : undefined) ?? this.#primary;
    if (!t) throw new Error('no primary tenant: the appliance is not initialised');
    this.#lastHost = hostHeader;
    this.#lastTenant = t;
    return t;
  }

  primary(): Tenant | undefined {
    this.refreshIfStale();
    return this.#primary;
  }

  byId(id: string): Tenant | undefined {
    this.refreshIfStale();
    return this.#byId.get(id);
  }

  byHost(host: string): Tenant | undefined {
    this.refreshIfStale();
    return this.#byHost.get(normalizeHost(host));
  }

  /** The tenant named by a CLI `--tenant HOST`, or the primary tenant when omitted. */
  require(host?: string): Tenant {
    this.reload();
    if (!host) {
      if (!this.#primary) throw new NotFoundError('no primary tenant');
      return this.#primary;
    }
    const t = this.#byHost.get(normalizeHost(host));
    if (!t) throw new NotFoundError(`no tenant with host ${host}`);
    return t;
  }

  list(): Tenant[] {
    this.reload();
    return [...this.#byId.values()].sort((a, b) => Number(b.isPrimary) - Number(a.isPrimary) || a.host.localeCompare(b.host));
  }

  /** `hmacV1`: accept the spec's admin signature without a body digest (default off; see Tenant.hmacV1). */
  add(hostInput: string, name?: string, opts: { primary?: boolean; hmacV1?: boolean } = {}): Tenant {
    const host = validateHost(hostInput);
    const id = crypto.randomBytes(6).toString('hex');
    this.db
      .transaction(() => {
        if (this.db.prepare('SELECT 1 FROM tenant_hosts WHERE host = ?').get(host)) {
          throw new ConflictError('duplicate_tenant', `host ${host} already belongs to a tenant`);
        }
        const hasPrimary = !!this.db.prepare('SELECT 1 FROM tenants WHERE is_primary = 1').get();
        const primary = opts.primary || !hasPrimary;
        if (primary) this.db.prepare('UPDATE tenants SET is_primary = 0 WHERE is_primary = 1').run();
        this.db
          .prepare('INSERT INTO tenants (id, name, is_primary, created_at, hmac_v1) VALUES (?, ?, ?, ?, ?)')
          .run(id, name || host, primary ? 1 : 0, new Date(this.clock.now()).toISOString(), opts.hmacV1 ? 1 : 0);
        this.db.prepare('INSERT INTO tenant_hosts (host, tenant_id, position) VALUES (?, ?, 0)').run(host, id);
      })
      .immediate();
    this.reload();
    return this.#byId.get(id)!;
  }

  addHost(tenantId: string, hostInput: string): void {
    const host = validateHost(hostInput);
    if (this.db.prepare('SELECT 1 FROM tenant_hosts WHERE host = ?').get(host)) {
      throw new ConflictError('duplicate_tenant', `host ${host} already belongs to a tenant`);
    }
    const pos = (this.db.prepare('SELECT COALESCE(MAX(position), -1) + 1 AS p FROM tenant_hosts WHERE tenant_id = ?').get(tenantId) as { p: number }).p;
    this.db.prepare('INSERT INTO tenant_hosts (host, tenant_id, position) VALUES (?, ?, ?)').run(host, tenantId, pos);
    this.reload();
  }

  /**
   * Removes a tenant with all its data: the foreign keys cascade only where a table declares
   * one, so every table with a `tenant_id` column (the plugin convention: repositories take the
   * tenant first) is cleared in the same transaction, and the tenant's files are deleted after it.
   */
  remove(host: string): Tenant {
    const t = this.require(host);
    if (t.isPrimary) throw new InputError('the primary tenant cannot be removed; make another tenant primary first', 'cannot_remove_primary');
    this.db
      .transaction(() => {
        // Checked at commit, when every row of the tenant is gone, so table order does not matter.
        this.db.pragma('defer_foreign_keys = ON');
        const tables = (
          this.db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'tenants'").all() as { name: string }[]
        ).map((r) => r.name);
        for (const table of tables) {
          const cols = this.db.prepare(`PRAGMA table_info("${table.replace(/"/g, '""')}")`).all() as { name: string }[];
          if (cols.some((c) => c.name === 'tenant_id')) this.db.prepare(`DELETE FROM "${table.replace(/"/g, '""')}" WHERE tenant_id = ?`).run(t.id);
        }
        this.db.prepare('DELETE FROM tenants WHERE id = ?').run(t.id);
      })
      .immediate();
    this.reload();
    // Ids are server-made hex; the check keeps a corrupt row from pointing the delete elsewhere.
    if (this.dataDir && /^[A-Za-z0-9_-]+$/.test(t.id)) fs.rmSync(path.join(this.dataDir, 'tenants', t.id), { recursive: true, force: true });
    return t;
  }

  /** Sets (or with null clears) the tenant's public origin; returns the tenant as it is now. */
  setOrigin(tenantId: string, origin: string | null): Tenant {
    const value = origin === null ? null : validateOrigin(origin);
    const r = this.db.prepare('UPDATE tenants SET public_origin = ? WHERE id = ?').run(value, tenantId);
    if (r.changes === 0) throw new NotFoundError(`no tenant ${tenantId}`);
    this.reload();
    return this.#byId.get(tenantId)!;
  }

  /** Switches the spec's admin signature without a body digest on or off for the tenant. */
  setHmacV1(tenantId: string, on: boolean): Tenant {
    const r = this.db.prepare('UPDATE tenants SET hmac_v1 = ? WHERE id = ?').run(on ? 1 : 0, tenantId);
    if (r.changes === 0) throw new NotFoundError(`no tenant ${tenantId}`);
    this.reload();
    return this.#byId.get(tenantId)!;
  }

  setPrimary(host: string): Tenant {
    const t = this.require(host);
    this.db
      .transaction(() => {
        this.db.prepare('UPDATE tenants SET is_primary = 0 WHERE is_primary = 1').run();
        this.db.prepare('UPDATE tenants SET is_primary = 1 WHERE id = ?').run(t.id);
      })
      .immediate();
    this.reload();
    return this.#byId.get(t.id)!;
  }
}
