import { BUILD, definePlugin, type PluginHealth } from '../../server/sdk.ts';
import { Advertiser } from './advertiser.ts';
import { discoverCli } from './cli.ts';
import { discoveryConfig } from './schemas.ts';

export interface DiscoveryServices {
  advertiser: Advertiser;
  enabled: boolean;
  reason: string;
}

/** RFC 6761 §6.3 and RFC 6890: addresses and names that never leave this machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\./.test(h) || h.endsWith('.localhost');
}

/** The core setting `discovery` when set; else on unless the listener is loopback-only. */
export function discoveryDecision(setting: boolean | undefined, host: string): { enabled: boolean; reason: string } {
  if (setting !== undefined) return { enabled: setting, reason: `discovery: ${setting}` };
  return isLoopbackHost(host) ? { enabled: false, reason: `listening on loopback (${host}) only` } : { enabled: true, reason: `listening on ${host}` };
}

/**
 * LAN discovery: the appliance advertises itself over mDNS/DNS-SD so the office's phones,
 * wallets and browsers find it, and `sovcomms discover` lists the appliances on the LAN.
 * Core setting `discovery`: true, false, or unset (on when listening on a non-loopback address).
 */
export default definePlugin({
  name: 'discovery',
  description: 'LAN advertisement over mDNS/DNS-SD and `sovcomms discover`',
  config: discoveryConfig,
  cli: { discover: discoverCli },
  setup(ctx): DiscoveryServices {
    return { advertiser: new Advertiser(ctx.config), ...discoveryDecision(ctx.core.discovery, ctx.core.http.host) };
  },
  start(s, ctx) {
    if (!s.enabled || !ctx.listening) return;
    // Plugins start before the listener opens: advertise once it does (the port may be ephemeral).
    void ctx.listening.then(async ({ url, port }) => {
      const hosts = ctx.tenants.list().flatMap((t) => t.hosts);
      try {
        await s.advertiser.publish({ port, tls: url.startsWith('https:'), version: BUILD, tenantHosts: hosts });
        if (s.advertiser.advertising) ctx.log.info({ name: s.advertiser.name, port }, 'advertising on the LAN (mDNS)');
      } catch (e) {
        s.advertiser.lastError = (e as Error).message;
        ctx.log.warn({ err: (e as Error).message }, 'LAN advertisement failed');
      }
    });
  },
  async stop(s) {
    await s.advertiser.withdraw();
  },
  health(s): PluginHealth {
    const detail = { advertising: s.advertiser.advertising, why: s.reason };
    if (s.enabled && s.advertiser.lastError) return { status: 'degraded', reason: `mDNS: ${s.advertiser.lastError}`, detail };
    return { status: 'ok', detail };
  },
});
