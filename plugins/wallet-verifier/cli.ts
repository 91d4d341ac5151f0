import fs from 'node:fs';
import { type CliCommand, type CliContext, parse, str, table, type Tenant, UsageError } from '../../server/sdk.ts';
import type { VerifierServices } from './index.ts';

const USAGE = ['verifier trust add PEM_FILE [--tenant HOST]', 'verifier trust list [--tenant HOST] [--json]', 'verifier trust remove SHA256 [--tenant HOST]'];

function tenantOf(ctx: CliContext, host: string | undefined): Tenant {
  const t = host ? ctx.tenants.byHost(host) : ctx.tenants.primary();
  if (!t) throw new UsageError(`no tenant ${host ?? '(primary)'}`);
  return t;
}

/** `sovcomms verifier ...`: the issuer trust anchors of the wallet verifier. */
export const verifierCli: CliCommand<VerifierServices> = {
  summary: 'EU wallet verifier: issuer trust anchors for presentations',
  usage: USAGE,
  async run(args, ctx, s) {
    const [area, sub, ...rest] = args;
    if (area !== 'trust') throw new UsageError(`usage:\n  ${USAGE.join('\n  ')}`);
    const { values, positionals } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 1);
    const tenant = tenantOf(ctx, str(values.tenant));
    switch (sub) {
      case 'add': {
        const file = positionals[0];
        if (!file) throw new UsageError('verifier trust add PEM_FILE');
        const a = s.anchors.add(tenant, fs.readFileSync(file, 'utf8'), 'cli');
        ctx.audit.write(tenant, { event: 'verifier.trust-add', user: 'cli', extra: { sha256: a.sha256 } });
        ctx.out(`trusted ${a.sha256} ${a.subject}`);
        return 0;
      }
      case 'list': {
        const items = s.anchors.list(tenant);
        if (values.json) ctx.out(JSON.stringify(items, null, 2));
        else for (const line of table(items as unknown as Record<string, unknown>[], ['sha256', 'source', 'not_after', 'subject'])) ctx.out(line);
        return 0;
      }
      case 'remove': {
        const sha = positionals[0];
        if (!sha) throw new UsageError('verifier trust remove SHA256');
        s.anchors.remove(tenant, sha);
        ctx.audit.write(tenant, { event: 'verifier.trust-remove', user: 'cli', extra: { sha256: sha } });
        ctx.out(`removed ${sha}`);
        return 0;
      }
      default:
        throw new UsageError(`usage:\n  ${USAGE.join('\n  ')}`);
    }
  },
};
