import crypto from 'node:crypto';
import * as jose from 'jose';
import { AppError, RandomPool, type AuditWriter, type Clock, type DB, type Principal, type RateLimiter, sha256Hex, type Tenant, type TenantService, type User, type UserService, verifyPassword } from '../../server/sdk.ts';
import { SigningKeys, halfHash, type SigAlg } from './keys.ts';
import { ClientRepo, JWT_BEARER, redirectUriAllowed, type AuthMethod, type OidcClient } from './clients.ts';
import type { OidcConfig, TokenForm } from './schemas.ts';

export const SCOPES = ['openid', 'profile', 'email', 'offline_access', 'network_access'] as const;
export const CLIENT_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Algorithms accepted from clients (request objects, client assertions); never `none` or HMAC. */
export const CLIENT_ALGS = ['RS256', 'PS256', 'ES256', 'EdDSA'];

/** An OAuth error as RFC 6749 §5.2 names it; rendered by the core as {error, error_description}. */
export function oauthError(code: string, description: string, status = 400, headers?: Record<string, string>): AppError {
  return new AppError(status, code, description, { headers });
}

export interface RequestInfo { ip: string; ua: string; headers: Record<string, string | string[] | undefined> }

export interface GrantContext {
  tenant: Tenant;
  issuer: string;
  form: TokenForm;
  /** The authenticated client, or undefined when the grant allows anonymous use (pre-authorized_code). */
  client: OidcClient | undefined;
  req: RequestInfo;
  provider: OidcProvider;
}
export type GrantHandler = (g: GrantContext) => Promise<Record<string, unknown>>;

/** What other plugins get through ctx.use('oidc'). */
export interface OidcService {
  /** Adds a token endpoint grant (the OID4VCI pre-authorized_code grant of the wallet issuer). */
  registerGrant(type: string, handler: GrantHandler, opts?: { clientAuth?: 'required' | 'optional' }): void;
  issuer(origin: string): string;
  provider: OidcProvider;
}

interface CodeRow {
  code_hash: string; tenant_id: string; grant_id: string; client_id: string; user_id: string; redirect_uri: string; scope: string; nonce: string | null;
  code_challenge: string | null; code_challenge_method: string | null; auth_time: number; sid: string | null; expires_at: number; used_at: number | null;
  amr: string | null;
}
interface RefreshRow {
  token_hash: string; tenant_id: string; grant_id: string; client_id: string; user_id: string; scope: string; auth_time: number; expires_at: number; used_at: number | null;
}

export interface AuthenticatedClient { client: OidcClient; method: AuthMethod }
type ClientAuthForm = { client_id?: string; client_secret?: string; client_assertion_type?: string; client_assertion?: string };

/** A token's jti: 16 fresh random bytes as base64url, from a pooled block (see RandomPool). */
const jtiPool = new RandomPool();

function b64urlSha256(s: string): string {
  return crypto.createHash('sha256').update(s).digest('base64url');
}

function header(h: RequestInfo['headers'], name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The credentials of an `Authorization: Basic` header (scheme case-insensitive, RFC 7617 §2), or undefined. */
function basicCredentials(authz: string | undefined): string | undefined {
  if (authz === undefined || authz.length < 6 || authz.slice(0, 5).toLowerCase() !== 'basic' || (authz[5] !== ' ' && authz[5] !== '\t')) return undefined;
  return authz.slice(6).trim();
}

/** `id:secret` from base64, each form-urlencoded (RFC 6749 §2.3.1); undefined when malformed. */
function decodeBasic(b64: string): { id: string; secret: string } | undefined {
  const dec = Buffer.from(b64, 'base64').toString('utf8');
  const i = dec.indexOf(':');
  if (i < 0) return undefined;
  try {
    return { id: formDecode(dec.slice(0, i)), secret: formDecode(dec.slice(i + 1)) };
  } catch {
    return undefined;
  }
}

function formDecode(s: string): string {
  return s.includes('%') || s.includes('+') ? decodeURIComponent(s.replace(/\+/g, ' ')) : s;
}

/** RFC 6749 §5.2 invalid_client; 401 with WWW-Authenticate when the client tried Basic. */
function clientAuthFailed(why: string, basic: boolean): AppError {
  return oauthError('invalid_client', why, 401, basic ? { 'WWW-Authenticate': 'Basic realm="oauth2", charset="UTF-8"' } : undefined);
}

/**
 * The protocol core: client authentication, the token endpoint's grants, token minting and
 * verification, revocation and introspection. No HTTP in here; routes.ts maps requests onto it.
 */
export class OidcProvider {
  readonly #grants = new Map<string, { handler: GrantHandler; clientAuth: 'required' | 'optional'; sync?: (g: GrantContext) => Record<string, unknown> }>();
  readonly #stmts;

  constructor(
    readonly db: DB,
    readonly keys: SigningKeys,
    readonly clients: ClientRepo,
    readonly users: UserService,
    readonly tenants: TenantService,
    readonly audit: AuditWriter,
    readonly clock: Clock,
    readonly limiter: RateLimiter,
    readonly config: OidcConfig,
  ) {
    this.#stmts = {
      revokedJti: db.prepare('SELECT 1 FROM oidc_revoked_jti WHERE jti = ?'),
      grantRevoked: db.prepare('SELECT revoked_at FROM oidc_grants WHERE grant_id = ?'),
    };
    this.#grants.set('authorization_code', { handler: (g) => this.codeGrant(g), clientAuth: 'required' });
    this.#grants.set('refresh_token', { handler: (g) => this.refreshGrant(g), clientAuth: 'required' });
    this.#grants.set('client_credentials', { handler: async (g) => this.clientCredentialsGrant(g), clientAuth: 'required', sync: (g) => this.clientCredentialsGrant(g) });
    this.#grants.set('password', { handler: (g) => this.passwordGrant(g), clientAuth: 'required' });
    this.#grants.set(JWT_BEARER, { handler: (g) => this.jwtBearerGrant(g), clientAuth: 'optional' });
  }

  registerGrant(type: string, handler: GrantHandler, opts: { clientAuth?: 'required' | 'optional' } = {}): void {
    if (this.#grants.has(type)) throw new Error(`grant ${type} registered twice`);
    this.#grants.set(type, { handler, clientAuth: opts.clientAuth ?? 'optional' });
  }

  grantTypes(): string[] {
    return [...this.#grants.keys()];
  }

  now(): number {
    return Math.floor(this.clock.now() / 1000);
  }

  // ---- client authentication (RFC 6749 §2.3, OIDC Core §9) ----------------------------------

  /**
   * Authenticates the client of a token, revocation or introspection request. Exactly one method
   * may be used (RFC 6749 §2.3), and it must be the one the client registered.
   */
  async authenticateClient(tenant: Tenant, issuer: string, form: ClientAuthForm, req: RequestInfo): Promise<AuthenticatedClient | undefined> {
    return this.#authenticate(tenant, issuer, form, req);
  }

  /** authenticateClient, synchronous unless a client assertion has to be verified. */
  #authenticate(tenant: Tenant, issuer: string, form: ClientAuthForm, req: RequestInfo): AuthenticatedClient | undefined | Promise<AuthenticatedClient> {
    const basic = basicCredentials(header(req.headers, 'authorization'));
    const used = (basic !== undefined ? 1 : 0) + (form.client_secret !== undefined ? 1 : 0) + (form.client_assertion !== undefined ? 1 : 0);
    if (used > 1) throw oauthError('invalid_request', 'more than one client authentication method used');
    if (basic !== undefined) {
      // RFC 6749 §2.3.1: client_id and secret are form-urlencoded before base64.
      const cred = decodeBasic(basic);
      if (!cred) throw clientAuthFailed('malformed Basic credentials', true);
      if (form.client_id !== undefined && form.client_id !== cred.id) throw oauthError('invalid_request', 'client_id differs from the authenticated client');
      const c = this.clients.authenticateSecret(tenant, cred.id, 'client_secret_basic', cred.secret);
      if (!c) throw clientAuthFailed('client authentication failed', true);
      return { client: c, method: 'client_secret_basic' };
    }
    if (form.client_secret !== undefined) {
      const c = this.clients.authenticateSecret(tenant, form.client_id ?? '', 'client_secret_post', form.client_secret);
      if (!c) throw clientAuthFailed('client authentication failed', false);
      return { client: c, method: 'client_secret_post' };
    }
    if (form.client_assertion !== undefined) return this.#authenticateAssertion(tenant, issuer, form, form.client_assertion);
    if (form.client_id !== undefined) {
      const c = this.clients.get(tenant, form.client_id);
      if (!c) throw clientAuthFailed('unknown client', false);
      if (c.authMethod !== 'none') throw clientAuthFailed(`client ${c.clientId} must authenticate with ${c.authMethod}`, false);
      return { client: c, method: 'none' };
    }
    return undefined;
  }

  /** private_key_jwt (RFC 7523 §2.2, OIDC Core §9). */
  async #authenticateAssertion(tenant: Tenant, issuer: string, form: ClientAuthForm, assertion: string): Promise<AuthenticatedClient> {
    const fail = (why: string) => clientAuthFailed(why, false);
    if (form.client_assertion_type !== CLIENT_ASSERTION_TYPE) throw oauthError('invalid_request', `client_assertion_type must be ${CLIENT_ASSERTION_TYPE}`);
    let claims: jose.JWTPayload;
    try {
      claims = jose.decodeJwt(assertion);
    } catch {
      throw fail('client_assertion is not a JWT');
    }
    const id = typeof claims.iss === 'string' ? claims.iss : '';
    if (form.client_id !== undefined && form.client_id !== id) throw oauthError('invalid_request', 'client_id differs from the assertion issuer');
    const c = this.clients.get(tenant, id);
    if (!c || c.authMethod !== 'private_key_jwt') throw fail('client authentication failed');
    // RFC 7523 §3: iss = sub = client_id, aud = the token endpoint (we accept the issuer too, OIDC Core §9).
    await this.verifyClientJwt(tenant, c, assertion, [issuer, `${issuer}/oauth2/v1/token`, `${issuer}/oidc.ashx/token`], true).catch((e: unknown) => {
      throw fail(`client_assertion rejected: ${(e as Error).message}`);
    });
    return { client: c, method: 'private_key_jwt' };
  }

  /** Verifies a JWT signed with one of the client's registered keys (RFC 7523, RFC 9101). */
  async verifyClientJwt(tenant: Tenant, c: OidcClient, jwt: string, audience: string[], assertion: boolean): Promise<jose.JWTPayload> {
    if (!c.jwks?.keys.length) throw new Error('the client has no registered keys');
    const set = jose.createLocalJWKSet(c.jwks as jose.JSONWebKeySet);
    const { payload } = await jose.jwtVerify(jwt, set, {
      algorithms: CLIENT_ALGS, issuer: c.clientId, audience, clockTolerance: 30, currentDate: new Date(this.clock.now()),
      requiredClaims: assertion ? ['exp', 'jti', 'sub'] : [],
    });
    if (assertion) {
      if (payload.sub !== c.clientId) throw new Error('sub must equal the client_id');
      this.rememberJti(tenant, c.clientId, payload.jti!, payload.exp!);
    }
    return payload;
  }

  /** One use per jti until it expires (RFC 7523 §3 item 7): a replayed assertion is refused. */
  rememberJti(tenant: Tenant, issuer: string, jti: string, exp: number): void {
    this.db.prepare('DELETE FROM oidc_assertion_jti WHERE exp < ?').run(this.now() - 60);
    const r = this.db.prepare('INSERT OR IGNORE INTO oidc_assertion_jti (tenant_id, issuer, jti, exp) VALUES (?, ?, ?, ?)').run(tenant.id, issuer, jti, exp);
    if (r.changes === 0) throw new Error('jti already used');
  }

  // ---- the token endpoint --------------------------------------------------------------------

  async token(tenant: Tenant, issuer: string, form: TokenForm, req: RequestInfo): Promise<Record<string, unknown>> {
    const g = this.#grants.get(form.grant_type);
    if (!g) throw oauthError('unsupported_grant_type', `grant_type ${form.grant_type} is not supported`);
    const pending = this.#authenticate(tenant, issuer, form, req);
    const auth = pending instanceof Promise ? await pending : pending;
    if (!auth && g.clientAuth === 'required') throw oauthError('invalid_client', 'client authentication or client_id is required', 401);
    if (auth && !auth.client.grantTypes.includes(form.grant_type)) {
      throw oauthError('unauthorized_client', `client ${auth.client.clientId} may not use grant_type ${form.grant_type}`);
    }
    const ctx: GrantContext = { tenant, issuer, form, client: auth?.client, req, provider: this };
    return g.sync ? g.sync(ctx) : g.handler(ctx);
  }

  /** Scopes asked for, limited to the known ones (RFC 6749 §3.3: unknown → invalid_scope). */
  parseScope(scope: string | undefined, fallback: string[]): string[] {
    if (scope === undefined || scope.trim() === '') return fallback;
    const s = [...new Set(scope.split(' ').filter(Boolean))];
    const unknown = s.filter((x) => !(SCOPES as readonly string[]).includes(x));
    if (unknown.length) throw oauthError('invalid_scope', `unknown scope ${unknown.join(' ')}`);
    return s;
  }

  private async codeGrant(g: GrantContext): Promise<Record<string, unknown>> {
    const { tenant, form } = g;
    const client = g.client!;
    if (!form.code) throw oauthError('invalid_request', 'code is required');
    const hash = sha256Hex(form.code);
    const now = this.now();
    // Single use, consumed even when the exchange fails (spec "Issuer authorization code"):
    // mark used first, inside one statement, so two racing exchanges cannot both win.
    const row = this.db.transaction(() => {
      const r = this.db.prepare('SELECT * FROM oidc_codes WHERE code_hash = ? AND tenant_id = ?').get(hash, tenant.id) as CodeRow | undefined;
      if (r && r.used_at === null) this.db.prepare('UPDATE oidc_codes SET used_at = ? WHERE code_hash = ?').run(now, hash);
      return r;
    }).immediate();
    if (!row) throw oauthError('invalid_grant', 'unknown or expired code');
    if (row.used_at !== null) {
      // RFC 6749 §4.1.2: a code used twice revokes the tokens issued from it.
      this.revokeGrant(row.grant_id);
      throw oauthError('invalid_grant', 'code already used; the tokens issued from it are revoked');
    }
    if (row.client_id !== client.clientId) throw oauthError('invalid_grant', 'code was issued to another client');
    if (row.expires_at < now) throw oauthError('invalid_grant', 'code expired');
    if (form.redirect_uri !== row.redirect_uri) throw oauthError('invalid_grant', 'redirect_uri differs from the authorization request');
    if (row.code_challenge) {
      const v = form.code_verifier;
      if (!v) throw oauthError('invalid_grant', 'code_verifier is required (PKCE)');
      // RFC 7636 §4.1: 43 to 128 unreserved characters.
      if (!/^[A-Za-z0-9._~-]{43,128}$/.test(v)) throw oauthError('invalid_grant', 'code_verifier must be 43 to 128 unreserved characters');
      const ok = row.code_challenge_method === 'plain' ? v === row.code_challenge : b64urlSha256(v) === row.code_challenge;
      if (!ok) throw oauthError('invalid_grant', 'code_verifier does not match the code_challenge');
    } else if (form.code_verifier !== undefined) {
      // RFC 9700 §2.1.1 (PKCE downgrade): a verifier without a challenge in the request is refused.
      throw oauthError('invalid_grant', 'code_verifier sent but no code_challenge was in the authorization request');
    }
    const user = this.activeUser(tenant, row.user_id);
    if (!user) throw oauthError('invalid_grant', 'the account is no longer active');
    const scope = row.scope.split(' ');
    return this.issue(tenant, g.issuer, {
      client, user, scope, grantId: row.grant_id, authTime: row.auth_time, nonce: row.nonce ?? undefined, sid: row.sid ?? undefined,
      amr: row.amr ? (JSON.parse(row.amr) as string[]) : undefined, withIdToken: scope.includes('openid'), withRefresh: scope.includes('offline_access') && client.grantTypes.includes('refresh_token'),
    });
  }

  private async refreshGrant(g: GrantContext): Promise<Record<string, unknown>> {
    const { tenant, form } = g;
    const client = g.client!;
    if (!form.refresh_token) throw oauthError('invalid_request', 'refresh_token is required');
    const hash = sha256Hex(form.refresh_token);
    const now = this.now();
    const row = this.db.transaction(() => {
      const r = this.db.prepare('SELECT * FROM oidc_refresh_tokens WHERE token_hash = ? AND tenant_id = ?').get(hash, tenant.id) as RefreshRow | undefined;
      if (r && r.used_at === null) this.db.prepare('UPDATE oidc_refresh_tokens SET used_at = ? WHERE token_hash = ?').run(now, hash);
      return r;
    }).immediate();
    if (!row) throw oauthError('invalid_grant', 'unknown refresh token');
    if (row.client_id !== client.clientId) throw oauthError('invalid_grant', 'refresh token was issued to another client');
    if (row.used_at !== null) {
      // RFC 9700 §4.14.2: a rotated-out refresh token presented again means it leaked; revoke the family.
      this.revokeGrant(row.grant_id);
      throw oauthError('invalid_grant', 'refresh token already used; the grant is revoked');
    }
    if (this.grantRevoked(row.grant_id)) throw oauthError('invalid_grant', 'the grant was revoked');
    if (row.expires_at < now) throw oauthError('invalid_grant', 'refresh token expired');
    const granted = row.scope.split(' ');
    const scope = this.parseScope(form.scope, granted);
    // RFC 6749 §6: the scope may only narrow.
    if (scope.some((s) => !granted.includes(s))) throw oauthError('invalid_scope', 'scope exceeds the original grant');
    const user = this.activeUser(tenant, row.user_id);
    if (!user) throw oauthError('invalid_grant', 'the account is no longer active');
    return this.issue(tenant, g.issuer, {
      client, user, scope, grantId: row.grant_id, authTime: row.auth_time, withIdToken: scope.includes('openid'), withRefresh: true, refreshScope: granted,
    });
  }

  /** Synchronous: nothing to wait for (no id_token, no refresh token), so no promise per step. */
  private clientCredentialsGrant(g: GrantContext): Record<string, unknown> {
    const client = g.client!;
    // No user: identity scopes make no sense (OIDC Core §3.1.2.1 is about users).
    const scope = this.parseScope(g.form.scope, []).filter((s) => s !== 'openid' && s !== 'offline_access' && s !== 'profile' && s !== 'email');
    const at = this.mintAccessToken(g.tenant, g.issuer, { client, scope });
    return { access_token: at.token, token_type: 'Bearer', expires_in: this.config.accessTokenTtl, scope: scope.join(' ') };
  }

  private async passwordGrant(g: GrantContext): Promise<Record<string, unknown>> {
    const { tenant, form, req } = g;
    const client = g.client!;
    if (!form.username || form.password === undefined) throw oauthError('invalid_request', 'username and password are required');
    const user = await this.checkPassword(tenant, form.username, form.password, req, { via: 'password-grant', client: client.clientId });
    if (!user) throw oauthError('invalid_grant', 'wrong username or password');
    const scope = this.parseScope(form.scope, ['openid']);
    const grantId = this.newGrant(tenant, client.clientId, user.id, scope);
    return this.issue(tenant, g.issuer, {
      client, user, scope, grantId, authTime: this.now(), withIdToken: scope.includes('openid'),
      withRefresh: scope.includes('offline_access') && client.grantTypes.includes('refresh_token'), amr: ['pwd'],
    });
  }

  /**
   * Password check with per-IP and per-account limits and the audit trail. Returns the user, or
   * undefined for a wrong password / unknown account (constant time either way, users.ts).
   * Throws 429 when rate limited.
   */
  async checkPassword(tenant: Tenant, login: string, password: string, req: RequestInfo, extra: Record<string, string>): Promise<User | undefined> {
    const acct = `${tenant.id}|${login.toLowerCase()}`;
    const ipWait = this.limiter.take('oidc-login-ip', req.ip, this.config.loginPerIpPerMinute);
    const acctLimited = this.limiter.isLimited('oidc-login-account', acct, this.config.loginFailuresPerAccountPerMinute);
    if (ipWait > 0 || acctLimited) {
      this.audit.write(tenant, { event: 'login-rate-limited', user: login, ip: req.ip, ua: req.ua, extra: { ...extra, by: ipWait > 0 ? 'ip' : 'account' } });
      throw new AppError(429, 'rate_limited', 'too many sign-in attempts; try again later', { headers: { 'Retry-After': String(ipWait > 0 ? ipWait : 60) } });
    }
    const user = this.users.byLogin(tenant, login);
    const ok = await verifyPassword(password, user ? this.users.passwordHash(tenant, user.id) : null);
    if (ok && user && user.status === 'active') {
      this.limiter.reset('oidc-login-account', acct);
      this.audit.write(tenant, { event: 'login-ok', user: user.name, ip: req.ip, ua: req.ua, extra });
      return user;
    }
    if (user && user.status === 'invited') {
      this.audit.write(tenant, { event: 'login-claim-pending', user: user.name, ip: req.ip, ua: req.ua, extra });
    }
    this.limiter.take('oidc-login-account', acct, this.config.loginFailuresPerAccountPerMinute);
    this.audit.write(tenant, { event: 'login-fail', user: login, ip: req.ip, ua: req.ua, extra: { ...extra, reason: !user ? 'unknown-user' : user.status !== 'active' ? user.status : 'bad-password' } });
    return undefined;
  }

  /** RFC 7523 §2.1: an assertion signed by a registered client, whose sub names a user of the tenant. */
  private async jwtBearerGrant(g: GrantContext): Promise<Record<string, unknown>> {
    const { tenant, form } = g;
    if (!form.assertion) throw oauthError('invalid_request', 'assertion is required');
    let iss: unknown;
    try {
      iss = jose.decodeJwt(form.assertion).iss;
    } catch {
      throw oauthError('invalid_grant', 'assertion is not a JWT');
    }
    const client = g.client ?? (typeof iss === 'string' ? this.clients.get(tenant, iss) : undefined);
    if (!client) throw oauthError('invalid_grant', 'assertion issuer is not a registered client');
    if (!client.grantTypes.includes(JWT_BEARER)) throw oauthError('unauthorized_client', `client ${client.clientId} may not use the jwt-bearer grant`);
    if (g.client && iss !== g.client.clientId) throw oauthError('invalid_grant', 'assertion issuer differs from the authenticated client');
    let claims: jose.JWTPayload;
    try {
      const set = jose.createLocalJWKSet(client.jwks as jose.JSONWebKeySet);
      ({ payload: claims } = await jose.jwtVerify(form.assertion, set, {
        algorithms: CLIENT_ALGS, issuer: client.clientId, audience: [g.issuer, `${g.issuer}/oauth2/v1/token`, `${g.issuer}/oidc.ashx/token`],
        requiredClaims: ['exp', 'sub', 'jti'], clockTolerance: 30, currentDate: new Date(this.clock.now()),
      }));
      // RFC 7523 §3 item 4: exp bounds the window; refuse assertions living longer than an hour.
      if (claims.exp! - this.now() > 3600) throw new Error('exp too far in the future');
      this.rememberJti(tenant, client.clientId, claims.jti!, claims.exp!);
    } catch (e) {
      throw oauthError('invalid_grant', `assertion rejected: ${(e as Error).message}`);
    }
    const user = this.users.get(tenant, String(claims.sub)) ?? this.users.byName(tenant, String(claims.sub));
    if (!user || user.status !== 'active') throw oauthError('invalid_grant', 'assertion subject is not an active user of this tenant');
    const scope = this.parseScope(form.scope, ['openid']).filter((s) => s !== 'offline_access');
    const grantId = this.newGrant(tenant, client.clientId, user.id, scope);
    return this.issue(tenant, g.issuer, { client, user, scope, grantId, authTime: this.now(), withIdToken: false, withRefresh: false });
  }

  // ---- minting ---------------------------------------------------------------------------

  activeUser(tenant: Tenant, id: string): User | undefined {
    const u = this.users.get(tenant, id);
    return u && u.status === 'active' ? u : undefined;
  }

  newGrant(tenant: Tenant, clientId: string, userId: string | null, scope: string[]): string {
    const id = 'g_' + crypto.randomBytes(12).toString('base64url');
    this.db.prepare('INSERT INTO oidc_grants (grant_id, tenant_id, client_id, user_id, scope, created_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(id, tenant.id, clientId, userId, scope.join(' '), new Date(this.clock.now()).toISOString());
    return id;
  }

  revokeGrant(grantId: string): void {
    this.db.prepare('UPDATE oidc_grants SET revoked_at = COALESCE(revoked_at, ?) WHERE grant_id = ?').run(new Date(this.clock.now()).toISOString(), grantId);
    this.db.prepare('UPDATE oidc_refresh_tokens SET used_at = COALESCE(used_at, ?) WHERE grant_id = ?').run(this.now(), grantId);
  }

  grantRevoked(grantId: string): boolean {
    const r = this.#stmts.grantRevoked.get(grantId) as { revoked_at: string | null } | undefined;
    return !r || r.revoked_at !== null;
  }

  async accessToken(tenant: Tenant, issuer: string, o: { client: OidcClient; user?: User; scope: string[]; grantId?: string; authTime?: number; extra?: Record<string, unknown> }): Promise<{ token: string; exp: number; jti: string }> {
    return this.mintAccessToken(tenant, issuer, o);
  }

  mintAccessToken(tenant: Tenant, issuer: string, o: { client: OidcClient; user?: User; scope: string[]; grantId?: string; authTime?: number; extra?: Record<string, unknown> }): { token: string; exp: number; jti: string } {
    const now = this.now();
    const exp = now + this.config.accessTokenTtl;
    const jti = jtiPool.base64url(16);
    // RFC 9068 §2.2: iss, exp, aud, sub, client_id, iat, jti; plus tenant, roles and scope.
    const payload: jose.JWTPayload = {
      iss: issuer, sub: o.user?.id ?? o.client.clientId, aud: issuer, client_id: o.client.clientId, iat: now, exp, jti,
      scope: o.scope.join(' '), tenant: tenant.id,
      ...(o.user ? { roles: [o.user.role], preferred_username: o.user.name } : {}),
      ...(o.authTime ? { auth_time: o.authTime } : {}),
      ...(o.grantId ? { gid: o.grantId } : {}),
      ...o.extra,
    };
    return { token: this.keys.signSync(tenant, payload, { alg: this.config.accessTokenAlg, typ: 'at+jwt' }), exp, jti };
  }

  async idToken(tenant: Tenant, issuer: string, o: { client: OidcClient; user: User; authTime: number; nonce?: string; sid?: string; accessToken?: string; code?: string; scope: string[]; amr?: string[] }): Promise<string> {
    const now = this.now();
    const payload: jose.JWTPayload = {
      iss: issuer, sub: o.user.id, aud: o.client.clientId, azp: o.client.clientId, iat: now, exp: now + this.config.idTokenTtl, auth_time: o.authTime,
      ...(o.nonce !== undefined ? { nonce: o.nonce } : {}),
      ...(o.sid ? { sid: o.sid } : {}),
      ...(o.amr ? { amr: o.amr } : {}),
      ...(o.accessToken ? { at_hash: halfHash(o.accessToken) } : {}),
      ...(o.code ? { c_hash: halfHash(o.code) } : {}),
      ...this.userClaims(tenant, o.user, o.scope),
    };
    return this.keys.sign(tenant, payload, { alg: o.client.idTokenAlg as SigAlg, typ: 'JWT' });
  }

  /** Claims by scope (OIDC Core §5.4). */
  userClaims(tenant: Tenant, user: User, scope: string[]): Record<string, unknown> {
    const c: Record<string, unknown> = { tenant: tenant.id };
    if (scope.includes('profile')) Object.assign(c, { name: user.name, preferred_username: user.name, roles: [user.role] });
    if (scope.includes('email') && user.email) Object.assign(c, { email: user.email, email_verified: false });
    return c;
  }

  async issue(tenant: Tenant, issuer: string, o: {
    client: OidcClient; user?: User; scope: string[]; grantId?: string; authTime?: number; nonce?: string; sid?: string;
    withIdToken: boolean; withRefresh: boolean; refreshScope?: string[]; amr?: string[];
  }): Promise<Record<string, unknown>> {
    const at = this.mintAccessToken(tenant, issuer, o);
    const out: Record<string, unknown> = { access_token: at.token, token_type: 'Bearer', expires_in: this.config.accessTokenTtl, scope: o.scope.join(' ') };
    if (o.withIdToken && o.user) {
      out.id_token = await this.idToken(tenant, issuer, { client: o.client, user: o.user, authTime: o.authTime ?? this.now(), nonce: o.nonce, sid: o.sid, accessToken: at.token, scope: o.scope, amr: o.amr });
    }
    if (o.withRefresh && o.user && o.grantId) {
      const rt = 'rt_' + crypto.randomBytes(32).toString('base64url');
      this.db.prepare('INSERT INTO oidc_refresh_tokens (token_hash, tenant_id, grant_id, client_id, user_id, scope, auth_time, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run(sha256Hex(rt), tenant.id, o.grantId, o.client.clientId, o.user.id, (o.refreshScope ?? o.scope).join(' '), o.authTime ?? this.now(), this.now() + this.config.refreshTokenTtl);
      out.refresh_token = rt;
    }
    return out;
  }

  /** Stores an authorization code (by hash) and returns it. */
  newCode(tenant: Tenant, o: { grantId: string; clientId: string; userId: string; redirectUri: string; scope: string[]; nonce?: string; challenge?: string; method?: string; authTime: number; sid?: string; amr?: string[] }): string {
    const code = 'ac_' + crypto.randomBytes(32).toString('base64url');
    this.db.prepare('DELETE FROM oidc_codes WHERE expires_at < ?').run(this.now() - 86_400);
    this.db.prepare(`INSERT INTO oidc_codes (code_hash, tenant_id, grant_id, client_id, user_id, redirect_uri, scope, nonce, code_challenge, code_challenge_method, auth_time, sid, expires_at, amr)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(sha256Hex(code), tenant.id, o.grantId, o.clientId, o.userId, o.redirectUri, o.scope.join(' '), o.nonce ?? null, o.challenge ?? null,
        o.challenge ? (o.method ?? 'plain') : null, o.authTime, o.sid ?? null, this.now() + this.config.codeTtl, o.amr ? JSON.stringify(o.amr) : null);
    return code;
  }

  // ---- verification ----------------------------------------------------------------------

  /**
   * Verifies one of our access tokens for `tenant`: signature with that tenant's keys only, alg
   * pinned to the key, typ at+jwt (RFC 9068 §4), iss naming a host of the tenant, tenant claim,
   * exp, and neither the jti nor the grant revoked. Null for anything else.
   */
  async verifyAccessToken(tenant: Tenant, token: string): Promise<jose.JWTPayload | null> {
    if (token.length > 8192 || token.split('.').length !== 3) return null;
    let claims: jose.JWTPayload;
    try {
      claims = await this.keys.verify(tenant, token, { typ: 'at+jwt' });
    } catch {
      return null;
    }
    if (claims.tenant !== tenant.id || typeof claims.iss !== 'string') return null;
    try {
      if (this.tenants.resolve(new URL(claims.iss).host).id !== tenant.id) return null;
    } catch {
      return null;
    }
    if (typeof claims.jti === 'string' && this.#stmts.revokedJti.get(claims.jti)) return null;
    if (typeof claims.gid === 'string' && this.grantRevoked(claims.gid)) return null;
    return claims;
  }

  async principal(token: string, tenant: Tenant): Promise<Principal | null> {
    const claims = await this.verifyAccessToken(tenant, token);
    if (!claims) return null;
    const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ').filter(Boolean) : [];
    const clientId = String(claims.client_id);
    if (claims.sub === clientId && !claims.roles) {
      return { kind: 'client', tenantId: tenant.id, subject: clientId, clientId, scopes, superAdmin: false, claims: claims as Record<string, unknown> };
    }
    // The role is read now, not from the token: a demoted or disabled admin loses access at once.
    const user = this.activeUser(tenant, String(claims.sub));
    if (!user) return null;
    return {
      kind: 'user', tenantId: tenant.id, subject: user.id, userName: user.name, email: user.email, role: user.role, scopes, clientId,
      superAdmin: user.role === 'admin' && tenant.isPrimary, claims: claims as Record<string, unknown>,
    };
  }

  /** RFC 7009: revoke an access token (by jti) or a refresh token (its whole grant). Never tells which. */
  async revoke(tenant: Tenant, client: OidcClient, token: string): Promise<'access' | 'refresh' | 'unknown'> {
    const rt = this.db.prepare('SELECT grant_id, client_id FROM oidc_refresh_tokens WHERE token_hash = ? AND tenant_id = ?').get(sha256Hex(token), tenant.id) as { grant_id: string; client_id: string } | undefined;
    if (rt) {
      if (rt.client_id !== client.clientId) return 'unknown';
      this.revokeGrant(rt.grant_id);
      return 'refresh';
    }
    const claims = await this.verifyAccessToken(tenant, token);
    if (!claims || claims.client_id !== client.clientId) return 'unknown';
    this.db.prepare('DELETE FROM oidc_revoked_jti WHERE exp < ?').run(this.now());
    this.db.prepare('INSERT OR IGNORE INTO oidc_revoked_jti (jti, tenant_id, exp) VALUES (?, ?, ?)').run(String(claims.jti), tenant.id, Number(claims.exp));
    return 'access';
  }

  /** RFC 7662: {active:false} for anything unknown, expired, revoked or of another tenant. */
  async introspect(tenant: Tenant, token: string): Promise<Record<string, unknown>> {
    const rt = this.db.prepare('SELECT * FROM oidc_refresh_tokens WHERE token_hash = ? AND tenant_id = ?').get(sha256Hex(token), tenant.id) as RefreshRow | undefined;
    if (rt) {
      if (rt.used_at !== null || rt.expires_at < this.now() || this.grantRevoked(rt.grant_id)) return { active: false };
      // RFC 7662 §2.2: active means usable; the refresh grant refuses a disabled account's token.
      const u = this.activeUser(tenant, rt.user_id);
      if (!u) return { active: false };
      return { active: true, token_type: 'refresh_token', client_id: rt.client_id, sub: rt.user_id, username: u?.name, scope: rt.scope, exp: rt.expires_at };
    }
    const c = await this.verifyAccessToken(tenant, token);
    if (!c) return { active: false };
    const u = c.roles ? this.activeUser(tenant, String(c.sub)) : undefined;
    if (c.roles && !u) return { active: false };
    return {
      active: true, token_type: 'Bearer', scope: c.scope, client_id: c.client_id, sub: c.sub, username: u?.name, iss: c.iss, aud: c.aud,
      exp: c.exp, iat: c.iat, jti: c.jti, tenant: c.tenant, ...(u ? { roles: [u.role] } : {}),
    };
  }

  redirectAllowed(client: OidcClient, uri: string, issuer: string): boolean {
    return redirectUriAllowed(client.redirectUris, uri, issuer);
  }
}
