import { parse, str, table, UsageError } from '../cli-args.ts';
import { AppError } from '../errors.ts';
import type { CoreCommand } from './command.ts';

export const apikeyCommand: CoreCommand = {
  opens: 'store',
  summary: 'API keys of the v1 API',
  usage: ['apikey create --user NAME [--tenant HOST] [--name LABEL]', 'apikey list [--tenant HOST] [--json]', 'apikey revoke ID'],
  changes: ['create', 'revoke'],
  audited: ['tenant', 'user', 'name'],
  async run(args, ctx) {
    const [sub, ...rest] = args;
    switch (sub) {
      case 'create': {
        const { values } = parse(rest, { user: { type: 'string' }, tenant: { type: 'string' }, name: { type: 'string' } }, 0);
        if (!values.user) throw new UsageError('apikey create: --user NAME is required');
        const tenant = ctx.tenants.require(str(values.tenant));
        const user = ctx.users.byName(tenant, String(values.user));
        if (!user) throw new AppError(404, 'not_found', `--user: no user ${values.user} in ${tenant.host}`);
        const { key, info } = ctx.auth.createApiKey(tenant, user, { name: str(values.name), createdBy: 'cli' });
        ctx.out(key);
        ctx.err(`API key ${info.id} for ${user.name} (${user.role}) created; the key above is shown once.`);
        return 0;
      }
      case 'list': {
        const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
        const tenant = ctx.tenants.require(str(values.tenant));
        const list = ctx.auth.listApiKeys(tenant).map((k) => ({
          id: k.id,
          user: k.userName,
          name: k.name,
          prefix: k.prefix,
          createdAt: k.createdAt,
          lastUsedAt: k.lastUsedAt,
          revokedAt: k.revokedAt,
        }));
        if (values.json) ctx.out(JSON.stringify(list, null, 2));
        else
          for (const l of table(
            list.map((k) => ({ ...k, status: k.revokedAt ? 'revoked' : 'active' })),
            ['id', 'user', 'name', 'prefix', 'status', 'lastUsedAt'],
          ))
            ctx.out(l);
        return 0;
      }
      case 'revoke': {
        const { positionals } = parse(rest, {}, 1);
        if (!positionals[0]) throw new UsageError('apikey revoke: ID is required');
        const k = ctx.auth.revokeApiKey(null, positionals[0]);
        ctx.out(`API key ${k.id} revoked`);
        return 0;
      }
      default:
        throw new UsageError(sub ? `apikey: unknown subcommand ${sub}` : 'apikey: subcommand required (create, list, revoke)');
    }
  },
};
