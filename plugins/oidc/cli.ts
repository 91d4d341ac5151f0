import fs from 'node:fs';
import { type CliCommand, parse, str, UsageError, zodMessage } from '../../server/sdk.ts';
import { AUTH_METHODS, clientInputSchema, clientView } from './clients.ts';
import type { OidcServices } from './services.ts';

/** `sovcomms client ...`: OIDC clients from the command line (same validation as the admin surface). */
export const clientCli: CliCommand<OidcServices> = {
  summary: 'OIDC clients of a tenant',
  usage: [
    `client add CLIENT_ID [--tenant HOST] [--redirect-uri U]... [--grant G]... [--auth-method ${AUTH_METHODS.filter((m) => m !== 'none').join('|')}|none] [--jwks-file F] [--public] [--name N]`,
    'client list [--tenant HOST] [--json]',
    'client remove CLIENT_ID [--tenant HOST]',
    'client secret CLIENT_ID [--tenant HOST]',
  ],
  changes: ['add', 'remove', 'secret'],
  audited: ['tenant', 'name', 'grant', 'auth-method'],
  async run(args, ctx, { provider }) {
    const [sub, ...rest] = args;
    const repo = () => provider.clients;
    switch (sub) {
      case 'add': {
        const { values, positionals } = parse(
          rest,
          {
            tenant: { type: 'string' },
            'redirect-uri': { type: 'string', multiple: true },
            grant: { type: 'string', multiple: true },
            public: { type: 'boolean' },
            name: { type: 'string' },
            'auth-method': { type: 'string' },
            'jwks-file': { type: 'string' },
          },
          1,
        );
        const id = positionals[0];
        if (!id) throw new UsageError('client add needs CLIENT_ID');
        const tenant = ctx.tenants.require(values.tenant as string | undefined);
        const v = values as Record<string, unknown>;
        // RFC 7591 §2 token_endpoint_auth_method; --public is shorthand for `none`.
        const method = str(values['auth-method']) ?? (values.public ? 'none' : 'client_secret_basic');
        if (!(AUTH_METHODS as readonly string[]).includes(method)) throw new UsageError(`--auth-method: one of ${AUTH_METHODS.join(', ')}, got ${method}`);
        if (values.public && method !== 'none') throw new UsageError('--public and --auth-method other than none exclude each other');
        let jwks: unknown;
        const jwksFile = str(values['jwks-file']);
        if (jwksFile) {
          try {
            jwks = JSON.parse(fs.readFileSync(jwksFile, 'utf8'));
          } catch (e) {
            throw new UsageError(`--jwks-file: cannot read a JSON key set from ${jwksFile} (${(e as Error).message})`);
          }
        }
        const isPublic = method === 'none';
        const grants =
          (v.grant as string[] | undefined) ??
          (isPublic ? ['authorization_code', 'refresh_token'] : ['authorization_code', 'refresh_token', 'client_credentials']);
        const parsed = clientInputSchema(provider.clientGrantTypes()).safeParse({
          client_id: id,
          client_name: v.name,
          redirect_uris: v['redirect-uri'] ?? [],
          grant_types: grants,
          token_endpoint_auth_method: method,
          ...(jwks === undefined ? {} : { jwks }),
        });
        if (!parsed.success) throw new UsageError(zodMessage(parsed.error));
        const r = repo();
        if (r.get(tenant, id)) throw new UsageError(`client ${id} already exists on ${tenant.host} (use the admin surface to change it)`);
        const { secret } = r.upsert(tenant, parsed.data);
        ctx.out(`client ${id} added to ${tenant.host}`);
        if (secret) ctx.out(`client_secret: ${secret}   (shown once; store it now)`);
        return 0;
      }
      case 'list': {
        const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
        const tenant = ctx.tenants.require(values.tenant as string | undefined);
        const list = repo().list(tenant);
        if (values.json) ctx.out(JSON.stringify(list.map(clientView), null, 2));
        else for (const c of list) ctx.out(`${c.clientId}\t${c.authMethod}\t${c.grantTypes.join(',')}\t${c.redirectUris.join(' ')}`);
        return 0;
      }
      case 'remove': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 1);
        if (!positionals[0]) throw new UsageError('client remove needs CLIENT_ID');
        repo().remove(ctx.tenants.require(values.tenant as string | undefined), positionals[0]);
        ctx.out(`client ${positionals[0]} removed`);
        return 0;
      }
      case 'secret': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 1);
        if (!positionals[0]) throw new UsageError('client secret needs CLIENT_ID');
        const secret = repo().newSecret(ctx.tenants.require(values.tenant as string | undefined), positionals[0]);
        ctx.out(`client_secret: ${secret}   (shown once; the previous secret no longer works)`);
        return 0;
      }
      default:
        throw new UsageError(`unknown subcommand: client ${sub ?? ''} (add, list, remove, secret)`);
    }
  },
};
