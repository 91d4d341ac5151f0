import crypto from 'node:crypto';
import { z } from 'zod';
import { AppError, type Clock, dataVersionOf, type DB, InputError, NotFoundError, sha256Hex, type Tenant } from '../../server/sdk.ts';
export const AUTH_METHODS = ['none', 'client_secret_basic', 'client_secret_post', 'private_key_jwt'] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];

export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

export const CONSOLE_CLIENT_ID = 'sovcomms-console';

export interface OidcClient {
  clientId: string;
  name: string;
  authMethod: AuthMethod;
  redirectUris: string[];
  postLogoutRedirectUris: string[];
  grantTypes: string[];
  jwks: { keys: Record<string, unknown>[] } | null;
  allowPlainPkce: boolean;
  idTokenAlg: 'RS256' | 'ES256';
  skipConsent: boolean;
  builtin: boolean;
  hasSecret: boolean;
  createdAt: string;
  updatedAt: string;
}

interface ClientRow {
  client_id: string;
  name: string;
  secret_hash: string | null;
  auth_method: AuthMethod;
  redirect_uris: string;
  post_logout_redirect_uris: string;
  grant_types: string;
  jwks: string | null;
  allow_plain_pkce: number;
  id_token_alg: 'RS256' | 'ES256';
  skip_consent: number;
  builtin: number;
  created_at: string;
  updated_at: string;
}

function toClient(r: ClientRow): OidcClient {
  return {
    clientId: r.client_id,
    name: r.name,
    authMethod: r.auth_method,
    redirectUris: JSON.parse(r.redirect_uris) as string[],
    postLogoutRedirectUris: JSON.parse(r.post_logout_redirect_uris) as string[],
    grantTypes: JSON.parse(r.grant_types) as string[],
    jwks: r.jwks ? (JSON.parse(r.jwks) as OidcClient['jwks']) : null,
    allowPlainPkce: r.allow_plain_pkce === 1,
    idTokenAlg: r.id_token_alg,
    skipConsent: r.skip_consent === 1,
    builtin: r.builtin === 1,
    hasSecret: !!r.secret_hash,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * A redirect URI is absolute, has no fragment (RFC 6749 §3.1.2), and is https, http on loopback
 * (RFC 8252 §7.3), or a private-use scheme with a dot (RFC 8252 §7.1). The console's built-in
 * client uses origin-relative paths, resolved against the issuer.
 */
export function checkRedirectUri(u: string, field: string): string {
  let url: URL;
  try {
    url = new URL(u);
  } catch {
    throw new InputError(`${field}: ${JSON.stringify(u)} is not an absolute URI`, 'invalid_redirect_uri');
  }
  if (url.hash || u.includes('#')) throw new InputError(`${field}: ${u} must not contain a fragment`, 'invalid_redirect_uri');
  if (url.protocol === 'http:' && !LOOPBACK.has(url.hostname))
    throw new InputError(`${field}: ${u} must use https (http only on loopback)`, 'invalid_redirect_uri');
  if (url.protocol !== 'https:' && url.protocol !== 'http:' && !/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/.test(url.protocol)) {
    throw new InputError(`${field}: ${u}: scheme must be https, loopback http, or a reverse-DNS private-use scheme`, 'invalid_redirect_uri');
  }
  return u;
}

const jwkSchema = z.object({ kty: z.string() }).loose();

/**
 * Client metadata as RFC 7591 §2 names it (snake_case), the body of oidc-clients-save. The grant
 * types a client may be registered for are the token endpoint's grants (the built-in ones and
 * those other plugins registered) and `implicit` (response types with an id_token).
 */
export function clientInputSchema(grantTypes: readonly string[]) {
  return z
    .object({
      client_id: z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'letters, digits and . _ : - (1 to 128)'),
      client_name: z.string().max(200).optional(),
      redirect_uris: z.array(z.string().max(2000)).max(50).default([]),
      post_logout_redirect_uris: z.array(z.string().max(2000)).max(50).default([]),
      grant_types: z
        .array(z.enum(grantTypes as [string, ...string[]]))
        .min(1)
        .max(10)
        .default(['authorization_code', 'refresh_token']),
      token_endpoint_auth_method: z.enum(AUTH_METHODS).default('client_secret_basic'),
      jwks: z
        .object({ keys: z.array(jwkSchema).min(1).max(20) })
        .nullable()
        .optional(),
      allow_plain_pkce: z.boolean().default(true),
      id_token_signed_response_alg: z.enum(['RS256', 'ES256']).default('RS256'),
      skip_consent: z.boolean().default(false),
    })
    .strict();
}
export type ClientInput = z.infer<ReturnType<typeof clientInputSchema>>;

/** Accepts camelCase keys too (the core's convention for JSON bodies). */
export function snakeKeys(v: unknown): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    const sk = /[A-Z]/.test(k) ? k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) : k;
    out[sk] = val;
  }
  return out;
}

export function validateClient(c: ClientInput): void {
  c.redirect_uris.forEach((u, i) => checkRedirectUri(u, `redirect_uris[${i}]`));
  c.post_logout_redirect_uris.forEach((u, i) => checkRedirectUri(u, `post_logout_redirect_uris[${i}]`));
  const usesRedirect = c.grant_types.includes('authorization_code') || c.grant_types.includes('implicit');
  if (usesRedirect && !c.redirect_uris.length)
    throw new InputError('redirect_uris: at least one is required for authorization_code or implicit', 'invalid_redirect_uri');
  if (c.token_endpoint_auth_method === 'none' && c.grant_types.includes('client_credentials')) {
    throw new InputError(
      'grant_types: client_credentials needs an authenticated client (token_endpoint_auth_method other than none)',
      'invalid_client_metadata',
    );
  }
  if ((c.token_endpoint_auth_method === 'private_key_jwt' || c.grant_types.includes(JWT_BEARER)) && !c.jwks?.keys.length) {
    throw new InputError("jwks: private_key_jwt and jwt-bearer need the client's public keys", 'invalid_client_metadata');
  }
  for (const [i, k] of (c.jwks?.keys ?? []).entries()) {
    // RFC 7517 §4: a JWK set published by a client must never carry private members.
    if (['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'].some((m) => m in k))
      throw new InputError(`jwks.keys[${i}]: private or symmetric key material is not accepted`, 'invalid_client_metadata');
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- kty comes from client-supplied JSON that only claims to be a JWK
    if (!['RSA', 'EC', 'OKP'].includes(String(k.kty))) throw new InputError(`jwks.keys[${i}]: kty must be RSA, EC or OKP`, 'invalid_client_metadata');
    try {
      crypto.createPublicKey({ key: k as crypto.JsonWebKey, format: 'jwk' });
    } catch {
      throw new InputError(`jwks.keys[${i}]: not a valid public key`, 'invalid_client_metadata');
    }
  }
}

export function newClientSecret(): string {
  return 'cs_' + crypto.randomBytes(32).toString('base64url');
}

interface CacheEntry {
  row: ClientRow | undefined;
  client: OidcClient | undefined;
  digest: Buffer | undefined;
  at: number;
}
const NO_SECRET = Buffer.alloc(32);

/** OIDC clients of a tenant. Secrets are stored as SHA-256 only and shown once. */
export class ClientRepo {
  readonly #get;
  readonly #dataVersion;
  /**
   * Parsed rows (and the secret's digest) for a short while: the token endpoint reads its client
   * on every request. Changes through this repo drop the entry at once; changes by another
   * connection (the `sovcomms client` CLI) drop the whole cache at the next lookup, because
   * SQLite's `data_version` (https://sqlite.org/pragma.html#pragma_data_version) moves whenever
   * another connection commits: a removed client or a replaced secret stops working for every
   * request sent after the commit. The pragma is the connection's once-per-turn read, shared
   * with the tenant cache (DataVersion: a statement per token was ~3 % of a token's CPU).
   * CACHE_MS bounds the life of an entry for anything else.
   */
  readonly #cache = new Map<string, CacheEntry>();
  #version = -1;
  static readonly CACHE_MS = 2000;

  constructor(
    private readonly db: DB,
    private readonly clock: Clock,
  ) {
    this.#get = db.prepare('SELECT * FROM oidc_clients WHERE tenant_id = ? AND client_id = ?');
    this.#dataVersion = dataVersionOf(db);
  }

  #lookup(tenant: Tenant, clientId: string): CacheEntry {
    const version = this.#dataVersion.current();
    if (version !== this.#version) {
      this.#cache.clear();
      this.#version = version;
    }
    // Elapsed time on the monotonic clock (a cache's age, not the appliance's time), in whole ms.
    const now = Math.floor(performance.now());
    const key = `${tenant.id}\u0000${clientId}`;
    const hit = this.#cache.get(key);
    if (hit && now - hit.at < ClientRepo.CACHE_MS) return hit;
    if (clientId === CONSOLE_CLIENT_ID) this.ensureBuiltin(tenant);
    const row = this.#get.get(tenant.id, clientId) as ClientRow | undefined;
    const entry: CacheEntry = { row, client: row && toClient(row), digest: row?.secret_hash ? Buffer.from(row.secret_hash, 'hex') : undefined, at: now };
    if (this.#cache.size > 10_000) this.#cache.clear();
    this.#cache.set(key, entry);
    return entry;
  }

  #forget(tenant: Tenant, clientId: string): void {
    this.#cache.delete(`${tenant.id}\u0000${clientId}`);
  }

  get(tenant: Tenant, clientId: string): OidcClient | undefined {
    const c = this.#lookup(tenant, clientId).client;
    // A copy: callers must not be able to change the cached record.
    return c && { ...c };
  }

  /** The secret check in constant time; false for clients without a secret. */
  checkSecret(tenant: Tenant, clientId: string, secret: string): boolean {
    return this.#secretMatches(this.#lookup(tenant, clientId), secret);
  }

  /**
   * The client, when it exists, uses `method`, and `secret` is its secret; otherwise undefined.
   * One cache lookup for the token endpoint's secret-based client authentication.
   */
  authenticateSecret(tenant: Tenant, clientId: string, method: AuthMethod, secret: string): OidcClient | undefined {
    const e = this.#lookup(tenant, clientId);
    // The digest comparison runs whatever the client's state, so an unknown client and a wrong
    // secret take the same time.
    const ok = this.#secretMatches(e, secret);
    return ok && e.client!.authMethod === method ? { ...e.client! } : undefined;
  }

  /**
   * SHA-256 of the presented secret against the stored one, compared with timingSafeEqual (both
   * 32 bytes, so nothing about the stored value leaks through the comparison's length or time).
   * Secrets are 256 random bits (newClientSecret), so a fast hash is enough: there is nothing to
   * guess that a slow KDF would protect.
   */
  #secretMatches(e: CacheEntry, secret: string): boolean {
    const presented = crypto.hash('sha256', secret, 'buffer');
    return crypto.timingSafeEqual(e.digest ?? NO_SECRET, presented) && e.digest !== undefined;
  }

  list(tenant: Tenant): OidcClient[] {
    this.ensureBuiltin(tenant);
    return (this.db.prepare('SELECT * FROM oidc_clients WHERE tenant_id = ? ORDER BY client_id').all(tenant.id) as ClientRow[]).map(toClient);
  }

  /** Insert or update; a new client with a secret-based auth method gets a secret, returned once. */
  upsert(tenant: Tenant, c: ClientInput): { client: OidcClient; created: boolean; secret?: string } {
    validateClient(c);
    this.#forget(tenant, c.client_id);
    if (c.client_id === CONSOLE_CLIENT_ID) throw new InputError(`${CONSOLE_CLIENT_ID} is built in and cannot be changed`, 'invalid_client_metadata');
    const now = new Date(this.clock.now()).toISOString();
    const existing = this.#get.get(tenant.id, c.client_id) as ClientRow | undefined;
    const needsSecret = c.token_endpoint_auth_method === 'client_secret_basic' || c.token_endpoint_auth_method === 'client_secret_post';
    let secret: string | undefined;
    let secretHash = existing?.secret_hash ?? null;
    if (needsSecret && !secretHash) {
      secret = newClientSecret();
      secretHash = sha256Hex(secret);
    }
    if (!needsSecret) secretHash = null;
    this.db
      .prepare(
        `INSERT INTO oidc_clients (tenant_id, client_id, name, secret_hash, auth_method, redirect_uris, post_logout_redirect_uris, grant_types, jwks,
                  allow_plain_pkce, id_token_alg, skip_consent, builtin, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)
                ON CONFLICT (tenant_id, client_id) DO UPDATE SET name = excluded.name, secret_hash = excluded.secret_hash, auth_method = excluded.auth_method,
                  redirect_uris = excluded.redirect_uris, post_logout_redirect_uris = excluded.post_logout_redirect_uris, grant_types = excluded.grant_types,
                  jwks = excluded.jwks, allow_plain_pkce = excluded.allow_plain_pkce, id_token_alg = excluded.id_token_alg, skip_consent = excluded.skip_consent,
                  updated_at = excluded.updated_at`,
      )
      .run(
        tenant.id,
        c.client_id,
        c.client_name ?? c.client_id,
        secretHash,
        c.token_endpoint_auth_method,
        JSON.stringify(c.redirect_uris),
        JSON.stringify(c.post_logout_redirect_uris),
        JSON.stringify(c.grant_types),
        c.jwks ? JSON.stringify(c.jwks) : null,
        c.allow_plain_pkce ? 1 : 0,
        c.id_token_signed_response_alg,
        c.skip_consent ? 1 : 0,
        now,
        now,
      );
    return { client: this.get(tenant, c.client_id)!, created: !existing, secret };
  }

  /** A new secret replaces the old one at once; the value is returned once and stored hashed. */
  newSecret(tenant: Tenant, clientId: string): string {
    const c = this.get(tenant, clientId);
    if (!c) throw new NotFoundError(`no OIDC client ${clientId}`);
    if (c.authMethod !== 'client_secret_basic' && c.authMethod !== 'client_secret_post') {
      throw new InputError(
        `client ${clientId} authenticates with ${c.authMethod}; a secret applies to client_secret_basic or client_secret_post`,
        'invalid_client_metadata',
      );
    }
    const secret = newClientSecret();
    this.#forget(tenant, clientId);
    this.db
      .prepare('UPDATE oidc_clients SET secret_hash = ?, updated_at = ? WHERE tenant_id = ? AND client_id = ?')
      .run(sha256Hex(secret), new Date(this.clock.now()).toISOString(), tenant.id, clientId);
    return secret;
  }

  remove(tenant: Tenant, clientId: string): void {
    if (clientId === CONSOLE_CLIENT_ID) throw new InputError(`${CONSOLE_CLIENT_ID} is built in and cannot be removed`);
    this.#forget(tenant, clientId);
    const n = this.db.prepare('DELETE FROM oidc_clients WHERE tenant_id = ? AND client_id = ?').run(tenant.id, clientId).changes;
    if (!n) throw new NotFoundError(`no OIDC client ${clientId}`);
  }

  /**
   * The console's public client: PKCE code flow and the password grant of the spec's admin
   * walk-through. Its redirect URIs are origin-relative (`/console/...`): the console is served
   * by the appliance itself under whatever host the operator uses.
   */
  ensureBuiltin(tenant: Tenant): void {
    const now = new Date(this.clock.now()).toISOString();
    this.db
      .prepare(
        `INSERT OR IGNORE INTO oidc_clients (tenant_id, client_id, name, secret_hash, auth_method, redirect_uris, post_logout_redirect_uris, grant_types,
                  jwks, allow_plain_pkce, id_token_alg, skip_consent, builtin, created_at, updated_at)
                VALUES (?, ?, 'Operator console', NULL, 'none', ?, ?, ?, NULL, 0, 'RS256', 1, 1, ?, ?)`,
      )
      .run(
        tenant.id,
        CONSOLE_CLIENT_ID,
        JSON.stringify(['/console/callback']),
        JSON.stringify(['/console/']),
        JSON.stringify(['authorization_code', 'refresh_token', 'password']),
        now,
        now,
      );
  }
}

/** Exact match (RFC 9700 §2.1); origin-relative entries of built-in clients resolve against the issuer. */
export function redirectUriAllowed(registered: string[], uri: string, issuer: string): boolean {
  return registered.some((r) => (r.startsWith('/') ? issuer + r : r) === uri);
}

export function clientView(c: OidcClient): Record<string, unknown> {
  return {
    client_id: c.clientId,
    client_name: c.name,
    token_endpoint_auth_method: c.authMethod,
    redirect_uris: c.redirectUris,
    post_logout_redirect_uris: c.postLogoutRedirectUris,
    grant_types: c.grantTypes,
    jwks: c.jwks,
    allow_plain_pkce: c.allowPlainPkce,
    id_token_signed_response_alg: c.idTokenAlg,
    skip_consent: c.skipConsent,
    builtin: c.builtin,
    has_secret: c.hasSecret,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
  };
}

/**
 * A plugin's built-in public sign-in client (authorization code + PKCE S256, no secret, no consent
 * page), made or completed on first use with `redirectUri` among its redirect URIs (the last 50
 * kept, one per origin the appliance is reached at). Returns `redirectUri`; 400 where the
 * provider refuses it (http on a non-loopback host).
 */
export function builtInClient(clients: ClientRepo, tenant: Tenant, want: { clientId: string; name: string; redirectUri: string }): string {
  const c = clients.get(tenant, want.clientId);
  if (c && c.redirectUris.includes(want.redirectUri) && c.authMethod === 'none' && c.skipConsent && c.grantTypes.includes('authorization_code'))
    return want.redirectUri;
  try {
    clients.upsert(tenant, {
      client_id: want.clientId,
      client_name: want.name,
      redirect_uris: [...new Set([...(c?.redirectUris ?? []), want.redirectUri])].slice(-50),
      post_logout_redirect_uris: [],
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
      jwks: null,
      allow_plain_pkce: false,
      id_token_signed_response_alg: 'ES256',
      skip_consent: true,
    });
  } catch (e) {
    // http on a non-loopback host: the provider takes https redirect URIs only.
    throw new AppError(400, 'invalid_request', `sign-in is not possible at ${new URL(want.redirectUri).origin}: ${(e as Error).message}`);
  }
  return want.redirectUri;
}
