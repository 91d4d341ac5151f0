import type { Response } from 'express';
import type * as jose from 'jose';
import { loadJose } from './jose.ts';
import { AppError, html, reply, type Reply, type RouteRequest, type Tenant, type User } from '../../server/sdk.ts';
import { redirectUriAllowed, type OidcClient } from './clients.ts';
import { CLIENT_ALGS, SCOPES } from './oauth.ts';
import type { OidcProvider } from './provider.ts';
import { issuerOf } from './issuer.ts';
import type { AuthorizeParams } from './schemas.ts';
import type { Interaction, Session, Sessions } from './sessions.ts';
import type { TenantSettings } from './settings.ts';
import type { SignIn } from './signin.ts';
import { pageLang } from './page-text.ts';
import { message, page } from './pages.ts';

type ResponseType = 'code' | 'id_token' | 'code id_token';

/** A validated authorization request (OIDC Core §3.1.2.1), kept while the user signs in. */
export interface AuthzRequest {
  clientId: string;
  redirectUri: string;
  responseType: ResponseType;
  responseMode: 'query' | 'fragment' | 'form_post';
  scope: string[];
  state?: string;
  nonce?: string;
  prompt: string[];
  codeChallenge?: string;
  codeChallengeMethod?: 'S256' | 'plain';
  maxAge?: number;
  hintSub?: string;
  loginHint?: string;
  /** ui_locales (OIDC Core §3.1.2.1): the languages the user prefers for the provider's pages. */
  uiLocales?: string;
  issuer: string;
}

/** An error that goes back to the client's redirect_uri (OIDC Core §3.1.2.6). */
class RedirectError extends Error {
  constructor(
    readonly code: string,
    description: string,
  ) {
    super(description);
  }
}

/** Builds the authorization response in the requested mode, always with iss (RFC 9207) and state. */
export function respond(
  a: { redirectUri: string; responseMode: AuthzRequest['responseMode']; state?: string; issuer: string },
  params: Record<string, string>,
): Reply {
  const all: Record<string, string> = { ...params, ...(a.state !== undefined ? { state: a.state } : {}), iss: a.issuer };
  if (a.responseMode === 'form_post') {
    const fields = Object.entries(all)
      .map(([k, v]) => `<input type="hidden" name="${html.escape(k)}" value="${html.escape(v)}">`)
      .join('\n');
    return page('form-post.html', { action: a.redirectUri, fields });
  }
  const url = new URL(a.redirectUri);
  if (a.responseMode === 'fragment') url.hash = new URLSearchParams(all).toString();
  else for (const [k, v] of Object.entries(all)) url.searchParams.set(k, v);
  return reply.redirect(url.href, 302);
}

function one(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (Array.isArray(v)) throw new AppError(400, 'invalid_request', 'a parameter was repeated');
  return typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
}

/**
 * The authorization endpoint's decisions (OIDC Core §3.1.2): the request checked, then what it
 * still needs (sign-in, account choice, consent) until the client gets its answer. The pages'
 * routes (authorize.ts, interact.ts) call it with what the browser sent; the browser's cookies
 * are SignIn's.
 */
export class AuthorizeFlow {
  private readonly s: Sessions;

  constructor(
    private readonly p: OidcProvider,
    private readonly settings: TenantSettings,
    private readonly signIn: SignIn,
  ) {
    this.s = signIn.sessions;
  }

  /** Entry point of GET and POST /oauth2/v1/authorize. */
  async start(req: RouteRequest, res: Response, raw: AuthorizeParams): Promise<Reply> {
    const tenant = req.tenant;
    const issuer = issuerOf(req);
    const clientId = one(raw.client_id);
    if (!clientId) throw new AppError(400, 'invalid_request', 'client_id is required');
    const client = this.p.clients.get(tenant, clientId);
    if (!client) throw new AppError(400, 'invalid_request', `unknown client ${clientId}`);
    let params: Record<string, unknown> = { ...raw };
    let roError: string | undefined;
    if (raw.request !== undefined) {
      // RFC 9101 §6.1: the request object is signed with the client's registered key. The spec
      // asks for the query to win on conflict (RFC 9101 §6.3 would ignore the query instead).
      try {
        if (!client.jwks?.keys.length) throw new Error('the client has no registered keys');
        const J = await loadJose();
        const { payload } = await J.jwtVerify(raw.request, J.createLocalJWKSet(client.jwks as jose.JSONWebKeySet), {
          algorithms: CLIENT_ALGS,
          issuer: client.clientId,
          clockTolerance: 30,
          currentDate: new Date(this.p.clock.now()),
        });
        if (payload.aud !== undefined && !(Array.isArray(payload.aud) ? payload.aud : [payload.aud]).includes(issuer))
          throw new Error('aud is not this issuer');
        if (payload.client_id !== undefined && payload.client_id !== clientId) throw new Error('client_id differs from the query');
        const { iss: _i, aud: _a, exp: _e, iat: _t, nbf: _n, jti: _j, ...rest } = payload;
        const q = Object.fromEntries(Object.entries(raw).filter(([k, v]) => k !== 'request' && v !== undefined));
        params = { ...rest, ...q };
      } catch (e) {
        roError = `request object rejected: ${(e as Error).message}`;
      }
    }
    const redirectUri = one(params.redirect_uri);
    if (!redirectUri) throw new AppError(400, 'invalid_request', 'redirect_uri is required');
    // RFC 9700 §2.1: exact string match; on mismatch never redirect (open redirector).
    if (!redirectUriAllowed(client.redirectUris, redirectUri, issuer))
      throw new AppError(400, 'invalid_request', 'redirect_uri is not registered for this client');
    const state = one(params.state);
    const rt = one(params.response_type);
    const responseType = (rt === 'code' || rt === 'id_token' || rt === 'code id_token' ? rt : rt === 'id_token code' ? 'code id_token' : undefined) as
      ResponseType | undefined;
    const defaultMode = responseType === 'code' || !responseType ? 'query' : 'fragment';
    const rm = one(params.response_mode);
    const responseMode = (rm === 'query' || rm === 'fragment' || rm === 'form_post' ? rm : defaultMode) as AuthzRequest['responseMode'];
    const base = { redirectUri, responseMode, state, issuer };
    try {
      if (roError) throw new RedirectError('invalid_request_object', roError);
      if (rm !== undefined && rm !== responseMode) throw new RedirectError('invalid_request', `unsupported response_mode ${rm}`);
      if (!responseType) throw new RedirectError('unsupported_response_type', 'response_type must be code, id_token or "code id_token"');
      // OIDC Core §3.2.2.1: id_token in the front channel is never sent in a query string.
      if (responseType !== 'code' && responseMode === 'query')
        throw new RedirectError('invalid_request', 'response_mode query is not allowed with id_token responses');
      if (responseType.includes('code') && !client.grantTypes.includes('authorization_code'))
        throw new RedirectError('unauthorized_client', 'client may not use the code flow');
      if (responseType.includes('id_token') && !client.grantTypes.includes('implicit'))
        throw new RedirectError('unauthorized_client', 'client may not receive id_tokens from the authorization endpoint (grant type implicit)');
      const scope = [...new Set((one(params.scope) ?? '').split(' ').filter(Boolean))];
      if (!scope.includes('openid')) throw new RedirectError('invalid_scope', 'scope must include openid');
      const unknown = scope.filter((x) => !(SCOPES as readonly string[]).includes(x));
      if (unknown.length) throw new RedirectError('invalid_scope', `unknown scope ${unknown.join(' ')}`);
      const nonce = one(params.nonce);
      if (responseType !== 'code' && !nonce)
        throw new RedirectError('invalid_request', 'nonce is required when an id_token is returned from the authorization endpoint');
      const prompt = (one(params.prompt) ?? '').split(' ').filter(Boolean);
      for (const pr of prompt)
        if (!['none', 'login', 'consent', 'select_account'].includes(pr)) throw new RedirectError('invalid_request', `unsupported prompt ${pr}`);
      if (prompt.includes('none') && prompt.length > 1) throw new RedirectError('invalid_request', 'prompt=none cannot be combined with other values');
      const codeChallenge = one(params.code_challenge);
      let method = one(params.code_challenge_method);
      if (codeChallenge !== undefined) {
        method ??= 'plain'; // RFC 7636 §4.3
        if (method !== 'S256' && method !== 'plain') throw new RedirectError('invalid_request', 'code_challenge_method must be S256 or plain');
        if (method === 'plain' && !(this.settings.allowPlainPkce(req.tenant) && client.allowPlainPkce))
          throw new RedirectError('invalid_request', 'code_challenge_method plain is not allowed; use S256');
        if (!/^[A-Za-z0-9._~-]{43,128}$/.test(codeChallenge))
          throw new RedirectError('invalid_request', 'code_challenge must be 43 to 128 unreserved characters');
      } else if (method !== undefined) {
        throw new RedirectError('invalid_request', 'code_challenge_method without code_challenge');
      } else if (client.authMethod === 'none' && responseType.includes('code')) {
        throw new RedirectError('invalid_request', 'PKCE (code_challenge) is required for public clients');
      }
      const ma = one(params.max_age);
      let maxAge: number | undefined;
      if (ma !== undefined) {
        if (!/^\d{1,9}$/.test(ma)) throw new RedirectError('invalid_request', 'max_age must be a non-negative integer');
        maxAge = Number(ma);
      }
      let hintSub: string | undefined;
      const hint = one(params.id_token_hint);
      if (hint !== undefined) {
        try {
          // OIDC Core §3.1.2.1: an id_token we issued to this client (expired is fine), not an access token.
          const c = await this.p.keys.verify(tenant, hint, { allowExpired: true, audience: client.clientId });
          if (typeof c.sub !== 'string' || c.iss !== issuer || c.client_id !== undefined) throw new Error('bad');
          hintSub = c.sub;
        } catch {
          throw new RedirectError('invalid_request', 'id_token_hint is not an id_token of this issuer');
        }
      }
      const a: AuthzRequest = {
        clientId,
        redirectUri,
        responseType,
        responseMode,
        scope,
        state,
        nonce,
        prompt,
        codeChallenge,
        codeChallengeMethod: codeChallenge ? (method as 'S256' | 'plain') : undefined,
        maxAge,
        hintSub,
        loginHint: one(params.login_hint),
        uiLocales: one(params.ui_locales),
        issuer,
      };
      const b = this.signIn.ensureBrowser(req, res);
      return await this.proceed(req, a, client, undefined, b);
    } catch (e) {
      if (e instanceof RedirectError) return respond(base, { error: e.code, error_description: e.message });
      throw e;
    }
  }

  /**
   * Decides what the request still needs (sign-in, account choice, consent) and either shows that
   * page or answers the client. Called at the start and after each page's form; `session` when
   * this very request signed the browser in (its new cookie is on the answer, not in the request).
   */
  async proceed(
    req: RouteRequest,
    a: AuthzRequest,
    client: OidcClient,
    it: Interaction<AuthzRequest> | undefined,
    browser: string,
    session: Session | undefined = this.signIn.session(req),
  ): Promise<Reply> {
    const tenant = req.tenant;
    const now = this.p.now();
    const accounts = (session?.accounts ?? []).filter((x) => this.p.activeUser(tenant, x.userId));
    const none = a.prompt.includes('none');
    const st = it?.state ?? {};
    const need = (what: 'login' | 'select' | 'consent', code: string): Reply => {
      if (none)
        throw new RedirectError(
          code,
          `${what === 'login' ? 'the user is not signed in' : what === 'select' ? 'several accounts are signed in' : 'the user has not consented'} and prompt=none`,
        );
      const id = it?.id ?? this.s.createInteraction(tenant, browser, a);
      const target = what === 'login' ? '/login.html' : what === 'select' ? '/select-account.html' : '/consent.html';
      return reply.redirect(`${target}?i=${encodeURIComponent(id)}`, 302);
    };
    try {
      // Which account? One chosen on a page of this interaction, else the id_token_hint's, else the only one.
      let account = st.userId ? accounts.find((x) => x.userId === st.userId) : undefined;
      if (!account && a.hintSub) {
        account = accounts.find((x) => x.userId === a.hintSub);
        if (!account && none) throw new RedirectError('login_required', 'the user named by id_token_hint is not signed in');
      }
      const forceLogin = a.prompt.includes('login') && !st.loginAt;
      const forceSelect = a.prompt.includes('select_account') && !st.userId;
      if (!account && !forceLogin) {
        if (accounts.length > 1 || (forceSelect && accounts.length > 0)) return need('select', 'account_selection_required');
        account = accounts[0];
      } else if (account && forceSelect && !st.userId) {
        return need('select', 'account_selection_required');
      }
      if (!account || forceLogin) return need('login', 'login_required');
      if (a.maxAge !== undefined && account.authTime + a.maxAge < now && !(st.loginAt && st.loginAt >= now - 60)) return need('login', 'login_required');
      const user = this.p.activeUser(tenant, account.userId)!;
      const consentNeeded = !client.skipConsent && (!this.s.hasConsent(tenant, user.id, client.clientId, a.scope) || a.prompt.includes('consent'));
      if (consentNeeded && !st.consented) return need('consent', 'consent_required');
      if (it) this.s.finishInteraction(it.id);
      return await this.complete(tenant, a, client, user, account.authTime, account.amr, session!);
    } catch (e) {
      if (e instanceof RedirectError) {
        if (it) this.s.finishInteraction(it.id);
        return respond(a, { error: e.code, error_description: e.message });
      }
      throw e;
    }
  }

  private async complete(tenant: Tenant, a: AuthzRequest, client: OidcClient, user: User, authTime: number, amr: string[], session: Session): Promise<Reply> {
    const out: Record<string, string> = {};
    const grantId = this.p.newGrant(tenant, client.clientId, user.id, a.scope);
    let code: string | undefined;
    if (a.responseType.includes('code')) {
      code = this.p.newCode(tenant, {
        grantId,
        clientId: client.clientId,
        userId: user.id,
        redirectUri: a.redirectUri,
        scope: a.scope,
        nonce: a.nonce,
        challenge: a.codeChallenge,
        method: a.codeChallengeMethod,
        authTime,
        sid: session.sid,
        amr,
      });
      out.code = code;
    }
    if (a.responseType.includes('id_token')) {
      out.id_token = await this.p.idToken(tenant, a.issuer, { client, user, authTime, nonce: a.nonce, sid: session.sid, code, scope: a.scope, amr });
    }
    return respond(a, out);
  }

  // ---- the pages' forms ------------------------------------------------------------------

  /** Loads the interaction of a page (bound to this browser), or answers with a readable page. */
  pending(req: RouteRequest, id: string | undefined): { it: Interaction<AuthzRequest>; client: OidcClient; browser: string } | Reply {
    const browser = this.signIn.browser(req);
    const it = this.s.interaction<AuthzRequest>(req.tenant, id, browser);
    const client = it && this.p.clients.get(req.tenant, it.params.clientId);
    if (!it || !client || !browser) return message(pageLang(req, it?.params.uiLocales), 'msg_signInExpired', 'msg_signInExpiredText', 400);
    return { it, client, browser };
  }

  async afterLogin(
    req: RouteRequest,
    res: Response,
    it: Interaction<AuthzRequest>,
    client: OidcClient,
    browser: string,
    user: User,
    amr: string[],
  ): Promise<Reply> {
    const session = this.signIn.login(req, res, user, amr);
    it.state = { ...it.state, userId: user.id, loginAt: this.p.now(), amr };
    this.s.updateInteraction(it.id, it.state);
    return this.proceed(req, it.params, client, it, browser, session);
  }
}
