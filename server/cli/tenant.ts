import { parse, str, table, UsageError } from '../cli-args.ts';
import type { CoreCommand } from './command.ts';

export const tenantCommand: CoreCommand = {
  opens: 'store',
  summary: 'Tenants and the host names they answer on',
  usage: [
    'tenant add HOST [--name N]',
    'tenant list [--json]',
    'tenant remove HOST',
    'tenant set-primary HOST',
    'tenant add-host HOST --tenant HOST',
    'tenant set-origin HOST (URL | --clear)',
    'tenant set-hmac-v1 HOST on|off',
  ],
  changes: ['add', 'add-host', 'remove', 'set-primary', 'set-origin', 'set-hmac-v1'],
  audited: ['tenant', 'name'],
  async run(args, ctx) {
    const [sub, ...rest] = args;
    const t = ctx.tenants;
    switch (sub) {
      case 'add': {
        const { values, positionals } = parse(rest, { name: { type: 'string' } }, 1);
        if (!positionals[0]) throw new UsageError('tenant add: HOST is required');
        const tenant = t.add(positionals[0], str(values.name));
        ctx.out(`tenant ${tenant.host} added (id ${tenant.id}${tenant.isPrimary ? ', primary' : ''})`);
        return 0;
      }
      case 'add-host': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 1);
        if (!positionals[0]) throw new UsageError('tenant add-host: HOST is required');
        const tenant = t.require(str(values.tenant));
        t.addHost(tenant.id, positionals[0]);
        ctx.out(`host ${positionals[0]} now serves tenant ${tenant.host}`);
        return 0;
      }
      case 'list': {
        const { values } = parse(rest, { json: { type: 'boolean' } }, 0);
        const list = t.list().map((x) => ({ id: x.id, host: x.host, name: x.name, primary: x.isPrimary, hosts: x.hosts, origin: x.publicOrigin ?? null }));
        if (values.json) ctx.out(JSON.stringify(list, null, 2));
        else
          for (const l of table(
            list.map((x) => ({ ...x, primary: x.primary ? 'yes' : '', hosts: x.hosts.join(','), origin: x.origin ?? '(default)' })),
            ['host', 'name', 'id', 'primary', 'hosts', 'origin'],
          ))
            ctx.out(l);
        return 0;
      }
      case 'remove': {
        const { positionals } = parse(rest, {}, 1);
        if (!positionals[0]) throw new UsageError('tenant remove: HOST is required');
        const removed = t.remove(positionals[0]);
        ctx.out(`tenant ${removed.host} removed with all its data`);
        return 0;
      }
      case 'set-primary': {
        const { positionals } = parse(rest, {}, 1);
        if (!positionals[0]) throw new UsageError('tenant set-primary: HOST is required');
        ctx.out(`tenant ${t.setPrimary(positionals[0]).host} is now primary`);
        return 0;
      }
      case 'set-origin': {
        const { values, positionals } = parse(rest, { clear: { type: 'boolean' } }, 2);
        if (!positionals[0]) throw new UsageError('tenant set-origin: HOST is required');
        if (!positionals[1] === !values.clear) throw new UsageError('tenant set-origin: give the origin URL (https://name[:port]) or --clear');
        const tenant = t.setOrigin(t.require(positionals[0]).id, values.clear ? null : positionals[1]!);
        ctx.out(
          tenant.publicOrigin
            ? `tenant ${tenant.host} now signs and publishes its URLs under ${tenant.publicOrigin}`
            : `tenant ${tenant.host} uses the default origin (its host name on the listening scheme and port)`,
        );
        return 0;
      }
      case 'set-hmac-v1': {
        const { positionals } = parse(rest, {}, 2);
        const on = positionals[1] === 'on' ? true : positionals[1] === 'off' ? false : undefined;
        if (!positionals[0] || on === undefined) throw new UsageError('tenant set-hmac-v1: HOST and on or off are required');
        const tenant = t.setHmacV1(t.require(positionals[0]).id, on);
        ctx.out(`tenant ${tenant.host} ${on ? 'accepts' : 'refuses'} the admin signature without a body digest (X-Service-Admin-Signature)`);
        return 0;
      }
      default:
        throw new UsageError(
          sub ? `tenant: unknown subcommand ${sub}` : 'tenant: subcommand required (add, add-host, list, remove, set-primary, set-origin, set-hmac-v1)',
        );
    }
  },
};
