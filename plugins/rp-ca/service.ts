import crypto from 'node:crypto';
import net from 'node:net';
import {
  AppError,
  type Clock,
  ConflictError,
  type DB,
  HsmError,
  type HsmConfig,
  InputError,
  type KeyService,
  type Logger,
  NotFoundError,
  Pkcs11Signer,
  type Signer,
  SoftwareSigner,
  type Tenant,
} from '../../server/sdk.ts';
import { CaRepo, type CaRow, type CertRow, type NewCa } from './repo.ts';
import { createCaCertificate, createCrl, createLeafCertificate, fingerprint, pem, randomSerialHex, x509, x509Hash } from './x509.ts';
import { REVOCATION_REASONS, type IssueBody, type RpCaConfig } from './schemas.ts';

export interface CaDeps {
  db: DB;
  keys: KeyService;
  clock: Clock;
  log: Logger;
  config: RpCaConfig;
}

/** A tenant's CA as loaded: its certificate and a live signer. */
export interface LoadedCa {
  tenantId: string;
  generation: number;
  updatedAt: string;
  cert: x509.X509Certificate;
  der: Buffer;
  pem: string;
  signer: Signer;
}

export interface CaStatus {
  tenant: string;
  key: { kind: 'software' } | { kind: 'pkcs11'; module: string; token: string; label: string };
  keyLocation: string;
  subject: string;
  notBefore: string;
  notAfter: string;
  fingerprintSha256: string;
  generation: number;
  issued: number;
  revoked: number;
  crlNumber: number;
}

export interface InitResult {
  action: 'created' | 'adopted' | 'unchanged' | 'replaced';
  /** The HSM key was generated now (false: an existing key was adopted). */
  keyCreated: boolean;
  status: CaStatus;
}

export interface IssueResult {
  client_id: string;
  x509_hash: string;
  x509_hash_client_id: string;
  serial: string;
  not_before: string;
  not_after: string;
  certificate: string;
  chain: string[];
  x5c: string[];
  private_key?: string;
}

export interface LeafRequest {
  purpose: 'rp' | 'tls';
  clientId: string;
  subjectCn: string;
  dnsNames: string[];
  ipAddresses: string[];
  spki: Buffer;
  keySource: CertRow['key_source'];
  days: number;
  eku?: string[];
  issuedBy: string;
}

const SKEW_MS = 5 * 60_000;
const DAY_MS = 86_400_000;
// RFC 1035 §2.3.1 preferred name syntax (LDH labels), lower-cased; at least two labels or "localhost".
const DNS_RE = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

const aadKey = (t: Tenant) => `rp-ca:key:${t.id}`;
const aadPin = (t: Tenant) => `rp-ca:pin:${t.id}`;

/** The relying-party certificate authorities, one per tenant (no HTTP in here). */
export class CaService {
  readonly repo: CaRepo;
  readonly #loaded = new Map<string, LoadedCa>();
  readonly #loading = new Map<string, Promise<LoadedCa>>();
  readonly #crlInflight = new Map<string, Promise<Buffer>>();

  constructor(private readonly deps: CaDeps) {
    this.repo = new CaRepo(deps.db);
  }

  private nowIso(): string {
    return new Date(this.deps.clock.now()).toISOString();
  }

  /** The CA subject: the tenant's host keeps roots of different tenants apart by name as well as by key. */
  private subjectOf(tenant: Tenant): x509.JsonName {
    return [{ CN: [`RP CA ${tenant.host}`] }, { O: [tenant.name || tenant.host] }];
  }

  private async newCaRow(tenant: Tenant, signer: Signer, keyFields: Omit<NewCa, 'cert_der'>): Promise<NewCa> {
    const now = this.deps.clock.now();
    const cert = await createCaCertificate(signer, {
      subject: new x509.Name(this.subjectOf(tenant)).toString(),
      notBefore: new Date(now - SKEW_MS),
      notAfter: new Date(now + this.deps.config.caValidityYears * 365 * DAY_MS),
    });
    return { ...keyFields, cert_der: Buffer.from(cert.rawData) };
  }

  private async softwareCa(tenant: Tenant): Promise<{ row: NewCa; signer: SoftwareSigner }> {
    const { signer, pkcs8 } = SoftwareSigner.generate();
    const row = await this.newCaRow(tenant, signer, {
      key_kind: 'software',
      sealed_key: this.deps.keys.seal(pkcs8, aadKey(tenant)),
      hsm_module: null,
      hsm_token: null,
      hsm_key_label: null,
      sealed_pin: null,
    });
    return { row, signer };
  }

  private openSigner(tenant: Tenant, row: CaRow): Signer {
    if (row.key_kind === 'software') return new SoftwareSigner(this.deps.keys.open(row.sealed_key!, aadKey(tenant)));
    return Pkcs11Signer.open({
      module: row.hsm_module!,
      tokenLabel: row.hsm_token!,
      keyLabel: row.hsm_key_label!,
      pin: this.deps.keys.openString(row.sealed_pin!, aadPin(tenant)),
    }).signer;
  }

  /**
   * The tenant's CA, created in software on first use. The row is re-read on every call (one
   * primary-key lookup) so a `ca init` from the CLI in another process takes effect at once.
   */
  async ca(tenant: Tenant): Promise<LoadedCa> {
    let row = this.repo.get(tenant);
    if (!row) {
      const { row: fresh, signer } = await this.softwareCa(tenant);
      signer.close();
      if (this.repo.insertIfAbsent(tenant, fresh, this.nowIso())) this.deps.log.info({ tenant: tenant.host }, 'RP CA created (software key)');
      row = this.repo.get(tenant)!;
    }
    const cached = this.#loaded.get(tenant.id);
    if (cached && cached.generation === row.generation && cached.updatedAt === row.updated_at && cached.signer.usable) return cached;
    const key = `${tenant.id}:${row.generation}:${row.updated_at}`;
    let p = this.#loading.get(key);
    if (!p) {
      const r = row;
      p = (async () => {
        try {
          return this.load(tenant, r);
        } finally {
          this.#loading.delete(key);
        }
      })();
      this.#loading.set(key, p);
    }
    return p;
  }

  private load(tenant: Tenant, row: CaRow): LoadedCa {
    let signer: Signer;
    try {
      signer = this.openSigner(tenant, row);
    } catch (e) {
      this.deps.log.error({ tenant: tenant.host, err: (e as Error).message }, 'RP CA key unavailable');
      // Details (module paths, token labels) go to the log and `ca status`, not to a public answer.
      throw new AppError(503, 'ca_unavailable', `the certificate authority key of ${tenant.host} is unavailable`, {
        headers: { 'Retry-After': '30' },
        cause: e,
        reason: 'key_unreachable',
      });
    }
    const cert = new x509.X509Certificate(row.cert_der);
    if (!Buffer.from(cert.publicKey.rawData).equals(signer.spki)) {
      signer.close();
      throw new AppError(503, 'ca_unavailable', `the CA key of ${tenant.host} does not match its certificate (was the HSM key replaced?)`, {
        reason: 'key_mismatch',
      });
    }
    const prev = this.#loaded.get(tenant.id);
    const loaded: LoadedCa = {
      tenantId: tenant.id,
      generation: row.generation,
      updatedAt: row.updated_at,
      cert,
      der: Buffer.from(row.cert_der),
      pem: pem(Buffer.from(row.cert_der)),
      signer,
    };
    this.#loaded.set(tenant.id, loaded);
    prev?.signer.close();
    return loaded;
  }

  /**
   * `ca init`: creates the CA with a software key, or with a key in a PKCS#11 token (generated
   * there, or adopted when the token already holds a key with that label). A CA that has issued
   * certificates is replaced only with `force` (its certificates become `superseded`).
   */
  async init(tenant: Tenant, opts: { hsm?: HsmConfig; force?: boolean } = {}): Promise<InitResult> {
    const existing = this.repo.get(tenant);
    const issued = this.repo.count(tenant).issued;
    const guard = (what: string) => {
      if (existing && issued > 0 && !opts.force) {
        throw new ConflictError('ca_exists', `the CA of ${tenant.host} has issued ${issued} certificate(s); ${what} replaces it: repeat with --force to do so`);
      }
    };
    if (!opts.hsm) {
      if (existing?.key_kind === 'software' && !opts.force) return { action: 'unchanged', keyCreated: false, status: this.statusOf(tenant, existing) };
      guard('a new software key');
      const { row, signer } = await this.softwareCa(tenant);
      signer.close();
      return this.save(tenant, existing, row, true);
    }
    const hsm = opts.hsm;
    let opened: { signer: Pkcs11Signer; created: boolean };
    try {
      opened = Pkcs11Signer.open(hsm, { create: true });
    } catch (e) {
      if (e instanceof HsmError) throw new AppError(400, 'hsm_error', e.message, { reason: e.reason });
      throw e;
    }
    try {
      const keyFields: Omit<NewCa, 'cert_der'> = {
        key_kind: 'pkcs11',
        sealed_key: null,
        hsm_module: hsm.module,
        hsm_token: hsm.tokenLabel,
        hsm_key_label: hsm.keyLabel,
        sealed_pin: this.deps.keys.seal(hsm.pin, aadPin(tenant)),
      };
      // The same key as today's CA: keep the certificate, update where the key is found (and the PIN).
      if (existing && !opts.force && Buffer.from(new x509.X509Certificate(existing.cert_der).publicKey.rawData).equals(opened.signer.spki)) {
        const row: NewCa = { ...keyFields, cert_der: existing.cert_der };
        this.deps.db
          .prepare(
            'UPDATE rp_ca SET key_kind = ?, sealed_key = NULL, hsm_module = ?, hsm_token = ?, hsm_key_label = ?, sealed_pin = ?, updated_at = ? WHERE tenant_id = ?',
          )
          .run(row.key_kind, row.hsm_module, row.hsm_token, row.hsm_key_label, row.sealed_pin, this.nowIso(), tenant.id);
        return { action: 'unchanged', keyCreated: false, status: this.statusOf(tenant, this.repo.get(tenant)!) };
      }
      guard('a key in the HSM');
      const row = await this.newCaRow(tenant, opened.signer, keyFields);
      return this.save(tenant, existing, row, opened.created);
    } finally {
      opened.signer.close();
    }
  }

  private save(tenant: Tenant, existing: CaRow | undefined, row: NewCa, keyCreated: boolean): InitResult {
    const now = this.nowIso();
    if (existing) this.repo.replace(tenant, row, now);
    else if (!this.repo.insertIfAbsent(tenant, row, now)) this.repo.replace(tenant, row, now);
    const saved = this.repo.get(tenant)!;
    this.deps.log.info({ tenant: tenant.host, key: saved.key_kind, generation: saved.generation }, 'RP CA initialised');
    const action = existing ? 'replaced' : row.key_kind === 'pkcs11' && !keyCreated ? 'adopted' : 'created';
    return { action, keyCreated, status: this.statusOf(tenant, saved) };
  }

  status(tenant: Tenant): CaStatus | undefined {
    const row = this.repo.get(tenant);
    return row ? this.statusOf(tenant, row) : undefined;
  }

  private statusOf(tenant: Tenant, row: CaRow): CaStatus {
    const cert = new x509.X509Certificate(row.cert_der);
    const key: CaStatus['key'] =
      row.key_kind === 'software' ? { kind: 'software' } : { kind: 'pkcs11', module: row.hsm_module!, token: row.hsm_token!, label: row.hsm_key_label! };
    const counts = this.repo.count(tenant);
    return {
      tenant: tenant.host,
      key,
      keyLocation:
        key.kind === 'software'
          ? 'software (P-256 key sealed with the master key in the database)'
          : `HSM: module ${key.module}, token "${key.token}", key "${key.label}"`,
      subject: cert.subject,
      notBefore: cert.notBefore.toISOString(),
      notAfter: cert.notAfter.toISOString(),
      fingerprintSha256: fingerprint(Buffer.from(cert.rawData)),
      generation: row.generation,
      issued: counts.issued,
      revoked: counts.revoked,
      crlNumber: row.crl_number,
    };
  }

  /** Opens the key now (HSM reachable, PIN right, key matches the certificate). */
  async check(tenant: Tenant): Promise<void> {
    await this.ca(tenant);
  }

  /** check() as an answer: whether the key opens now and, if not, why (with the HSM's own cause). */
  async probe(tenant: Tenant): Promise<{ reachable: boolean; problem?: string }> {
    try {
      await this.check(tenant);
      return { reachable: true };
    } catch (e) {
      const cause = (e as Error).cause as Error | undefined;
      return { reachable: false, problem: cause?.message ? `${(e as Error).message}: ${cause.message}` : (e as Error).message };
    }
  }

  private baseUrl(tenant: Tenant): string {
    return (this.deps.config.publicBaseUrl ?? `https://${tenant.host}`).replace(/\/+$/, '');
  }

  /** Signs and records one end-entity certificate. Serials are random; a collision (2^-126) is retried. */
  async issueLeaf(tenant: Tenant, r: LeafRequest): Promise<{ cert: x509.X509Certificate; der: Buffer; ca: LoadedCa; row: CertRow }> {
    const ca = await this.ca(tenant);
    const now = this.deps.clock.now();
    const notBefore = new Date(now - SKEW_MS);
    // A certificate must not outlive its issuer (RFC 5280 §6.1.3 would reject it anyway).
    const notAfter = new Date(Math.min(now + r.days * DAY_MS, ca.cert.notAfter.getTime()));
    const base = this.baseUrl(tenant);
    for (let attempt = 0; attempt < 3; attempt++) {
      const serial = randomSerialHex();
      if (this.repo.hasSerial(tenant, serial)) continue;
      const cert = await signing(tenant, () =>
        createLeafCertificate(ca.signer, {
          ca: ca.cert,
          serialHex: serial,
          subject: new x509.Name([{ CN: [r.subjectCn] }]).toString(),
          spki: r.spki,
          notBefore,
          notAfter,
          dnsNames: r.dnsNames,
          ipAddresses: r.ipAddresses,
          policyOid: this.deps.config.policyOid,
          cpsUri: this.deps.config.cpsUrl ?? `${base}/rp-cert.ashx?cps`,
          crlUri: `${base}/rp-cert.ashx?crl`,
          eku: r.eku,
        }),
      );
      const der = Buffer.from(cert.rawData);
      const row: CertRow = {
        serial,
        ca_generation: ca.generation,
        purpose: r.purpose,
        client_id: r.clientId,
        subject: cert.subject,
        names: JSON.stringify([...r.dnsNames.map((d) => `dns:${d}`), ...r.ipAddresses.map((i) => `ip:${i}`)]),
        not_before: notBefore.toISOString(),
        not_after: notAfter.toISOString(),
        x509_hash: x509Hash(der),
        key_source: r.keySource,
        cert_der: der,
        issued_by: r.issuedBy,
        revoked_at: null,
        revocation_reason: null,
        created_at: new Date(now).toISOString(),
      };
      if (this.repo.insertCert(tenant, row)) return { cert, der, ca, row };
    }
    throw new AppError(500, 'server_error', 'could not allocate a unique serial number');
  }

  /** POST ?issue: an RP access certificate for an OpenID4VP verifier (x509_san_dns / x509_hash client ids). */
  /**
   * `registered`, when given, says whether any of the client's names (as typed, the
   * `x509_san_dns:` form, the bare host) is a registered OIDC client of the tenant: a certificate
   * names a verifier the tenant knows, not whatever was typed (the HTTP API passes it).
   */
  async issue(tenant: Tenant, body: IssueBody, issuedBy: string, registered?: (names: string[]) => boolean): Promise<IssueResult> {
    const host = parseClientId(body.client_id);
    if (registered && !registered([...new Set([body.client_id.trim(), `x509_san_dns:${host}`, host])])) {
      throw new InputError(`client_id: ${host} is not a registered OIDC client of this tenant; register the client first`, 'invalid_client_id', {
        field: 'client_id',
      });
    }
    const given = [body.include_key, body.csr !== undefined, body.public_key !== undefined].filter(Boolean).length;
    if (given > 1) {
      throw new InputError('at most one of include_key: true, csr or public_key may be given', 'invalid_request');
    }
    let spki: Buffer;
    let privateKey: string | undefined;
    let keySource: CertRow['key_source'];
    if (body.csr === undefined && body.public_key === undefined) {
      // The spec's shape (client_id alone): the key pair is made here; its private half leaves
      // only in this answer and only when include_key asks for it, and is never stored.
      const pair = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
      spki = pair.publicKey.export({ format: 'der', type: 'spki' });
      if (body.include_key) privateKey = pair.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;
      keySource = 'generated';
    } else if (body.csr !== undefined) {
      spki = await spkiFromCsr(body.csr);
      keySource = 'csr';
    } else {
      spki = spkiFromPublicKey(body.public_key!);
      keySource = 'public_key';
    }
    const { der, ca, row } = await this.issueLeaf(tenant, {
      purpose: 'rp',
      clientId: `x509_san_dns:${host}`,
      subjectCn: host,
      dnsNames: [host],
      ipAddresses: [],
      spki,
      keySource,
      days: body.days,
      issuedBy,
    });
    const leafPem = pem(der);
    return {
      client_id: `x509_san_dns:${host}`,
      x509_hash: row.x509_hash,
      x509_hash_client_id: `x509_hash:${row.x509_hash}`,
      serial: row.serial,
      not_before: row.not_before,
      not_after: row.not_after,
      certificate: leafPem,
      chain: [leafPem, ca.pem],
      x5c: [der.toString('base64')],
      ...(privateKey ? { private_key: privateKey } : {}),
    };
  }

  list(tenant: Tenant, f: { limit: number; offset: number; purpose?: 'rp' | 'tls' }) {
    const row = this.repo.get(tenant);
    const { rows, total } = this.repo.list(tenant, f);
    const now = this.deps.clock.now();
    return {
      total,
      items: rows.map((r) => ({
        serial: r.serial,
        client_id: r.client_id,
        purpose: r.purpose,
        subject: r.subject,
        names: JSON.parse(r.names) as string[],
        not_before: r.not_before,
        not_after: r.not_after,
        x509_hash: r.x509_hash,
        key_source: r.key_source,
        status: r.revoked_at
          ? ('revoked' as const)
          : row && r.ca_generation !== row.generation
            ? ('superseded' as const)
            : Date.parse(r.not_after) < now
              ? ('expired' as const)
              : ('valid' as const),
        revoked_at: r.revoked_at,
        revocation_reason: r.revocation_reason,
        issued_by: r.issued_by,
        created_at: r.created_at,
      })),
    };
  }

  /** One issued certificate as PEM (public: what a verifier installs beside its key). */
  certPem(tenant: Tenant, serialInput: string): { serial: string; pem: string } {
    const serial = normalizeSerial(serialInput);
    const cert = this.repo.cert(tenant, serial);
    if (!cert) throw new NotFoundError(`no certificate with serial ${serial} was issued by this tenant's CA`);
    return { serial, pem: pem(Buffer.from(cert.cert_der)) };
  }

  /** Revokes one certificate of this tenant; the next CRL lists it. */
  revoke(
    tenant: Tenant,
    serialInput: string,
    reason: keyof typeof REVOCATION_REASONS,
  ): { serial: string; status: 'revoked'; revoked_at: string; revocation_reason: string } {
    const serial = normalizeSerial(serialInput);
    const cert = this.repo.cert(tenant, serial);
    if (!cert) throw new NotFoundError(`no certificate with serial ${serial} was issued by this tenant's CA`);
    const at = this.nowIso();
    if (!this.repo.revoke(tenant, serial, reason, at)) throw new ConflictError('already_revoked', `certificate ${serial} was revoked at ${cert.revoked_at}`);
    return { serial, status: 'revoked', revoked_at: at, revocation_reason: reason };
  }

  /**
   * The CA's current CRL (DER). Signed anew after a revocation, after a CA change, or when half
   * of its validity has passed, so a cached copy is always fresh enough to use.
   */
  async crl(tenant: Tenant): Promise<Buffer> {
    const ca = await this.ca(tenant);
    const row = this.repo.get(tenant)!;
    const now = this.deps.clock.now();
    const half = (this.deps.config.crlValidityDays * DAY_MS) / 2;
    if (row.crl_der && !row.crl_stale && row.crl_next_update && Date.parse(row.crl_next_update) - now > half && row.generation === ca.generation) {
      return Buffer.from(row.crl_der);
    }
    let p = this.#crlInflight.get(tenant.id);
    if (!p) {
      p = (async () => {
        try {
          const number = this.repo.nextCrlNumber(tenant);
          const nextUpdate = new Date(now + this.deps.config.crlValidityDays * DAY_MS);
          const entries = this.repo.revoked(tenant, ca.generation).map((c) => ({
            serialHex: c.serial,
            revokedAt: new Date(c.revoked_at!),
            reason: REVOCATION_REASONS[c.revocation_reason as keyof typeof REVOCATION_REASONS] ?? 0,
          }));
          const crl = await signing(tenant, () => createCrl(ca.signer, ca.cert, { thisUpdate: new Date(now), nextUpdate, number, entries }));
          const der = Buffer.from(crl.rawData);
          this.repo.saveCrl(tenant, ca.generation, der, nextUpdate.toISOString());
          return der;
        } finally {
          this.#crlInflight.delete(tenant.id);
        }
      })();
      this.#crlInflight.set(tenant.id, p);
    }
    return p;
  }

  close(): void {
    for (const l of this.#loaded.values()) l.signer.close();
    this.#loaded.clear();
  }
}

/** A signature the key store could not make is the service's trouble (503), not the client's. */
async function signing<T>(tenant: Tenant, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof HsmError) {
      throw new AppError(503, 'ca_unavailable', `the certificate authority key of ${tenant.host} cannot sign now`, {
        headers: { 'Retry-After': '30' },
        cause: e,
        reason: 'cannot_sign',
      });
    }
    throw e;
  }
}

/** `x509_san_dns:<host>` or a bare host → the lower-cased DNS name (OpenID4VP 1.0 §5.9.3). */
export function parseClientId(clientId: string): string {
  let v = clientId.trim();
  const colon = v.indexOf(':');
  if (colon >= 0) {
    const prefix = v.slice(0, colon);
    if (prefix !== 'x509_san_dns') {
      throw new InputError(
        `client_id prefix ${prefix}: is not issuable; use x509_san_dns:<host> or a bare host (the x509_hash value is returned with the certificate)`,
        'invalid_client_id',
      );
    }
    v = v.slice(colon + 1);
  }
  const host = v.toLowerCase().replace(/\.$/, '');
  if (net.isIP(host) || !DNS_RE.test(host) || /^\d+$/.test(host.split('.').pop()!)) {
    throw new InputError(`client_id: not a DNS host name: ${JSON.stringify(v)}`, 'invalid_client_id');
  }
  return host;
}

/** Canonical serial: lower-case hex, no separators, minimal whole bytes (`0b0a…` stays, `000b0a…` becomes `0b0a…`). */
export function normalizeSerial(s: string): string {
  let hex = s.replace(/[:\s]/g, '').toLowerCase();
  if (!/^[0-9a-f]{1,42}$/.test(hex)) throw new InputError('serial: expected a hexadecimal serial number', 'invalid_request');
  hex = hex.replace(/^0+(?=.)/, '');
  return hex.length % 2 ? `0${hex}` : hex;
}

function checkKey(key: crypto.KeyObject, field: 'public_key' | 'csr'): Buffer {
  const t = key.asymmetricKeyType;
  const d = key.asymmetricKeyDetails;
  const ok = (t === 'ec' && (d?.namedCurve === 'prime256v1' || d?.namedCurve === 'secp384r1')) || (t === 'rsa' && (d?.modulusLength ?? 0) >= 2048);
  if (!ok) {
    throw new AppError(400, 'invalid_key', 'public key: only EC P-256, EC P-384 or RSA of at least 2048 bits is accepted', {
      reason: 'unsupported_key',
      params: { field },
    });
  }
  return key.export({ format: 'der', type: 'spki' });
}

function spkiFromPublicKey(v: string | Record<string, unknown>): Buffer {
  let key: crypto.KeyObject;
  try {
    key = typeof v === 'string' ? crypto.createPublicKey({ key: v, format: 'pem' }) : crypto.createPublicKey({ key: v as crypto.JsonWebKey, format: 'jwk' });
  } catch {
    throw new AppError(400, 'invalid_key', 'public_key: not a PEM SubjectPublicKeyInfo or a public JWK', {
      reason: 'not_a_key',
      params: { field: 'public_key' },
    });
  }
  if (key.type !== 'public')
    throw new AppError(400, 'invalid_key', 'public_key: a public key is expected', { reason: 'not_public', params: { field: 'public_key' } });
  return checkKey(key, 'public_key');
}

/** PKCS#10 (RFC 2986): the signature proves possession of the key; only the key is taken. */
async function spkiFromCsr(csrPem: string): Promise<Buffer> {
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(csrPem);
  } catch {
    throw new AppError(400, 'invalid_csr', 'csr: not a PEM PKCS#10 certificate request', { reason: 'not_pem', params: { field: 'csr' } });
  }
  let valid = false;
  try {
    valid = await csr.verify();
  } catch {
    valid = false;
  }
  if (!valid) throw new AppError(400, 'invalid_csr', 'csr: its signature does not verify', { reason: 'bad_signature', params: { field: 'csr' } });
  return checkKey(crypto.createPublicKey({ key: Buffer.from(csr.publicKey.rawData), format: 'der', type: 'spki' }), 'csr');
}
