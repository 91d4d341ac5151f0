import { type CliCommand, type CliContext, parse, UsageError } from '../../server/sdk.ts';
import { ClientRepo, clientInput, clientView } from './clients.ts';

function repo(ctx: CliContext): ClientRepo {
  return new ClientRepo(ctx.db);
}

/** `sovcomms client ...`: OIDC clients from the command line (same validation as the admin surface). */
export const clientCli: CliCommand = {
  summary: 'OIDC clients of a tenant',
  usage: [
    'client add CLIENT_ID [--tenant HOST] [--redirect-uri U]... [--grant G]... [--public] [--name N]',
    'client list [--tenant HOST] [--json]',
    'client remove CLIENT_ID [--tenant HOST]',
    'client secret CLIENT_ID [--tenant HOST]',
  ],
  async run(args, ctx) {
    const [sub, ...rest] = args;
    switch (sub) {
      case 'add': {
        const { values, positionals } = parse(rest, {
          tenant: { type: 'string' }, 'redirect-uri': { type: 'string', multiple: true }, grant: { type: 'string', multiple: true },
          public: { type: 'boolean' }, name: { type: 'string' },
        }, 1);
        const id = positionals[0];
        if (!id) throw new UsageError('client add needs CLIENT_ID');
        const tenant = ctx.tenants.require(values.tenant as string | undefined);
        const v = values as Record<string, unknown>;
        const grants = (v.grant as string[] | undefined) ?? (values.public ? ['authorization_code', 'refresh_token'] : ['authorization_code', 'refresh_token', 'client_credentials']);
        const parsed = clientInput.safeParse({
          client_id: id, client_name: v.name, redirect_uris: v['redirect-uri'] ?? [], grant_types: grants,
          token_endpoint_auth_method: values.public ? 'none' : 'client_secret_basic',
        });
        if (!parsed.success) throw new UsageError(`${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
        const r = repo(ctx);
        if (r.get(tenant, id)) throw new UsageError(`client ${id} already exists on ${tenant.host} (use the admin surface to change it)`);
        const { secret } = r.upsert(tenant, parsed.data);
        ctx.out(`client ${id} added to ${tenant.host}`);
        if (secret) ctx.out(`client_secret: ${secret}   (shown once; store it now)`);
        return 0;
      }
      case 'list': {
        const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
        const tenant = ctx.tenants.require(values.tenant as string | undefined);
        const list = repo(ctx).list(tenant);
        if (values.json) ctx.out(JSON.stringify(list.map(clientView), null, 2));
        else for (const c of list) ctx.out(`${c.clientId}\t${c.authMethod}\t${c.grantTypes.join(',')}\t${c.redirectUris.join(' ')}`);
        return 0;
      }
      case 'remove': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 1);
        if (!positionals[0]) throw new UsageError('client remove needs CLIENT_ID');
        repo(ctx).remove(ctx.tenants.require(values.tenant as string | undefined), positionals[0]);
        ctx.out(`client ${positionals[0]} removed`);
        return 0;
      }
      case 'secret': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 1);
        if (!positionals[0]) throw new UsageError('client secret needs CLIENT_ID');
        const secret = repo(ctx).newSecret(ctx.tenants.require(values.tenant as string | undefined), positionals[0]);
        ctx.out(`client_secret: ${secret}   (shown once; the previous secret no longer works)`);
        return 0;
      }
      default:
        throw new UsageError(`unknown subcommand: client ${sub ?? ''} (add, list, remove, secret)`);
    }
  },
};
