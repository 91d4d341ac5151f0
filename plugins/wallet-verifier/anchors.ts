import crypto from 'node:crypto';
import { type Clock, ConflictError, type DB, InputError, NotFoundError, type Tenant } from '../../server/sdk.ts';
import type { LOTL } from '../lotl/api.ts';
import { type Anchor, dersOfPem, sha256Hex } from './x509.ts';

type LotlService = NonNullable<ReturnType<NonNullable<(typeof LOTL)['__type']>>>;

export interface AnchorItem {
  sha256: string;
  subject: string;
  not_after: string;
  source: 'tenant' | 'lotl';
  added_by: string | null;
  added_at: string | null;
}

/**
 * Service types of the EU trusted lists whose certificates sign PIDs and attestations: the PID
 * provider and (Q)EAA lists the Commission's LOTL points at (ETSI TS 119 602). The August 2026
 * national lists in the fixtures carry none yet, so today the tenant's own anchors do the work.
 */
const PID_PROVIDER_TYPE = /\/Svctype\/(PID|EAA|QEAA|PuBEAA|Wallet)|eudi/i;

/** Issuer trust anchors of a tenant: the ones its administrators added plus the LOTL's PID providers. */
export class AnchorStore {
  #lotlCache: { at: number; anchors: Anchor[] } | undefined;
  /** Each tenant's anchor array, by the fingerprints it was made of and the LOTL array it includes. */
  readonly #byTenant = new Map<string, { shas: string; lotl: Anchor[]; anchors: Anchor[] }>();

  constructor(
    private readonly db: DB,
    private readonly clock: Clock,
    private readonly lotl: LotlService | undefined,
  ) {}

  add(tenant: Tenant, pemText: string, who: string): AnchorItem {
    const ders = dersOfPem(pemText);
    if (ders.length !== 1) throw new InputError('expected exactly one PEM CERTIFICATE', 'invalid_request');
    let cert: crypto.X509Certificate;
    try {
      cert = new crypto.X509Certificate(ders[0]!);
    } catch {
      throw new InputError('the PEM block is not an X.509 certificate', 'invalid_request');
    }
    const sha = sha256Hex(ders[0]!);
    const now = new Date(this.clock.now()).toISOString();
    const r = this.db
      .prepare('INSERT OR IGNORE INTO vp_trust_anchor (tenant_id, sha256, subject, not_after, der, added_by, added_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(tenant.id, sha, oneLine(cert.subject), new Date(cert.validTo).toISOString(), ders[0]!, who, now);
    if (!r.changes) throw new ConflictError('duplicate_anchor', `anchor ${sha} is already trusted by this tenant`);
    return { sha256: sha, subject: oneLine(cert.subject), not_after: new Date(cert.validTo).toISOString(), source: 'tenant', added_by: who, added_at: now };
  }

  remove(tenant: Tenant, sha256: string): void {
    const sha = sha256.replace(/:/g, '').toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(sha)) throw new InputError('expected a SHA-256 fingerprint (64 hex digits)', 'invalid_request');
    if (!this.db.prepare('DELETE FROM vp_trust_anchor WHERE tenant_id = ? AND sha256 = ?').run(tenant.id, sha).changes) {
      throw new NotFoundError(`no anchor ${sha} was added to this tenant`);
    }
  }

  list(tenant: Tenant): AnchorItem[] {
    const own = this.db
      .prepare('SELECT sha256, subject, not_after, added_by, added_at FROM vp_trust_anchor WHERE tenant_id = ? ORDER BY added_at, sha256')
      .all(tenant.id) as Omit<AnchorItem, 'source'>[];
    const lotl = this.lotlAnchors().map((a) => ({
      sha256: a.sha256,
      subject: oneLine(a.cert.subject),
      not_after: new Date(a.cert.validTo).toISOString(),
      source: 'lotl' as const,
      added_by: null,
      added_at: null,
    }));
    return [...own.map((o) => ({ ...o, source: 'tenant' as const })), ...lotl];
  }

  /**
   * Anchors for chain checks (tenant's own first). The same array while neither the tenant's
   * anchors (checked by their fingerprints on every call: the CLI adds them from another process)
   * nor the LOTL's have changed, so the verifiers' chain caches find their keys without rebuilding
   * them, and no certificate is parsed again per presentation.
   */
  anchors(tenant: Tenant): Anchor[] {
    const shas = (this.db.prepare('SELECT sha256 FROM vp_trust_anchor WHERE tenant_id = ? ORDER BY rowid').all(tenant.id) as { sha256: string }[])
      .map((r) => r.sha256)
      .join(',');
    const lotl = this.lotlAnchors();
    const hit = this.#byTenant.get(tenant.id);
    if (hit && hit.shas === shas && hit.lotl === lotl) return hit.anchors;
    const own = (
      this.db.prepare('SELECT sha256, der FROM vp_trust_anchor WHERE tenant_id = ? ORDER BY rowid').all(tenant.id) as { sha256: string; der: Buffer }[]
    ).map((r) => ({
      sha256: r.sha256,
      cert: new crypto.X509Certificate(r.der),
      source: 'tenant' as const,
    }));
    const anchors = [...own, ...lotl];
    // Keyed by what was read, not re-read: a change between the two queries is seen next time.
    this.#byTenant.set(tenant.id, { shas: own.map((a) => a.sha256).join(','), lotl, anchors });
    return anchors;
  }

  private lotlAnchors(): Anchor[] {
    if (!this.lotl) return [];
    const now = this.clock.now();
    if (this.#lotlCache && now - this.#lotlCache.at < 60_000) return this.#lotlCache.anchors;
    const out: Anchor[] = [];
    const seen = new Set<string>();
    for (const a of this.lotl.anchors()) {
      if (seen.has(a.sha256) || !PID_PROVIDER_TYPE.test(a.service_type)) continue;
      seen.add(a.sha256);
      const pem = this.lotl.anchorPem(a.sha256);
      const der = pem ? dersOfPem(pem)[0] : undefined;
      if (der) out.push({ sha256: a.sha256, cert: new crypto.X509Certificate(der), source: 'lotl' });
    }
    this.#lotlCache = { at: now, anchors: out };
    return out;
  }
}

function oneLine(dn: string): string {
  return dn.split('\n').filter(Boolean).join(', ');
}
