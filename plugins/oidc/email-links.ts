import { z } from 'zod';
import { checkPasswordPolicy, policy, reply, type RouteRegistrar } from '../../server/sdk.ts';
import { EMAIL_TOKEN_TTL, type InteractKit } from './interact.ts';
import { page } from './pages.ts';

/**
 * E-mail links: the magic sign-in link and account recovery. The form answers the same whether
 * or not an account has the address; a link is single use and short-lived.
 */
export function emailLinkRoutes(r: RouteRegistrar, kit: InteractKit): void {
  const { d, area, browser, signIn, newEmailToken, peekToken, consumeToken, send, ensureBrowser } = kit;
  const { ctx } = kit.d;
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
      const b = browser(req);
      if (!d.sessions().checkCsrf(b, `login|${req.body.i ?? ''}`, req.body.csrf))
        return page('message.html', { title: 'Form expired', message: 'Reload the sign-in page and try again.' }, 403);
      const purpose = req.body.purpose;
      const email = req.body.email.trim();
      const limited =
        ctx.rateLimit.take('oidc-maglink-ip', req.ip, 10) > 0 || ctx.rateLimit.take('oidc-maglink-account', `${req.tenant.id}|${email.toLowerCase()}`, 3) > 0;
      if (limited) {
        ctx.audit.write(req.tenant, { event: 'login-rate-limited', user: email, ip: req.ip, ua: req.ua, extra: { via: purpose } });
        return page('message.html', { title: 'Too many requests', message: 'Too many e-mails were requested. Wait a few minutes.' }, 429);
      }
      const user = email.includes('@') ? d.p().users.byLogin(req.tenant, email) : undefined;
      ctx.audit.write(req.tenant, {
        event: purpose === 'maglink' ? 'maglink-start' : 'recover-start',
        user: email,
        ip: req.ip,
        ua: req.ua,
        extra: { known: !!user },
      });
      if (user && user.email && user.status === 'active') {
        const it = req.body.i ? d.sessions().interaction(req.tenant, req.body.i, b) : undefined;
        const t = newEmailToken(req.tenant, user, purpose, it?.id ?? null, EMAIL_TOKEN_TTL);
        const link = `${req.publicOrigin}/oidc.ashx/${purpose === 'maglink' ? 'maglink-finish' : 'recover-finish'}?t=${t}`;
        await send(
          req.tenant,
          user.email,
          purpose === 'maglink' ? `Sign in to ${req.tenant.name}` : `Reset your password for ${req.tenant.name}`,
          `${purpose === 'maglink' ? 'Sign in' : 'Choose a new password'} with this link (valid 15 minutes, once):\n\n${link}\n\nIf you did not ask for it, ignore this mail.`,
        );
      }
      return page('message.html', {
        title: 'Check your mail',
        message: 'If an account with that address exists, we sent it a link. It is valid for 15 minutes.',
      });
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
      if (!peekToken(req.tenant, req.query.t, 'maglink'))
        return page('message.html', { title: 'Link expired', message: 'This sign-in link has expired or was used. Request a new one.' }, 400);
      const b = ensureBrowser(req, res);
      return page('email-link.html', {
        tenant: req.tenant.name,
        title: 'Finish signing in',
        action: '/oidc.ashx/maglink-finish',
        t: req.query.t,
        csrf: d.sessions().csrf(b, 'maglink'),
        password: '',
        button: 'Sign in',
      });
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
      if (!d.sessions().checkCsrf(browser(req), 'maglink', req.body.csrf))
        return page('message.html', { title: 'Form expired', message: 'Open the link again.' }, 403);
      const tok = consumeToken(req.tenant, req.body.t, 'maglink');
      const user = tok && d.p().activeUser(req.tenant, tok.user_id);
      if (!tok || !user) return page('message.html', { title: 'Link expired', message: 'This sign-in link has expired or was used. Request a new one.' }, 400);
      ctx.audit.write(req.tenant, { event: 'maglink-finish', user: user.name, ip: req.ip, ua: req.ua });
      return reply.redirect(signIn(req, res, user, ['email'], tok.interaction_id), 302);
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
      if (!peekToken(req.tenant, req.query.t, 'recover'))
        return page('message.html', { title: 'Link expired', message: 'This recovery link has expired or was used.' }, 400);
      const b = ensureBrowser(req, res);
      return page('email-link.html', {
        tenant: req.tenant.name,
        title: 'Choose a new password',
        action: '/oidc.ashx/recover-finish',
        t: req.query.t,
        csrf: d.sessions().csrf(b, 'recover'),
        button: 'Save and sign in',
        password:
          '<label for="password">New password (at least 10 characters)</label><input type="password" id="password" name="password" autocomplete="new-password" minlength="10" required>',
      });
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
      if (!d.sessions().checkCsrf(browser(req), 'recover', req.body.csrf))
        return page('message.html', { title: 'Form expired', message: 'Open the link again.' }, 403);
      try {
        checkPasswordPolicy(req.body.password);
      } catch (e) {
        return page('message.html', { title: 'Password not accepted', message: (e as Error).message }, 400);
      }
      const tok = consumeToken(req.tenant, req.body.t, 'recover');
      const user = tok && d.p().activeUser(req.tenant, tok.user_id);
      if (!tok || !user) return page('message.html', { title: 'Link expired', message: 'This recovery link has expired or was used.' }, 400);
      await ctx.users.setPassword(req.tenant, user.name, req.body.password);
      ctx.audit.write(req.tenant, { event: 'recover-finish', user: user.name, ip: req.ip, ua: req.ua });
      return reply.redirect(signIn(req, res, user, ['pwd', 'email'], tok.interaction_id), 302);
    },
  });
}
