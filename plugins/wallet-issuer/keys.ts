import type Database from 'better-sqlite3';
import crypto from 'node:crypto';
import { type Clock, type DB, type HsmConfig, type KeyService, type Logger, Pkcs11Signer, probeToken, type Tenant } from '../../server/sdk.ts';
import type { IssuerConfig } from './schemas.ts';
import { jwkThumbprint, publicJwk, SoftwareSigner, type Signer } from './signer.ts';

export interface KeyRow {
  tenant_id: string;
  kid: string;
  role: 'iaca' | 'signing';
  key_kind: 'software' | 'pkcs11';
  sealed_key: string | null;
  hsm_module: string | null;
  hsm_token: string | null;
  hsm_key_label: string | null;
  sealed_pin: string | null;
  cert_der: Buffer;
  created_at: string;
  retired_at: string | null;
  publish_until: string | null;
}

/** A usable key: its signer and certificate (the IACA's own, or the document signer from it). */
export interface IssuerKey {
  kid: string;
  signer: Signer;
  certDer: Buffer;
  jwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string };
  /** The document signer certificate as the JWS x5c header carries it. */
  x5c: string[];
}

export interface PublishedKey {
  kid: string;
  jwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string; kid: string; use: 'sig'; alg: 'ES256'; x5c: string[] };
  active: boolean;
}

/** Where `issuer init` puts new keys: software, or a PKCS#11 token. */
export type KeyHome = { kind: 'software' } | { kind: 'pkcs11'; hsm: Omit<HsmConfig, 'keyLabel'> };

const YEAR_MS = 365 * 86_400_000;

/**
 * The issuer's keys per tenant: one IACA (the trust anchor verifiers are configured with,
 * `GET /vci.ashx?iaca`) and one active credential signing key with a document signer certificate
 * from the IACA, made in software on first use (sealed with the master key) or in an HSM after
 * `sovcomms issuer init --hsm-module`. Rotation retires the signing key but keeps it published
 * for `rotationOverlapDays`, so credentials it signed keep verifying.
 */
const ACTIVE_RECHECK_MS = 100;

export class IssuerKeys {
  readonly #signers = new Map<string, Signer>();
  readonly #making = new Map<string, Promise<void>>();
  /** Loaded keys by tenant and kid (the active row is still read per call: a CLI rotation shows at once). */
  readonly #loaded = new Map<string, IssuerKey>();
  #activeStmt: Database.Statement | undefined;
  /**
   * The active signing key per tenant, kept while SQLite's `data_version` stays the same: it
   * changes when another connection (the CLI's `issuer rotate` or `init`) commits, so a rotation
   * elsewhere is seen without reading the key row for every credential. `data_version` itself is
   * read at most every ACTIVE_RECHECK_MS (it takes a WAL read lock, about a third of a
   * signature), so another process's rotation shows within that. This process's rotations clear it.
   */
  readonly #active = new Map<string, { key: IssuerKey; version: number; checked: number }>();
  #versionStmt: Database.Statement | undefined;

  constructor(
    private readonly db: DB,
    private readonly keys: KeyService,
    private readonly clock: Clock,
    private readonly config: IssuerConfig,
    private readonly log: Logger,
  ) {}

  private row(tenant: Tenant, role: 'iaca' | 'signing'): KeyRow | undefined {
    this.#activeStmt ??= this.db.prepare('SELECT * FROM wi_key WHERE tenant_id = ? AND role = ? AND retired_at IS NULL');
    return this.#activeStmt.get(tenant.id, role) as KeyRow | undefined;
  }

  /** The IACA of the tenant (made on first use). */
  async iaca(tenant: Tenant): Promise<IssuerKey> {
    await this.ensure(tenant);
    return this.load(tenant, this.row(tenant, 'iaca')!);
  }

  /**
   * The active signing key when it is loaded and still current (the same checks as active()),
   * else undefined: lets an issuance skip a promise round trip per credential.
   */
  activeLoaded(tenant: Tenant): IssuerKey | undefined {
    const hit = this.#active.get(tenant.id);
    if (!hit) return undefined;
    const t = performance.now();
    if (t - hit.checked < ACTIVE_RECHECK_MS) return hit.key;
    this.#versionStmt ??= this.db.prepare('PRAGMA data_version').pluck();
    if (hit.version !== (this.#versionStmt.get() as number)) return undefined;
    hit.checked = t;
    return hit.key;
  }

  /** The active credential signing key (made on first use). */
  async active(tenant: Tenant): Promise<IssuerKey> {
    const loaded = this.activeLoaded(tenant);
    if (loaded) return loaded;
    this.#versionStmt ??= this.db.prepare('PRAGMA data_version').pluck();
    const version = this.#versionStmt.get() as number;
    const t = performance.now();
    let r = this.row(tenant, 'signing');
    if (!r) {
      await this.ensure(tenant);
      r = this.row(tenant, 'signing')!;
    }
    const key = await this.load(tenant, r);
    this.#active.set(tenant.id, { key, version, checked: t });
    return key;
  }

  iacaPem(der: Buffer): string {
    const b64 = der
      .toString('base64')
      .match(/.{1,64}/g)!
      .join('\n');
    return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
  }

  /** Signing keys verifiers may meet: the active one and retired ones inside their overlap. */
  async published(tenant: Tenant): Promise<PublishedKey[]> {
    await this.ensure(tenant);
    const now = new Date(this.clock.now()).toISOString();
    const rows = this.db
      .prepare(
        `SELECT * FROM wi_key WHERE tenant_id = ? AND role = 'signing' AND (retired_at IS NULL OR publish_until > ?)
         ORDER BY retired_at IS NOT NULL, created_at DESC`,
      )
      .all(tenant.id, now) as KeyRow[];
    return rows.map((r) => {
      const cert = new crypto.X509Certificate(r.cert_der);
      const jwk = publicJwk(cert.publicKey.export({ format: 'der', type: 'spki' }));
      return { kid: r.kid, jwk: { ...jwk, kid: r.kid, use: 'sig', alg: 'ES256', x5c: [r.cert_der.toString('base64')] }, active: r.retired_at === null };
    });
  }

  /** Makes the IACA and the first signing key when missing (once per tenant at a time). */
  async ensure(tenant: Tenant, home: KeyHome = { kind: 'software' }): Promise<void> {
    if (this.row(tenant, 'iaca') && this.row(tenant, 'signing')) return;
    let p = this.#making.get(tenant.id);
    if (!p) {
      p = this.make(tenant, home).finally(() => this.#making.delete(tenant.id));
      this.#making.set(tenant.id, p);
    }
    await p;
  }

  private async make(tenant: Tenant, home: KeyHome): Promise<void> {
    let iacaRow = this.row(tenant, 'iaca');
    if (!iacaRow) {
      const { signer, stored } = await this.newKey(tenant, 'iaca', home);
      // @peculiar/x509 costs start-up time: loaded only when a key is made.
      const { createIaca } = await import('./x509.ts');
      const now = new Date(this.clock.now());
      const der = await createIaca(signer, {
        commonName: `${tenant.host} IACA`,
        country: this.config.country,
        notBefore: new Date(now.getTime() - 60_000),
        notAfter: new Date(now.getTime() + 10 * YEAR_MS),
      });
      const kid = jwkThumbprint(publicJwk(signer.spki));
      this.insert(tenant, kid, 'iaca', stored, der);
      this.#signers.set(`${tenant.id}|${kid}`, signer);
      iacaRow = this.row(tenant, 'iaca')!;
      this.log.info({ tenant: tenant.host, kid, kind: signer.kind }, 'wallet issuer IACA created');
    }
    if (!this.row(tenant, 'signing')) await this.addSigningKey(tenant, home);
  }

  /** A new signing key with its document signer certificate; the caller retires the old one. */
  private async addSigningKey(tenant: Tenant, home: KeyHome): Promise<string> {
    const iaca = await this.load(tenant, this.row(tenant, 'iaca')!);
    const { signer, stored } = await this.newKey(tenant, 'signing', home);
    const { createSignerCertificate } = await import('./x509.ts');
    const now = new Date(this.clock.now());
    const notAfter = new Date(now.getTime() + (this.config.credentialTtlDays + this.config.rotationOverlapDays) * 86_400_000);
    const der = await createSignerCertificate(iaca.signer, iaca.certDer, {
      spki: signer.spki,
      commonName: `${tenant.host} credential issuer`,
      country: this.config.country,
      notBefore: new Date(now.getTime() - 60_000),
      notAfter: notAfter < new Date(now.getTime() + 10 * YEAR_MS) ? notAfter : new Date(now.getTime() + 10 * YEAR_MS),
    });
    const kid = jwkThumbprint(publicJwk(signer.spki));
    this.insert(tenant, kid, 'signing', stored, der);
    this.#signers.set(`${tenant.id}|${kid}`, signer);
    return kid;
  }

  /**
   * Retires the active signing key (published `rotationOverlapDays` more) and makes a new one in
   * the same home (software or the same HSM token). Returns both kids.
   */
  async rotate(tenant: Tenant, pin?: string): Promise<{ retired: string; active: string }> {
    await this.ensure(tenant);
    this.#active.clear();
    const old = this.row(tenant, 'signing')!;
    const home: KeyHome =
      old.key_kind === 'software'
        ? { kind: 'software' }
        : {
            kind: 'pkcs11',
            hsm: {
              module: old.hsm_module!,
              tokenLabel: old.hsm_token!,
              pin: pin ?? this.keys.openString(old.sealed_pin!, `wi-pin|${tenant.id}`),
            },
          };
    const now = this.clock.now();
    const until = new Date(now + this.config.rotationOverlapDays * 86_400_000).toISOString();
    this.db
      .prepare('UPDATE wi_key SET retired_at = ?, publish_until = ? WHERE tenant_id = ? AND kid = ?')
      .run(new Date(now).toISOString(), until, tenant.id, old.kid);
    try {
      const kid = await this.addSigningKey(tenant, home);
      this.#active.clear();
      return { retired: old.kid, active: kid };
    } catch (e) {
      // No tenant is ever left without an active key.
      this.db.prepare('UPDATE wi_key SET retired_at = NULL, publish_until = NULL WHERE tenant_id = ? AND kid = ?').run(tenant.id, old.kid);
      this.#active.clear();
      throw e;
    }
  }

  /**
   * `issuer init`: puts the tenant's IACA and signing key in `home`. Existing keys are retired
   * (the old signing key stays published for the overlap; the old IACA is no longer served).
   */
  async init(tenant: Tenant, home: KeyHome): Promise<{ iaca: string; signing: string }> {
    // A wrong PIN or a missing token fails here, before anything changes.
    if (home.kind === 'pkcs11') probeToken(home.hsm);
    this.#active.clear();
    const now = this.clock.now();
    const until = new Date(now + this.config.rotationOverlapDays * 86_400_000).toISOString();
    const before = this.db.prepare('SELECT kid FROM wi_key WHERE tenant_id = ? AND retired_at IS NULL').all(tenant.id) as { kid: string }[];
    this.db
      .prepare("UPDATE wi_key SET retired_at = ?, publish_until = CASE role WHEN 'signing' THEN ? ELSE NULL END WHERE tenant_id = ? AND retired_at IS NULL")
      .run(new Date(now).toISOString(), until, tenant.id);
    try {
      await this.make(tenant, home);
    } catch (e) {
      // No tenant is left without keys: the new ones that were made go, the old ones come back.
      this.db.prepare('DELETE FROM wi_key WHERE tenant_id = ? AND retired_at IS NULL').run(tenant.id);
      for (const b of before)
        this.db.prepare('UPDATE wi_key SET retired_at = NULL, publish_until = NULL WHERE tenant_id = ? AND kid = ?').run(tenant.id, b.kid);
      this.#active.clear();
      throw e;
    }
    this.#active.clear();
    return { iaca: this.row(tenant, 'iaca')!.kid, signing: this.row(tenant, 'signing')!.kid };
  }

  status(tenant: Tenant): { role: string; kid: string; kind: string; location: string; created_at: string; retired_at: string | null }[] {
    const rows = this.db.prepare('SELECT * FROM wi_key WHERE tenant_id = ? ORDER BY created_at').all(tenant.id) as KeyRow[];
    return rows.map((r) => ({
      role: r.role,
      kid: r.kid,
      kind: r.key_kind,
      location: r.key_kind === 'software' ? 'software (sealed)' : `HSM ${r.hsm_module} token "${r.hsm_token}" key "${r.hsm_key_label}"`,
      created_at: r.created_at,
      retired_at: r.retired_at,
    }));
  }

  private async newKey(tenant: Tenant, role: 'iaca' | 'signing', home: KeyHome): Promise<{ signer: Signer; stored: Partial<KeyRow> }> {
    if (home.kind === 'software') {
      const { signer, pkcs8 } = SoftwareSigner.generate();
      return { signer, stored: { key_kind: 'software', sealed_key: this.keys.seal(pkcs8, `wi-key|${tenant.id}`) } };
    }
    const keyLabel = `sovcomms-wi-${role}-${crypto.randomBytes(6).toString('hex')}`;
    const { signer } = Pkcs11Signer.open({ ...home.hsm, keyLabel }, { create: true });
    return {
      signer,
      stored: {
        key_kind: 'pkcs11',
        hsm_module: home.hsm.module,
        hsm_token: home.hsm.tokenLabel,
        hsm_key_label: keyLabel,
        sealed_pin: this.keys.seal(home.hsm.pin, `wi-pin|${tenant.id}`),
      },
    };
  }

  private insert(tenant: Tenant, kid: string, role: 'iaca' | 'signing', s: Partial<KeyRow>, der: Buffer): void {
    this.db
      .prepare(
        `INSERT INTO wi_key (tenant_id, kid, role, key_kind, sealed_key, hsm_module, hsm_token, hsm_key_label, sealed_pin, cert_der, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        tenant.id,
        kid,
        role,
        s.key_kind,
        s.sealed_key ?? null,
        s.hsm_module ?? null,
        s.hsm_token ?? null,
        s.hsm_key_label ?? null,
        s.sealed_pin ?? null,
        der,
        new Date(this.clock.now()).toISOString(),
      );
  }

  private async load(tenant: Tenant, r: KeyRow): Promise<IssuerKey> {
    const id = `${tenant.id}|${r.kid}`;
    const hit = this.#loaded.get(id);
    if (hit) return hit;
    let signer = this.#signers.get(id);
    if (!signer) {
      if (r.key_kind === 'software') signer = new SoftwareSigner(this.keys.open(r.sealed_key!, `wi-key|${tenant.id}`));
      else {
        signer = Pkcs11Signer.open({
          module: r.hsm_module!,
          tokenLabel: r.hsm_token!,
          keyLabel: r.hsm_key_label!,
          pin: this.keys.openString(r.sealed_pin!, `wi-pin|${tenant.id}`),
        }).signer;
      }
      this.#signers.set(id, signer);
    }
    const key: IssuerKey = { kid: r.kid, signer, certDer: r.cert_der, jwk: publicJwk(signer.spki), x5c: [r.cert_der.toString('base64')] };
    this.#loaded.set(id, key);
    return key;
  }

  close(): void {
    for (const s of this.#signers.values()) s.close();
    this.#signers.clear();
    this.#loaded.clear();
  }
}
