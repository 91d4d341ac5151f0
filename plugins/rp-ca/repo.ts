import type { DB, Tenant } from '../../server/sdk.ts';
export interface CaRow {
  tenant_id: string;
  key_kind: 'software' | 'pkcs11';
  sealed_key: string | null;
  hsm_module: string | null;
  hsm_token: string | null;
  hsm_key_label: string | null;
  sealed_pin: string | null;
  cert_der: Buffer;
  generation: number;
  crl_number: number;
  crl_der: Buffer | null;
  crl_next_update: string | null;
  crl_stale: number;
  created_at: string;
  updated_at: string;
}

export type NewCa = Pick<CaRow, 'key_kind' | 'sealed_key' | 'hsm_module' | 'hsm_token' | 'hsm_key_label' | 'sealed_pin' | 'cert_der'>;

export interface CertRow {
  serial: string;
  ca_generation: number;
  purpose: 'rp' | 'tls';
  client_id: string;
  subject: string;
  names: string;
  not_before: string;
  not_after: string;
  x509_hash: string;
  key_source: 'generated' | 'csr' | 'public_key';
  cert_der: Buffer;
  issued_by: string;
  revoked_at: string | null;
  revocation_reason: string | null;
  created_at: string;
}

export interface TlsRow {
  tenant_id: string;
  serial: string;
  cert_pem: string;
  sealed_key: string;
  names: string;
  not_before: string;
  not_after: string;
  updated_at: string;
}

/** SQL of the CA plugin. Every tenant-owned query takes the Tenant first. */
export class CaRepo {
  constructor(private readonly db: DB) {}

  get(tenant: Tenant): CaRow | undefined {
    return this.db.prepare('SELECT * FROM rp_ca WHERE tenant_id = ?').get(tenant.id) as CaRow | undefined;
  }

  /** Inserts the first CA of a tenant; false when another process created one first. */
  insertIfAbsent(tenant: Tenant, row: NewCa, now: string): boolean {
    return (
      this.db
        .prepare(
          `INSERT OR IGNORE INTO rp_ca (tenant_id, key_kind, sealed_key, hsm_module, hsm_token, hsm_key_label, sealed_pin, cert_der, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(tenant.id, row.key_kind, row.sealed_key, row.hsm_module, row.hsm_token, row.hsm_key_label, row.sealed_pin, row.cert_der, now, now).changes > 0
    );
  }

  /** Replaces the CA (new key or new key location); the generation moves on, the CRL number does not reset. */
  replace(tenant: Tenant, row: NewCa, now: string): void {
    this.db
      .prepare(
        `UPDATE rp_ca SET key_kind = ?, sealed_key = ?, hsm_module = ?, hsm_token = ?, hsm_key_label = ?, sealed_pin = ?, cert_der = ?,
           generation = generation + 1, crl_der = NULL, crl_next_update = NULL, crl_stale = 1, updated_at = ?
         WHERE tenant_id = ?`,
      )
      .run(row.key_kind, row.sealed_key, row.hsm_module, row.hsm_token, row.hsm_key_label, row.sealed_pin, row.cert_der, now, tenant.id);
  }

  /** Takes the next CRL number (atomic: two processes never publish the same number). */
  nextCrlNumber(tenant: Tenant): number {
    return (this.db.prepare('UPDATE rp_ca SET crl_number = crl_number + 1 WHERE tenant_id = ? RETURNING crl_number').get(tenant.id) as { crl_number: number })
      .crl_number;
  }

  saveCrl(tenant: Tenant, generation: number, der: Buffer, nextUpdate: string): void {
    this.db
      .prepare('UPDATE rp_ca SET crl_der = ?, crl_next_update = ?, crl_stale = 0 WHERE tenant_id = ? AND generation = ?')
      .run(der, nextUpdate, tenant.id, generation);
  }

  insertCert(tenant: Tenant, c: Omit<CertRow, 'revoked_at' | 'revocation_reason'>): boolean {
    const r = this.db
      .prepare(
        `INSERT OR IGNORE INTO rp_cert (tenant_id, serial, ca_generation, purpose, client_id, subject, names, not_before, not_after, x509_hash, key_source, cert_der, issued_by, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        tenant.id,
        c.serial,
        c.ca_generation,
        c.purpose,
        c.client_id,
        c.subject,
        c.names,
        c.not_before,
        c.not_after,
        c.x509_hash,
        c.key_source,
        c.cert_der,
        c.issued_by,
        c.created_at,
      );
    return r.changes > 0;
  }

  hasSerial(tenant: Tenant, serial: string): boolean {
    return !!this.db.prepare('SELECT 1 FROM rp_cert WHERE tenant_id = ? AND serial = ?').get(tenant.id, serial);
  }

  cert(tenant: Tenant, serial: string): CertRow | undefined {
    return this.db.prepare('SELECT * FROM rp_cert WHERE tenant_id = ? AND serial = ?').get(tenant.id, serial) as CertRow | undefined;
  }

  list(tenant: Tenant, f: { limit: number; offset: number; purpose?: string }): { rows: CertRow[]; total: number } {
    const where = f.purpose ? 'tenant_id = ? AND purpose = ?' : 'tenant_id = ?';
    const args: unknown[] = f.purpose ? [tenant.id, f.purpose] : [tenant.id];
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM rp_cert WHERE ${where}`).get(...args) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT * FROM rp_cert WHERE ${where} ORDER BY created_at DESC, serial LIMIT ? OFFSET ?`)
      .all(...args, f.limit, f.offset) as CertRow[];
    return { rows, total };
  }

  /** Marks a certificate revoked (RFC 5280 §3.3: revocation is final); false if it already was. */
  revoke(tenant: Tenant, serial: string, reason: string, at: string): boolean {
    return this.db
      .transaction(() => {
        const n = this.db
          .prepare('UPDATE rp_cert SET revoked_at = ?, revocation_reason = ? WHERE tenant_id = ? AND serial = ? AND revoked_at IS NULL')
          .run(at, reason, tenant.id, serial).changes;
        if (n) this.db.prepare('UPDATE rp_ca SET crl_stale = 1 WHERE tenant_id = ?').run(tenant.id);
        return n > 0;
      })
      .immediate();
  }

  /**
   * Every revoked certificate of the current CA generation, expired ones included: RFC 5280 §5
   * allows dropping them, but a small CA keeps them and the CRL stays easy to audit.
   */
  revoked(tenant: Tenant, generation: number): CertRow[] {
    return this.db
      .prepare('SELECT * FROM rp_cert WHERE tenant_id = ? AND ca_generation = ? AND revoked_at IS NOT NULL ORDER BY revoked_at, serial')
      .all(tenant.id, generation) as CertRow[];
  }

  count(tenant: Tenant): { issued: number; revoked: number } {
    return this.db.prepare('SELECT COUNT(*) AS issued, COUNT(revoked_at) AS revoked FROM rp_cert WHERE tenant_id = ?').get(tenant.id) as {
      issued: number;
      revoked: number;
    };
  }

  tls(): TlsRow | undefined {
    return this.db.prepare('SELECT * FROM rp_tls WHERE id = 1').get() as TlsRow | undefined;
  }

  saveTls(tenant: Tenant, t: Omit<TlsRow, 'tenant_id'>): void {
    this.db
      .prepare(
        `INSERT INTO rp_tls (id, tenant_id, serial, cert_pem, sealed_key, names, not_before, not_after, updated_at) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET tenant_id = excluded.tenant_id, serial = excluded.serial, cert_pem = excluded.cert_pem,
           sealed_key = excluded.sealed_key, names = excluded.names, not_before = excluded.not_before, not_after = excluded.not_after, updated_at = excluded.updated_at`,
      )
      .run(tenant.id, t.serial, t.cert_pem, t.sealed_key, t.names, t.not_before, t.not_after, t.updated_at);
  }
}
