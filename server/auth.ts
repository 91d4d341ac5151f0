import crypto from 'node:crypto';
import type Database from 'better-sqlite3';
import { systemClock, type Clock } from './clock.ts';
import type { DB } from './store/db.ts';
import type { Tenant } from './tenancy.ts';
import type { Role } from './users.ts';
import { AuthenticationError, InputError, NotAllowedError, NotFoundError, RateLimitedError, type ErrorCode } from './errors.ts';
import { sha256Hex, type SecretSettings } from './keys.ts';

/** Who is calling, as established by the route's auth policy. */
export interface Principal {
  kind: 'user' | 'apiKey' | 'hmac' | 'client' | 'credential';
  tenantId: string;
  /** Subject: user id for users and keys, client id for clients. */
  subject: string;
  userName?: string;
  email?: string | null;
  role?: Role;
  scopes: string[];
  clientId?: string;
  keyId?: string;
  /** Role admin on the primary tenant (or HMAC on the primary tenant's host). */
  superAdmin: boolean;
  /** Raw claims of a bearer token, for plugins that need more than the above. */
  claims?: Record<string, unknown>;
}

export type Credential = 'bearer' | 'apiKey' | 'hmac';

/**
 * A route's auth policy. `public` takes no credentials. `credentials` accepts the listed kinds;
 * `role` and `superAdmin` narrow who passes (401 when no valid credential, 403 when valid but not
 * privileged). `custom` hands the request to a verifier a plugin registered (credential tokens).
 */
export type AuthPolicy =
  | { kind: 'public' }
  | { kind: 'credentials'; accept: Credential[]; role?: Role; superAdmin?: boolean; hmacBucket?: string; scope?: string }
  | { kind: 'custom'; verifier: string; description: string };

type CredentialsPolicy = Extract<AuthPolicy, { kind: 'credentials' }>;

export const policy = {
  public: { kind: 'public' } as AuthPolicy,
  /** v1 REST: OIDC bearer or ak_ key, role admin. */
  v1Admin: { kind: 'credentials', accept: ['bearer', 'apiKey'], role: 'admin' } as AuthPolicy,
  /** Admin surface: bearer with role admin or the admin HMAC header for `bucket`. */
  adminOrHmac: (bucket: string): AuthPolicy => ({ kind: 'credentials', accept: ['bearer', 'hmac'], role: 'admin', hmacBucket: bucket }),
  /** Any signed-in user of the tenant (OIDC bearer). */
  bearer: (role?: Role): AuthPolicy => ({ kind: 'credentials', accept: ['bearer'], role }),
  /** Admin OIDC bearer only: ak_ keys and HMAC refused (e.g. minting ak_ keys). */
  adminBearerOnly: { kind: 'credentials', accept: ['bearer'], role: 'admin' } as AuthPolicy,
  superAdmin: (bucket?: string): AuthPolicy => ({
    kind: 'credentials',
    accept: bucket ? ['bearer', 'hmac'] : ['bearer'],
    role: 'admin',
    superAdmin: true,
    hmacBucket: bucket,
  }),
  custom: (verifier: string, description: string): AuthPolicy => ({ kind: 'custom', verifier, description }),
};

export type BearerVerifier = (token: string, tenant: Tenant) => Promise<Principal | null>;
export type CustomVerifier = (req: { headers: Record<string, string | string[] | undefined>; tenant: Tenant }) => Promise<Principal | null>;

export interface ApiKeyInfo {
  id: string;
  tenantId: string;
  userId: string;
  userName: string;
  name: string;
  prefix: string;
  createdAt: string;
  createdBy: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export const HMAC_HEADER = 'x-service-admin-signature';
export const ADMIN_SECRET_SETTING = 'admin-hmac-secret';

/**
 * The text the admin HMAC signs. The spec's form is `bucket|Host` for every bucket (only its
 * `whitelist-add` example appends `|bodyLen`); `bucket|Host|bodyLen` is accepted too, for every
 * bucket, as an extension. Neither binds the body's content or a time: see the V2 header.
 */
export function hmacSigningText(bucket: string, host: string, bodyLen?: number): string {
  return bodyLen && bodyLen > 0 ? `${bucket}|${host}|${bodyLen}` : `${bucket}|${host}`;
}

export function signAdminHmac(secret: string, bucket: string, host: string, bodyLen?: number): string {
  return crypto
    .createHmac('sha256', secret)
    .update(hmacSigningText(bucket, host, bodyLen))
    .digest('hex');
}

/**
 * The stronger admin signature (our extension, recommended): `X-Service-Admin-Signature-V2:
 * t=<unix seconds>,sig=<hex HMAC-SHA256>` over `v2|bucket|Host|t|<hex SHA-256 of the body>`. It
 * binds the exact body and a time: refused more than 5 minutes from the server's clock, and a
 * signature is accepted once (a replay within the window is refused).
 * The method and path are not in the text: a bucket names exactly one method and address (the
 * spec's buckets are the address's verb; a test holds every route to one bucket each), so they
 * would add nothing, and scripts sign what the spec already has them sign. A separate header,
 * not a new value of the spec's one, keeps a spec client's header meaning exactly what it says.
 */
export const HMAC_V2_HEADER = 'x-service-admin-signature-v2';
export const HMAC_V2_WINDOW_SEC = 300;
/**
 * Used V2 signatures remembered at most (each for 10 minutes). When that many were used in the
 * window, new ones are refused (429) rather than forgetting one still valid, which would let it
 * be replayed: only holders of the secret can add entries, so this caps the admin's own rate.
 */
export const HMAC_V2_REPLAY_MAX = 100_000;

export function hmacV2SigningText(bucket: string, host: string, t: number, body: Buffer | string): string {
  return hmacV2TextOfDigest(bucket, host, t, crypto.createHash('sha256').update(body).digest('hex'));
}

/** The same text from the body's hex SHA-256, computed while the body streamed in (http/body.ts readSigned). */
export function hmacV2TextOfDigest(bucket: string, host: string, t: number, digestHex: string): string {
  return `v2|${bucket}|${host}|${t}|${digestHex}`;
}

const V2_VALUE = /^\s*t=(\d{1,12})\s*,\s*sig=([0-9a-fA-F]{64})\s*$/;

/** The V2 header value for a request (the CLI's `admin-secret sign` prints it). */
export function signAdminHmacV2(secret: string, bucket: string, host: string, body: Buffer | string, nowSec = Math.floor(systemClock.now() / 1000)): string {
  const sig = crypto
    .createHmac('sha256', secret)
    .update(hmacV2SigningText(bucket, host, nowSec, body))
    .digest('hex');
  return `t=${nowSec},sig=${sig}`;
}

function hexEqual(a: string, b: string): boolean {
  return a.length === b.length && crypto.timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'));
}

/**
 * Authentication for every route: `ak_` personal API keys (SHA-256 at rest), the admin HMAC
 * header, a bearer hook the OIDC plugin fills, and named custom verifiers.
 */
export class AuthService {
  #bearer: BearerVerifier | undefined;
  #custom = new Map<string, CustomVerifier>();
  #lastUsedWrites = new Map<string, number>();
  #keyByHash: Database.Statement | undefined;

  constructor(
    private readonly db: DB,
    private readonly secrets: SecretSettings,
    private readonly isPrimaryTenant: (tenantId: string) => boolean,
    readonly realm = 'sovcomms',
    private readonly opts: { replayMax?: number; clock?: Clock } = {},
  ) {}

  /** The appliance's clock (ctx.clock): signature freshness, key timestamps. */
  private now(): number {
    return (this.opts.clock ?? systemClock).now();
  }

  setBearerVerifier(v: BearerVerifier): void {
    this.#bearer = v;
  }

  registerVerifier(name: string, v: CustomVerifier): void {
    this.#custom.set(name, v);
  }

  customVerifier(name: string): CustomVerifier | undefined {
    return this.#custom.get(name);
  }

  adminSecret(): string {
    return this.secrets.getOrCreate(ADMIN_SECRET_SETTING, () => crypto.randomBytes(32).toString('hex'));
  }

  rotateAdminSecret(): string {
    const s = crypto.randomBytes(32).toString('hex');
    this.secrets.set(ADMIN_SECRET_SETTING, s);
    return s;
  }

  unauthorized(description: string, code: ErrorCode = 'invalid_token'): AuthenticationError {
    return new AuthenticationError(description, code, this.realm);
  }

  /** The spec's admin signature: `bucket|Host`, or (extension) `bucket|Host|bodyLen` when there is a body. */
  verifyHmac(signature: string, bucket: string, host: string, bodyLen: number): boolean {
    if (!/^[0-9a-fA-F]{64}$/.test(signature)) return false;
    const sig = signature.toLowerCase();
    const secret = this.adminSecret();
    // Both forms are computed and compared, so the time taken does not say which one matched.
    const spec = hexEqual(signAdminHmac(secret, bucket, host), sig);
    const withLen = bodyLen > 0 && hexEqual(signAdminHmac(secret, bucket, host, bodyLen), sig);
    return spec || withLen;
  }

  /**
   * What the V2 header says before its body is read: its form and its time (the dispatcher calls
   * this first, so a malformed or stale header is refused without the body ever being read).
   */
  precheckHmacV2(value: string, nowMs = this.now()): void {
    const { t } = this.parseHmacV2(value);
    const nowSec = Math.floor(nowMs / 1000);
    if (Math.abs(nowSec - t) > HMAC_V2_WINDOW_SEC)
      throw this.unauthorized(`admin signature outside the ${HMAC_V2_WINDOW_SEC / 60}-minute window (t=${t}, now=${nowSec})`, 'stale_signature');
  }

  private parseHmacV2(value: string): { t: number; sig: string } {
    const m = V2_VALUE.exec(value);
    if (!m) throw this.unauthorized('malformed X-Service-Admin-Signature-V2: expected t=<unix seconds>,sig=<hex>', 'invalid_signature');
    return { t: Number(m[1]), sig: m[2]!.toLowerCase() };
  }

  /** Signatures of the V2 header already used, with when they leave the window (replay refusal). */
  readonly #seenV2 = new Map<string, number>();

  /**
   * The V2 header: `t=<unix>,sig=<hex>`. Throws 401 with `invalid_signature`, `stale_signature`
   * (outside ±5 minutes) or `replayed_signature` (seen before within the window), and 429 when
   * the replay memory is full (see HMAC_V2_REPLAY_MAX).
   */
  verifyHmacV2(value: string, bucket: string, host: string, body: Buffer | { digest: string }, nowMs = this.now()): void {
    const { t, sig } = this.parseHmacV2(value);
    const text = Buffer.isBuffer(body) ? hmacV2SigningText(bucket, host, t, body) : hmacV2TextOfDigest(bucket, host, t, body.digest);
    const expected = crypto.createHmac('sha256', this.adminSecret()).update(text).digest('hex');
    if (!hexEqual(expected, sig)) throw this.unauthorized('bad admin signature', 'invalid_signature');
    const nowSec = Math.floor(nowMs / 1000);
    if (Math.abs(nowSec - t) > HMAC_V2_WINDOW_SEC)
      throw this.unauthorized(`admin signature outside the ${HMAC_V2_WINDOW_SEC / 60}-minute window (t=${t}, now=${nowSec})`, 'stale_signature');
    for (const [k, until] of this.#seenV2) {
      if (until > nowSec) break; // insertion order is expiry order (same window for all)
      this.#seenV2.delete(k);
    }
    if (this.#seenV2.has(sig)) throw this.unauthorized('admin signature already used (replay)', 'replayed_signature');
    // Bounded, and failing closed: evicting a remembered signature inside its window would make
    // it replayable again. The oldest entry leaves first, so that is when there is room.
    if (this.#seenV2.size >= (this.opts.replayMax ?? HMAC_V2_REPLAY_MAX)) {
      const oldest = this.#seenV2.values().next().value ?? nowSec + 1;
      throw new RateLimitedError(Math.max(1, oldest - nowSec));
    }
    // Kept past the latest moment the signature could still verify (t may be up to 5 min ahead).
    this.#seenV2.set(sig, nowSec + 2 * HMAC_V2_WINDOW_SEC);
  }

  async verifyBearer(token: string, tenant: Tenant): Promise<Principal | null> {
    if (token.startsWith('ak_')) return this.verifyApiKey(token, tenant);
    if (!this.#bearer) return null;
    return this.#bearer(token, tenant);
  }

  // ---- ak_ personal API keys -------------------------------------------------------------

  createApiKey(tenant: Tenant, user: { id: string; name: string }, opts: { name?: string; createdBy: string }): { key: string; info: ApiKeyInfo } {
    const key = 'ak_' + crypto.randomBytes(32).toString('base64url');
    const id = 'key_' + crypto.randomBytes(6).toString('hex');
    const name = (opts.name ?? '').slice(0, 100);
    this.db
      .prepare('INSERT INTO api_keys (id, tenant_id, user_id, name, hash, prefix, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
      .run(id, tenant.id, user.id, name, sha256Hex(key), key.slice(0, 10), new Date(this.now()).toISOString(), opts.createdBy);
    return { key, info: this.getApiKey(tenant, id)! };
  }

  getApiKey(tenant: Tenant, id: string): ApiKeyInfo | undefined {
    const r = this.db
      .prepare('SELECT k.*, u.name AS user_name FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.tenant_id = ? AND k.id = ?')
      .get(tenant.id, id) as ApiKeyRow | undefined;
    return r && toKeyInfo(r);
  }

  listApiKeys(tenant: Tenant): ApiKeyInfo[] {
    return (
      this.db
        .prepare('SELECT k.*, u.name AS user_name FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.tenant_id = ? ORDER BY k.created_at')
        .all(tenant.id) as ApiKeyRow[]
    ).map(toKeyInfo);
  }

  revokeApiKey(tenant: Tenant | null, id: string): ApiKeyInfo {
    const row = (
      tenant
        ? this.db.prepare('SELECT tenant_id FROM api_keys WHERE id = ? AND tenant_id = ?').get(id, tenant.id)
        : this.db.prepare('SELECT tenant_id FROM api_keys WHERE id = ?').get(id)
    ) as { tenant_id: string } | undefined;
    if (!row) throw new NotFoundError(`no API key ${id}`);
    this.db.prepare('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?').run(new Date(this.now()).toISOString(), id);
    const r = this.db.prepare('SELECT k.*, u.name AS user_name FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.id = ?').get(id) as ApiKeyRow;
    return toKeyInfo(r);
  }

  private verifyApiKey(key: string, tenant: Tenant): Principal | null {
    if (key.length > 200 || !/^ak_[A-Za-z0-9_-]+$/.test(key)) return null;
    // Lookup by hash: the hash is the index, so no comparison leaks timing about the stored key.
    // Prepared once: this runs on every ak_ request (bench/core.bench.ts).
    this.#keyByHash ??= this.db.prepare(`SELECT k.id, k.tenant_id, k.user_id, k.revoked_at, k.hash, u.name, u.email, u.role, u.status
                FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.hash = ?`);
    const hash = sha256Hex(key);
    const r = this.#keyByHash.get(hash) as
      | {
          id: string;
          tenant_id: string;
          user_id: string;
          revoked_at: string | null;
          hash: string;
          name: string;
          email: string | null;
          role: Role;
          status: string;
        }
      | undefined;
    // The row was found by equality on this very hash; a plain check is enough (no secret is
    // compared: both sides derive from the caller's own key), and spares two more SHA-256 runs.
    if (!r || r.hash !== hash) return null;
    if (r.revoked_at || r.status === 'disabled' || r.tenant_id !== tenant.id) return null;
    this.touchKey(r.id);
    return {
      kind: 'apiKey',
      tenantId: r.tenant_id,
      subject: r.user_id,
      userName: r.name,
      email: r.email,
      role: r.role,
      scopes: [],
      keyId: r.id,
      superAdmin: r.role === 'admin' && this.isPrimaryTenant(r.tenant_id),
    };
  }

  /** last_used_at, written at most once a minute per key so auth stays a read on the hot path. */
  private touchKey(id: string): void {
    const now = this.now();
    if ((this.#lastUsedWrites.get(id) ?? 0) > now - 60_000) return;
    this.#lastUsedWrites.set(id, now);
    try {
      this.db.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(new Date(now).toISOString(), id);
    } catch {
      // A busy database must not fail the request; the timestamp is informational.
    }
  }

  /**
   * Applies a policy to a request's credentials. Returns the principal, or null for public routes.
   * Throws 401 (no or bad credential) or 403 (valid but not privileged).
   */
  async authenticate(p: AuthPolicy, req: AuthRequest): Promise<Principal | null> {
    const now = this.authenticateNow(p, req);
    if (now !== undefined) return now;
    if (p.kind === 'custom') {
      const v = this.#custom.get(p.verifier);
      if (!v) throw this.unauthorized(`no verifier for ${p.description}`);
      const principal = await v({ headers: req.headers, tenant: req.tenant });
      if (!principal) throw this.unauthorized(`a valid ${p.description} is required`);
      return principal;
    }
    // What authenticateNow leaves: an OIDC bearer token it has already checked the form and policy of.
    const token = bearerToken(header(req.headers, 'authorization'))!;
    const principal = await this.verifyBearer(token, req.tenant);
    if (!principal) throw this.unauthorized('invalid, expired or revoked access token');
    // authenticateNow answered public routes, so this is a credentials policy.
    return this.admit(p as CredentialsPolicy, principal, req.tenant);
  }

  /**
   * `authenticate` without a promise, for what needs no I/O but the store (synchronous): public
   * routes, `ak_` keys, the admin signatures and every refusal of a malformed or missing
   * credential. Returns undefined when only `authenticate` can decide (an OIDC bearer token, a
   * custom verifier); otherwise the same principal, or throws the same error, as `authenticate`.
   * The dispatcher calls it first, so a v1 request with an `ak_` key makes no promise.
   */
  authenticateNow(p: AuthPolicy, req: AuthRequest): Principal | null | undefined {
    if (p.kind === 'public') return null;
    if (p.kind === 'custom') return undefined;
    let principal: Principal | null;
    const authz = header(req.headers, 'authorization');
    const sig = header(req.headers, HMAC_HEADER);
    const sigV2 = header(req.headers, HMAC_V2_HEADER);
    if (authz !== undefined) {
      const token = bearerToken(authz);
      if (!token) throw this.unauthorized('malformed Authorization header: expected "Bearer <token>"', 'invalid_request');
      const isKey = token.startsWith('ak_');
      if (isKey && !p.accept.includes('apiKey')) {
        throw new NotAllowedError('an ak_ API key is not accepted here; use an OIDC bearer token', 'insufficient_scope');
      }
      if (!isKey && !p.accept.includes('bearer')) throw this.unauthorized('bearer tokens are not accepted here');
      if (!isKey) return undefined;
      principal = this.verifyApiKey(token, req.tenant);
      if (!principal) throw this.unauthorized('invalid or revoked API key');
    } else if (sigV2 !== undefined && p.accept.includes('hmac') && p.hmacBucket) {
      this.verifyHmacV2(sigV2, p.hmacBucket, req.rawHost, req.bodyDigest !== undefined ? { digest: req.bodyDigest } : (req.body ?? Buffer.alloc(0)));
      principal = hmacPrincipal(req.tenant);
    } else if (sig !== undefined && p.accept.includes('hmac') && p.hmacBucket) {
      // The spec's form signs neither the body nor a time: a tenant may switch it off (new tenants have it off).
      if (!req.tenant.hmacV1) {
        throw this.unauthorized(
          'the admin signature without a body digest (X-Service-Admin-Signature) is off for this tenant: use X-Service-Admin-Signature-V2',
          'invalid_signature',
        );
      }
      if (!this.verifyHmac(sig, p.hmacBucket, req.rawHost, req.bodyLen)) throw this.unauthorized('bad admin signature', 'invalid_signature');
      principal = hmacPrincipal(req.tenant);
    } else {
      throw this.unauthorized(p.accept.includes('hmac') ? 'a bearer token or the admin signature header is required' : 'a bearer token is required');
    }
    return this.admit(p, principal, req.tenant);
  }

  /** The policy's demands on a verified credential: its tenant, role, super-admin and scope. */
  private admit(p: CredentialsPolicy, principal: Principal, tenant: Tenant): Principal {
    if (principal.tenantId !== tenant.id) throw this.unauthorized('the credential belongs to another tenant');
    if (p.role === 'admin' && principal.role !== 'admin') throw new NotAllowedError('role admin required');
    if (p.superAdmin && !principal.superAdmin) throw new NotAllowedError('super-admin required (an admin of the primary tenant)');
    if (p.scope && principal.kind !== 'hmac' && principal.kind !== 'apiKey' && !principal.scopes.includes(p.scope)) {
      throw new NotAllowedError(`scope ${p.scope} required`);
    }
    return principal;
  }
}

/** What `authenticate` reads of a request. */
export interface AuthRequest {
  headers: Record<string, string | string[] | undefined>;
  tenant: Tenant;
  rawHost: string;
  bodyLen: number;
  body?: Buffer;
  /** The body's hex SHA-256 when it was hashed as it streamed in (the V2 signature covers it). */
  bodyDigest?: string;
}

/** Who the admin signature speaks for: the tenant's admin, a super-admin on the primary tenant. */
function hmacPrincipal(tenant: Tenant): Principal {
  return {
    kind: 'hmac',
    tenantId: tenant.id,
    subject: 'admin-hmac',
    userName: 'admin-hmac',
    role: 'admin',
    scopes: [],
    superAdmin: tenant.isPrimary,
  };
}

interface ApiKeyRow {
  id: string;
  tenant_id: string;
  user_id: string;
  user_name: string;
  name: string;
  prefix: string;
  created_at: string;
  created_by: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

function toKeyInfo(r: ApiKeyRow): ApiKeyInfo {
  return {
    id: r.id,
    tenantId: r.tenant_id,
    userId: r.user_id,
    userName: r.user_name,
    name: r.name,
    prefix: r.prefix,
    createdAt: r.created_at,
    createdBy: r.created_by,
    lastUsedAt: r.last_used_at,
    revokedAt: r.revoked_at,
  };
}

function header(h: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A bodyless endpoint: nothing, whitespace or an empty JSON object (clients that always send `{}`). */
/** The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1), or undefined. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  const h = Array.isArray(header) ? header[0] : header;
  if (h === undefined) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1] : undefined;
}

export function requireBodyless(raw: Buffer): void {
  if (raw.length === 0) return;
  const text = raw.toString('utf8').trim();
  if (text === '' || /^\{\s*\}$/.test(text)) return;
  throw new InputError('this endpoint takes no body');
}
