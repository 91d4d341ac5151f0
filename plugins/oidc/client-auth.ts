import type * as jose from 'jose';
import { loadJose } from './jose.ts';
import type { AppError, Clock, Tenant } from '../../server/sdk.ts';
import type { AuthMethod, ClientRepo, OidcClient } from './clients.ts';
import { CLIENT_ALGS, CLIENT_ASSERTION_TYPE, oauthError, type RequestInfo } from './oauth.ts';
import type { OidcRepo } from './repo.ts';

export interface AuthenticatedClient {
  client: OidcClient;
  method: AuthMethod;
}
export interface ClientAuthForm {
  client_id?: string;
  client_secret?: string;
  client_assertion_type?: string;
  client_assertion?: string;
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
 * Client authentication at the token, revocation and introspection endpoints (RFC 6749 §2.3,
 * OIDC Core §9): client_secret_basic, client_secret_post, private_key_jwt (RFC 7523) and none.
 * Exactly one method may be used, and it must be the one the client registered. Synchronous
 * unless a client assertion has to be verified (the benchmark's client_credentials path makes no
 * promise per step).
 */
export class ClientAuthenticator {
  constructor(
    private readonly clients: ClientRepo,
    private readonly repo: OidcRepo,
    private readonly clock: Clock,
  ) {}

  authenticate(tenant: Tenant, issuer: string, form: ClientAuthForm, req: RequestInfo): AuthenticatedClient | undefined | Promise<AuthenticatedClient> {
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
    if (form.client_assertion !== undefined) return this.#assertion(tenant, issuer, form, form.client_assertion);
    if (form.client_id !== undefined) {
      const c = this.clients.get(tenant, form.client_id);
      if (!c) throw clientAuthFailed('unknown client', false);
      if (c.authMethod !== 'none') throw clientAuthFailed(`client ${c.clientId} must authenticate with ${c.authMethod}`, false);
      return { client: c, method: 'none' };
    }
    return undefined;
  }

  /** private_key_jwt (RFC 7523 §2.2, OIDC Core §9). */
  async #assertion(tenant: Tenant, issuer: string, form: ClientAuthForm, assertion: string): Promise<AuthenticatedClient> {
    const fail = (why: string) => clientAuthFailed(why, false);
    if (form.client_assertion_type !== CLIENT_ASSERTION_TYPE) throw oauthError('invalid_request', `client_assertion_type must be ${CLIENT_ASSERTION_TYPE}`);
    const J = await loadJose();
    let claims: jose.JWTPayload;
    try {
      claims = J.decodeJwt(assertion);
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
    const J = await loadJose();
    const set = J.createLocalJWKSet(c.jwks as jose.JSONWebKeySet);
    const { payload } = await J.jwtVerify(jwt, set, {
      algorithms: CLIENT_ALGS,
      issuer: c.clientId,
      audience,
      clockTolerance: 30,
      currentDate: new Date(this.clock.now()),
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
    if (!this.repo.rememberAssertionJti(tenant, issuer, jti, exp, Math.floor(this.clock.now() / 1000))) throw new Error('jti already used');
  }
}
