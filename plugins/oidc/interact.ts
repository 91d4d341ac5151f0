import crypto from 'node:crypto';
import type { Response } from 'express';
import { z } from 'zod';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { AppError, checkPasswordPolicy, InputError, NotFoundError, policy, reply, type RouteRegistrar, type RouteRequest, sha256Hex, type Tenant, type User } from '../../server/sdk.ts';
import type { AuthorizeFlow, Deps } from './authorize.ts';
import { BROWSER_COOKIE, SID_COOKIE, cookie, parseCookies } from './sessions.ts';
import { page } from './pages.ts';

// Loaded on first use: @simplewebauthn/server and nodemailer cost ~0.45 s of every start, and
// most starts never see a passkey or send a mail before they are needed.
const webauthn = () => import('@simplewebauthn/server');
const mailer = async () => (await import('nodemailer')).default;

const CHALLENGE_COOKIE = 'sc_wa';
const EMAIL_TOKEN_TTL = 15 * 60;
const CLAIM_TOKEN_TTL = 7 * 86_400;

type Purpose = 'maglink' | 'recover' | 'claim';

function secure(req: RouteRequest): boolean {
  return req.origin.startsWith('https:');
}

/** WebAuthn RP ID: the host name the browser used, without port (WebAuthn L3 §5.1.4.1). */
function rpId(req: RouteRequest): string {
  return new URL(req.origin).hostname;
}

/**
 * Passkeys (WebAuthn, discoverable credentials), e-mail links (magic link, recovery) and the
 * invitation claim: the sign-in methods beside the password.
 */
export function interactRoutes(r: RouteRegistrar, d: Deps, flow: AuthorizeFlow): void {
  const { ctx } = d;
  const area = 'login';
  const sealChallenge = (res: Response, req: RouteRequest, v: { c: string; p: string; u?: string }) => {
    const sealed = ctx.keys.seal(JSON.stringify({ ...v, exp: Date.now() + 300_000 }), 'oidc-webauthn');
    res.append('Set-Cookie', cookie(CHALLENGE_COOKIE, sealed, { secure: secure(req), maxAge: 300 }));
  };
  const openChallenge = (req: RouteRequest, purpose: string): { c: string; u?: string } | undefined => {
    const raw = parseCookies(req.headers.cookie)[CHALLENGE_COOKIE];
    if (!raw) return undefined;
    try {
      const v = JSON.parse(ctx.keys.openString(raw, 'oidc-webauthn')) as { c: string; p: string; u?: string; exp: number };
      return v.p === purpose && v.exp > Date.now() ? v : undefined;
    } catch {
      return undefined;
    }
  };
  const browser = (req: RouteRequest) => parseCookies(req.headers.cookie)[BROWSER_COOKIE];
  const currentUser = (req: RouteRequest): User | undefined => {
    const s = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
    const a = s?.accounts[0];
    return a ? d.p().activeUser(req.tenant, a.userId) : undefined;
  };
  /** Signs the user in and says where the browser goes next (the pending authorization, or a page). */
  const signIn = (req: RouteRequest, res: Response, user: User, amr: string[], interactionId: string | undefined | null): string => {
    const old = d.sessions().get(req.tenant, parseCookies(req.headers.cookie)[SID_COOKIE]);
    const { cookie: value } = d.sessions().login(req.tenant, old, user.id, amr);
    res.append('Set-Cookie', cookie(SID_COOKIE, value, { secure: secure(req), maxAge: ctx.config.sessionTtl }));
    const b = browser(req);
    const it = interactionId ? d.sessions().interaction(req.tenant, interactionId, b) : undefined;
    if (it) {
      d.sessions().updateInteraction(it.id, { ...it.state, userId: user.id, loginAt: d.p().now(), amr });
      return `/oidc.ashx/resume?i=${encodeURIComponent(it.id)}`;
    }
    return '/passkeys.html';
  };

  r.add({
    method: 'GET', path: '/oidc.ashx/resume', summary: 'Continues a pending authorization after a sign-in step', area, auth: policy.public,
    query: z.object({ i: z.string().max(64) }),
    responses: { 302: { description: 'onward in the authorization flow' } },
    handler: (req, res) => {
      const pend = flow.pending(req, req.query.i);
      if (!('it' in pend)) return pend;
      return flow.proceed(req, res, pend.it.params, pend.client, pend.it, pend.browser);
    },
  });

  // ---- passkeys ----
  const signinStart = z.object({ i: z.string().max(64).optional(), csrf: z.string().max(128) }).strict();
  r.add({
    method: 'POST', path: '/oidc.ashx/passkey/options', summary: 'WebAuthn authentication options (discoverable credentials)', area, auth: policy.public,
    body: signinStart, camelize: false, rateLimit: 'sensitive',
    responses: { 200: { description: 'PublicKeyCredentialRequestOptionsJSON', schema: z.object({ challenge: z.string() }).loose() } },
    handler: async (req, res) => {
      if (!d.sessions().checkCsrf(browser(req), `login|${req.body.i ?? ''}`, req.body.csrf)) throw new AppError(403, 'invalid_csrf', 'the form expired; reload the page');
      const opts = await (await webauthn()).generateAuthenticationOptions({ rpID: rpId(req), userVerification: 'required', allowCredentials: [] });
      sealChallenge(res, req, { c: opts.challenge, p: 'signin' });
      ctx.audit.write(req.tenant, { event: 'passkey-signin-start', ip: req.ip, ua: req.ua });
      return opts;
    },
  });
  const signinFinish = z.object({ i: z.string().max(64).optional(), csrf: z.string().max(128), response: z.object({ id: z.string().max(1024) }).loose() }).strict();
  r.add({
    method: 'POST', path: '/oidc.ashx/passkey/verify', summary: 'WebAuthn assertion check; signs in', area, auth: policy.public,
    body: signinFinish, camelize: false, rateLimit: 'sensitive',
    responses: { 200: { description: '{redirect}', schema: z.object({ redirect: z.string() }) }, 400: { description: 'passkey not accepted' } },
    handler: async (req, res) => {
      if (!d.sessions().checkCsrf(browser(req), `login|${req.body.i ?? ''}`, req.body.csrf)) throw new AppError(403, 'invalid_csrf', 'the form expired; reload the page');
      const ch = openChallenge(req, 'signin');
      res.append('Set-Cookie', cookie(CHALLENGE_COOKIE, '', { secure: secure(req), maxAge: 0 }));
      const fail = (why: string, user?: string) => {
        ctx.audit.write(req.tenant, { event: 'passkey-signin-fail', user, ip: req.ip, ua: req.ua, extra: { reason: why } });
        return new AppError(400, 'passkey_rejected', `passkey not accepted: ${why}`);
      };
      if (!ch) throw fail('no or expired challenge');
      const row = ctx.db.prepare('SELECT * FROM oidc_passkeys WHERE id = ? AND tenant_id = ?').get(req.body.response.id, req.tenant.id) as
        { id: string; user_id: string; public_key: string; counter: number; transports: string } | undefined;
      if (!row) throw fail('unknown credential');
      const user = d.p().activeUser(req.tenant, row.user_id);
      if (!user) throw fail('account not active');
      let v;
      try {
        v = await (await webauthn()).verifyAuthenticationResponse({
          response: req.body.response as unknown as AuthenticationResponseJSON, expectedChallenge: ch.c, expectedOrigin: req.origin, expectedRPID: rpId(req),
          credential: { id: row.id, publicKey: Buffer.from(row.public_key, 'base64url'), counter: row.counter, transports: JSON.parse(row.transports) as string[] },
          requireUserVerification: true,
        });
      } catch (e) {
        throw fail((e as Error).message.slice(0, 200), user.name);
      }
      if (!v.verified) throw fail('signature not verified', user.name);
      ctx.db.prepare('UPDATE oidc_passkeys SET counter = ? WHERE id = ?').run(v.authenticationInfo.newCounter, row.id);
      ctx.audit.write(req.tenant, { event: 'passkey-signin-ok', user: user.name, ip: req.ip, ua: req.ua });
      return { redirect: signIn(req, res, user, ['hwk', 'user'], req.body.i) };
    },
  });
  r.add({
    method: 'GET', path: '/passkeys.html', summary: 'Passkeys of the signed-in user (register a new one)', area, auth: policy.public,
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      const user = currentUser(req);
      if (!user) return reply.redirect('/login.html', 302);
      let b = browser(req);
      if (!b) {
        b = crypto.randomBytes(24).toString('base64url');
        res.append('Set-Cookie', cookie(BROWSER_COOKIE, b, { secure: secure(req) }));
      }
      const n = (ctx.db.prepare('SELECT COUNT(*) AS n FROM oidc_passkeys WHERE tenant_id = ? AND user_id = ?').get(req.tenant.id, user.id) as { n: number }).n;
      return page('passkeys.html', { tenant: req.tenant.name, user: user.name, count: n, csrf: d.sessions().csrf(b, 'passkey-register') });
    },
  });
  r.add({
    method: 'POST', path: '/oidc.ashx/passkey/register-options', summary: 'WebAuthn registration options for the signed-in user', area, auth: policy.public,
    body: z.object({ csrf: z.string().max(128) }).strict(), camelize: false, rateLimit: 'sensitive',
    responses: { 200: { description: 'PublicKeyCredentialCreationOptionsJSON', schema: z.object({ challenge: z.string() }).loose() } },
    handler: async (req, res) => {
      if (!d.sessions().checkCsrf(browser(req), 'passkey-register', req.body.csrf)) throw new AppError(403, 'invalid_csrf', 'the form expired; reload the page');
      const user = currentUser(req);
      if (!user) throw new AppError(401, 'login_required', 'sign in first');
      const existing = ctx.db.prepare('SELECT id, transports FROM oidc_passkeys WHERE tenant_id = ? AND user_id = ?').all(req.tenant.id, user.id) as { id: string; transports: string }[];
      const opts = await (await webauthn()).generateRegistrationOptions({
        rpName: req.tenant.name, rpID: rpId(req), userName: user.name, userID: new TextEncoder().encode(user.id), attestationType: 'none',
        authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
        excludeCredentials: existing.map((e) => ({ id: e.id, transports: JSON.parse(e.transports) as string[] })),
      });
      sealChallenge(res, req, { c: opts.challenge, p: 'register', u: user.id });
      return opts;
    },
  });
  r.add({
    method: 'POST', path: '/oidc.ashx/passkey/register', summary: 'Stores a new passkey of the signed-in user', area, auth: policy.public,
    body: z.object({ csrf: z.string().max(128), response: z.object({ id: z.string().max(1024) }).loose() }).strict(), camelize: false, rateLimit: 'sensitive',
    responses: { 200: { description: '{id}', schema: z.object({ id: z.string() }) } },
    handler: async (req, res) => {
      if (!d.sessions().checkCsrf(browser(req), 'passkey-register', req.body.csrf)) throw new AppError(403, 'invalid_csrf', 'the form expired; reload the page');
      const user = currentUser(req);
      const ch = openChallenge(req, 'register');
      res.append('Set-Cookie', cookie(CHALLENGE_COOKIE, '', { secure: secure(req), maxAge: 0 }));
      if (!user || !ch || ch.u !== user.id) throw new AppError(400, 'passkey_rejected', 'no registration in progress for this user');
      let v;
      try {
        v = await (await webauthn()).verifyRegistrationResponse({
          response: req.body.response as unknown as RegistrationResponseJSON, expectedChallenge: ch.c, expectedOrigin: req.origin, expectedRPID: rpId(req), requireUserVerification: true,
        });
      } catch (e) {
        throw new AppError(400, 'passkey_rejected', `registration not accepted: ${(e as Error).message.slice(0, 200)}`);
      }
      if (!v.verified) throw new AppError(400, 'passkey_rejected', 'registration not verified');
      const c = v.registrationInfo.credential;
      ctx.db.prepare('INSERT INTO oidc_passkeys (id, tenant_id, user_id, public_key, counter, transports, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
        .run(c.id, req.tenant.id, user.id, Buffer.from(c.publicKey).toString('base64url'), c.counter, JSON.stringify(c.transports ?? []), new Date().toISOString());
      ctx.audit.write(req.tenant, { event: 'passkey-register', user: user.name, ip: req.ip, ua: req.ua });
      return { id: c.id };
    },
  });

  // ---- e-mail links ----
  const relay = (tenant: Tenant) => ctx.config.tenantSmtp[tenant.host] ?? ctx.config.smtp;
  const newEmailToken = (tenant: Tenant, user: User, purpose: Purpose, interactionId: string | null, ttl: number): string => {
    const t = crypto.randomBytes(32).toString('base64url');
    const now = d.p().now();
    ctx.db.prepare('DELETE FROM oidc_email_tokens WHERE expires_at < ?').run(now);
    ctx.db.prepare('INSERT INTO oidc_email_tokens (token_hash, tenant_id, user_id, purpose, interaction_id, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(sha256Hex(t), tenant.id, user.id, purpose, interactionId, now + ttl);
    return t;
  };
  const peekToken = (tenant: Tenant, t: string | undefined, purpose: Purpose) => {
    if (!t || t.length > 100) return undefined;
    const r = ctx.db.prepare('SELECT * FROM oidc_email_tokens WHERE token_hash = ? AND tenant_id = ? AND purpose = ?').get(sha256Hex(t), tenant.id, purpose) as
      { token_hash: string; user_id: string; interaction_id: string | null; expires_at: number; used_at: number | null } | undefined;
    return r && r.used_at === null && r.expires_at >= d.p().now() ? r : undefined;
  };
  /** Single use: the UPDATE is the claim, so two clicks cannot both sign in. */
  const consumeToken = (tenant: Tenant, t: string, purpose: Purpose) => {
    const r = peekToken(tenant, t, purpose);
    if (!r) return undefined;
    const n = ctx.db.prepare('UPDATE oidc_email_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL').run(d.p().now(), r.token_hash).changes;
    return n ? r : undefined;
  };
  // Mail goes out through the durable job queue: the answer to the form does not wait for (or
  // reveal, by its timing, whether there was) a mail, and a relay that is down is retried. The
  // body carries a sign-in link, so it is sealed in the job row.
  ctx.jobs.define({
    name: 'oidc-mail',
    maxAttempts: 5,
    schema: z.object({ to: z.string(), subject: z.string(), sealed: z.string() }),
    run: async (job) => {
      const tenant = job.tenantId ? ctx.tenants.byId(job.tenantId) : undefined;
      const cfg = tenant && relay(tenant);
      if (!cfg) return;
      await (await mailer()).createTransport(cfg.url).sendMail({ from: cfg.from, to: job.data.to, subject: job.data.subject, text: ctx.keys.openString(job.data.sealed, 'oidc-mail') });
    },
  });
  const send = async (tenant: Tenant, to: string, subject: string, text: string): Promise<boolean> => {
    if (!relay(tenant)) {
      ctx.log.warn({ tenant: tenant.host }, 'no SMTP relay configured: sign-in mail not sent');
      return false;
    }
    ctx.jobs.enqueue('oidc-mail', { to, subject, sealed: ctx.keys.seal(text, 'oidc-mail') }, { tenantId: tenant.id });
    ctx.jobs.kick();
    return true;
  };

  const maglinkForm = z.object({ i: z.string().max(64).optional(), csrf: z.string().max(128), email: z.string().max(320), purpose: z.enum(['maglink', 'recover']).default('maglink') });
  r.add({
    method: 'POST', path: '/oidc.ashx/maglink', summary: 'Sends a sign-in link or a recovery link by e-mail (same answer whether or not the account exists)', area,
    auth: policy.public, bodyType: 'form', body: maglinkForm, rateLimit: 'sensitive',
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: async (req) => {
      const b = browser(req);
      if (!d.sessions().checkCsrf(b, `login|${req.body.i ?? ''}`, req.body.csrf)) return page('message.html', { title: 'Form expired', message: 'Reload the sign-in page and try again.' }, 403);
      const purpose = req.body.purpose;
      const email = req.body.email.trim();
      const limited = ctx.rateLimit.take('oidc-maglink-ip', req.ip, 10) > 0 || ctx.rateLimit.take('oidc-maglink-account', `${req.tenant.id}|${email.toLowerCase()}`, 3) > 0;
      if (limited) {
        ctx.audit.write(req.tenant, { event: 'login-rate-limited', user: email, ip: req.ip, ua: req.ua, extra: { via: purpose } });
        return page('message.html', { title: 'Too many requests', message: 'Too many e-mails were requested. Wait a few minutes.' }, 429);
      }
      const user = email.includes('@') ? d.p().users.byLogin(req.tenant, email) : undefined;
      ctx.audit.write(req.tenant, { event: purpose === 'maglink' ? 'maglink-start' : 'recover-start', user: email, ip: req.ip, ua: req.ua, extra: { known: !!user } });
      if (user && user.email && user.status === 'active') {
        const it = req.body.i ? d.sessions().interaction(req.tenant, req.body.i, b) : undefined;
        const t = newEmailToken(req.tenant, user, purpose, it?.id ?? null, EMAIL_TOKEN_TTL);
        const link = `${req.origin}/oidc.ashx/${purpose === 'maglink' ? 'maglink-finish' : 'recover-finish'}?t=${t}`;
        await send(req.tenant, user.email, purpose === 'maglink' ? `Sign in to ${req.tenant.name}` : `Reset your password for ${req.tenant.name}`,
          `${purpose === 'maglink' ? 'Sign in' : 'Choose a new password'} with this link (valid 15 minutes, once):\n\n${link}\n\nIf you did not ask for it, ignore this mail.`);
      }
      return page('message.html', { title: 'Check your mail', message: 'If an account with that address exists, we sent it a link. It is valid for 15 minutes.' });
    },
  });
  // GET shows a button only: mail scanners that prefetch links must not consume them.
  r.add({
    method: 'GET', path: '/oidc.ashx/maglink-finish', summary: 'Magic-link landing page (confirms with a POST)', area, auth: policy.public,
    query: z.object({ t: z.string().max(100) }), responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      if (!peekToken(req.tenant, req.query.t, 'maglink')) return page('message.html', { title: 'Link expired', message: 'This sign-in link has expired or was used. Request a new one.' }, 400);
      let b = browser(req);
      if (!b) {
        b = crypto.randomBytes(24).toString('base64url');
        res.append('Set-Cookie', cookie(BROWSER_COOKIE, b, { secure: secure(req) }));
      }
      return page('email-link.html', { tenant: req.tenant.name, title: 'Finish signing in', action: '/oidc.ashx/maglink-finish', t: req.query.t, csrf: d.sessions().csrf(b, 'maglink'), password: '', button: 'Sign in' });
    },
  });
  r.add({
    method: 'POST', path: '/oidc.ashx/maglink-finish', summary: 'Redeems a magic link (single use) and signs in', area, auth: policy.public,
    bodyType: 'form', body: z.object({ t: z.string().max(100), csrf: z.string().max(128) }), rateLimit: 'sensitive',
    responses: { 302: { description: 'onward' } },
    handler: (req, res) => {
      if (!d.sessions().checkCsrf(browser(req), 'maglink', req.body.csrf)) return page('message.html', { title: 'Form expired', message: 'Open the link again.' }, 403);
      const tok = consumeToken(req.tenant, req.body.t, 'maglink');
      const user = tok && d.p().activeUser(req.tenant, tok.user_id);
      if (!tok || !user) return page('message.html', { title: 'Link expired', message: 'This sign-in link has expired or was used. Request a new one.' }, 400);
      ctx.audit.write(req.tenant, { event: 'maglink-finish', user: user.name, ip: req.ip, ua: req.ua });
      return reply.redirect(signIn(req, res, user, ['email'], tok.interaction_id), 302);
    },
  });
  r.add({
    method: 'GET', path: '/oidc.ashx/recover-finish', summary: 'Recovery link landing page: choose a new password', area, auth: policy.public,
    query: z.object({ t: z.string().max(100) }), responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      if (!peekToken(req.tenant, req.query.t, 'recover')) return page('message.html', { title: 'Link expired', message: 'This recovery link has expired or was used.' }, 400);
      let b = browser(req);
      if (!b) {
        b = crypto.randomBytes(24).toString('base64url');
        res.append('Set-Cookie', cookie(BROWSER_COOKIE, b, { secure: secure(req) }));
      }
      return page('email-link.html', {
        tenant: req.tenant.name, title: 'Choose a new password', action: '/oidc.ashx/recover-finish', t: req.query.t, csrf: d.sessions().csrf(b, 'recover'), button: 'Save and sign in',
        password: '<label for="password">New password (at least 10 characters)</label><input type="password" id="password" name="password" autocomplete="new-password" minlength="10" required>',
      });
    },
  });
  r.add({
    method: 'POST', path: '/oidc.ashx/recover-finish', summary: 'Sets a new password from a recovery link (single use) and signs in', area, auth: policy.public,
    bodyType: 'form', body: z.object({ t: z.string().max(100), csrf: z.string().max(128), password: z.string().max(1024) }), rateLimit: 'sensitive',
    responses: { 302: { description: 'onward' } },
    handler: async (req, res) => {
      if (!d.sessions().checkCsrf(browser(req), 'recover', req.body.csrf)) return page('message.html', { title: 'Form expired', message: 'Open the link again.' }, 403);
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

  // ---- invitation claim ----
  // A disabled account's open invitation must not let it in (an admin may disable an invitee
  // before the link is used): it reads like an expired invitation.
  const claimable = (tenant: Tenant, userId: string) => {
    const u = ctx.users.get(tenant, userId);
    return u && u.status !== 'disabled' ? u : undefined;
  };
  r.add({
    method: 'POST', path: '/signal.ashx?oidc-invite=1', summary: 'Invitation for an account without a password: a claim link (shown once, mailed when possible)', area: 'admin',
    auth: policy.adminOrHmac('oidc-invite'), body: z.object({ user: z.string().max(128) }).strict(),
    responses: { 200: { description: '{claim_url, expires_in, mailed}', schema: z.object({ claim_url: z.string(), expires_in: z.number(), mailed: z.boolean() }) } },
    handler: async (req) => {
      const user = ctx.users.byName(req.tenant, req.body.user);
      if (!user) throw new NotFoundError(`no user ${req.body.user}`);
      if (user.status !== 'invited') throw new InputError(`user ${user.name} has already claimed the account`, 'already_claimed');
      const t = newEmailToken(req.tenant, user, 'claim', null, CLAIM_TOKEN_TTL);
      const url = `${req.origin}/claim.html?t=${t}`;
      const mailed = user.email ? await send(req.tenant, user.email, `Your account on ${req.tenant.name}`, `Set your password with this link (valid 7 days, once):\n\n${url}\n`) : false;
      return { claim_url: url, expires_in: CLAIM_TOKEN_TTL, mailed };
    },
  });
  const claimLimited = (req: RouteRequest): boolean => {
    if (ctx.rateLimit.take('oidc-claim-ip', req.ip, 10) === 0) return false;
    ctx.audit.write(req.tenant, { event: 'claim-rate-limited', ip: req.ip, ua: req.ua });
    return true;
  };
  r.add({
    method: 'GET', path: '/oidc.ashx/claim-info', summary: 'Who an invitation is for (before claiming it)', area, auth: policy.public,
    query: z.object({ t: z.string().max(100) }), rateLimit: 'sensitive',
    responses: { 200: { description: '{user, email, tenant}', schema: z.object({ user: z.string() }).loose() }, 404: { description: 'unknown or used invitation' } },
    handler: (req) => {
      if (claimLimited(req)) throw new AppError(429, 'rate_limited', 'too many attempts; try again later', { headers: { 'Retry-After': '60' } });
      const tok = peekToken(req.tenant, req.query.t, 'claim');
      const user = tok && claimable(req.tenant, tok.user_id);
      ctx.audit.write(req.tenant, { event: 'claim-info', user: user?.name, ip: req.ip, ua: req.ua, extra: { valid: !!user } });
      if (!tok || !user) throw new NotFoundError('unknown, expired or used invitation');
      return { user: user.name, email: user.email, tenant: req.tenant.name };
    },
  });
  r.add({
    method: 'GET', path: '/claim.html', summary: 'Invitation claim page', area, auth: policy.public, query: z.object({ t: z.string().max(100) }),
    responses: { 200: { description: 'HTML', contentType: 'text/html' } },
    handler: (req, res) => {
      const tok = peekToken(req.tenant, req.query.t, 'claim');
      const user = tok && claimable(req.tenant, tok.user_id);
      if (!user) return page('message.html', { title: 'Invitation expired', message: 'This invitation has expired or was used. Ask your administrator for a new one.' }, 400);
      let b = browser(req);
      if (!b) {
        b = crypto.randomBytes(24).toString('base64url');
        res.append('Set-Cookie', cookie(BROWSER_COOKIE, b, { secure: secure(req) }));
      }
      return page('email-link.html', {
        tenant: req.tenant.name, title: `Welcome, ${user.name}`, action: '/oidc.ashx/claim', t: req.query.t, csrf: d.sessions().csrf(b, 'claim'), button: 'Set password and sign in',
        password: '<label for="password">Choose a password (at least 10 characters)</label><input type="password" id="password" name="password" autocomplete="new-password" minlength="10" required>',
      });
    },
  });
  r.add({
    method: 'POST', path: '/oidc.ashx/claim', summary: 'Claims an invitation: sets the password (single use) and signs in', area, auth: policy.public,
    bodyType: 'json-or-form', body: z.object({ t: z.string().max(100), password: z.string().max(1024), csrf: z.string().max(128).optional() }), rateLimit: 'sensitive',
    responses: { 302: { description: 'signed in (form)' }, 200: { description: '{user} (JSON)' } },
    handler: async (req, res) => {
      const isForm = String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');
      if (isForm && !d.sessions().checkCsrf(browser(req), 'claim', req.body.csrf)) return page('message.html', { title: 'Form expired', message: 'Open the link again.' }, 403);
      if (claimLimited(req)) throw new AppError(429, 'rate_limited', 'too many attempts; try again later', { headers: { 'Retry-After': '60' } });
      checkPasswordPolicy(req.body.password);
      const tok = consumeToken(req.tenant, req.body.t, 'claim');
      const user = tok && claimable(req.tenant, tok.user_id);
      if (!tok || !user) throw new NotFoundError('unknown, expired or used invitation');
      await ctx.users.setPassword(req.tenant, user.name, req.body.password);
      ctx.audit.write(req.tenant, { event: 'claim', user: user.name, ip: req.ip, ua: req.ua });
      if (!isForm) return { user: user.name };
      const active = d.p().activeUser(req.tenant, user.id)!;
      return reply.redirect(signIn(req, res, active, ['pwd'], null), 302);
    },
  });
}

