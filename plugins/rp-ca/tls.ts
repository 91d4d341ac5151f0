import crypto from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import type { Clock, KeyService, Logger, Tenant, TenantService } from '../../server/sdk.ts';
import type { CaRepo } from './repo.ts';
import type { CaService } from './service.ts';
import type { RpCaConfig } from './schemas.ts';

/** What server/app.ts takes from the 'tls-auto' service for `serve --tls auto`. */
export interface TlsCredentials {
  cert: string;
  key: string;
}

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1'; // RFC 5280 §4.2.1.12 id-kp-serverAuth
const TLS_KEY_AAD = 'rp-ca:tls-key';
const DAY_MS = 86_400_000;

/**
 * The names the appliance is reached by on the LAN: every tenant host, this machine's host name,
 * localhost, loopback and every non-internal interface address. IPv6 link-local addresses are
 * left out: their zone id cannot be written in an iPAddress SAN (RFC 5280 §4.2.1.6).
 */
export function applianceNames(tenants: readonly Tenant[], extra: readonly string[] = []): { dns: string[]; ips: string[] } {
  const dns = new Set<string>(['localhost']);
  const ips = new Set<string>(['127.0.0.1', '::1']);
  const add = (raw: string) => {
    const v = raw
      .trim()
      .toLowerCase()
      .replace(/^\[(.*)\]$/, '$1')
      .replace(/\.$/, '');
    if (!v) return;
    if (net.isIP(v)) ips.add(v);
    else if (/^[a-z0-9.-]+$/.test(v)) dns.add(v);
  };
  for (const t of tenants) for (const h of t.hosts) add(h);
  const host = os.hostname();
  if (host) add(host);
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal || (a.family === 'IPv6' && /^fe80:/i.test(a.address))) continue;
      add(a.address);
    }
  }
  for (const e of extra) add(e);
  return { dns: [...dns].sort(), ips: [...ips].sort() };
}

/**
 * The appliance's own HTTPS certificate, issued by the primary tenant's CA, kept in `rp_tls`
 * (key sealed) and renewed by a job before expiry or when the set of names changes.
 *
 * Checking the stored certificate needs only node:crypto and two rows; the CA service (with
 * @peculiar/x509 and PKCS#11, 10-20 MiB of the core's idle RSS once loaded) is loaded only to
 * issue. SIP over TLS checks at every bridge start, so this keeps the steady state light.
 */
export class TlsAuto {
  #creds: TlsCredentials | undefined;
  #serial: string | undefined;
  readonly #listeners: (() => void)[] = [];
  #checking: Promise<boolean> | undefined;
  /** Names other listeners asked for (TlsAutoService.require), besides `tls.extraNames`. */
  extraNames: readonly string[] = [];

  constructor(
    private readonly repo: CaRepo,
    private readonly caService: () => Promise<CaService>,
    private readonly tenants: TenantService,
    private readonly keys: KeyService,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly config: RpCaConfig['tls'],
  ) {}

  /** The current certificate chain and key; `ensure()` ran at plugin start, so there is one. */
  getCredentials(): TlsCredentials {
    if (!this.#creds) throw new Error('no HTTPS certificate yet');
    return this.#creds;
  }

  /** Called after each renewal, so the listener can swap its secure context (server.setSecureContext). */
  onRenew(listener: () => void): void {
    this.#listeners.push(listener);
  }

  get serial(): string | undefined {
    return this.#serial;
  }

  /** Issues or renews when needed; true when the certificate changed. Concurrent calls share one run. */
  ensure(): Promise<boolean> {
    this.#checking ??= this.check().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  private async check(): Promise<boolean> {
    const primary = this.tenants.primary();
    if (!primary) throw new Error('no primary tenant');
    const names = applianceNames(this.tenants.list(), [...this.config.extraNames, ...this.extraNames]);
    const namesKey = JSON.stringify(names);
    const stored = this.repo.tls();
    const caRow = this.repo.get(primary);
    const now = this.clock.now();
    let reason: string | undefined;
    if (!stored) reason = 'none yet';
    else if (stored.tenant_id !== primary.id) reason = 'the primary tenant changed';
    else if (stored.names !== namesKey) reason = 'host names or addresses changed';
    else if (!caRow) reason = 'the CA changed';
    else {
      const leaf = new crypto.X509Certificate(stored.cert_pem.split(/(?<=-----END CERTIFICATE-----)/)[0]!);
      const caCert = new crypto.X509Certificate(caRow.cert_der);
      const life = Date.parse(stored.not_after) - Date.parse(stored.not_before);
      const left = Date.parse(stored.not_after) - now;
      if (left < Math.min(this.config.renewBeforeDays * DAY_MS, life / 3)) reason = 'close to expiry';
      // Issued by this CA (names and key identifiers: checkIssued) and signed by its key.
      else if (!leaf.checkIssued(caCert) || !leaf.verify(caCert.publicKey)) reason = 'the CA changed';
    }
    if (!reason) {
      // Another process (or node) may have renewed: take what the table holds.
      return this.adopt(stored!.serial, stored!.cert_pem, stored!.sealed_key);
    }
    const svc = await this.caService();
    const ca = await svc.ca(primary);
    const { pem } = await import('./x509.ts');
    const pair = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const keyPem = pair.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;
    const { der, row } = await svc.issueLeaf(primary, {
      purpose: 'tls',
      clientId: `tls:${primary.host}`,
      subjectCn: primary.host,
      dnsNames: names.dns,
      ipAddresses: names.ips,
      spki: pair.publicKey.export({ format: 'der', type: 'spki' }),
      keySource: 'generated',
      days: this.config.validityDays,
      eku: [SERVER_AUTH],
      issuedBy: 'tls-auto',
    });
    const chain = pem(der) + ca.pem;
    const sealed = this.keys.seal(keyPem, TLS_KEY_AAD);
    this.repo.saveTls(primary, {
      serial: row.serial,
      cert_pem: chain,
      sealed_key: sealed,
      names: namesKey,
      not_before: row.not_before,
      not_after: row.not_after,
      updated_at: new Date(now).toISOString(),
    });
    this.log.info({ serial: row.serial, notAfter: row.not_after, reason, names: [...names.dns, ...names.ips].length }, 'HTTPS certificate issued');
    return this.adopt(row.serial, chain, sealed);
  }

  private adopt(serial: string, chain: string, sealedKey: string): boolean {
    if (this.#serial === serial) return false;
    this.#creds = { cert: chain, key: this.keys.openString(sealedKey, TLS_KEY_AAD) };
    this.#serial = serial;
    for (const l of this.#listeners) {
      try {
        l();
      } catch (e) {
        this.log.error({ err: (e as Error).message }, 'HTTPS certificate listener failed');
      }
    }
    return true;
  }
}
