/**
 * LAN advertisement over multicast DNS (RFC 6762) with DNS-SD service types (RFC 6763):
 * `_https._tcp` (or `_http._tcp`) for browsers and `_sovcomms._tcp` for phones, wallets and
 * `sovcomms discover`, whose TXT record says where the console, the API and the OIDC discovery
 * document are. Withdrawn (goodbye packets, TTL 0, RFC 6762 §10.1) on stop.
 */
import os from 'node:os';
import type * as BonjourModule from 'bonjour-service';
import type { Bonjour, Service } from 'bonjour-service';
import type { DiscoveryConfig } from './schemas.ts';

// bonjour-service (7-12 ms of start CPU) is loaded when the appliance first advertises, after it
// listens (or `sovcomms discover` browses): a server on loopback, where discovery is off by
// default, never loads it.
let bonjourModule: Promise<typeof BonjourModule> | undefined;

export function loadBonjour(): Promise<typeof BonjourModule> {
  return (bonjourModule ??= import('bonjour-service'));
}

export const SERVICE_TYPE = 'sovcomms';
export const PRODUCT = 'Sovereign Communications Appliance';
export const PATHS = { path: '/console/', api: '/api.ashx/v1', oidc: '/.well-known/openid-configuration' } as const;
/** RFC 6763 §6.1: one TXT string holds at most 255 bytes (`key=value`). */
const TXT_STRING_MAX = 255;

export function mdnsOptions(c: DiscoveryConfig): Record<string, unknown> {
  return { port: c.mdnsPort, ttl: c.ttl, ...(c.interface ? { interface: c.interface } : {}), ...(c.bind ? { bind: c.bind } : {}) };
}

/** Tenant host names for the TXT record: comma-separated, cut at whole names to fit one TXT string. */
export function tenantsTxt(hosts: readonly string[]): string {
  let out = '';
  for (const h of hosts) {
    const next = out ? `${out},${h}` : h;
    if (Buffer.byteLength(`tenants=${next}`) > TXT_STRING_MAX) break;
    out = next;
  }
  return out;
}

export interface Advertisement {
  port: number;
  tls: boolean;
  version: string;
  tenantHosts: readonly string[];
}

export class Advertiser {
  private bonjour: Bonjour | null = null;
  private services: Service[] = [];
  lastError: string | null = null;
  #withdrawn = false;

  constructor(private readonly cfg: DiscoveryConfig) {}

  get name(): string {
    return this.cfg.name ?? `${PRODUCT} (${os.hostname()})`.slice(0, 63);
  }

  get advertising(): boolean {
    return this.services.length > 0;
  }

  txt(a: Advertisement): Record<string, string> {
    return { version: a.version, ...PATHS, proto: a.tls ? 'https' : 'http', tenants: tenantsTxt(a.tenantHosts) };
  }

  /** Advertises on the LAN; nothing once withdrawn (a stop while the module was loading). */
  async publish(a: Advertisement): Promise<void> {
    if (this.bonjour || this.#withdrawn) return;
    const { Bonjour } = await loadBonjour();
    if (this.bonjour || this.#withdrawn) return;
    this.bonjour = new Bonjour(mdnsOptions(this.cfg), (err: Error) => {
      this.lastError = err.message;
    });
    const base = { name: this.name, port: a.port, disableIPv6: !!this.cfg.interface };
    this.services = [
      this.bonjour.publish({ ...base, type: a.tls ? 'https' : 'http', txt: { path: PATHS.path } }),
      this.bonjour.publish({ ...base, type: SERVICE_TYPE, txt: this.txt(a) }),
    ];
    for (const s of this.services) s.on('error', (e: Error) => (this.lastError = e.message));
  }

  /** Sends the goodbyes and closes the socket. */
  async withdraw(): Promise<void> {
    this.#withdrawn = true;
    const b = this.bonjour;
    if (!b) return;
    this.bonjour = null;
    this.services = [];
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 2000);
      b.unpublishAll(() => {
        clearTimeout(t);
        resolve();
      });
    });
    b.destroy();
  }
}
