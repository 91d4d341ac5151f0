import type { PluginContext } from '../../server/sdk.ts';
import type { OidcService } from './api.ts';
import { ClientRepo } from './clients.ts';
import { AuthorizeFlow } from './flow.ts';
import { issuerOfOrigin as issuer } from './issuer.ts';
import { SigningKeys } from './keys.ts';
import { OneTimeLinks } from './one-time-links.ts';
import { pageLang } from './page-text.ts';
import { OidcProvider } from './provider.ts';
import { relyingParty } from './relying-party.ts';
import type { OidcConfig } from './schemas.ts';
import { Sessions } from './sessions.ts';
import { TenantSettings } from './settings.ts';
import { SignIn } from './signin.ts';

/** What setup builds, once; the routes, the token pre-router and `sovcomms client` share it. */
export interface OidcServices {
  provider: OidcProvider;
  settings: TenantSettings;
  signIn: SignIn;
  flow: AuthorizeFlow;
  links: OneTimeLinks;
  /** The narrow door other plugins get (`ctx.use(OIDC)`). */
  service: OidcService;
}

export function oidcServices(ctx: PluginContext<OidcConfig>): OidcServices {
  const keys = new SigningKeys(ctx.db, ctx.keys, ctx.clock);
  const provider = new OidcProvider(ctx.db, keys, new ClientRepo(ctx.db, ctx.clock), ctx.users, ctx.tenants, ctx.audit, ctx.clock, ctx.rateLimit, ctx.config);
  const settings = new TenantSettings(ctx.db, ctx.config);
  const sessions = new Sessions(ctx.db, ctx.keys.subkey('oidc-csrf'), ctx.clock, ctx.config.sessionTtl);
  const signIn = new SignIn(provider, sessions, ctx.keys, ctx.config.sessionTtl);
  const service: OidcService = {
    registerGrant: (g) => provider.registerGrant(g),
    registerLoginOption: (o) => signIn.registerLoginOption(o),
    pageLang: (req) => pageLang(req),
    signInBrowser: (...a) => signIn.signIn(...a),
    issuer,
    activeUser: (tenant, id) => provider.activeUser(tenant, id),
    relyingParty: (c) => relyingParty(provider, issuer, c),
    isClient: (tenant, clientId) => provider.clients.get(tenant, clientId) !== undefined,
  };
  return {
    provider,
    settings,
    signIn,
    flow: new AuthorizeFlow(provider, settings, signIn),
    links: new OneTimeLinks(ctx, provider),
    service,
  };
}
