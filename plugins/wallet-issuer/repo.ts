import type Database from 'better-sqlite3';
import type { DB, Tenant } from '../../server/sdk.ts';

export interface OfferRow {
  tenant_id: string;
  id: string;
  configuration_ids: string;
  sealed_claims: string;
  pre_auth_hash: string | null;
  tx_code_hash: string | null;
  tx_code_length: number | null;
  tx_code_failures: number;
  issuer_state_hash: string | null;
  sealed_grant: string;
  created_by: string;
  created_at: string;
  expires_at: number;
  redeemed_at: string | null;
  /** The account (login name) that alone may redeem an authorization code offer, or null. */
  subject_user: string | null;
}

export interface CodeRow {
  tenant_id: string;
  code_hash: string;
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  offer_id: string;
  configuration_ids: string;
  expires_at: number;
  used_at: number | null;
  /** The account that signed in at the authorization step. */
  user_id: string | null;
}

export interface TokenRow {
  tenant_id: string;
  token_hash: string;
  offer_id: string;
  configuration_ids: string;
  expires_at: number;
  issued: number;
  user_id: string | null;
}

export interface LoginRow {
  tenant_id: string;
  state_hash: string;
  browser_hash: string;
  params: string;
  sealed_verifier: string;
  nonce: string;
  expires_at: number;
  used_at: number | null;
}

export interface CredentialRow {
  tenant_id: string;
  id: string;
  offer_id: string;
  format: string;
  list_id: number;
  idx: number;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  revoked_by: string | null;
}

/** SQL of the wallet issuer; every statement is tenant-scoped (the tenant is the first argument). */
export class IssuerRepo {
  readonly #stmts = new Map<string, Database.Statement>();

  constructor(private readonly db: DB) {}

  /** Statements are prepared once: the credential endpoint runs several per request. */
  private q(sql: string): Database.Statement {
    let st = this.#stmts.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.#stmts.set(sql, st);
    }
    return st;
  }

  insertOffer(tenant: Tenant, o: Omit<OfferRow, 'tenant_id' | 'tx_code_failures' | 'redeemed_at'>): void {
    this.q(
      `INSERT INTO wi_offer (tenant_id, id, configuration_ids, sealed_claims, pre_auth_hash, tx_code_hash, tx_code_length, issuer_state_hash, sealed_grant, created_by, created_at, expires_at, subject_user)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      tenant.id,
      o.id,
      o.configuration_ids,
      o.sealed_claims,
      o.pre_auth_hash,
      o.tx_code_hash,
      o.tx_code_length,
      o.issuer_state_hash,
      o.sealed_grant,
      o.created_by,
      o.created_at,
      o.expires_at,
      o.subject_user,
    );
  }

  offer(tenant: Tenant, id: string): OfferRow | undefined {
    return this.q('SELECT * FROM wi_offer WHERE tenant_id = ? AND id = ?').get(tenant.id, id) as OfferRow | undefined;
  }

  offerByPreAuth(tenant: Tenant, hash: string): OfferRow | undefined {
    return this.q('SELECT * FROM wi_offer WHERE tenant_id = ? AND pre_auth_hash = ?').get(tenant.id, hash) as OfferRow | undefined;
  }

  offerByIssuerState(tenant: Tenant, hash: string): OfferRow | undefined {
    return this.q('SELECT * FROM wi_offer WHERE tenant_id = ? AND issuer_state_hash = ?').get(tenant.id, hash) as OfferRow | undefined;
  }

  /** Marks an offer redeemed; false when it already was (single use, race-free). */
  redeemOffer(tenant: Tenant, id: string, at: string): boolean {
    return this.q('UPDATE wi_offer SET redeemed_at = ? WHERE tenant_id = ? AND id = ? AND redeemed_at IS NULL').run(at, tenant.id, id).changes === 1;
  }

  /** Counts a wrong tx_code; returns the failures so far. */
  txCodeFailed(tenant: Tenant, id: string): number {
    this.q('UPDATE wi_offer SET tx_code_failures = tx_code_failures + 1 WHERE tenant_id = ? AND id = ?').run(tenant.id, id);
    return (this.q('SELECT tx_code_failures AS n FROM wi_offer WHERE tenant_id = ? AND id = ?').get(tenant.id, id) as { n: number }).n;
  }

  insertPar(tenant: Tenant, uriHash: string, clientId: string, params: string, expiresAt: number): void {
    this.q('INSERT INTO wi_par (tenant_id, uri_hash, client_id, params, expires_at) VALUES (?, ?, ?, ?, ?)').run(
      tenant.id,
      uriHash,
      clientId,
      params,
      expiresAt,
    );
  }

  /** Takes a pushed request once (RFC 9126 §4: the request_uri is one-time use). */
  takePar(tenant: Tenant, uriHash: string, now: number): { client_id: string; params: string; expires_at: number } | undefined {
    const row = this.q('UPDATE wi_par SET used_at = ? WHERE tenant_id = ? AND uri_hash = ? AND used_at IS NULL RETURNING client_id, params, expires_at').get(
      now,
      tenant.id,
      uriHash,
    ) as { client_id: string; params: string; expires_at: number } | undefined;
    return row;
  }

  insertCode(tenant: Tenant, c: Omit<CodeRow, 'tenant_id' | 'used_at'>): void {
    this.q(
      'INSERT INTO wi_code (tenant_id, code_hash, client_id, redirect_uri, code_challenge, offer_id, configuration_ids, expires_at, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(tenant.id, c.code_hash, c.client_id, c.redirect_uri, c.code_challenge, c.offer_id, c.configuration_ids, c.expires_at, c.user_id);
  }

  insertLogin(tenant: Tenant, l: Omit<LoginRow, 'tenant_id' | 'used_at'>): void {
    this.q('INSERT INTO wi_login (tenant_id, state_hash, browser_hash, params, sealed_verifier, nonce, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      tenant.id,
      l.state_hash,
      l.browser_hash,
      l.params,
      l.sealed_verifier,
      l.nonce,
      l.expires_at,
    );
  }

  /** Takes a sign-in under way once (the OIDC callback comes back once). */
  takeLogin(tenant: Tenant, stateHash: string, now: number): LoginRow | undefined {
    return this.q('UPDATE wi_login SET used_at = ? WHERE tenant_id = ? AND state_hash = ? AND used_at IS NULL RETURNING *').get(now, tenant.id, stateHash) as
      LoginRow | undefined;
  }

  /** Consumes a code whatever happens next (spec: single use, consumed even on a failed exchange). */
  consumeCode(tenant: Tenant, hash: string, now: number): CodeRow | undefined {
    return this.q('UPDATE wi_code SET used_at = ? WHERE tenant_id = ? AND code_hash = ? AND used_at IS NULL RETURNING *').get(now, tenant.id, hash) as
      CodeRow | undefined;
  }

  insertToken(tenant: Tenant, t: Omit<TokenRow, 'tenant_id' | 'issued'>): void {
    this.q('INSERT INTO wi_token (tenant_id, token_hash, offer_id, configuration_ids, expires_at, user_id) VALUES (?, ?, ?, ?, ?, ?)').run(
      tenant.id,
      t.token_hash,
      t.offer_id,
      t.configuration_ids,
      t.expires_at,
      t.user_id,
    );
  }

  token(tenant: Tenant, hash: string): TokenRow | undefined {
    return this.q('SELECT * FROM wi_token WHERE tenant_id = ? AND token_hash = ?').get(tenant.id, hash) as TokenRow | undefined;
  }

  /** Counts `n` more credentials against a token; false (nothing counted) when that passes `max`. */
  spendToken(tenant: Tenant, hash: string, n: number, max: number): boolean {
    return (
      this.q('UPDATE wi_token SET issued = issued + ? WHERE tenant_id = ? AND token_hash = ? AND issued + ? <= ?').run(n, tenant.id, hash, n, max).changes === 1
    );
  }

  insertNonce(tenant: Tenant, hash: string, expiresAt: number): void {
    this.q('INSERT INTO wi_nonce (tenant_id, nonce_hash, expires_at) VALUES (?, ?, ?)').run(tenant.id, hash, expiresAt);
  }

  /** Takes a nonce once: true when it existed and had not expired (a used nonce is gone). */
  takeNonce(tenant: Tenant, hash: string, now: number): boolean {
    const r = this.q('DELETE FROM wi_nonce WHERE tenant_id = ? AND nonce_hash = ? RETURNING expires_at').get(tenant.id, hash) as
      { expires_at: number } | undefined;
    return r !== undefined && r.expires_at >= now;
  }

  /**
   * Reserves `n` status list positions of the tenant (never reused; another process reserving at
   * the same time gets the next block). Returns the first.
   */
  reserveStatusIndices(tenant: Tenant, n: number): number {
    const r = this.q(
      `INSERT INTO wi_status_counter (tenant_id, next_idx) VALUES (?, ?)
         ON CONFLICT(tenant_id) DO UPDATE SET next_idx = next_idx + excluded.next_idx RETURNING next_idx - ? AS idx`,
    ).get(tenant.id, n, n) as { idx: number };
    return r.idx;
  }

  insertCredential(tenant: Tenant, c: Omit<CredentialRow, 'tenant_id' | 'revoked_at' | 'revoked_by'>): void {
    this.q('INSERT INTO wi_credential (tenant_id, id, offer_id, format, list_id, idx, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
      tenant.id,
      c.id,
      c.offer_id,
      c.format,
      c.list_id,
      c.idx,
      c.created_at,
      c.expires_at,
    );
  }

  /** `n` credential rows of `rows` from `from` on, with one statement (prepared once per n). */
  insertCredentials(rows: readonly [Tenant, Omit<CredentialRow, 'tenant_id' | 'revoked_at' | 'revoked_by'>][], from: number, n: number): void {
    const args: (string | number)[] = new Array<string | number>(8 * n);
    for (let k = 0; k < n; k++) {
      const [t, c] = rows[from + k]!;
      const a = 8 * k;
      args[a] = t.id;
      args[a + 1] = c.id;
      args[a + 2] = c.offer_id;
      args[a + 3] = c.format;
      args[a + 4] = c.list_id;
      args[a + 5] = c.idx;
      args[a + 6] = c.created_at;
      args[a + 7] = c.expires_at;
    }
    this.q(
      `INSERT INTO wi_credential (tenant_id, id, offer_id, format, list_id, idx, created_at, expires_at) VALUES ${new Array(n).fill('(?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
    ).run(args);
  }

  credentials(tenant: Tenant, opts: { offerId?: string; limit: number; offset: number }): { items: CredentialRow[]; total: number } {
    const where = opts.offerId !== undefined ? 'tenant_id = ? AND offer_id = ?' : 'tenant_id = ?';
    const args = opts.offerId !== undefined ? [tenant.id, opts.offerId] : [tenant.id];
    const items = this.q(`SELECT * FROM wi_credential WHERE ${where} ORDER BY created_at DESC, id LIMIT ? OFFSET ?`).all(
      ...args,
      opts.limit,
      opts.offset,
    ) as CredentialRow[];
    const total = (this.q(`SELECT COUNT(*) AS n FROM wi_credential WHERE ${where}`).get(...args) as { n: number }).n;
    return { items, total };
  }

  credential(tenant: Tenant, id: string): CredentialRow | undefined {
    return this.q('SELECT * FROM wi_credential WHERE tenant_id = ? AND id = ?').get(tenant.id, id) as CredentialRow | undefined;
  }

  /** Revokes by credential or by offer; returns the ids that changed now. */
  revoke(tenant: Tenant, by: { credentialId?: string; offerId?: string }, at: string, who: string): string[] {
    const rows = (
      by.credentialId !== undefined
        ? this.q('UPDATE wi_credential SET revoked_at = ?, revoked_by = ? WHERE tenant_id = ? AND id = ? AND revoked_at IS NULL RETURNING id').all(
            at,
            who,
            tenant.id,
            by.credentialId,
          )
        : this.q('UPDATE wi_credential SET revoked_at = ?, revoked_by = ? WHERE tenant_id = ? AND offer_id = ? AND revoked_at IS NULL RETURNING id').all(
            at,
            who,
            tenant.id,
            by.offerId,
          )
    ) as { id: string }[];
    return rows.map((r) => r.id);
  }

  /** Revoked indices of one list (the rest are valid, 0). */
  revokedIndices(tenant: Tenant, listId: number): number[] {
    return (
      this.q('SELECT idx FROM wi_credential WHERE tenant_id = ? AND list_id = ? AND revoked_at IS NOT NULL').all(tenant.id, listId) as {
        idx: number;
      }[]
    ).map((r) => r.idx);
  }

  /** Revoked entries of one list: only grows (revocation is final), so it versions the list. */
  revokedCount(tenant: Tenant, listId: number): number {
    return (
      this.q('SELECT COUNT(*) AS n FROM wi_credential WHERE tenant_id = ? AND list_id = ? AND revoked_at IS NOT NULL').get(tenant.id, listId) as {
        n: number;
      }
    ).n;
  }

  /** Drops expired pushed requests, codes, tokens and nonces. */
  prune(now: number): void {
    this.q('DELETE FROM wi_par WHERE expires_at < ?').run(now - 60);
    this.q('DELETE FROM wi_login WHERE expires_at < ?').run(now - 60);
    this.q('DELETE FROM wi_code WHERE expires_at < ?').run(now - 3600);
    this.q('DELETE FROM wi_token WHERE expires_at < ?').run(now);
    this.q('DELETE FROM wi_nonce WHERE expires_at < ?').run(now);
  }
}
