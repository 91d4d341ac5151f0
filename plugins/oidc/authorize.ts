import type { Response } from 'express';
import type * as jose from 'jose';
import { z } from 'zod';
import { AppError, html, type PluginContext, policy, reply, type Reply, type RouteRegistrar, type RouteRequest, type User } from '../../server/sdk.ts';
import { redirectUriAllowed, type OidcClient } from './clients.ts';
import { respond, type AuthzRequest } from './flow.ts';
import { pageLang, text, type Lang, type TextKey } from './page-text.ts';
import { asset, message, page } from './pages.ts';
import { issuerOf, reqInfo } from './issuer.ts';
import { authorizeParams, logoutParams, type OidcConfig } from './schemas.ts';
import type { OidcServices } from './services.ts';
import type { Session } from './sessions.ts';

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

/**
 * The authorization endpoint, its pages (login, consent, account choice) and RP-initiated logout.
 * The decisions are the flow's (flow.ts), the browser's cookies SignIn's (signin.ts).
 */
export function authorizeRoutes(r: RouteRegistrar, ctx: PluginContext<OidcConfig>, s: OidcServices): void {
  const { flow, signIn, provider } = s;
  const area = 'oidc';
  const formExpired = (lang: Lang, msg: TextKey) => message(lang, 'msg_formExpired', msg, 403);
  /** The language of a page of an authorization request: its ui_locales first (OIDC Core §3.1.2.1). */
  const langOf = (req: RouteRequest, i?: string): Lang =>
    pageLang(req, i ? signIn.sessions.interaction<AuthzRequest>(req.tenant, i, signIn.browser(req))?.params.uiLocales : undefined);
  const scopeText = (lang: Lang, scope: string): string => {
    const key = `scope_${scope}`;
    return key in { scope_openid: 1, scope_profile: 1, scope_email: 1, scope_offline_access: 1, scope_network_access: 1 } ? text(lang, key as TextKey) : scope;
  };
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
      const b = signIn.ensureBrowser(req, res);
      const pend = req.query.i ? flow.pending(req, req.query.i) : undefined;
      if (pend && !('it' in pend)) return pend;
      const client = pend?.client;
      const lang = pageLang(req, pend?.it.params.uiLocales);
      const errorText = req.query.error === 'expired' ? text(lang, 'linkExpiredSignIn') : '';
      return page(
        'login.html',
        {
          tenant: req.tenant.name,
          signInTo: text(lang, 'signInTo', { tenant: req.tenant.name }),
          i: req.query.i ?? '',
          csrf: signIn.csrf(b, `login|${req.query.i ?? ''}`),
          clientLine: client ? text(lang, 'continueTo', { client: client.name }) : '',
          loginHint: pend?.it.params.loginHint ?? '',
          error: errorText ? `<p class="error" role="alert">${html.escape(errorText)}</p>` : '',
          loginOptions: signIn.loginOptionsHtml(req.tenant, req.query.i ?? '', lang),
        },
        200,
        lang,
      );
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
      const i = req.body.i ?? '';
      const lang = langOf(req, i);
      if (!signIn.csrfOk(req, `login|${i}`, req.body.csrf)) return formExpired(lang, 'msg_formExpiredReload');
      const again = (msg: TextKey, status: number) =>
        page(
          'login.html',
          {
            tenant: req.tenant.name,
            signInTo: text(lang, 'signInTo', { tenant: req.tenant.name }),
            i,
            csrf: req.body.csrf,
            clientLine: '',
            loginHint: req.body.username,
            error: `<p class="error" role="alert">${html.escape(text(lang, msg))}</p>`,
            loginOptions: signIn.loginOptionsHtml(req.tenant, i, lang),
          },
          status,
          lang,
        );
      let user: User | undefined;
      try {
        user = await provider.checkPassword(req.tenant, req.body.username, req.body.password, reqInfo(req), { via: 'login-page' });
      } catch (e) {
        if (e instanceof AppError && e.status === 429) return again('tooManyAttempts', 429);
        throw e;
      }
      if (!user) return again('wrongPassword', 400);
      if (!i) {
        signIn.login(req, res, user, ['pwd']);
        return message(lang, 'msg_signedIn', 'msg_signedInAs', 200, { user: user.name });
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
      const uid = pend.it.state.userId ?? signIn.session(req)?.accounts[0]?.userId;
      const user = uid ? provider.activeUser(req.tenant, uid) : undefined;
      const lang = pageLang(req, pend.it.params.uiLocales);
      return page(
        'consent.html',
        {
          tenant: req.tenant.name,
          heading: text(lang, 'consentHeading', { client: pend.client.name }),
          asks: text(lang, 'consentAsks', { client: pend.client.name }),
          user: user?.name ?? '',
          i: pend.it.id,
          csrf: signIn.csrf(pend.browser, `consent|${pend.it.id}`),
          scopes: pend.it.params.scope.map((x) => `<li>${html.escape(scopeText(lang, x))}</li>`).join(''),
        },
        200,
        lang,
      );
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
    handler: async (req) => {
      const pend = flow.pending(req, req.body.i);
      if (!('it' in pend)) return pend;
      if (!signIn.csrfOk(req, `consent|${pend.it.id}`, req.body.csrf)) return formExpired(pageLang(req, pend.it.params.uiLocales), 'msg_reloadRetry');
      const a = pend.it.params;
      if (req.body.decision === 'deny') {
        signIn.sessions.finishInteraction(pend.it.id);
        return respond(a, { error: 'access_denied', error_description: 'the user denied the request' });
      }
      const session = signIn.session(req);
      const uid = pend.it.state.userId ?? (session?.accounts.length === 1 ? session.accounts[0]!.userId : undefined);
      if (uid) signIn.sessions.saveConsent(req.tenant, uid, a.clientId, a.scope);
      pend.it.state = { ...pend.it.state, consented: true, userId: uid };
      signIn.sessions.updateInteraction(pend.it.id, pend.it.state);
      return flow.proceed(req, a, pend.client, pend.it, pend.browser, session);
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
      const accounts = (signIn.session(req)?.accounts ?? []).map((x) => provider.activeUser(req.tenant, x.userId)).filter((u): u is User => !!u);
      const lang = pageLang(req, pend.it.params.uiLocales);
      return page(
        'select-account.html',
        {
          tenant: req.tenant.name,
          continueTo: text(lang, 'continueTo', { client: pend.client.name }),
          i: pend.it.id,
          csrf: signIn.csrf(pend.browser, `select|${pend.it.id}`),
          accounts: accounts
            .map(
              (u) =>
                `<li><button type="submit" name="account" value="${html.escape(u.id)}">${html.escape(u.name)}${u.email ? ` (${html.escape(u.email)})` : ''}</button></li>`,
            )
            .join(''),
        },
        200,
        lang,
      );
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
    handler: async (req) => {
      const pend = flow.pending(req, req.body.i);
      if (!('it' in pend)) return pend;
      const lang = pageLang(req, pend.it.params.uiLocales);
      if (!signIn.csrfOk(req, `select|${pend.it.id}`, req.body.csrf)) return formExpired(lang, 'msg_reloadRetry');
      if (req.body.account === 'other') {
        const params = { ...pend.it.params, prompt: [...pend.it.params.prompt.filter((x) => x !== 'select_account'), 'login'] };
        signIn.sessions.finishInteraction(pend.it.id);
        const id = signIn.sessions.createInteraction(req.tenant, pend.browser, params);
        return reply.redirect(`/login.html?i=${encodeURIComponent(id)}`, 302);
      }
      const session = signIn.session(req);
      if (!session?.accounts.some((x) => x.userId === req.body.account)) return message(lang, 'msg_unknownAccount', 'msg_unknownAccountText', 400);
      pend.it.state = { ...pend.it.state, userId: req.body.account };
      signIn.sessions.updateInteraction(pend.it.id, pend.it.state);
      return flow.proceed(req, pend.it.params, pend.client, pend.it, pend.browser, session);
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
        hintClaims = await provider.keys.verify(tenant, q.id_token_hint, { allowExpired: true });
        if (hintClaims.iss !== issuer || hintClaims.client_id !== undefined) throw new Error('not an id_token of this issuer');
      } catch {
        throw new AppError(400, 'invalid_request', 'id_token_hint is not an id_token of this issuer');
      }
    }
    const clientId = q.client_id ?? (hintClaims ? String(Array.isArray(hintClaims.aud) ? hintClaims.aud[0] : hintClaims.aud) : undefined);
    if (q.client_id && hintClaims && !(Array.isArray(hintClaims.aud) ? hintClaims.aud : [hintClaims.aud]).includes(q.client_id)) {
      throw new AppError(400, 'invalid_request', 'client_id differs from the id_token_hint audience');
    }
    const client = clientId ? provider.clients.get(tenant, clientId) : undefined;
    if (q.post_logout_redirect_uri !== undefined) {
      // §3: the URI must be registered for the client; without a known client it cannot be checked.
      if (!client || !redirectUriAllowed(client.postLogoutRedirectUris, q.post_logout_redirect_uri, issuer)) {
        throw new AppError(400, 'invalid_request', 'post_logout_redirect_uri is not registered for the client');
      }
    }
    const session = signIn.session(req);
    const confirmed = hintClaims && (!session || session.accounts.some((x) => x.userId === hintClaims!.sub));
    if (session && !confirmed) {
      const b = signIn.ensureBrowser(req, res);
      const lang = pageLang(req, q.ui_locales);
      return page(
        'logout.html',
        {
          tenant: tenant.name,
          signOutOf: text(lang, 'signOutOf', { tenant: tenant.name }),
          csrf: signIn.csrf(b, 'logout'),
          postLogoutRedirectUri: q.post_logout_redirect_uri ?? '',
          state: q.state ?? '',
          clientId: client?.clientId ?? '',
        },
        200,
        lang,
      );
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
    signIn.logout(req, res, session);
    ctx.audit.write(req.tenant, {
      event: 'end-session',
      user: typeof sub === 'string' ? (ctx.users.get(req.tenant, sub)?.name ?? sub) : '',
      ip: req.ip,
      ua: req.ua,
      extra: { client: client?.clientId, had_session: !!session },
    });
    if (uri) {
      const u = new URL(uri.startsWith('/') ? issuerOf(req) + uri : uri);
      if (state !== undefined && state !== '') u.searchParams.set('state', state);
      return reply.redirect(u.href, 302);
    }
    return message(pageLang(req), 'msg_signedOut', 'msg_signedOutText');
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
      const lang = pageLang(req);
      if (!signIn.csrfOk(req, 'logout', req.body.csrf)) return formExpired(lang, 'msg_reloadRetry');
      const client = req.body.client_id ? provider.clients.get(req.tenant, req.body.client_id) : undefined;
      const uri = req.body.post_logout_redirect_uri || undefined;
      if (uri && (!client || !redirectUriAllowed(client.postLogoutRedirectUris, uri, issuerOf(req))))
        throw new AppError(400, 'invalid_request', 'post_logout_redirect_uri is not registered for the client');
      if (req.body.confirm === 'no') return message(lang, 'msg_stillSignedIn', 'msg_stillSignedInText');
      const session = signIn.session(req);
      return finishLogout(req, res, session, client, uri, req.body.state, session?.accounts[0]?.userId);
    },
  });
}
