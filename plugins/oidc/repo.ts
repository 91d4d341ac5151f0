import crypto from 'node:crypto';
import { type DB, sha256Hex, type Tenant } from '../../server/sdk.ts';

export interface CodeRow {
  code_hash: string;
  tenant_id: string;
  grant_id: string;
  client_id: string;
  user_id: string;
  redirect_uri: string;
  scope: string;
  nonce: string | null;
  code_challenge: string | null;
  code_challenge_method: string | null;
  auth_time: number;
  sid: string | null;
  expires_at: number;
  used_at: number | null;
  amr: string | null;
}
/** What an authorization code stands for (RFC 6749 §4.1.2), as the authorize step mints it. */
export interface NewCode {
  grantId: string;
  clientId: string;
  userId: string;
  redirectUri: string;
  scope: string[];
  nonce?: string;
  challenge?: string;
  method?: string;
  authTime: number;
  sid?: string;
  amr?: string[];
}

export interface RefreshRow {
  token_hash: string;
  tenant_id: string;
  grant_id: string;
  client_id: string;
  user_id: string;
  scope: string;
  auth_time: number;
  expires_at: number;
  used_at: number | null;
}

export interface PasskeyRow {
  id: string;
  user_id: string;
  public_key: string;
  counter: number;
  transports: string;
}
export interface EmailTokenRow {
  token_hash: string;
  user_id: string;
  interaction_id: string | null;
  expires_at: number;
  used_at: number | null;
}

/**
 * The provider's SQL: grants, authorization codes, refresh tokens, used assertion ids, revoked
 * access-token ids, passkeys and e-mail link tokens. Codes and tokens are stored by SHA-256 only. Times are Unix seconds unless
 * the column says otherwise. Statements on the token path are prepared once.
 */
export class OidcRepo {
  readonly #revokedJti;
  readonly #grantRevoked;

  constructor(readonly db: DB) {
    this.#revokedJti = db.prepare('SELECT 1 FROM oidc_revoked_jti WHERE jti = ?');
    this.#grantRevoked = db.prepare('SELECT revoked_at FROM oidc_grants WHERE grant_id = ?');
  }

  // ---- grants (one per consent/sign-in; tokens of a grant are revoked together) --------------

  newGrant(tenant: Tenant, clientId: string, userId: string | null, scope: string[], nowIso: string): string {
    const id = 'g_' + crypto.randomBytes(12).toString('base64url');
    this.db
      .prepare('INSERT INTO oidc_grants (grant_id, tenant_id, client_id, user_id, scope, created_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(id, tenant.id, clientId, userId, scope.join(' '), nowIso);
    return id;
  }

  /** Revokes the grant and uses up its refresh tokens, in one transaction. */
  revokeGrant(grantId: string, nowIso: string, nowSec: number): void {
    this.db.transaction(() => {
      this.db.prepare('UPDATE oidc_grants SET revoked_at = COALESCE(revoked_at, ?) WHERE grant_id = ?').run(nowIso, grantId);
      this.db.prepare('UPDATE oidc_refresh_tokens SET used_at = COALESCE(used_at, ?) WHERE grant_id = ?').run(nowSec, grantId);
    })();
  }

  /** True for a revoked or unknown grant. */
  grantRevoked(grantId: string): boolean {
    const r = this.#grantRevoked.get(grantId) as { revoked_at: string | null } | undefined;
    return !r || r.revoked_at !== null;
  }

  // ---- authorization codes --------------------------------------------------------------------

  insertCode(tenant: Tenant, codeHash: string, o: NewCode & { expiresAt: number }, nowSec: number): void {
    this.db.prepare('DELETE FROM oidc_codes WHERE expires_at < ?').run(nowSec - 86_400);
    this.db
      .prepare(
        `INSERT INTO oidc_codes (code_hash, tenant_id, grant_id, client_id, user_id, redirect_uri, scope, nonce, code_challenge, code_challenge_method, auth_time, sid, expires_at, amr)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        codeHash,
        tenant.id,
        o.grantId,
        o.clientId,
        o.userId,
        o.redirectUri,
        o.scope.join(' '),
        o.nonce ?? null,
        o.challenge ?? null,
        o.challenge ? (o.method ?? 'plain') : null,
        o.authTime,
        o.sid ?? null,
        o.expiresAt,
        o.amr ? JSON.stringify(o.amr) : null,
      );
  }

  /**
   * The code's row, marked used in the same immediate transaction when it was not yet: single
   * use, consumed even when the exchange then fails, and two racing exchanges cannot both win.
   * The row is returned as it was before (used_at set means it had been used already).
   */
  takeCode(tenant: Tenant, codeHash: string, nowSec: number): CodeRow | undefined {
    return this.db
      .transaction(() => {
        const r = this.db.prepare('SELECT * FROM oidc_codes WHERE code_hash = ? AND tenant_id = ?').get(codeHash, tenant.id) as CodeRow | undefined;
        if (r && r.used_at === null) this.db.prepare('UPDATE oidc_codes SET used_at = ? WHERE code_hash = ?').run(nowSec, codeHash);
        return r;
      })
      .immediate();
  }

  // ---- refresh tokens -------------------------------------------------------------------------

  insertRefresh(
    tenant: Tenant,
    token: string,
    o: { grantId: string; clientId: string; userId: string; scope: string[]; authTime: number; expiresAt: number },
  ): void {
    this.db
      .prepare(
        'INSERT INTO oidc_refresh_tokens (token_hash, tenant_id, grant_id, client_id, user_id, scope, auth_time, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(sha256Hex(token), tenant.id, o.grantId, o.clientId, o.userId, o.scope.join(' '), o.authTime, o.expiresAt);
  }

  /** Like takeCode: the row as it was, marked used (rotation) in the same transaction. */
  takeRefresh(tenant: Tenant, tokenHash: string, nowSec: number): RefreshRow | undefined {
    return this.db
      .transaction(() => {
        const r = this.db.prepare('SELECT * FROM oidc_refresh_tokens WHERE token_hash = ? AND tenant_id = ?').get(tokenHash, tenant.id) as
          RefreshRow | undefined;
        if (r && r.used_at === null) this.db.prepare('UPDATE oidc_refresh_tokens SET used_at = ? WHERE token_hash = ?').run(nowSec, tokenHash);
        return r;
      })
      .immediate();
  }

  refresh(tenant: Tenant, tokenHash: string): RefreshRow | undefined {
    return this.db.prepare('SELECT * FROM oidc_refresh_tokens WHERE token_hash = ? AND tenant_id = ?').get(tokenHash, tenant.id) as RefreshRow | undefined;
  }

  // ---- one-time ids -----------------------------------------------------------------------------

  /** Records a client assertion's jti until it expires; false when it was used before (RFC 7523 §3 item 7). */
  rememberAssertionJti(tenant: Tenant, issuer: string, jti: string, exp: number, nowSec: number): boolean {
    this.db.prepare('DELETE FROM oidc_assertion_jti WHERE exp < ?').run(nowSec - 60);
    return (
      this.db.prepare('INSERT OR IGNORE INTO oidc_assertion_jti (tenant_id, issuer, jti, exp) VALUES (?, ?, ?, ?)').run(tenant.id, issuer, jti, exp).changes > 0
    );
  }

  revokeAccessJti(tenant: Tenant, jti: string, exp: number, nowSec: number): void {
    this.db.prepare('DELETE FROM oidc_revoked_jti WHERE exp < ?').run(nowSec);
    this.db.prepare('INSERT OR IGNORE INTO oidc_revoked_jti (jti, tenant_id, exp) VALUES (?, ?, ?)').run(jti, tenant.id, exp);
  }

  accessJtiRevoked(jti: string): boolean {
    return this.#revokedJti.get(jti) !== undefined;
  }

  // ---- passkeys (WebAuthn credentials) ----------------------------------------------------------

  passkey(tenant: Tenant, id: string): PasskeyRow | undefined {
    return this.db.prepare('SELECT * FROM oidc_passkeys WHERE id = ? AND tenant_id = ?').get(id, tenant.id) as PasskeyRow | undefined;
  }

  passkeysOf(tenant: Tenant, userId: string): Pick<PasskeyRow, 'id' | 'transports'>[] {
    return this.db.prepare('SELECT id, transports FROM oidc_passkeys WHERE tenant_id = ? AND user_id = ?').all(tenant.id, userId) as Pick<
      PasskeyRow,
      'id' | 'transports'
    >[];
  }

  insertPasskey(tenant: Tenant, userId: string, c: { id: string; publicKey: string; counter: number; transports: string[] }, nowIso: string): void {
    this.db
      .prepare('INSERT INTO oidc_passkeys (id, tenant_id, user_id, public_key, counter, transports, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(c.id, tenant.id, userId, c.publicKey, c.counter, JSON.stringify(c.transports), nowIso);
  }

  /** WebAuthn L3 §6.1.1: the signature counter the authenticator reported. */
  setPasskeyCounter(id: string, counter: number): void {
    this.db.prepare('UPDATE oidc_passkeys SET counter = ? WHERE id = ?').run(counter, id);
  }

  // ---- e-mail link tokens (magic link, recovery, invitation claim) -------------------------------

  insertEmailToken(
    tenant: Tenant,
    tokenHash: string,
    o: { userId: string; purpose: string; interactionId: string | null; expiresAt: number },
    nowSec: number,
  ): void {
    this.db.prepare('DELETE FROM oidc_email_tokens WHERE expires_at < ?').run(nowSec);
    this.db
      .prepare('INSERT INTO oidc_email_tokens (token_hash, tenant_id, user_id, purpose, interaction_id, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(tokenHash, tenant.id, o.userId, o.purpose, o.interactionId, o.expiresAt);
  }

  emailToken(tenant: Tenant, tokenHash: string, purpose: string): EmailTokenRow | undefined {
    return this.db.prepare('SELECT * FROM oidc_email_tokens WHERE token_hash = ? AND tenant_id = ? AND purpose = ?').get(tokenHash, tenant.id, purpose) as
      EmailTokenRow | undefined;
  }

  /** Single use: true for the one caller whose UPDATE claimed the token. */
  useEmailToken(tokenHash: string, nowSec: number): boolean {
    return this.db.prepare('UPDATE oidc_email_tokens SET used_at = ? WHERE token_hash = ? AND used_at IS NULL').run(nowSec, tokenHash).changes > 0;
  }
}
