import crypto from 'node:crypto';
import { type Clock, type DB, safeEqual, sha256Hex, type Tenant } from '../../server/sdk.ts';
export const SID_COOKIE = 'sc_sid';
/** Browser binding: a random value that CSRF tokens and pending interactions are tied to. */
export const BROWSER_COOKIE = 'sc_b';

export interface SessionAccount {
  userId: string;
  authTime: number;
  amr: string[];
}
export interface Session {
  sidHash: string;
  sid: string;
  accounts: SessionAccount[];
}

export interface InteractionState {
  userId?: string;
  loginAt?: number;
  consented?: boolean;
  amr?: string[];
}
export interface Interaction<P> {
  id: string;
  params: P;
  state: InteractionState;
  browserHash: string;
  createdAt: number;
}

/**
 * Sign-in sessions and pending interactions. The session cookie holds a random id stored only as
 * SHA-256; every sign-in issues a fresh id and drops the old one, so an id planted before login
 * is worthless afterwards (no session fixation). CSRF tokens are HMACs over the browser cookie
 * and the form's purpose.
 */
export class Sessions {
  constructor(
    private readonly db: DB,
    private readonly csrfKey: Buffer,
    private readonly clock: Clock,
    private readonly ttl: number,
  ) {}

  private now(): number {
    return Math.floor(this.clock.now() / 1000);
  }

  get(tenant: Tenant, sidCookie: string | undefined): Session | undefined {
    if (!sidCookie || sidCookie.length > 200) return undefined;
    const h = sha256Hex(sidCookie);
    const r = this.db.prepare('SELECT sid_hash, sid, expires_at FROM oidc_sessions WHERE sid_hash = ? AND tenant_id = ?').get(h, tenant.id) as
      { sid_hash: string; sid: string; expires_at: number } | undefined;
    if (!r || r.expires_at < this.now()) return undefined;
    const accounts = (
      this.db.prepare('SELECT user_id, auth_time, amr FROM oidc_session_accounts WHERE sid_hash = ? ORDER BY auth_time DESC').all(h) as {
        user_id: string;
        auth_time: number;
        amr: string;
      }[]
    ).map((a) => ({ userId: a.user_id, authTime: a.auth_time, amr: JSON.parse(a.amr) as string[] }));
    return { sidHash: h, sid: r.sid, accounts };
  }

  /** Signs `userId` in: a new session id (rotation), carrying over the other accounts of the browser. Returns the cookie value. */
  login(tenant: Tenant, old: Session | undefined, userId: string, amr: string[]): { cookie: string; sid: string } {
    const value = crypto.randomBytes(32).toString('base64url');
    const h = sha256Hex(value);
    const now = this.now();
    const sid = old?.sid ?? crypto.randomBytes(16).toString('base64url');
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM oidc_sessions WHERE expires_at < ?').run(now);
      this.db
        .prepare('INSERT INTO oidc_sessions (sid_hash, tenant_id, sid, created_at, expires_at) VALUES (?, ?, ?, ?, ?)')
        .run(h, tenant.id, sid, now, now + this.ttl);
      for (const a of old?.accounts ?? []) {
        if (a.userId === userId) continue;
        this.db
          .prepare('INSERT INTO oidc_session_accounts (sid_hash, user_id, auth_time, amr) VALUES (?, ?, ?, ?)')
          .run(h, a.userId, a.authTime, JSON.stringify(a.amr));
      }
      this.db.prepare('INSERT INTO oidc_session_accounts (sid_hash, user_id, auth_time, amr) VALUES (?, ?, ?, ?)').run(h, userId, now, JSON.stringify(amr));
      if (old) this.db.prepare('DELETE FROM oidc_sessions WHERE sid_hash = ?').run(old.sidHash);
    })();
    return { cookie: value, sid };
  }

  end(session: Session): void {
    this.db.prepare('DELETE FROM oidc_sessions WHERE sid_hash = ?').run(session.sidHash);
  }

  csrf(browser: string, purpose: string): string {
    return crypto.createHmac('sha256', this.csrfKey).update(`${browser}|${purpose}`).digest('base64url');
  }

  checkCsrf(browser: string | undefined, purpose: string, token: string | undefined): boolean {
    if (!browser || !token) return false;
    return safeEqual(this.csrf(browser, purpose), token);
  }

  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- P names the caller's parameter type at the call site (read back typed by interaction())
  createInteraction<P>(tenant: Tenant, browser: string, params: P): string {
    const id = crypto.randomBytes(18).toString('base64url');
    const now = this.now();
    this.db.prepare('DELETE FROM oidc_interactions WHERE expires_at < ?').run(now);
    this.db
      .prepare('INSERT INTO oidc_interactions (id, tenant_id, browser_hash, params, state, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(id, tenant.id, sha256Hex(browser), JSON.stringify(params), '{}', now, now + 1800);
    return id;
  }

  /** The pending interaction, only for the browser that started it. */
  interaction<P>(tenant: Tenant, id: string | undefined, browser: string | undefined): Interaction<P> | undefined {
    if (!id || !browser || id.length > 64) return undefined;
    const r = this.db.prepare('SELECT * FROM oidc_interactions WHERE id = ? AND tenant_id = ?').get(id, tenant.id) as
      { id: string; browser_hash: string; params: string; state: string; created_at: number; expires_at: number } | undefined;
    if (!r || r.expires_at < this.now() || !safeEqual(r.browser_hash, sha256Hex(browser))) return undefined;
    return {
      id: r.id,
      params: JSON.parse(r.params) as P,
      state: JSON.parse(r.state) as InteractionState,
      browserHash: r.browser_hash,
      createdAt: r.created_at,
    };
  }

  updateInteraction(id: string, state: InteractionState): void {
    this.db.prepare('UPDATE oidc_interactions SET state = ? WHERE id = ?').run(JSON.stringify(state), id);
  }

  finishInteraction(id: string): void {
    this.db.prepare('DELETE FROM oidc_interactions WHERE id = ?').run(id);
  }

  hasConsent(tenant: Tenant, userId: string, clientId: string, scope: string[]): boolean {
    const r = this.db.prepare('SELECT scope FROM oidc_consents WHERE tenant_id = ? AND user_id = ? AND client_id = ?').get(tenant.id, userId, clientId) as
      { scope: string } | undefined;
    if (!r) return false;
    const have = r.scope.split(' ');
    return scope.every((s) => have.includes(s));
  }

  saveConsent(tenant: Tenant, userId: string, clientId: string, scope: string[]): void {
    this.db
      .prepare(
        `INSERT INTO oidc_consents (tenant_id, user_id, client_id, scope, granted_at) VALUES (?, ?, ?, ?, ?)
                     ON CONFLICT (tenant_id, user_id, client_id) DO UPDATE SET scope = excluded.scope, granted_at = excluded.granted_at`,
      )
      .run(tenant.id, userId, clientId, scope.join(' '), new Date(this.clock.now()).toISOString());
  }
}
