import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { OIDC } from './api.ts';
import { authorizeRoutes } from './authorize.ts';
import { clientCli } from './cli.ts';
import { interactRoutes } from './interact.ts';
import { defineMailJob } from './one-time-links.ts';
import { adminRoutes, protocolRoutes } from './routes.ts';
import { oidcConfig } from './schemas.ts';
import { oidcServices, type OidcServices } from './services.ts';
import { tokenPreRouter } from './token-prerouter.ts';

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
    const s = oidcServices(ctx);
    // Provided at setup so dependants can plug grants and sign-in options in before the routes
    // compose the token form from them.
    ctx.provide(OIDC, s.service);
    ctx.auth.setBearerVerifier((token, tenant) => s.provider.principal(token, tenant));
    return s;
  },
  metrics(s) {
    return [
      {
        name: 'oidc_tokens_issued_total',
        help: 'Token endpoint answers that issued tokens, by grant type, since this process started',
        type: 'counter',
        labelNames: ['grant_type'],
        samples: [...s.provider.issued].map(([grant, n]) => ({ labels: { grant_type: grant }, value: n })),
      },
    ];
  },
  routes(r, s, ctx) {
    protocolRoutes(r, ctx, s);
    r.preRouter(tokenPreRouter(ctx, s.provider));
    authorizeRoutes(r, ctx, s);
    interactRoutes(r, ctx, s);
    adminRoutes(r, ctx, s);
  },
  start(_s, ctx) {
    defineMailJob(ctx);
  },
  // The signing thread, if load started one (keys.ts, sign-thread.ts).
  stop: (s) => s.provider.keys.close(),
  health: (s) => ({ status: 'ok', detail: { grants: s.provider.grantTypes() } }),
});
