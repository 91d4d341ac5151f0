import crypto from 'node:crypto';
import { z } from 'zod';
import { sha256Hex, type PluginContext, type Tenant, type User } from '../../server/sdk.ts';
import type { Lang } from './page-text.ts';
import type { OidcProvider } from './provider.ts';
import type { EmailTokenRow } from './repo.ts';
import type { OidcConfig } from './schemas.ts';

// Loaded on first use: nodemailer costs part of every start, and most starts send no mail before it is needed.
const mailer = async () => (await import('nodemailer')).default;

export const EMAIL_TOKEN_TTL = 15 * 60;
export const CLAIM_TOKEN_TTL = 7 * 86_400;
export const MAIL_QUEUE = 'oidc-mail';

export type Purpose = 'maglink' | 'recover' | 'claim';

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
    // lang is absent from jobs queued before mails had a language.
    schema: z.object({ to: z.string(), subject: z.string(), sealed: z.string(), lang: z.string().optional() }),
    run: async (job) => {
      const tenant = job.tenantId ? ctx.tenants.byId(job.tenantId) : undefined;
      const cfg = tenant && relay(ctx.config, tenant);
      if (!cfg) return;
      await (await mailer()).createTransport(cfg.url).sendMail({
        from: cfg.from,
        to: job.data.to,
        subject: job.data.subject,
        text: ctx.keys.openString(job.data.sealed, 'oidc-mail'),
        // RFC 3282: the language of the body, for mail clients that read it aloud or offer to translate.
        ...(job.data.lang ? { headers: { 'Content-Language': job.data.lang } } : {}),
      });
    },
  });
}

/**
 * The single-use links of e-mail sign-in, recovery and invitations (stored by hash), and the mail
 * that carries them.
 */
export class OneTimeLinks {
  constructor(
    private readonly ctx: PluginContext<OidcConfig>,
    private readonly provider: OidcProvider,
  ) {}

  /** A one-time link token (stored by hash) for `purpose`. */
  issue(tenant: Tenant, user: User, purpose: Purpose, interactionId: string | null, ttl: number): string {
    const t = crypto.randomBytes(32).toString('base64url');
    const now = this.provider.now();
    this.provider.repo.insertEmailToken(tenant, sha256Hex(t), { userId: user.id, purpose, interactionId, expiresAt: now + ttl }, now);
    return t;
  }

  peek(tenant: Tenant, t: string | undefined, purpose: Purpose): EmailTokenRow | undefined {
    if (!t || t.length > 100) return undefined;
    const r = this.provider.repo.emailToken(tenant, sha256Hex(t), purpose);
    return r && r.used_at === null && r.expires_at >= this.provider.now() ? r : undefined;
  }

  /** Single use: the UPDATE is the claim, so two clicks cannot both sign in. */
  consume(tenant: Tenant, t: string, purpose: Purpose): EmailTokenRow | undefined {
    const r = this.peek(tenant, t, purpose);
    return r && this.provider.repo.useEmailToken(r.token_hash, this.provider.now()) ? r : undefined;
  }

  /** Queues a mail (`mail`: its subject and body, in `lang`) through the durable job queue; false when no relay is configured. */
  async send(tenant: Tenant, to: string, lang: Lang, mail: { subject: string; body: string }): Promise<boolean> {
    if (!relay(this.ctx.config, tenant)) {
      this.ctx.log.warn({ tenant: tenant.host }, 'no SMTP relay configured: sign-in mail not sent');
      return false;
    }
    this.ctx.jobs.enqueue(MAIL_QUEUE, { to, subject: mail.subject, sealed: this.ctx.keys.seal(mail.body, 'oidc-mail'), lang }, { tenantId: tenant.id });
    this.ctx.jobs.kick();
    return true;
  }
}
