import type { Response } from 'express';
import { defineService, type RouteRequest, type Tenant, type User } from '../../server/sdk.ts';
import type { OidcClient } from './clients.ts';

/**
 * What other plugins get from the OpenID Provider (`ctx.use(OIDC)`): narrow methods, never the
 * provider itself. Everything here is in place at setup, so a dependant plugs its grants and
 * sign-in options in before the first request.
 */
export interface OidcService {
  /**
   * Adds a grant to the token endpoint (the OID4VCI pre-authorized_code grant of the wallet
   * issuer, the wallet verifier's sso_assertion). Its parameters join the token form (zod schema
   * and /openapi.json), its type the grant types a client may be registered for and discovery's
   * `grant_types_supported`. Only at setup: the form is composed when the routes are mounted.
   */
  registerGrant<P extends string>(grant: GrantDefinition<P>): void;
  /** Adds a sign-in method to /login.html. */
  registerLoginOption(o: LoginOption): void;
  /**
   * The language of the provider's pages for a request (the console's language cookie, then
   * Accept-Language; page-text.ts): the pages other plugins render around a sign-in (the wallet's
   * QR and answer pages, a credential offer) speak the one the provider's own pages speak.
   */
  pageLang(req: { headers: { cookie?: string; 'accept-language'?: string } }): PageLang;
  /** Signs the browser in as `user` and returns where it goes next: the pending authorization `interactionId`, or a page. */
  signInBrowser: BrowserSignIn;
  issuer(origin: string): string;
  /** The user, when the account exists and may sign in (not invited, not disabled). */
  activeUser(tenant: Tenant, id: string): User | undefined;
  /**
   * "Sign in through our own provider" for a plugin's page: the authorization code flow with PKCE
   * for the plugin's built-in public client `clientId`, whose code is exchanged in process.
   */
  relyingParty(client: RelyingPartyClient): RelyingParty;
  /** Whether `clientId` is a registered client of the tenant. */
  isClient(tenant: Tenant, clientId: string): boolean;
}

/** The parameters of a token request a grant reads (besides grant_type and client authentication), as node-oidc-provider's grants declare them. */
export type GrantForm<P extends string> = { grant_type: string } & Partial<Record<P, string>>;

export interface GrantDefinition<P extends string = string> {
  /** The grant_type value (a URN for extension grants, RFC 6749 §4.5). */
  type: string;
  /** Form fields of this grant; each is a string of at most 8192 characters, repeated ones refused. */
  parameters: readonly P[];
  /** `required`: a client must authenticate (or name itself, if public); `optional`: anonymous use too. */
  clientAuth: 'required' | 'optional';
  handler(g: GrantRequest<P>): Promise<Record<string, unknown>>;
}

/** A token request as a registered grant sees it. */
export interface GrantRequest<P extends string> {
  tenant: Tenant;
  issuer: string;
  form: GrantForm<P>;
  /** The authenticated client (allowed to use this grant), or undefined with clientAuth `optional`. */
  client: OidcClient | undefined;
  req: RequestInfo;
  /** The scopes asked for, limited to the known ones (RFC 6749 §3.3: unknown → invalid_scope); `fallback` when none. */
  scope(asked: string | undefined, fallback: string[]): string[];
  activeUser(id: string): User | undefined;
  /** A new grant of `user` to the authenticated client, and its tokens (access token; id_token when asked; no refresh token). */
  issue(o: { user: User; scope: string[]; idToken: boolean; amr?: string[] }): Promise<Record<string, unknown>>;
}

export interface RequestInfo {
  ip: string;
  ua: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * A sign-in method another plugin adds to /login.html (the wallet verifier's "Sign in with your
 * EU wallet"): a block of HTML for the page; its script must be same-origin (the page's CSP allows
 * no inline script). `i` is the pending authorization the page continues ('' for none), `lang` the
 * page's language.
 */
export interface LoginOption {
  id: string;
  /** The block in the page's language `lang`. */
  html(v: { tenant: Tenant; i: string; lang: PageLang }): string;
}

/** The languages the provider's pages speak. */
export type PageLang = 'en' | 'de';

/** Signs the browser of a request in (the session cookie) and says where it goes next. */
export type BrowserSignIn = (req: RouteRequest, res: Response, user: User, amr: string[], interactionId: string | null) => string;

/**
 * A plugin's built-in public sign-in client of the tenant (authorization code + PKCE S256, no
 * secret, no consent page: the person signs in to this appliance), with `origin + callbackPath`
 * among its redirect URIs (the last 50 kept, one per origin the appliance is reached at).
 */
export interface RelyingPartyClient {
  clientId: string;
  name: string;
  callbackPath: string;
}

export interface RelyingParty {
  /**
   * Where to send the browser (the provider's authorization endpoint), and what the caller keeps,
   * bound to that browser, until the callback: `state`, the PKCE `verifier`, the `nonce`. Makes
   * or completes the client; 400 where the provider refuses the callback (http on a non-loopback host).
   */
  start(tenant: Tenant, origin: string): { location: string; state: string; verifier: string; nonce: string };
  /**
   * The callback's code exchanged in process, the ID token's nonce checked, the provider's tokens
   * revoked at once (they served only to learn who signed in). The caller checks `state` first.
   */
  finish(
    tenant: Tenant,
    origin: string,
    p: { code: string; verifier: string; nonce: string },
    req: RequestInfo,
  ): Promise<{ user: User } | { error: 'unconfirmed' | 'inactive'; detail?: string }>;
}

/** The OpenID Provider for plugins that add grants or sign people in (`ctx.use(OIDC)`). */
export const OIDC = defineService<OidcService>('oidc');
