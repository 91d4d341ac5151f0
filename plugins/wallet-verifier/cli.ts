import fs from 'node:fs';
import { type CliCommand, type CliContext, parse, str, table, type Tenant, UsageError } from '../../server/sdk.ts';
import type { VerifierServices } from './index.ts';

const USAGE = [
  'verifier trust add PEM_FILE [--tenant HOST]',
  'verifier trust list [--tenant HOST] [--json]',
  'verifier trust remove SHA256 [--tenant HOST]',
  'verifier profile add NAME --type T [--ssid S] [--eap-method M] [--identity-template T] [--ttl-minutes N] [--tenant HOST]',
  'verifier profile list [--tenant HOST] [--json]',
  'verifier profile remove NAME [--tenant HOST]',
];

function tenantOf(ctx: CliContext, host: string | undefined): Tenant {
  const t = host ? ctx.tenants.byHost(host) : ctx.tenants.primary();
  if (!t) throw new UsageError(`no tenant ${host ?? '(primary)'}`);
  return t;
}

/** `sovcomms verifier ...`: the issuer trust anchors of the wallet verifier. */
export const verifierCli: CliCommand<VerifierServices> = {
  summary: 'EU wallet verifier: issuer trust anchors for presentations',
  usage: USAGE,
  changes: ['trust add', 'trust remove', 'profile add', 'profile remove'],
  audited: ['tenant'],
  async run(args, ctx, s) {
    const [area, sub, ...rest] = args;
    if (area === 'profile') return profile(sub, rest, ctx, s);
    if (area !== 'trust') throw new UsageError(`usage:\n  ${USAGE.join('\n  ')}`);
    const { values, positionals } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 1);
    const tenant = tenantOf(ctx, str(values.tenant));
    switch (sub) {
      case 'add': {
        const file = positionals[0];
        if (!file) throw new UsageError('verifier trust add PEM_FILE');
        const a = s.anchors.add(tenant, fs.readFileSync(file, 'utf8'), 'cli');
        ctx.audit.write(tenant, { event: 'verifier-trust-add', user: 'cli', extra: { sha256: a.sha256 } });
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
        ctx.audit.write(tenant, { event: 'verifier-trust-remove', user: 'cli', extra: { sha256: sha } });
        ctx.out(`removed ${sha}`);
        return 0;
      }
      default:
        throw new UsageError(`usage:\n  ${USAGE.join('\n  ')}`);
    }
  },
};

async function profile(sub: string | undefined, rest: string[], ctx: CliContext, s: VerifierServices): Promise<number> {
  const { values, positionals } = parse(
    rest,
    {
      tenant: { type: 'string' },
      json: { type: 'boolean' },
      type: { type: 'string' },
      ssid: { type: 'string' },
      'eap-method': { type: 'string' },
      'identity-template': { type: 'string' },
      'ttl-minutes': { type: 'string' },
    },
    1,
  );
  const tenant = tenantOf(ctx, str(values.tenant));
  switch (sub) {
    case 'add': {
      const name = positionals[0];
      const type = str(values.type);
      if (!name || !type) throw new UsageError(USAGE[3]!);
      const ttl = str(values['ttl-minutes']);
      if (ttl !== undefined && !/^\d+$/.test(ttl)) throw new UsageError('--ttl-minutes: a whole number');
      const p = s.network.add(tenant, {
        name,
        type,
        ssid: str(values.ssid),
        eapMethod: str(values['eap-method']),
        identityTemplate: str(values['identity-template']),
        ttlMinutes: ttl === undefined ? undefined : Number(ttl),
      });
      ctx.audit.write(tenant, { event: 'verifier-profile-add', user: 'cli', extra: { name: p.name, type: p.network_type } });
      ctx.out(`added ${p.name} (${p.network_type})`);
      return 0;
    }
    case 'list': {
      const items = s.network.list(tenant);
      if (values.json) ctx.out(JSON.stringify(items, null, 2));
      else
        for (const line of table(items as unknown as Record<string, unknown>[], [
          'name',
          'network_type',
          'ssid',
          'eap_method',
          'ttl_minutes',
          'identity_template',
        ]))
          ctx.out(line);
      return 0;
    }
    case 'remove': {
      const name = positionals[0];
      if (!name) throw new UsageError(USAGE[5]!);
      s.network.remove(tenant, name);
      ctx.audit.write(tenant, { event: 'verifier-profile-remove', user: 'cli', extra: { name } });
      ctx.out(`removed ${name}`);
      return 0;
    }
    default:
      throw new UsageError(`usage:\n  ${USAGE.join('\n  ')}`);
  }
}
