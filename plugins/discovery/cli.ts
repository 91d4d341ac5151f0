import { type CliCommand, parse, table, UsageError } from '../../server/sdk.ts';
import { discover } from './browse.ts';
import type { DiscoveryConfig } from './schemas.ts';
import type { DiscoveryServices } from './index.ts';

export const discoverCli: CliCommand<DiscoveryServices> = {
  summary: 'Appliances advertising themselves on the LAN (mDNS / DNS-SD)',
  usage: ['discover [--timeout-ms N] [--json]   (lists appliances on the LAN)'],
  changes: false,
  async run(args, ctx) {
    const { values } = parse(args, { 'timeout-ms': { type: 'string' }, json: { type: 'boolean' } }, 0);
    const raw = values['timeout-ms'];
    const timeoutMs = raw === undefined ? 3000 : Number(raw);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 60_000)
      throw new UsageError(`--timeout-ms: an integer from 100 to 60000, got ${String(raw)}`);
    const found = await discover(ctx.config as DiscoveryConfig, timeoutMs);
    if (values.json) {
      ctx.out(JSON.stringify(found, null, 2));
      return 0;
    }
    if (!found.length) {
      ctx.err(`no appliance answered within ${timeoutMs} ms`);
      return 0;
    }
    const rows = found.map((f) => ({
      name: f.name,
      url: `${f.protocol}://${f.addresses.find((a) => !a.includes(':')) ?? f.host}:${f.port}${f.console}`,
      version: f.version,
      tenants: f.tenants.join(','),
    }));
    for (const l of table(rows, ['name', 'url', 'version', 'tenants'])) ctx.out(l);
    return 0;
  },
};
