/**
 * Desk-phone accounts: one SIP login per office user for the bridge's
 * registrar. The password is sealed at rest and shown once (when generated); the full set goes to
 * the bridge with the trunks (supervisor.ts, PUT /phones).
 */
import crypto from 'node:crypto';
import { z } from 'zod';
import { AppError, type KeyService, NotFoundError, type Tenant } from '../../../server/sdk.ts';
import type { PhoneAccount } from '../bridge/inbound/control.ts';
import { SRTP_POLICIES, type SrtpPolicy } from '../control.ts';
import { checkTenantLimit, DEFAULT_LIMITS } from '../schemas.ts';
import type { TelephonyRepo } from '../repo.ts';

/** An office user's name as phones and routes name it (the SIP user name of the phone's login). */
export const phoneUser = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'letters, digits, . _ and -, at most 64, starting with a letter or digit');
export const phoneAdd = z.object({
  user: phoneUser,
  /** Write-only: sealed at rest, never returned. Omitted = a random one, returned once. */
  password: z.string().min(8, 'at least 8 characters').max(200).optional(),
  srtp: z
    .enum(SRTP_POLICIES)
    .default('off')
    .describe(
      "SRTP keyed by SDES (RFC 4568) on calls to the user's phones: required (RTP/SAVP, no call without), optional (used when the phone takes it), off",
    ),
});
export const phoneView = z.object({
  user: z.string(),
  username: z.string(),
  createdAtUtc: z.string(),
  srtp: z.enum(SRTP_POLICIES),
  registered: z.number().int().nullable().describe('phones registered now (from the bridge); null when unknown'),
});

interface PhoneRow {
  tenant_id: string;
  user: string;
  username: string;
  password_sealed: string;
  /** Migration 0007. */
  srtp: SrtpPolicy;
  created_at: string;
  updated_at: string;
}

export class PhoneAccounts {
  constructor(
    private readonly repo: TelephonyRepo,
    private readonly keys: KeyService,
    private readonly now: () => string,
    private readonly changed: () => void,
    /** The plugin's `limits.phones`: desk-phone logins per tenant. */
    private readonly maxPhones: number = DEFAULT_LIMITS.phones,
  ) {}

  private aad(tenantId: string, user: string): string {
    return `telephony-phone:${tenantId}:${user}`;
  }

  /** Creates or replaces the user's login; returns the password only when it was generated here. */
  add(t: Tenant, user: string, password?: string, srtp: SrtpPolicy = 'off'): { user: string; username: string; generatedPassword?: string } {
    const other = this.repo.db.prepare('SELECT tenant_id, user FROM tel_phones WHERE username = ?').get(user) as PhoneRow | undefined;
    // One registrar serves every tenant: a SIP user name is taken appliance-wide (no hint whose).
    if (other && (other.tenant_id !== t.id || other.user !== user)) {
      throw new AppError(409, 'conflict', `the SIP user name ${user} is taken`, { reason: 'sip_user_taken', params: { name: user } });
    }
    // 128 bits: the digest is offline-guessable by anyone who sees one REGISTER on the LAN.
    if (!other) {
      const n = (this.repo.db.prepare('SELECT COUNT(*) AS n FROM tel_phones WHERE tenant_id = ?').get(t.id) as { n: number }).n;
      checkTenantLimit('phones', this.maxPhones, n);
    }
    const pw = password ?? crypto.randomBytes(16).toString('base64url');
    const now = this.now();
    this.repo.db
      .prepare(
        `INSERT INTO tel_phones (tenant_id, user, username, password_sealed, srtp, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(tenant_id, user) DO UPDATE SET password_sealed = excluded.password_sealed, srtp = excluded.srtp, updated_at = excluded.updated_at`,
      )
      .run(t.id, user, user, this.keys.seal(pw, this.aad(t.id, user)), srtp, now, now);
    this.changed();
    return { user, username: user, ...(password === undefined ? { generatedPassword: pw } : {}) };
  }

  list(t: Tenant): { user: string; username: string; createdAtUtc: string; srtp: SrtpPolicy }[] {
    return (this.repo.db.prepare('SELECT * FROM tel_phones WHERE tenant_id = ? ORDER BY user').all(t.id) as PhoneRow[]).map((r) => ({
      user: r.user,
      username: r.username,
      createdAtUtc: r.created_at,
      srtp: r.srtp,
    }));
  }

  remove(t: Tenant, user: string): { user: string } {
    const n = this.repo.db.prepare('DELETE FROM tel_phones WHERE tenant_id = ? AND user = ?').run(t.id, user).changes;
    if (!n) throw new NotFoundError(`no desk phone login for ${user}`);
    this.changed();
    return { user };
  }

  /** Every tenant's logins with their passwords: only for PUT /phones on the loopback hop. */
  forBridge(): PhoneAccount[] {
    return (this.repo.db.prepare('SELECT * FROM tel_phones ORDER BY tenant_id, user').all() as PhoneRow[]).map((r) => ({
      tenantId: r.tenant_id,
      user: r.user,
      username: r.username,
      password: this.keys.openString(r.password_sealed, this.aad(r.tenant_id, r.user)),
      ...(r.srtp !== 'off' ? { srtp: r.srtp } : {}),
    }));
  }
}
