/**
 * Locating a trunk's SIP server by DNS (RFC 3263 §4.2, RFC 2782): SRV records
 * `_sip._udp.<host>`, `_sip._tcp.<host>` or, for SIP over TLS, `_sips._tcp.<host>`, the lowest priority first and, among equal
 * priorities, a weighted random pick; then the target's A (or AAAA) record. Without SRV records
 * the host's own address and the configured port are used (§4.2, last paragraph).
 * `SOVCOMMS_BRIDGE_DNS_SERVERS` (comma-separated `ip[:port]`) points the lookups at given
 * servers instead of the system's (a lab, or a test's loopback DNS server).
 */
import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { TransportName } from './transport.ts';

export interface SrvRecord {
  name: string;
  port: number;
  priority: number;
  weight: number;
}

/** RFC 2782 order: ascending priority; within one, weighted random (zero weights last-ish). */
export function orderSrv(records: SrvRecord[], random = Math.random): SrvRecord[] {
  const out: SrvRecord[] = [];
  const byPriority = new Map<number, SrvRecord[]>();
  for (const r of records) byPriority.set(r.priority, [...(byPriority.get(r.priority) ?? []), r]);
  for (const p of [...byPriority.keys()].sort((a, b) => a - b)) {
    const left = [...byPriority.get(p)!];
    while (left.length) {
      const total = left.reduce((a, r) => a + r.weight, 0);
      let pick = 0;
      if (total > 0) {
        let x = random() * total;
        pick = left.findIndex((r) => (x -= r.weight) < 0);
        if (pick < 0) pick = left.length - 1;
      }
      out.push(left.splice(pick, 1)[0]!);
    }
  }
  return out;
}

/** RFC 3263 §4.1/§4.2: the SRV service name of a transport (TLS is `_sips._tcp`). */
export function srvName(host: string, transport: TransportName): string {
  return transport === 'tls' ? `_sips._tcp.${host}` : `_sip._${transport}.${host}`;
}

export class SipResolver {
  private readonly dns = new Resolver({ timeout: 2000, tries: 2 });

  constructor(servers?: string) {
    const list = (servers ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (list.length) this.dns.setServers(list);
  }

  private async address(name: string): Promise<string> {
    if (isIP(name)) return name;
    try {
      const v4 = await this.dns.resolve4(name);
      if (v4.length) return v4[0]!;
    } catch {
      // no A record: try AAAA
    }
    const v6 = await this.dns.resolve6(name);
    if (!v6.length) throw new Error(`no address for ${name}`);
    return v6[0]!;
  }

  /** Where to send a trunk's requests: an IP literal and a port (the first of `locateAll`). */
  async locate(host: string, transport: TransportName, fallbackPort: number): Promise<{ host: string; port: number; via: 'srv' | 'address' }> {
    return (await this.locateAll(host, transport, fallbackPort))[0]!;
  }

  /**
   * Every target to try, in order (RFC 3263 §4.3: on a timeout or a 503 the client tries the
   * next one): each SRV target with an address, or the host's own address.
   */
  async locateAll(host: string, transport: TransportName, fallbackPort: number): Promise<{ host: string; port: number; via: 'srv' | 'address' }[]> {
    if (isIP(host)) return [{ host, port: fallbackPort, via: 'address' }];
    let records: SrvRecord[] = [];
    try {
      records = await this.dns.resolveSrv(srvName(host, transport));
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code !== 'ENOTFOUND' && code !== 'ENODATA')
        throw new Error(`DNS SRV lookup of ${srvName(host, transport)} failed (${code ?? (err as Error).message})`, { cause: err });
    }
    // A single "." target means the service is decidedly not offered there (RFC 2782).
    if (records.length && records.every((r) => !r.name || r.name === '.')) throw new Error(`${host} offers no SIP service over ${transport} (SRV target ".")`);
    records = records.filter((r) => r.name && r.name !== '.');
    const out: { host: string; port: number; via: 'srv' | 'address' }[] = [];
    for (const r of orderSrv(records)) {
      try {
        out.push({ host: await this.address(r.name), port: r.port, via: 'srv' });
      } catch {
        // no address: skip this target
      }
    }
    if (out.length) return out;
    if (records.length) throw new Error(`no SRV target of ${host} has an address`);
    return [{ host: await this.address(host), port: fallbackPort, via: 'address' }];
  }
}
