import crypto from 'node:crypto';
import type { Response } from 'express';
import * as jose from 'jose';
import { z } from 'zod';
import { AppError, type PluginContext, policy, reply, type Reply, type RouteRegistrar, type RouteRequest, type Tenant, type User } from '../../server/sdk.ts';
import { redirectUriAllowed, type OidcClient } from './clients.ts';
import { CLIENT_ALGS, SCOPES, type OidcProvider } from './provider.ts';
import { issuerOf, reqInfo } from './routes.ts';
import { authorizeParams, logoutParams, type AuthorizeParams, type OidcConfig } from './schemas.ts';
import { BROWSER_COOKIE, SID_COOKIE, cookie, parseCookies, type Interaction, type Session, type Sessions } from './sessions.ts';
import type { TenantSettings } from './settings.ts';
import { asset, esc, page } from './pages.ts';

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

export interface Deps {
  ctx: PluginContext<OidcConfig>;
  p: () => OidcProvider;
  sessions: () => Sessions;
  settings: () => TenantSettings;
}

function secure(req: RouteRequest): boolean {
  return req.origin.startsWith('https:');
}

/** The browser-binding cookie, created when missing (set on the response). */
function browserId(req: RouteRequest, res: Response): string {
  const c = parseCookies(req.headers.cookie)[BROWSER_COOKIE];
  if (c && /^[A-Za-z0-9_-]{20,64}$/.test(c)) return c;
  const v = crypto.randomBytes(24).toString('base64url');
  res.append('Set-Cookie', cookie(BROWSER_COOKIE, v, { secure: secure(req) }));
  // Later reads in the same request see it.
  req.headers.cookie = `${req.headers.cookie ? req.headers.cookie + '; ' : ''}${BROWSER_COOKIE}=${v}`;
  return v;
}

/** Builds the authorization response in the requested mode, always with iss (RFC 9207) and state. */
export function respond(
  a: { redirectUri: string; responseMode: AuthzRequest['responseMode']; state?: string; issuer: string },
  params: Record<string, string>,
): Reply {
  const all: Record<string, string> = { ...params, ...(a.state !== undefined ? { state: a.state } : {}), iss: a.issuer };
  if (a.responseMode === 'form_post') {
    const fields = Object.entries(all)
      .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
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

export class AuthorizeFlow {
  constructor(private readonly d: Deps) {}

  private get p(): OidcProvider {
    return this.d.p();
  }

  private get s(): Sessions {
    return this.d.sessions();
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
        const { payload } = await jose.jwtVerify(raw.request, jose.createLocalJWKSet(client.jwks as jose.JSONWebKeySet), {
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
        if (method === 'plain' && !(this.d.settings().allowPlainPkce(req.tenant) && client.allowPlainPkce))
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
        issuer,
      };
      const b = browserId(req, res);
      return await this.proceed(req, res, a, client, undefined, b);
    } catch (e) {
      if (e instanceof RedirectError) return respond(base, { error: e.code, error_description: e.message });
      throw e;
    }
  }

  /**
   * Decides what the request still needs (sign-in, account choice, consent) and either shows that
   * page or answers the client. Called at the start and after each page's form.
   */
  async proceed(
    req: RouteRequest,
    _res: Response,
    a: AuthzRequest,
    client: OidcClient,
    it: Interaction<AuthzRequest> | undefined,
    browser: string,
  ): Promise<Reply> {
    const tenant = req.tenant;
    const now = this.p.now();
    const session = this.s.get(tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
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
    const browser = parseCookies(req.headers.cookie)[BROWSER_COOKIE];
    const it = this.s.interaction<AuthzRequest>(req.tenant, id, browser);
    const client = it && this.p.clients.get(req.tenant, it.params.clientId);
    if (!it || !client || !browser)
      return page(
        'message.html',
        { title: 'Sign-in expired', message: 'This sign-in request has expired or was started in another browser. Go back to the application and try again.' },
        400,
      );
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
    const old = this.s.get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
    const { cookie: value } = this.s.login(req.tenant, old, user.id, amr);
    res.append('Set-Cookie', cookie(SID_COOKIE, value, { secure: secure(req), maxAge: this.d.ctx.config.sessionTtl }));
    req.headers.cookie = `${SID_COOKIE}=${value}; ${BROWSER_COOKIE}=${browser}`;
    it.state = { ...it.state, userId: user.id, loginAt: this.p.now(), amr };
    this.s.updateInteraction(it.id, it.state);
    return this.proceed(req, res, it.params, client, it, browser);
  }
}

const loginForm = z.object({
  i: z.string().max(64).optional(),
  csrf: z.string().max(128).optional(),
  username: z.string().max(256),
  password: z.string().max(1024),
});
const consentForm = z.object({ i: z.string().max(64), csrf: z.string().max(128).optional(), decision: z.enum(['allow', 'deny']) });
const selectForm = z.object({ i: z.string().max(64), csrf: z.string().max(128).optional(), account: z.string().max(64) });
const pageQuery = z.object({ i: z.string().max(64).optional(), error: z.string().max(64).optional() }).loose();
const logoutForm = z.object({
  csrf: z.string().max(128).optional(),
  confirm: z.enum(['yes', 'no']),
  post_logout_redirect_uri: z.string().max(2000).optional(),
  state: z.string().max(2000).optional(),
  client_id: z.string().max(128).optional(),
});

const SCOPE_TEXT: Record<string, string> = {
  openid: 'Sign you in',
  profile: 'Your name and role',
  email: 'Your e-mail address',
  offline_access: 'Stay connected when you are away (refresh tokens)',
  network_access: 'Network access configuration',
};

export function authorizeRoutes(r: RouteRegistrar, d: Deps): AuthorizeFlow {
  const flow = new AuthorizeFlow(d);
  const area = 'oidc';
  r.add({
    method: 'GET',
    path: '/oauth2/v1/authorize',
    aliases: ['/oidc.ashx?action=authorize'],
    summary: 'Authorization endpoint (OIDC Core §3.1.2): code, id_token, code id_token; PKCE; request objects; prompt',
    area,
    auth: policy.public,
    query: authorizeParams,
    responses: {
      302: { description: 'to the redirect_uri with a code / id_token or an error, or to a sign-in page' },
      400: { description: 'unknown client or redirect_uri' },
    },
    handler: (req, res) => flow.start(req, res, req.query),
  });
  r.add({
    method: 'POST',
    path: '/oauth2/v1/authorize',
    summary: 'Authorization endpoint, form-encoded (OIDC Core §3.1.2.1)',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: authorizeParams,
    responses: { 302: { description: 'as GET' }, 400: { description: 'unknown client or redirect_uri' } },
    handler: (req, res) => flow.start(req, res, req.body),
  });

  // ---- pages ----
  r.add({
    method: 'GET',
    path: '/login.html',
    summary: 'Sign-in page (password, passkey, e-mail link)',
    area: 'login',
    auth: policy.public,
    query: pageQuery,
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      const b = browserId(req, res);
      const pend = req.query.i ? flow.pending(req, req.query.i) : undefined;
      if (pend && !('it' in pend)) return pend;
      const client = pend?.client;
      const errorText = req.query.error === 'expired' ? 'That link has expired. Please sign in again.' : '';
      return page('login.html', {
        tenant: req.tenant.name,
        i: req.query.i ?? '',
        csrf: d.sessions().csrf(b, `login|${req.query.i ?? ''}`),
        clientLine: client ? `to continue to ${client.name}` : '',
        loginHint: pend?.it.params.loginHint ?? '',
        error: errorText ? `<p class="error" role="alert">${esc(errorText)}</p>` : '',
        loginOptions: d.p().loginOptionsHtml(req.tenant, req.query.i ?? ''),
      });
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/login',
    summary: 'Password sign-in form of /login.html',
    area: 'login',
    auth: policy.public,
    bodyType: 'form',
    body: loginForm,
    rateLimit: 'sensitive',
    responses: { 302: { description: 'onward in the authorization flow' }, 400: { description: 'HTML with the error' } },
    handler: async (req, res) => {
      const browser = parseCookies(req.headers.cookie)[BROWSER_COOKIE];
      const i = req.body.i ?? '';
      if (!d.sessions().checkCsrf(browser, `login|${i}`, req.body.csrf))
        return page('message.html', { title: 'Form expired', message: 'The form expired. Reload the sign-in page and try again.' }, 403);
      const again = (msg: string, status: number) =>
        page(
          'login.html',
          {
            tenant: req.tenant.name,
            i,
            csrf: req.body.csrf,
            clientLine: '',
            loginHint: req.body.username,
            error: `<p class="error" role="alert">${esc(msg)}</p>`,
            loginOptions: d.p().loginOptionsHtml(req.tenant, i),
          },
          status,
        );
      let user: User | undefined;
      try {
        user = await d.p().checkPassword(req.tenant, req.body.username, req.body.password, reqInfo(req), { via: 'login-page' });
      } catch (e) {
        if (e instanceof AppError && e.status === 429) return again('Too many attempts. Wait a minute and try again.', 429);
        throw e;
      }
      if (!user) return again('Wrong user name or password.', 400);
      if (!i) {
        const old = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
        const { cookie: value } = d.sessions().login(req.tenant, old, user.id, ['pwd']);
        res.append('Set-Cookie', cookie(SID_COOKIE, value, { secure: secure(req), maxAge: d.ctx.config.sessionTtl }));
        return page('message.html', { title: 'Signed in', message: `You are signed in as ${user.name}.` });
      }
      const pend = flow.pending(req, i);
      if (!('it' in pend)) return pend;
      return flow.afterLogin(req, res, pend.it, pend.client, pend.browser, user, ['pwd']);
    },
  });
  r.add({
    method: 'GET',
    path: '/consent.html',
    summary: 'Consent page',
    area: 'login',
    auth: policy.public,
    query: pageQuery,
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req) => {
      const pend = flow.pending(req, req.query.i);
      if (!('it' in pend)) return pend;
      const session = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
      const uid = pend.it.state.userId ?? session?.accounts[0]?.userId;
      const user = uid ? d.p().activeUser(req.tenant, uid) : undefined;
      return page('consent.html', {
        tenant: req.tenant.name,
        client: pend.client.name,
        user: user?.name ?? '',
        i: pend.it.id,
        csrf: d.sessions().csrf(pend.browser, `consent|${pend.it.id}`),
        scopes: pend.it.params.scope.map((x) => `<li>${esc(SCOPE_TEXT[x] ?? x)}</li>`).join(''),
      });
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/consent',
    summary: 'Consent decision',
    area: 'login',
    auth: policy.public,
    bodyType: 'form',
    body: consentForm,
    responses: { 302: { description: 'to the client' } },
    handler: async (req, res) => {
      const pend = flow.pending(req, req.body.i);
      if (!('it' in pend)) return pend;
      if (!d.sessions().checkCsrf(pend.browser, `consent|${pend.it.id}`, req.body.csrf))
        return page('message.html', { title: 'Form expired', message: 'Reload and try again.' }, 403);
      const a = pend.it.params;
      if (req.body.decision === 'deny') {
        d.sessions().finishInteraction(pend.it.id);
        return respond(a, { error: 'access_denied', error_description: 'the user denied the request' });
      }
      const session = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
      const uid = pend.it.state.userId ?? (session?.accounts.length === 1 ? session.accounts[0]!.userId : undefined);
      if (uid) d.sessions().saveConsent(req.tenant, uid, a.clientId, a.scope);
      pend.it.state = { ...pend.it.state, consented: true, userId: uid };
      d.sessions().updateInteraction(pend.it.id, pend.it.state);
      return flow.proceed(req, res, a, pend.client, pend.it, pend.browser);
    },
  });
  r.add({
    method: 'GET',
    path: '/select-account.html',
    summary: 'Account chooser (prompt=select_account)',
    area: 'login',
    auth: policy.public,
    query: pageQuery,
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req) => {
      const pend = flow.pending(req, req.query.i);
      if (!('it' in pend)) return pend;
      const session = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
      const accounts = (session?.accounts ?? []).map((x) => d.p().activeUser(req.tenant, x.userId)).filter((u): u is User => !!u);
      return page('select-account.html', {
        tenant: req.tenant.name,
        client: pend.client.name,
        i: pend.it.id,
        csrf: d.sessions().csrf(pend.browser, `select|${pend.it.id}`),
        accounts: accounts
          .map((u) => `<li><button type="submit" name="account" value="${esc(u.id)}">${esc(u.name)}${u.email ? ` (${esc(u.email)})` : ''}</button></li>`)
          .join(''),
      });
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/select-account',
    summary: 'Account chosen',
    area: 'login',
    auth: policy.public,
    bodyType: 'form',
    body: selectForm,
    responses: { 302: { description: 'onward' } },
    handler: async (req, res) => {
      const pend = flow.pending(req, req.body.i);
      if (!('it' in pend)) return pend;
      if (!d.sessions().checkCsrf(pend.browser, `select|${pend.it.id}`, req.body.csrf))
        return page('message.html', { title: 'Form expired', message: 'Reload and try again.' }, 403);
      if (req.body.account === 'other') {
        const params = { ...pend.it.params, prompt: [...pend.it.params.prompt.filter((x) => x !== 'select_account'), 'login'] };
        d.sessions().finishInteraction(pend.it.id);
        const id = d.sessions().createInteraction(req.tenant, pend.browser, params);
        return reply.redirect(`/login.html?i=${encodeURIComponent(id)}`, 302);
      }
      const session = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
      if (!session?.accounts.some((x) => x.userId === req.body.account))
        return page('message.html', { title: 'Unknown account', message: 'That account is not signed in here.' }, 400);
      pend.it.state = { ...pend.it.state, userId: req.body.account };
      d.sessions().updateInteraction(pend.it.id, pend.it.state);
      return flow.proceed(req, res, pend.it.params, pend.client, pend.it, pend.browser);
    },
  });
  for (const [name, type] of [
    ['style.css', 'text/css; charset=utf-8'],
    ['passkey.js', 'text/javascript; charset=utf-8'],
    ['form-post.js', 'text/javascript; charset=utf-8'],
  ] as const) {
    r.add({
      method: 'GET',
      path: `/login/${name}`,
      summary: `Sign-in page asset ${name}`,
      area: 'login',
      auth: policy.public,
      responses: { 200: { description: name, contentType: type.split(';')[0] } },
      handler: () => asset(name, type),
    });
  }

  // ---- RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0) ----
  const endSession = async (req: RouteRequest, res: Response, q: z.infer<typeof logoutParams>): Promise<Reply> => {
    const tenant = req.tenant;
    const issuer = issuerOf(req);
    let hintClaims: jose.JWTPayload | undefined;
    if (q.id_token_hint) {
      try {
        hintClaims = await d.p().keys.verify(tenant, q.id_token_hint, { allowExpired: true });
        if (hintClaims.iss !== issuer || hintClaims.client_id !== undefined) throw new Error('not an id_token of this issuer');
      } catch {
        throw new AppError(400, 'invalid_request', 'id_token_hint is not an id_token of this issuer');
      }
    }
    const clientId = q.client_id ?? (hintClaims ? String(Array.isArray(hintClaims.aud) ? hintClaims.aud[0] : hintClaims.aud) : undefined);
    if (q.client_id && hintClaims && !(Array.isArray(hintClaims.aud) ? hintClaims.aud : [hintClaims.aud]).includes(q.client_id)) {
      throw new AppError(400, 'invalid_request', 'client_id differs from the id_token_hint audience');
    }
    const client = clientId ? d.p().clients.get(tenant, clientId) : undefined;
    if (q.post_logout_redirect_uri !== undefined) {
      // §3: the URI must be registered for the client; without a known client it cannot be checked.
      if (!client || !redirectUriAllowed(client.postLogoutRedirectUris, q.post_logout_redirect_uri, issuer)) {
        throw new AppError(400, 'invalid_request', 'post_logout_redirect_uri is not registered for the client');
      }
    }
    const session = d.sessions().get(tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
    const confirmed = hintClaims && (!session || session.accounts.some((x) => x.userId === hintClaims!.sub));
    if (session && !confirmed) {
      const b = browserId(req, res);
      return page('logout.html', {
        tenant: tenant.name,
        csrf: d.sessions().csrf(b, 'logout'),
        postLogoutRedirectUri: q.post_logout_redirect_uri ?? '',
        state: q.state ?? '',
        clientId: client?.clientId ?? '',
      });
    }
    return finishLogout(req, res, session, client, q.post_logout_redirect_uri, q.state, hintClaims?.sub);
  };
  const finishLogout = (
    req: RouteRequest,
    res: Response,
    session: Session | undefined,
    client: OidcClient | undefined,
    uri: string | undefined,
    state: string | undefined,
    sub: unknown,
  ): Reply => {
    if (session) d.sessions().end(session);
    res.append('Set-Cookie', cookie(SID_COOKIE, '', { secure: secure(req), maxAge: 0 }));
    d.ctx.audit.write(req.tenant, {
      event: 'end-session',
      user: typeof sub === 'string' ? (d.p().users.get(req.tenant, sub)?.name ?? sub) : '',
      ip: req.ip,
      ua: req.ua,
      extra: { client: client?.clientId, had_session: !!session },
    });
    if (uri) {
      const u = new URL(uri.startsWith('/') ? issuerOf(req) + uri : uri);
      if (state !== undefined && state !== '') u.searchParams.set('state', state);
      return reply.redirect(u.href, 302);
    }
    return page('message.html', { title: 'Signed out', message: 'You are signed out.' });
  };
  r.add({
    method: 'GET',
    path: '/oauth2/v1/logout',
    aliases: ['/oidc.ashx?action=end_session'],
    summary: 'End session (RP-initiated logout); post_logout_redirect_uri checked against the client',
    area,
    auth: policy.public,
    query: logoutParams,
    responses: { 200: { description: 'signed out, or a confirmation page', contentType: 'text/html' }, 302: { description: 'to post_logout_redirect_uri' } },
    handler: (req, res) => endSession(req, res, req.query),
  });
  r.add({
    method: 'POST',
    path: '/oauth2/v1/logout',
    summary: 'End session, form-encoded',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: logoutParams,
    responses: { 200: { description: 'as GET', contentType: 'text/html' }, 302: { description: 'as GET' } },
    handler: (req, res) => endSession(req, res, req.body),
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/logout',
    summary: 'Logout confirmation form',
    area: 'login',
    auth: policy.public,
    bodyType: 'form',
    body: logoutForm,
    responses: { 200: { description: 'HTML', contentType: 'text/html' }, 302: { description: 'to post_logout_redirect_uri' } },
    handler: (req, res) => {
      const b = parseCookies(req.headers.cookie)[BROWSER_COOKIE];
      if (!d.sessions().checkCsrf(b, 'logout', req.body.csrf)) return page('message.html', { title: 'Form expired', message: 'Reload and try again.' }, 403);
      const client = req.body.client_id ? d.p().clients.get(req.tenant, req.body.client_id) : undefined;
      const uri = req.body.post_logout_redirect_uri || undefined;
      if (uri && (!client || !redirectUriAllowed(client.postLogoutRedirectUris, uri, issuerOf(req))))
        throw new AppError(400, 'invalid_request', 'post_logout_redirect_uri is not registered for the client');
      if (req.body.confirm === 'no') return page('message.html', { title: 'Still signed in', message: 'You are still signed in.' });
      const session = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
      return finishLogout(req, res, session, client, uri, req.body.state, session?.accounts[0]?.userId);
    },
  });
  return flow;
}
