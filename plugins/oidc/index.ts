import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { builtInClient, ClientRepo } from './clients.ts';
import { SigningKeys } from './keys.ts';
import { OIDC } from './api.ts';
import { OidcProvider } from './provider.ts';
import { adminRoutes, protocolRoutes } from './routes.ts';
import { oidcConfig, type OidcServices } from './schemas.ts';
import { TenantSettings } from './settings.ts';
import { clientCli } from './cli.ts';
import { tokenPreRouter } from './token-prerouter.ts';
import { Sessions } from './sessions.ts';
import { authorizeRoutes } from './authorize.ts';
import { defineMailJob, interactRoutes } from './interact.ts';

/**
 * The OpenID Provider of every tenant (issue 3): discovery, JWKS, federation entity statement,
 * authorize, token, userinfo, revoke, introspect, end session, the sign-in pages, client
 * management, and the core's bearer hook.
 */
export default definePlugin({
  name: 'oidc',
  description: 'OpenID Connect provider, sign-in pages and OIDC client management',
  dependsOn: ['audit'],
  migrations: sqlMigrations(import.meta.url),
  config: oidcConfig,
  cli: { client: clientCli },
  setup(ctx): OidcServices {
    const keys = new SigningKeys(ctx.db, ctx.keys, ctx.clock);
    const provider = new OidcProvider(ctx.db, keys, new ClientRepo(ctx.db), ctx.users, ctx.tenants, ctx.audit, ctx.clock, ctx.rateLimit, ctx.config);
    const settings = new TenantSettings(ctx.db, ctx.config);
    const sessions = new Sessions(ctx.db, ctx.keys.subkey('oidc-csrf'), ctx.clock, ctx.config.sessionTtl);
    // Provided at setup so dependants can plug grants in before the first request.
    ctx.provide(OIDC, {
      registerGrant: (type, handler, opts) => provider.registerGrant(type, handler, opts),
      registerLoginOption: (o) => provider.registerLoginOption(o),
      signInBrowser: (...a) => provider.signInBrowser(...a),
      issuer: (origin) => origin.replace(/\/+$/, ''),
      builtInClient: (tenant, c) => builtInClient(provider, tenant, c),
      provider,
    });
    ctx.auth.setBearerVerifier((token, tenant) => provider.principal(token, tenant));
    return { provider, settings, sessions };
  },
  routes(r, s, ctx) {
    const p = () => s.provider;
    const settings = () => s.settings;
    protocolRoutes(r, ctx, p, settings);
    r.preRouter(tokenPreRouter(ctx, s.provider));
    const deps = { ctx, p, sessions: () => s.sessions, settings };
    interactRoutes(r, deps, authorizeRoutes(r, deps));
    adminRoutes(r, ctx, p, settings);
  },
  start(_s, ctx) {
    defineMailJob(ctx);
  },
  health: (s) => ({ status: 'ok', detail: { grants: s.provider.grantTypes() } }),
});
