import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { ClientRepo } from './clients.ts';
import { SigningKeys } from './keys.ts';
import { OidcProvider, type OidcService } from './provider.ts';
import { adminRoutes, protocolRoutes } from './routes.ts';
import { oidcConfig } from './schemas.ts';
import { TenantSettings } from './settings.ts';
import { clientCli } from './cli.ts';
import { tokenFastPath } from './fast.ts';
import { Sessions } from './sessions.ts';
import { authorizeRoutes } from './authorize.ts';
import { interactRoutes } from './interact.ts';

/**
 * The OpenID Provider of every tenant (issue 3): discovery, JWKS, federation entity statement,
 * authorize, token, userinfo, revoke, introspect, end session, the sign-in pages, client
 * management, and the core's bearer hook.
 */
export default definePlugin(() => {
  let provider: OidcProvider | undefined;
  let settings: TenantSettings | undefined;
  return {
    name: 'oidc',
    description: 'OpenID Connect provider, sign-in pages and OIDC client management',
    dependsOn: ['audit'],
    migrations: sqlMigrations(import.meta.url),
    config: oidcConfig,
    cli: { client: clientCli },
    health: () => (provider ? { status: 'ok', detail: { grants: provider.grantTypes() } } : { status: 'degraded', reason: 'routes not registered' }),
    routes(r, ctx) {
      const keys = new SigningKeys(ctx.db, ctx.keys, ctx.clock);
      provider = new OidcProvider(ctx.db, keys, new ClientRepo(ctx.db), ctx.users, ctx.tenants, ctx.audit, ctx.clock, ctx.rateLimit, ctx.config);
      settings = new TenantSettings(ctx.db, ctx.config);
      const p = provider;
      const service: OidcService = {
        registerGrant: (type, handler, opts) => p.registerGrant(type, handler, opts),
        issuer: (origin) => origin.replace(/\/+$/, ''),
        provider: p,
      };
      // Provided at route time so dependants can plug grants in before the first request.
      ctx.provide('oidc', service);
      ctx.auth.setBearerVerifier((token, tenant) => p.principal(token, tenant));
      const sessions = new Sessions(ctx.db, ctx.keys.subkey('oidc-csrf'), ctx.clock, ctx.config.sessionTtl);
      protocolRoutes(r, ctx, () => p, () => settings!);
      r.fast?.(tokenFastPath(ctx, () => p));
      const deps = { ctx, p: () => p, sessions: () => sessions, settings: () => settings! };
      interactRoutes(r, deps, authorizeRoutes(r, deps));
      adminRoutes(r, ctx, () => p, () => settings!);
    },
  };
});
