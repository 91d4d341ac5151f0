/** OAuth 2.0 / OIDC vocabulary shared by the provider's modules. */
import type { Response } from 'express';
import { AppError, type ErrorCode, type RouteRequest, type Tenant, type User } from '../../server/sdk.ts';
import type { OidcClient } from './clients.ts';
import type { TokenForm } from './schemas.ts';
import type { OidcProvider } from './provider.ts';

export const SCOPES = ['openid', 'profile', 'email', 'offline_access', 'network_access'] as const;
export const CLIENT_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Algorithms accepted from clients (request objects, client assertions); never `none` or HMAC. */
export const CLIENT_ALGS = ['RS256', 'PS256', 'ES256', 'EdDSA'];

/** An OAuth error as RFC 6749 §5.2 names it (one of the appliance's typed codes); rendered by the core as {error, error_description}. */
export function oauthError(code: ErrorCode, description: string, status = 400, headers?: Record<string, string>): AppError {
  return new AppError(status, code, description, { headers });
}

export interface RequestInfo {
  ip: string;
  ua: string;
  headers: Record<string, string | string[] | undefined>;
}

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

/** A grant of the token endpoint: its handler, whether the client must authenticate, and an optional synchronous path. */
export interface Grant {
  handler: GrantHandler;
  clientAuth: 'required' | 'optional';
  /** The same grant without a promise (client_credentials: nothing to wait for). */
  sync?: (g: GrantContext) => Record<string, unknown>;
}

/**
 * A sign-in method another plugin adds to /login.html (the wallet verifier's "Sign in with your
 * EU wallet"): a block of HTML for the page; its script must be same-origin (the page's CSP allows
 * no inline script). `i` is the pending authorization the page continues ('' for none).
 */
export interface LoginOption {
  id: string;
  html(v: { tenant: Tenant; i: string }): string;
}

/** Signs the browser of a request in (the session cookie) and says where it goes next. */
export type BrowserSignIn = (req: RouteRequest, res: Response, user: User, amr: string[], interactionId: string | null) => string;

/** What other plugins get through ctx.use(OIDC). */
export interface OidcService {
  /** Adds a token endpoint grant (the OID4VCI pre-authorized_code grant of the wallet issuer). */
  registerGrant(type: string, handler: GrantHandler, opts?: { clientAuth?: 'required' | 'optional' }): void;
  /** Adds a sign-in method to /login.html. */
  registerLoginOption(o: LoginOption): void;
  /** Signs the browser in as `user` and returns where it goes next: the pending authorization `interactionId`, or a page. */
  signInBrowser: BrowserSignIn;
  issuer(origin: string): string;
  /**
   * A plugin's built-in public sign-in client of the tenant (authorization code + PKCE S256, no
   * secret, no consent page: the person signs in to this appliance), with `redirectUri` among
   * its redirect URIs (the last 50 kept, one per origin the appliance is reached at). Made or
   * completed on first use; returns `redirectUri`. 400 where the provider refuses the URI (http
   * on a non-loopback host).
   */
  builtInClient(tenant: Tenant, c: { clientId: string; name: string; redirectUri: string }): string;
  provider: OidcProvider;
}
