import { z } from 'zod';
import {
  AppError,
  checkPasswordPolicy,
  html,
  InputError,
  NotFoundError,
  policy,
  reply,
  type RouteRegistrar,
  type RouteRequest,
  type PluginContext,
  type Tenant,
} from '../../server/sdk.ts';
import { CLAIM_TOKEN_TTL } from './one-time-links.ts';
import { mailText, pageLang, text } from './page-text.ts';
import { message, page } from './pages.ts';
import type { OidcConfig } from './schemas.ts';
import type { OidcServices } from './services.ts';

/** Invitations: an admin's claim link for an account without a password, and the claim itself. */
export function invitationRoutes(r: RouteRegistrar, ctx: PluginContext<OidcConfig>, s: OidcServices, area: string): void {
  const { signIn, links, provider } = s;
  // A disabled account's open invitation must not let it in (an admin may disable an invitee
  // before the link is used): it reads like an expired invitation.
  const claimable = (tenant: Tenant, userId: string) => {
    const u = ctx.users.get(tenant, userId);
    return u && u.status !== 'disabled' ? u : undefined;
  };
  r.add({
    method: 'POST',
    path: '/signal.ashx?oidc-invite=1',
    summary: 'Invitation for an account without a password: a claim link (shown once, mailed when possible)',
    area: 'admin',
    auth: policy.adminOrHmac('oidc-invite'),
    body: z.object({ user: z.string().max(128) }).strict(),
    responses: {
      200: { description: '{claim_url, expires_in, mailed}', schema: z.object({ claim_url: z.string(), expires_in: z.number(), mailed: z.boolean() }) },
    },
    handler: async (req) => {
      const user = ctx.users.byName(req.tenant, req.body.user);
      if (!user) throw new NotFoundError(`no user ${req.body.user}`);
      if (user.status !== 'invited') throw new InputError(`user ${user.name} has already claimed the account`, 'already_claimed');
      const t = links.issue(req.tenant, user, 'claim', null, CLAIM_TOKEN_TTL);
      const url = `${req.publicOrigin}/claim.html?t=${t}`;
      // In the invitee's language when the administrator set one, else in the language of the
      // administrator's request (the console's language cookie, else Accept-Language).
      const lang = user.language ?? pageLang(req);
      const mailed = user.email
        ? await links.send(req.tenant, user.email, lang, mailText(lang, 'invite', { tenant: req.tenant.name, link: url, user: user.name }))
        : false;
      return { claim_url: url, expires_in: CLAIM_TOKEN_TTL, mailed };
    },
  });
  const claimLimited = (req: RouteRequest): boolean => {
    if (ctx.rateLimit.take('oidc-claim-ip', req.ip, 10) === 0) return false;
    ctx.audit.write(req.tenant, { event: 'claim-rate-limited', ip: req.ip, ua: req.ua });
    return true;
  };
  r.add({
    method: 'GET',
    path: '/oidc.ashx/claim-info',
    summary: 'Who an invitation is for (before claiming it)',
    area,
    auth: policy.public,
    query: z.object({ t: z.string().max(100) }),
    rateLimit: 'sensitive',
    responses: {
      200: { description: '{user, email, tenant}', schema: z.object({ user: z.string() }).loose() },
      404: { description: 'unknown or used invitation' },
    },
    handler: (req) => {
      if (claimLimited(req)) throw new AppError(429, 'rate_limited', 'too many attempts; try again later', { headers: { 'Retry-After': '60' } });
      const tok = links.peek(req.tenant, req.query.t, 'claim');
      const user = tok && claimable(req.tenant, tok.user_id);
      ctx.audit.write(req.tenant, { event: 'claim-info', user: user?.name, ip: req.ip, ua: req.ua, extra: { valid: !!user } });
      if (!tok || !user) throw new NotFoundError('unknown, expired or used invitation');
      return { user: user.name, email: user.email, tenant: req.tenant.name };
    },
  });
  r.add({
    method: 'GET',
    path: '/claim.html',
    summary: 'Invitation claim page',
    area,
    auth: policy.public,
    query: z.object({ t: z.string().max(100) }),
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      const tok = links.peek(req.tenant, req.query.t, 'claim');
      const user = tok && claimable(req.tenant, tok.user_id);
      const lang = pageLang(req);
      if (!user) return message(lang, 'msg_invitationExpired', 'msg_invitationExpiredText', 400);
      const b = signIn.ensureBrowser(req, res);
      return page(
        'email-link.html',
        {
          tenant: req.tenant.name,
          title: text(lang, 'welcome', { user: user.name }),
          action: '/oidc.ashx/claim',
          t: req.query.t,
          csrf: signIn.csrf(b, 'claim'),
          button: text(lang, 'setPasswordSignIn'),
          password: `<label for="password">${html.escape(text(lang, 'choosePasswordLabel'))}</label><input type="password" id="password" name="password" autocomplete="new-password" minlength="10" required>`,
        },
        200,
        lang,
      );
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/claim',
    summary: 'Claims an invitation: sets the password (single use) and signs in',
    area,
    auth: policy.public,
    bodyType: 'json-or-form',
    body: z.object({ t: z.string().max(100), password: z.string().max(1024), csrf: z.string().max(128).optional() }),
    rateLimit: 'sensitive',
    responses: { 302: { description: 'signed in (form)' }, 200: { description: '{user} (JSON)' } },
    handler: async (req, res) => {
      const isForm = (req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');
      if (isForm && !signIn.csrfOk(req, 'claim', req.body.csrf)) return message(pageLang(req), 'msg_formExpired', 'msg_openAgain', 403);
      if (claimLimited(req)) throw new AppError(429, 'rate_limited', 'too many attempts; try again later', { headers: { 'Retry-After': '60' } });
      checkPasswordPolicy(req.body.password);
      const tok = links.consume(req.tenant, req.body.t, 'claim');
      const user = tok && claimable(req.tenant, tok.user_id);
      if (!tok || !user) throw new NotFoundError('unknown, expired or used invitation');
      await ctx.users.setPassword(req.tenant, user.name, req.body.password);
      ctx.audit.write(req.tenant, { event: 'claim', user: user.name, ip: req.ip, ua: req.ua });
      if (!isForm) return { user: user.name };
      const active = provider.activeUser(req.tenant, user.id)!;
      return reply.redirect(signIn.signIn(req, res, active, ['pwd'], null), 302);
    },
  });
}
