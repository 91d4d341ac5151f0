/** `sovcomms discover`: browses `_sovcomms._tcp` for a while and lists what answered. */
import type { Service } from 'bonjour-service';
import { loadBonjour, mdnsOptions, SERVICE_TYPE } from './advertiser.ts';
import type { DiscoveryConfig, FoundAppliance } from './schemas.ts';

export function toFound(s: Service): FoundAppliance {
  const txt = (s.txt ?? {}) as Record<string, unknown>;
  const str = (k: string, d = '') => (typeof txt[k] === 'string' ? (txt[k] as string) : d);
  const tenants = str('tenants');
  return {
    name: s.name,
    host: s.host,
    port: s.port,
    addresses: [...(s.addresses ?? [])].sort(),
    version: str('version'),
    protocol: str('proto') === 'http' ? 'http' : 'https',
    console: str('path', '/console/'),
    api: str('api'),
    oidc: str('oidc'),
    tenants: tenants ? tenants.split(',') : [],
  };
}

export async function discover(cfg: DiscoveryConfig, timeoutMs: number): Promise<FoundAppliance[]> {
  const found = new Map<string, FoundAppliance>();
  const { Bonjour } = await loadBonjour();
  const b = new Bonjour(mdnsOptions(cfg), () => undefined);
  try {
    const browser = b.find({ type: SERVICE_TYPE });
    browser.on('up', (s: Service) => found.set(`${s.name}|${s.host}|${s.port}`, toFound(s)));
    browser.on('down', (s: Service) => found.delete(`${s.name}|${s.host}|${s.port}`));
    await new Promise((r) => setTimeout(r, timeoutMs));
    browser.stop();
  } finally {
    b.destroy();
  }
  return [...found.values()].sort((x, y) => x.name.localeCompare(y.name));
}
