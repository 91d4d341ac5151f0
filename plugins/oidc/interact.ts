import crypto from 'node:crypto';
import type { Response } from 'express';
import { z } from 'zod';
import { type PluginContext, policy, type RouteRegistrar, type RouteRequest, sha256Hex, type Tenant, type User } from '../../server/sdk.ts';
import type { AuthorizeFlow, Deps } from './authorize.ts';
import { emailLinkRoutes } from './email-links.ts';
import { invitationRoutes } from './invitations.ts';
import { passkeyRoutes } from './passkeys.ts';
import type { EmailTokenRow } from './repo.ts';
import type { OidcConfig } from './schemas.ts';
import { BROWSER_COOKIE, SID_COOKIE, cookie, parseCookies } from './sessions.ts';

// Loaded on first use: @simplewebauthn/server and nodemailer cost ~0.45 s of every start, and
// most starts never see a passkey or send a mail before they are needed.
export const webauthn = () => import('@simplewebauthn/server');
const mailer = async () => (await import('nodemailer')).default;

export const CHALLENGE_COOKIE = 'sc_wa';
export const EMAIL_TOKEN_TTL = 15 * 60;
export const CLAIM_TOKEN_TTL = 7 * 86_400;
export const MAIL_QUEUE = 'oidc-mail';

export type Purpose = 'maglink' | 'recover' | 'claim';

export function secure(req: RouteRequest): boolean {
  return req.origin.startsWith('https:');
}

/** WebAuthn RP ID: the host name the browser used, without port (WebAuthn L3 §5.1.4.1). */
export function rpId(req: RouteRequest): string {
  return new URL(req.origin).hostname;
}

/** What the sign-in methods beside the password share: challenges, the session, mail, one-time links. */
export interface InteractKit {
  d: Deps;
  flow: AuthorizeFlow;
  area: string;
  sealChallenge(res: Response, req: RouteRequest, v: { c: string; p: string; u?: string }): void;
  openChallenge(req: RouteRequest, purpose: string): { c: string; u?: string } | undefined;
  /** The browser's id cookie (the CSRF tokens are bound to it). */
  browser(req: RouteRequest): string;
  /** The browser's id, set as a new cookie on this answer when it has none yet (a landing page opened from a mail). */
  ensureBrowser(req: RouteRequest, res: Response): string;
  currentUser(req: RouteRequest): User | undefined;
  /** Signs the user in and says where the browser goes next (the pending authorization, or a page). */
  signIn(req: RouteRequest, res: Response, user: User, amr: string[], interactionId: string | undefined | null): string;
  /** A one-time link token (stored by hash) for `purpose`. */
  newEmailToken(tenant: Tenant, user: User, purpose: Purpose, interactionId: string | null, ttl: number): string;
  peekToken(tenant: Tenant, t: string | undefined, purpose: Purpose): EmailTokenRow | undefined;
  /** Single use: the UPDATE is the claim, so two clicks cannot both sign in. */
  consumeToken(tenant: Tenant, t: string, purpose: Purpose): EmailTokenRow | undefined;
  /** Queues a mail through the durable job queue; false when no relay is configured. */
  send(tenant: Tenant, to: string, subject: string, text: string): Promise<boolean>;
}

const relay = (config: OidcConfig, tenant: Tenant) => config.tenantSmtp[tenant.host] ?? config.smtp;

/**
 * Sign-in mail goes out through the durable job queue: the answer to the form does not wait for
 * (or reveal, by its timing, whether there was) a mail, and a relay that is down is retried. The
 * body carries a sign-in link, so it is sealed in the job row. Defined at start (the server's).
 */
export function defineMailJob(ctx: PluginContext<OidcConfig>): void {
  ctx.jobs.define({
    name: MAIL_QUEUE,
    maxAttempts: 5,
    schema: z.object({ to: z.string(), subject: z.string(), sealed: z.string() }),
    run: async (job) => {
      const tenant = job.tenantId ? ctx.tenants.byId(job.tenantId) : undefined;
      const cfg = tenant && relay(ctx.config, tenant);
      if (!cfg) return;
      await (
        await mailer()
      )
        .createTransport(cfg.url)
        .sendMail({ from: cfg.from, to: job.data.to, subject: job.data.subject, text: ctx.keys.openString(job.data.sealed, 'oidc-mail') });
    },
  });
}

/**
 * The sign-in methods beside the password: passkeys (passkeys.ts), e-mail links (email-links.ts)
 * and the invitation claim (invitations.ts), on one kit of what they share, plus the resume step.
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

  d.p().setBrowserSignIn(signIn);

  r.add({
    method: 'GET',
    path: '/oidc.ashx/resume',
    summary: 'Continues a pending authorization after a sign-in step',
    area,
    auth: policy.public,
    query: z.object({ i: z.string().max(64) }),
    responses: { 302: { description: 'onward in the authorization flow' } },
    handler: (req, res) => {
      const pend = flow.pending(req, req.query.i);
      if (!('it' in pend)) return pend;
      return flow.proceed(req, res, pend.it.params, pend.client, pend.it, pend.browser);
    },
  });

  const newEmailToken = (tenant: Tenant, user: User, purpose: Purpose, interactionId: string | null, ttl: number): string => {
    const t = crypto.randomBytes(32).toString('base64url');
    d.p().repo.insertEmailToken(tenant, sha256Hex(t), { userId: user.id, purpose, interactionId, expiresAt: d.p().now() + ttl }, d.p().now());
    return t;
  };
  const peekToken = (tenant: Tenant, t: string | undefined, purpose: Purpose) => {
    if (!t || t.length > 100) return undefined;
    const r = d.p().repo.emailToken(tenant, sha256Hex(t), purpose);
    return r && r.used_at === null && r.expires_at >= d.p().now() ? r : undefined;
  };
  const consumeToken = (tenant: Tenant, t: string, purpose: Purpose) => {
    const r = peekToken(tenant, t, purpose);
    return r && d.p().repo.useEmailToken(r.token_hash, d.p().now()) ? r : undefined;
  };
  const send = async (tenant: Tenant, to: string, subject: string, text: string): Promise<boolean> => {
    if (!relay(ctx.config, tenant)) {
      ctx.log.warn({ tenant: tenant.host }, 'no SMTP relay configured: sign-in mail not sent');
      return false;
    }
    ctx.jobs.enqueue(MAIL_QUEUE, { to, subject, sealed: ctx.keys.seal(text, 'oidc-mail') }, { tenantId: tenant.id });
    ctx.jobs.kick();
    return true;
  };

  const ensureBrowser = (req: RouteRequest, res: Response): string => {
    let b = browser(req);
    if (!b) {
      b = crypto.randomBytes(24).toString('base64url');
      res.append('Set-Cookie', cookie(BROWSER_COOKIE, b, { secure: secure(req) }));
    }
    return b;
  };
  const kit: InteractKit = {
    d,
    flow,
    area,
    sealChallenge,
    openChallenge,
    browser,
    ensureBrowser,
    currentUser,
    signIn,
    newEmailToken,
    peekToken,
    consumeToken,
    send,
  };
  passkeyRoutes(r, kit);
  emailLinkRoutes(r, kit);
  invitationRoutes(r, kit);
}
