import crypto from 'node:crypto';
import type * as jose from 'jose';
import { type Clock, RandomPool, type Tenant, type TenantService, type User } from '../../server/sdk.ts';
import type { OidcClient } from './clients.ts';
import { halfHash, type SigAlg, type SigningKeys } from './keys.ts';
import type { OidcRepo } from './repo.ts';
import type { OidcConfig } from './schemas.ts';

/** A token's jti: 16 fresh random bytes as base64url, from a pooled block (see RandomPool). */
const jtiPool = new RandomPool();

export interface AccessTokenInput {
  client: OidcClient;
  user?: User;
  scope: string[];
  grantId?: string;
  authTime?: number;
  extra?: Record<string, unknown>;
}
export interface IssueInput extends AccessTokenInput {
  nonce?: string;
  sid?: string;
  withIdToken: boolean;
  withRefresh: boolean;
  refreshScope?: string[];
  amr?: string[];
}

/**
 * Token minting and verification: RFC 9068 access tokens (signed, never opaque), OIDC id_tokens,
 * refresh tokens (stored by hash), the claims per scope, and the checks every presented access
 * token passes.
 */
export class TokenMinter {
  constructor(
    private readonly keys: SigningKeys,
    private readonly repo: OidcRepo,
    private readonly tenants: TenantService,
    private readonly clock: Clock,
    private readonly config: OidcConfig,
  ) {}

  now(): number {
    return Math.floor(this.clock.now() / 1000);
  }

  async accessToken(tenant: Tenant, issuer: string, o: AccessTokenInput): Promise<{ token: string; exp: number; jti: string }> {
    const now = this.now();
    const exp = now + this.config.accessTokenTtl;
    const jti = jtiPool.base64url(16);
    // RFC 9068 §2.2: iss, exp, aud, sub, client_id, iat, jti; plus tenant, roles and scope.
    const payload: jose.JWTPayload = {
      iss: issuer,
      sub: o.user?.id ?? o.client.clientId,
      aud: issuer,
      client_id: o.client.clientId,
      iat: now,
      exp,
      jti,
      scope: o.scope.join(' '),
      tenant: tenant.id,
      ...(o.user ? { roles: [o.user.role], preferred_username: o.user.name } : {}),
      ...(o.authTime ? { auth_time: o.authTime } : {}),
      ...(o.grantId ? { gid: o.grantId } : {}),
      ...o.extra,
    };
    return { token: await this.keys.sign(tenant, payload, { alg: this.config.accessTokenAlg, typ: 'at+jwt' }), exp, jti };
  }

  async idToken(
    tenant: Tenant,
    issuer: string,
    o: { client: OidcClient; user: User; authTime: number; nonce?: string; sid?: string; accessToken?: string; code?: string; scope: string[]; amr?: string[] },
  ): Promise<string> {
    const now = this.now();
    const payload: jose.JWTPayload = {
      iss: issuer,
      sub: o.user.id,
      aud: o.client.clientId,
      azp: o.client.clientId,
      iat: now,
      exp: now + this.config.idTokenTtl,
      auth_time: o.authTime,
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

  /** The token response (RFC 6749 §5.1): access token, and an id_token and refresh token when asked for. */
  async issue(tenant: Tenant, issuer: string, o: IssueInput): Promise<Record<string, unknown>> {
    const keys = this.keys.ready(tenant);
    if (keys !== true) await keys;
    const at = await this.accessToken(tenant, issuer, o);
    const out: Record<string, unknown> = { access_token: at.token, token_type: 'Bearer', expires_in: this.config.accessTokenTtl, scope: o.scope.join(' ') };
    if (o.withIdToken && o.user) {
      out.id_token = await this.idToken(tenant, issuer, {
        client: o.client,
        user: o.user,
        authTime: o.authTime ?? this.now(),
        nonce: o.nonce,
        sid: o.sid,
        accessToken: at.token,
        scope: o.scope,
        amr: o.amr,
      });
    }
    if (o.withRefresh && o.user && o.grantId) {
      const rt = 'rt_' + crypto.randomBytes(32).toString('base64url');
      this.repo.insertRefresh(tenant, rt, {
        grantId: o.grantId,
        clientId: o.client.clientId,
        userId: o.user.id,
        scope: o.refreshScope ?? o.scope,
        authTime: o.authTime ?? this.now(),
        expiresAt: this.now() + this.config.refreshTokenTtl,
      });
      out.refresh_token = rt;
    }
    return out;
  }

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
    if (typeof claims.jti === 'string' && this.repo.accessJtiRevoked(claims.jti)) return null;
    if (typeof claims.gid === 'string' && this.repo.grantRevoked(claims.gid)) return null;
    return claims;
  }
}
