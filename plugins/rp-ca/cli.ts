import fs from 'node:fs';
import { type CliCommand, type CliContext, parse, str, UsageError } from '../../server/sdk.ts';
import type { CaStatus } from './service.ts';
import type { RpCaServices } from './index.ts';

const USAGE = [
  'ca init [--tenant HOST] [--hsm-module PATH --token-label L (--pin PIN | --pin-stdin) [--key-label K]] [--force]',
  'ca status [--tenant HOST] [--json]',
];

function printStatus(ctx: CliContext, s: CaStatus): void {
  ctx.out(`tenant:       ${s.tenant}`);
  ctx.out(`key:          ${s.keyLocation}`);
  ctx.out(`subject:      ${s.subject}`);
  ctx.out(`valid:        ${s.notBefore} .. ${s.notAfter}`);
  ctx.out(`fingerprint:  SHA-256 ${s.fingerprintSha256}`);
  ctx.out(`issued:       ${s.issued} certificate(s), ${s.revoked} revoked; CRL number ${s.crlNumber}`);
}

/** `sovcomms ca ...`: the operator's door to the tenant CA (key in software or in an HSM). */
export const caCommand: CliCommand<RpCaServices> = {
  summary: 'Relying-party certificate authority: create or adopt the CA key, show where it lives',
  usage: USAGE,
  changes: ['init'],
  audited: ['tenant'],
  async run(args, ctx, services) {
    const [sub, ...rest] = args;
    const service = await services.ca.get();
    try {
      switch (sub) {
        case 'init': {
          const { values } = parse(
            rest,
            {
              tenant: { type: 'string' },
              'hsm-module': { type: 'string' },
              'token-label': { type: 'string' },
              pin: { type: 'string' },
              'pin-stdin': { type: 'boolean' },
              'key-label': { type: 'string' },
              force: { type: 'boolean' },
            },
            0,
          );
          const tenant = ctx.tenants.require(str(values.tenant));
          const module = str(values['hsm-module']);
          const hsmFlags = ['token-label', 'pin', 'pin-stdin', 'key-label'].filter((f) => values[f] !== undefined);
          if (!module) {
            if (hsmFlags.length) throw new UsageError(`--${hsmFlags[0]} needs --hsm-module`);
            const r = await service.init(tenant, { force: !!values.force });
            ctx.out(
              r.action === 'unchanged'
                ? `CA of ${tenant.host} already has a software key; nothing changed (--force makes a new one)`
                : `CA of ${tenant.host} ${r.action} with a software key`,
            );
            printStatus(ctx, r.status);
            return 0;
          }
          if (!fs.existsSync(module)) throw new UsageError(`--hsm-module: no such file: ${module}`);
          const tokenLabel = str(values['token-label']);
          if (!tokenLabel) throw new UsageError('--hsm-module needs --token-label');
          if (values.pin !== undefined && values['pin-stdin']) throw new UsageError('--pin and --pin-stdin exclude each other');
          const pin = values['pin-stdin'] ? (await ctx.readStdin()).replace(/\r?\n$/, '') : str(values.pin);
          if (!pin) throw new UsageError('--hsm-module needs --pin or --pin-stdin');
          const keyLabel = str(values['key-label']) ?? `rp-ca-${tenant.host}`;
          const r = await service.init(tenant, { hsm: { module, tokenLabel, pin, keyLabel }, force: !!values.force });
          const what = r.keyCreated ? 'a new key generated in the HSM' : 'the existing HSM key adopted';
          ctx.out(r.action === 'unchanged' ? `CA of ${tenant.host} already uses this HSM key; settings updated` : `CA of ${tenant.host} ${r.action}: ${what}`);
          printStatus(ctx, r.status);
          return 0;
        }
        case 'status': {
          const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
          const tenant = ctx.tenants.require(str(values.tenant));
          const s = service.status(tenant);
          if (!s) {
            if (values.json) ctx.out(JSON.stringify({ tenant: tenant.host, initialised: false }));
            else ctx.out(`no CA yet for ${tenant.host}: one is made in software on first use, or run: sovcomms ca init`);
            return 0;
          }
          const { reachable, problem } = await service.probe(tenant);
          if (values.json) ctx.out(JSON.stringify({ ...s, initialised: true, keyReachable: reachable, problem }, null, 2));
          else {
            printStatus(ctx, s);
            ctx.out(`key reachable: ${reachable ? 'yes' : `NO: ${problem}`}`);
          }
          return reachable ? 0 : 1;
        }
        default:
          throw new UsageError(sub ? `ca: unknown subcommand ${sub}` : 'ca: subcommand required (init, status)');
      }
    } finally {
      service.close();
    }
  },
};
