import { z } from 'zod';
import { checkPasswordPolicy, html, type PluginContext, policy, reply, type RouteRegistrar } from '../../server/sdk.ts';
import { EMAIL_TOKEN_TTL } from './one-time-links.ts';
import type { AuthzRequest } from './flow.ts';
import { mailText, pageLang, text } from './page-text.ts';
import { message, page } from './pages.ts';
import type { OidcConfig } from './schemas.ts';
import type { OidcServices } from './services.ts';

/**
 * E-mail links: the magic sign-in link and account recovery. The form answers the same whether
 * or not an account has the address; a link is single use and short-lived.
 */
export function emailLinkRoutes(r: RouteRegistrar, ctx: PluginContext<OidcConfig>, s: OidcServices, area: string): void {
  const { signIn, links, provider } = s;
  const maglinkForm = z.object({
    i: z.string().max(64).optional(),
    csrf: z.string().max(128),
    email: z.string().max(320),
    purpose: z.enum(['maglink', 'recover']).default('maglink'),
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/maglink',
    summary: 'Sends a sign-in link or a recovery link by e-mail (same answer whether or not the account exists)',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: maglinkForm,
    rateLimit: 'sensitive',
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: async (req) => {
      // The interaction's ui_locales chose the sign-in page's language: the answer and the mail keep it.
      const it = req.body.i ? signIn.sessions.interaction<AuthzRequest>(req.tenant, req.body.i, signIn.browser(req)) : undefined;
      const lang = pageLang(req, it?.params.uiLocales);
      if (!signIn.csrfOk(req, `login|${req.body.i ?? ''}`, req.body.csrf)) return message(lang, 'msg_formExpired', 'msg_formExpiredReload', 403);
      const purpose = req.body.purpose;
      const email = req.body.email.trim();
      const limited =
        ctx.rateLimit.take('oidc-maglink-ip', req.ip, 10) > 0 || ctx.rateLimit.take('oidc-maglink-account', `${req.tenant.id}|${email.toLowerCase()}`, 3) > 0;
      if (limited) {
        ctx.audit.write(req.tenant, { event: 'login-rate-limited', user: email, ip: req.ip, ua: req.ua, extra: { via: purpose } });
        return message(lang, 'msg_tooMany', 'msg_tooManyMails', 429);
      }
      const user = email.includes('@') ? ctx.users.byLogin(req.tenant, email) : undefined;
      ctx.audit.write(req.tenant, {
        event: purpose === 'maglink' ? 'maglink-start' : 'recover-start',
        user: email,
        ip: req.ip,
        ua: req.ua,
        extra: { known: !!user },
      });
      if (user && user.email && user.status === 'active') {
        const t = links.issue(req.tenant, user, purpose, it?.id ?? null, EMAIL_TOKEN_TTL);
        const link = `${req.publicOrigin}/oidc.ashx/${purpose === 'maglink' ? 'maglink-finish' : 'recover-finish'}?t=${t}`;
        // The account's own language, when it has one; else the page's (the request's).
        const mailLang = user.language ?? lang;
        await links.send(req.tenant, user.email, mailLang, mailText(mailLang, purpose, { tenant: req.tenant.name, link }));
      }
      return message(lang, 'msg_checkMail', 'msg_checkMailText');
    },
  });
  // GET shows a button only: mail scanners that prefetch links must not consume them.
  r.add({
    method: 'GET',
    path: '/oidc.ashx/maglink-finish',
    summary: 'Magic-link landing page (confirms with a POST)',
    area,
    auth: policy.public,
    query: z.object({ t: z.string().max(100) }),
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      const lang = pageLang(req);
      if (!links.peek(req.tenant, req.query.t, 'maglink')) return message(lang, 'msg_linkExpired', 'msg_signInLinkExpired', 400);
      const b = signIn.ensureBrowser(req, res);
      return page(
        'email-link.html',
        {
          tenant: req.tenant.name,
          title: text(lang, 'finishSignIn'),
          action: '/oidc.ashx/maglink-finish',
          t: req.query.t,
          csrf: signIn.csrf(b, 'maglink'),
          password: '',
          button: text(lang, 'signIn'),
        },
        200,
        lang,
      );
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/maglink-finish',
    summary: 'Redeems a magic link (single use) and signs in',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: z.object({ t: z.string().max(100), csrf: z.string().max(128) }),
    rateLimit: 'sensitive',
    responses: { 302: { description: 'onward' } },
    handler: (req, res) => {
      const lang = pageLang(req);
      if (!signIn.csrfOk(req, 'maglink', req.body.csrf)) return message(lang, 'msg_formExpired', 'msg_openAgain', 403);
      const tok = links.consume(req.tenant, req.body.t, 'maglink');
      const user = tok && provider.activeUser(req.tenant, tok.user_id);
      if (!tok || !user) return message(lang, 'msg_linkExpired', 'msg_signInLinkExpired', 400);
      ctx.audit.write(req.tenant, { event: 'maglink-finish', user: user.name, ip: req.ip, ua: req.ua });
      return reply.redirect(signIn.signIn(req, res, user, ['email'], tok.interaction_id), 302);
    },
  });
  r.add({
    method: 'GET',
    path: '/oidc.ashx/recover-finish',
    summary: 'Recovery link landing page: choose a new password',
    area,
    auth: policy.public,
    query: z.object({ t: z.string().max(100) }),
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      const lang = pageLang(req);
      if (!links.peek(req.tenant, req.query.t, 'recover')) return message(lang, 'msg_linkExpired', 'msg_recoveryLinkExpired', 400);
      const b = signIn.ensureBrowser(req, res);
      return page(
        'email-link.html',
        {
          tenant: req.tenant.name,
          title: text(lang, 'newPasswordTitle'),
          action: '/oidc.ashx/recover-finish',
          t: req.query.t,
          csrf: signIn.csrf(b, 'recover'),
          button: text(lang, 'saveAndSignIn'),
          password: `<label for="password">${html.escape(text(lang, 'newPasswordLabel'))}</label><input type="password" id="password" name="password" autocomplete="new-password" minlength="10" required>`,
        },
        200,
        lang,
      );
    },
  });
  r.add({
    method: 'POST',
    path: '/oidc.ashx/recover-finish',
    summary: 'Sets a new password from a recovery link (single use) and signs in',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: z.object({ t: z.string().max(100), csrf: z.string().max(128), password: z.string().max(1024) }),
    rateLimit: 'sensitive',
    responses: { 302: { description: 'onward' } },
    handler: async (req, res) => {
      const lang = pageLang(req);
      if (!signIn.csrfOk(req, 'recover', req.body.csrf)) return message(lang, 'msg_formExpired', 'msg_openAgain', 403);
      try {
        checkPasswordPolicy(req.body.password);
      } catch {
        return message(lang, 'msg_passwordRefused', 'msg_weakPassword', 400);
      }
      const tok = links.consume(req.tenant, req.body.t, 'recover');
      const user = tok && provider.activeUser(req.tenant, tok.user_id);
      if (!tok || !user) return message(lang, 'msg_linkExpired', 'msg_recoveryLinkExpired', 400);
      await ctx.users.setPassword(req.tenant, user.name, req.body.password);
      ctx.audit.write(req.tenant, { event: 'recover-finish', user: user.name, ip: req.ip, ua: req.ua });
      return reply.redirect(signIn.signIn(req, res, user, ['pwd', 'email'], tok.interaction_id), 302);
    },
  });
}
