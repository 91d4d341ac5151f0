/** OAuth 2.0 / OIDC vocabulary shared by the provider's modules (no module of the provider imported here). */
import { AppError, type Clock, type ErrorCode, type Tenant, type User, type UserService } from '../../server/sdk.ts';
import type { RequestInfo } from './api.ts';
import type { ClientRepo, OidcClient } from './clients.ts';
import type { OidcRepo } from './repo.ts';
import type { OidcConfig, TokenForm } from './schemas.ts';
import type { TokenMinter } from './tokens.ts';

export type { BrowserSignIn, LoginOption, RequestInfo } from './api.ts';
export type { TokenForm } from './schemas.ts';

export const SCOPES = ['openid', 'profile', 'email', 'offline_access', 'network_access'] as const;
export const CLIENT_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Algorithms accepted from clients (request objects, client assertions); never `none` or HMAC. */
export const CLIENT_ALGS = ['RS256', 'PS256', 'ES256', 'EdDSA'];

/** An OAuth error as RFC 6749 §5.2 names it (one of the appliance's typed codes); rendered by the core as {error, error_description}. */
export function oauthError(code: ErrorCode, description: string, status = 400, headers?: Record<string, string>): AppError {
  return new AppError(status, code, description, { headers });
}

/** What the built-in grants use of the provider (it implements this; the grants never import it). */
export interface GrantServices {
  readonly repo: OidcRepo;
  readonly tokens: TokenMinter;
  readonly clients: ClientRepo;
  readonly users: UserService;
  readonly clock: Clock;
  readonly config: OidcConfig;
  now(): number;
  parseScope(scope: string | undefined, fallback: string[]): string[];
  activeUser(tenant: Tenant, id: string): User | undefined;
  newGrant(tenant: Tenant, clientId: string, userId: string | null, scope: string[]): string;
  revokeGrant(grantId: string): void;
  rememberJti(tenant: Tenant, issuer: string, jti: string, exp: number): void;
  checkPassword(tenant: Tenant, login: string, password: string, req: RequestInfo, extra: Record<string, string>): Promise<User | undefined>;
}

export interface GrantContext {
  tenant: Tenant;
  issuer: string;
  form: TokenForm;
  /** The authenticated client, or undefined when the grant allows anonymous use (pre-authorized_code). */
  client: OidcClient | undefined;
  req: RequestInfo;
  provider: GrantServices;
}

/** A grant of the token endpoint: its type, the form fields it reads, whether the client must authenticate, its handler. */
export interface Grant {
  type: string;
  parameters: readonly string[];
  clientAuth: 'required' | 'optional';
  handler(g: GrantContext): Promise<Record<string, unknown>>;
}
