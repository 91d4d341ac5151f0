import crypto from 'node:crypto';
import type * as jose from 'jose';
import {
  AppError,
  type AuditWriter,
  type Clock,
  type DB,
  type Principal,
  type RateLimiter,
  sha256Hex,
  type Tenant,
  type TenantService,
  type User,
  type UserService,
  verifyPassword,
} from '../../server/sdk.ts';
import type { SigningKeys } from './keys.ts';
import type { GrantDefinition, GrantRequest } from './api.ts';
import { redirectUriAllowed, type ClientRepo, type OidcClient } from './clients.ts';
import { ClientAuthenticator, type AuthenticatedClient, type ClientAuthForm } from './client-auth.ts';
import { authorizationCodeGrant } from './grants/authorization-code.ts';
import { clientCredentialsGrant } from './grants/client-credentials.ts';
import { jwtBearerGrant } from './grants/jwt-bearer.ts';
import { passwordGrant } from './grants/password.ts';
import { refreshTokenGrant } from './grants/refresh-token.ts';
import { oauthError, SCOPES, type Grant, type GrantContext, type GrantServices, type RequestInfo } from './oauth.ts';
import { OidcRepo, type NewCode } from './repo.ts';
import { tokenFormSchema, type OidcConfig, type TokenForm } from './schemas.ts';
import { TokenMinter, type AccessTokenInput } from './tokens.ts';

export { CLIENT_ALGS, CLIENT_ASSERTION_TYPE, oauthError, SCOPES, type GrantContext, type RequestInfo } from './oauth.ts';
export type { AuthenticatedClient } from './client-auth.ts';

/** The built-in grants, in the order discovery lists them. */
const BUILT_IN_GRANTS: readonly Grant[] = [authorizationCodeGrant, refreshTokenGrant, clientCredentialsGrant, passwordGrant, jwtBearerGrant];

/**
 * The OpenID Provider of every tenant, composed: the grant registry and the token endpoint,
 * users' sign-in checks, grants and codes, principal lookup, revocation and introspection. Client
 * authentication is client-auth.ts, minting and verifying tokens tokens.ts, each grant a file of
 * grants/, the SQL repo.ts. No HTTP in here; routes map requests onto it.
 */
export class OidcProvider implements GrantServices {
  readonly #grants = new Map<string, Grant>();
  /** The token form, composed from the grants' parameters once the routes are mounted; no grant is added after. */
  #tokenForm: ReturnType<typeof tokenFormSchema> | undefined;
  readonly repo: OidcRepo;
  readonly tokens: TokenMinter;
  readonly #clientAuth: ClientAuthenticator;

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
    this.repo = new OidcRepo(db);
    this.tokens = new TokenMinter(keys, this.repo, tenants, clock, config);
    this.#clientAuth = new ClientAuthenticator(clients, this.repo, clock);
    for (const g of BUILT_IN_GRANTS) this.#add(g);
  }

  #add(g: Grant): void {
    if (this.#tokenForm) throw new Error(`grant ${g.type}: grants are registered at setup, before the token endpoint is mounted`);
    if (this.#grants.has(g.type)) throw new Error(`grant ${g.type} registered twice`);
    this.#grants.set(g.type, g);
  }

  /**
   * A grant of another plugin (OidcService.registerGrant). Its handler sees the request and a few
   * narrow methods of the provider (GrantRequest), never the provider itself.
   */
  registerGrant<P extends string>(def: GrantDefinition<P>): void {
    this.#add({
      type: def.type,
      parameters: def.parameters,
      clientAuth: def.clientAuth,
      handler: (g) => def.handler(this.#grantRequest<P>(g)),
    });
  }

  #grantRequest<P extends string>(g: GrantContext): GrantRequest<P> {
    return {
      tenant: g.tenant,
      issuer: g.issuer,
      form: g.form as GrantRequest<P>['form'],
      client: g.client,
      req: g.req,
      scope: (asked, fallback) => this.parseScope(asked, fallback),
      activeUser: (id) => this.activeUser(g.tenant, id),
      issue: async ({ user, scope, idToken, amr }) => {
        if (!g.client) throw oauthError('invalid_client', 'client authentication is required to issue tokens', 401);
        const grantId = this.newGrant(g.tenant, g.client.clientId, user.id, scope);
        return this.tokens.issue(g.tenant, g.issuer, {
          client: g.client,
          user,
          scope,
          grantId,
          authTime: this.now(),
          withIdToken: idToken,
          withRefresh: false,
          ...(amr ? { amr } : {}),
        });
      },
    };
  }

  /** The token endpoint's grant types, built-in first, then other plugins' in their setup order. */
  grantTypes(): string[] {
    return [...this.#grants.keys()];
  }

  /** What a client may be registered for: the grant types, and `implicit` (id_tokens from the authorization endpoint). */
  clientGrantTypes(): string[] {
    const types = this.grantTypes();
    return [types[0]!, 'implicit', ...types.slice(1)];
  }

  /** The token endpoint's form: grant_type and every registered grant's parameters (composed once; grants are fixed from then on). */
  tokenForm(): ReturnType<typeof tokenFormSchema> {
    this.#tokenForm ??= tokenFormSchema([...new Set([...this.#grants.values()].flatMap((g) => g.parameters))]);
    return this.#tokenForm;
  }

  /** One line per grant for the token endpoint's description in /openapi.json. */
  grantsDescription(): string {
    return [...this.#grants.values()]
      .map((g) => `\`${g.type}\`: ${g.parameters.join(', ')}${g.clientAuth === 'optional' ? ' (client authentication optional)' : ''}`)
      .join('; ');
  }

  now(): number {
    return Math.floor(this.clock.now() / 1000);
  }

  // ---- client authentication (client-auth.ts) --------------------------------------------------

  /** Authenticates the client of a token, revocation or introspection request (RFC 6749 §2.3). */
  async authenticateClient(tenant: Tenant, issuer: string, form: ClientAuthForm, req: RequestInfo): Promise<AuthenticatedClient | undefined> {
    return this.#clientAuth.authenticate(tenant, issuer, form, req);
  }

  verifyClientJwt(tenant: Tenant, c: OidcClient, jwt: string, audience: string[], assertion: boolean): Promise<jose.JWTPayload> {
    return this.#clientAuth.verifyClientJwt(tenant, c, jwt, audience, assertion);
  }

  rememberJti(tenant: Tenant, issuer: string, jti: string, exp: number): void {
    this.#clientAuth.rememberJti(tenant, issuer, jti, exp);
  }

  // ---- the token endpoint --------------------------------------------------------------------

  /**
   * The token endpoint's work (RFC 6749 §3.2): the grant by its type, the client authenticated
   * (without a promise unless an assertion has to be verified), then the grant's handler once the
   * tenant's signing keys exist (made off the event loop at first use: keys.ready).
   */
  async token(tenant: Tenant, issuer: string, form: TokenForm, req: RequestInfo): Promise<Record<string, unknown>> {
    const g = this.#grants.get(form.grant_type);
    if (!g) throw oauthError('unsupported_grant_type', `grant_type ${form.grant_type} is not supported`);
    const pending = this.#clientAuth.authenticate(tenant, issuer, form, req);
    const auth = pending instanceof Promise ? await pending : pending;
    if (!auth && g.clientAuth === 'required') throw oauthError('invalid_client', 'client authentication or client_id is required', 401);
    if (auth && !auth.client.grantTypes.includes(form.grant_type)) {
      throw oauthError('unauthorized_client', `client ${auth.client.clientId} may not use grant_type ${form.grant_type}`);
    }
    const keys = this.keys.ready(tenant);
    if (keys !== true) await keys;
    const out = await g.handler({ tenant, issuer, form, client: auth?.client, req, provider: this });
    this.#count(g);
    return out;
  }

  /** Counted per grant type (a bounded set: the registered grants) for GET /metrics. */
  #count(g: Grant): void {
    this.issued.set(g.type, (this.issued.get(g.type) ?? 0) + 1);
  }

  /** Token responses issued since start, by grant type (GET /metrics). */
  readonly issued = new Map<string, number>();

  /** Scopes asked for, limited to the known ones (RFC 6749 §3.3: unknown → invalid_scope). */
  parseScope(scope: string | undefined, fallback: string[]): string[] {
    if (scope === undefined || scope.trim() === '') return fallback;
    const s = [...new Set(scope.split(' ').filter(Boolean))];
    const unknown = s.filter((x) => !(SCOPES as readonly string[]).includes(x));
    if (unknown.length) throw oauthError('invalid_scope', `unknown scope ${unknown.join(' ')}`);
    return s;
  }

  /**
   * Password check with per-IP and per-account limits and the audit trail. Returns the user, or
   * undefined for a wrong password / unknown account (constant time either way, users.ts).
   * Throws 429 when rate limited.
   */
  async checkPassword(tenant: Tenant, login: string, password: string, req: RequestInfo, extra: Record<string, string>): Promise<User | undefined> {
    const ipWait = this.limiter.take('oidc-login-ip', req.ip, this.config.loginPerIpPerMinute);
    if (ipWait > 0) {
      this.audit.write(tenant, { event: 'login-rate-limited', user: login, ip: req.ip, ua: req.ua, extra: { ...extra, by: 'ip' }, aggregate: true });
      throw new AppError(429, 'rate_limited', 'too many sign-in attempts; try again later', { headers: { 'Retry-After': String(ipWait) } });
    }
    // Keyed on the account, not on what was typed: its name and its e-mail share one budget.
    const known = this.users.byLogin(tenant, login);
    const acct = `${tenant.id}|${known ? `id:${known.id}` : `login:${login.toLowerCase()}`}`;
    if (this.limiter.isLimited('oidc-login-account', acct, this.config.loginFailuresPerAccountPerMinute)) {
      // Slowed down, never locked out: a stranger's guesses must not keep the owner out, so the
      // right password still gets in, only later; guesses queue one at a time behind a pause.
      this.audit.write(tenant, { event: 'login-rate-limited', user: login, ip: req.ip, ua: req.ua, extra: { ...extra, by: 'account' }, aggregate: true });
      // One lane per (account, address): guesses from other addresses, however many are in
      // flight, never fill the owner's lane (4 addresses once kept `admin` at 429 for 45 s).
      await this.slowLane(`${acct}|${req.ip}`);
    }
    const user = known;
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
    this.audit.write(tenant, {
      event: 'login-fail',
      user: login,
      ip: req.ip,
      ua: req.ua,
      extra: { ...extra, reason: !user ? 'unknown-user' : user.status !== 'active' ? user.status : 'bad-password' },
      // Anyone can send wrong passwords: one row per account, address and minute, with a count.
      aggregate: true,
    });
    return undefined;
  }

  readonly #slow = new Map<string, { tail: Promise<void>; waiting: number }>();

  /**
   * Serves attempts on a rate-limited account from one address one at a time, each
   * `loginSlowdownMs` after the last; more than `loginSlowQueue` waiting answer 429 at once (no
   * unbounded pile of sockets). The per-IP limit bounds how many lanes one address can open.
   */
  private async slowLane(acct: string): Promise<void> {
    const lane = this.#slow.get(acct) ?? { tail: Promise.resolve(), waiting: 0 };
    if (lane.waiting >= this.config.loginSlowQueue) {
      throw new AppError(429, 'rate_limited', 'too many sign-in attempts for this account; try again later', {
        headers: { 'Retry-After': String(Math.ceil((this.config.loginSlowdownMs * (lane.waiting + 1)) / 1000)) },
      });
    }
    lane.waiting++;
    this.#slow.set(acct, lane);
    const turn = lane.tail.then(() => new Promise<void>((r) => setTimeout(r, this.config.loginSlowdownMs)));
    lane.tail = turn;
    try {
      await turn;
    } finally {
      if (--lane.waiting === 0 && lane.tail === turn) this.#slow.delete(acct);
    }
  }

  // ---- accounts, grants and codes --------------------------------------------------------------

  activeUser(tenant: Tenant, id: string): User | undefined {
    const u = this.users.get(tenant, id);
    return u && u.status === 'active' ? u : undefined;
  }

  newGrant(tenant: Tenant, clientId: string, userId: string | null, scope: string[]): string {
    return this.repo.newGrant(tenant, clientId, userId, scope, new Date(this.clock.now()).toISOString());
  }

  revokeGrant(grantId: string): void {
    this.repo.revokeGrant(grantId, new Date(this.clock.now()).toISOString(), this.now());
  }

  grantRevoked(grantId: string): boolean {
    return this.repo.grantRevoked(grantId);
  }

  /** Stores an authorization code (by hash) and returns it. */
  newCode(tenant: Tenant, o: NewCode): string {
    const code = 'ac_' + crypto.randomBytes(32).toString('base64url');
    this.repo.insertCode(tenant, sha256Hex(code), { ...o, expiresAt: this.now() + this.config.codeTtl }, this.now());
    return code;
  }

  // ---- tokens (tokens.ts) ----------------------------------------------------------------------

  async accessToken(tenant: Tenant, issuer: string, o: AccessTokenInput): Promise<{ token: string; exp: number; jti: string }> {
    const keys = this.keys.ready(tenant);
    if (keys !== true) await keys;
    return this.tokens.accessToken(tenant, issuer, o);
  }

  idToken(...a: Parameters<TokenMinter['idToken']>): Promise<string> {
    return this.tokens.idToken(...a);
  }

  userClaims(tenant: Tenant, user: User, scope: string[]): Record<string, unknown> {
    return this.tokens.userClaims(tenant, user, scope);
  }

  verifyAccessToken(tenant: Tenant, token: string): Promise<jose.JWTPayload | null> {
    return this.tokens.verifyAccessToken(tenant, token);
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
      kind: 'user',
      tenantId: tenant.id,
      subject: user.id,
      userName: user.name,
      email: user.email,
      role: user.role,
      scopes,
      clientId,
      superAdmin: user.role === 'admin' && tenant.isPrimary,
      claims: claims as Record<string, unknown>,
    };
  }

  /** RFC 7009: revoke an access token (by jti) or a refresh token (its whole grant). Never tells which. */
  async revoke(tenant: Tenant, client: OidcClient, token: string): Promise<'access' | 'refresh' | 'unknown'> {
    const rt = this.repo.refresh(tenant, sha256Hex(token));
    if (rt) {
      if (rt.client_id !== client.clientId) return 'unknown';
      this.revokeGrant(rt.grant_id);
      return 'refresh';
    }
    const claims = await this.verifyAccessToken(tenant, token);
    if (!claims || claims.client_id !== client.clientId) return 'unknown';
    this.repo.revokeAccessJti(tenant, String(claims.jti), Number(claims.exp), this.now());
    return 'access';
  }

  /** RFC 7662: {active:false} for anything unknown, expired, revoked or of another tenant. */
  async introspect(tenant: Tenant, token: string): Promise<Record<string, unknown>> {
    const rt = this.repo.refresh(tenant, sha256Hex(token));
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
      active: true,
      token_type: 'Bearer',
      scope: c.scope,
      client_id: c.client_id,
      sub: c.sub,
      username: u?.name,
      iss: c.iss,
      aud: c.aud,
      exp: c.exp,
      iat: c.iat,
      jti: c.jti,
      tenant: c.tenant,
      ...(u ? { roles: [u.role] } : {}),
    };
  }

  redirectAllowed(client: OidcClient, uri: string, issuer: string): boolean {
    return redirectUriAllowed(client.redirectUris, uri, issuer);
  }
}
