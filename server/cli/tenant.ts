import { parse, str, table, UsageError } from '../cli-args.ts';
import type { CoreCommand } from './command.ts';

export const tenantCommand: CoreCommand = {
  opens: 'store',
  summary: 'Tenants and the host names they answer on',
  usage: ['tenant add HOST [--name N]', 'tenant list [--json]', 'tenant remove HOST', 'tenant set-primary HOST', 'tenant add-host HOST --tenant HOST'],
  changes: ['add', 'add-host', 'remove', 'set-primary'],
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
        const list = t.list().map((x) => ({ id: x.id, host: x.host, name: x.name, primary: x.isPrimary, hosts: x.hosts }));
        if (values.json) ctx.out(JSON.stringify(list, null, 2));
        else
          for (const l of table(
            list.map((x) => ({ ...x, primary: x.primary ? 'yes' : '', hosts: x.hosts.join(',') })),
            ['host', 'name', 'id', 'primary', 'hosts'],
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
      default:
        throw new UsageError(sub ? `tenant: unknown subcommand ${sub}` : 'tenant: subcommand required (add, list, remove, set-primary)');
    }
  },
};
