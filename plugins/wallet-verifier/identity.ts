import crypto from 'node:crypto';
import type { Clock, DB, KeyService, Logger, Tenant } from '../../server/sdk.ts';
import type { RpCaApi } from '../rp-ca/api.ts';
import { x509HashOf } from './x509.ts';

/** The verifier of one tenant: its request-signing key and access certificate chain. */
export interface VerifierIdentity {
  key: crypto.KeyObject;
  /** DER, leaf first (the RP CA root is the wallet's anchor and is left out of x5c: RFC 7515 §4.1.6 allows either). */
  x5c: Buffer[];
  caDer: Buffer;
  notAfter: string;
  serial: string;
  /** `x509_hash:<base64url sha256 of the leaf>` (OpenID4VP 1.0 §5.9.3). */
  x509HashClientId: string;
  /** `x509_san_dns:<tenant host>`. */
  sanDnsClientId: string;
}

interface Row {
  sealed_key: string;
  chain_der: string;
  serial: string;
  not_after: string;
}

const DAY_MS = 86_400_000;
const aad = (t: Tenant) => `wallet-verifier:key:${t.id}`;

/**
 * Made on first use, renewed (new key, new certificate) when less than `renewBeforeDays` are left,
 * so the wallet never sees an expired certificate; the RP CA records every one it issued.
 */
export class IdentityStore {
  readonly #cache = new Map<string, VerifierIdentity>();
  readonly #pending = new Map<string, Promise<VerifierIdentity>>();

  constructor(
    private readonly db: DB,
    private readonly keys: KeyService,
    private readonly ca: RpCaApi,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly cfg: { certDays: number; renewBeforeDays: number },
  ) {}

  async get(tenant: Tenant): Promise<VerifierIdentity> {
    const cached = this.#cache.get(tenant.id);
    if (cached && !this.due(cached.notAfter)) return cached;
    let p = this.#pending.get(tenant.id);
    if (!p) {
      p = this.load(tenant).finally(() => this.#pending.delete(tenant.id));
      this.#pending.set(tenant.id, p);
    }
    return p;
  }

  private due(notAfter: string): boolean {
    const renewAt = Date.parse(notAfter) - Math.min(this.cfg.renewBeforeDays, this.cfg.certDays / 3) * DAY_MS;
    return this.clock.now() >= renewAt;
  }

  private async load(tenant: Tenant): Promise<VerifierIdentity> {
    let row = this.db.prepare('SELECT sealed_key, chain_der, serial, not_after FROM vp_identity WHERE tenant_id = ?').get(tenant.id) as Row | undefined;
    if (!row || this.due(row.not_after)) row = await this.issue(tenant, row !== undefined);
    const chain = (JSON.parse(row.chain_der) as string[]).map((b) => Buffer.from(b, 'base64'));
    const leaf = chain[0]!;
    const id: VerifierIdentity = {
      key: crypto.createPrivateKey({ key: this.keys.open(row.sealed_key, aad(tenant)), format: 'der', type: 'pkcs8' }),
      x5c: [leaf],
      caDer: chain[chain.length - 1]!,
      notAfter: row.not_after,
      serial: row.serial,
      x509HashClientId: `x509_hash:${x509HashOf(leaf)}`,
      sanDnsClientId: `x509_san_dns:${tenant.host}`,
    };
    this.#cache.set(tenant.id, id);
    return id;
  }

  private async issue(tenant: Tenant, renewal: boolean): Promise<Row> {
    const pair = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const spki = pair.publicKey.export({ format: 'der', type: 'spki' });
    const leaf = await this.ca.issueFor(tenant, { host: tenant.host, spki, days: this.cfg.certDays, issuedBy: 'wallet-verifier' });
    const row: Row = {
      sealed_key: this.keys.seal(pair.privateKey.export({ format: 'der', type: 'pkcs8' }), aad(tenant)),
      chain_der: JSON.stringify(leaf.chainDer.map((d) => d.toString('base64'))),
      serial: leaf.serial,
      not_after: leaf.notAfter,
    };
    this.db
      .prepare(
        `INSERT INTO vp_identity (tenant_id, sealed_key, chain_der, serial, not_after, created_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant_id) DO UPDATE SET sealed_key = excluded.sealed_key, chain_der = excluded.chain_der, serial = excluded.serial,
           not_after = excluded.not_after, created_at = excluded.created_at`,
      )
      .run(tenant.id, row.sealed_key, row.chain_der, row.serial, row.not_after, new Date(this.clock.now()).toISOString());
    this.log.info(
      { tenant: tenant.host, serial: row.serial, notAfter: row.not_after },
      renewal ? 'verifier certificate renewed' : 'verifier certificate issued',
    );
    return row;
  }
}
