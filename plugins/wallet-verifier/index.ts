import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { LOTL } from '../lotl/api.ts';
import { RP_CA } from '../rp-ca/api.ts';
import { OUTBOUND } from '../webhooks/api.ts';
import { AnchorStore } from './anchors.ts';
import { verifierCli } from './cli.ts';
import { IdentityStore } from './identity.ts';
import { NetworkProfiles } from './network.ts';
import { SsoAssertions } from './sso.ts';
import { OIDC, type OidcService } from '../oidc/api.ts';
import { Presets } from './presets.ts';
import { verifierRoutes, walletLoginBlock } from './routes.ts';
import { presentationVerified, verifierConfig } from './schemas.ts';
import { VerifierService } from './service.ts';
import { StatusLists } from './status-list.ts';

export interface VerifierServices {
  service: VerifierService;
  anchors: AnchorStore;
  identity: IdentityStore;
  network: NetworkProfiles;
  oidc: OidcService;
  timer?: NodeJS.Timeout;
}

/**
 * The EU wallet verifier (OpenID4VP 1.0, HAIP): per-tenant verifier identity from the RP CA,
 * DCQL presets, signed request objects, encrypted responses, SD-JWT VC verification against the
 * tenant's and the LOTL's issuer anchors.
 */
export default definePlugin({
  name: 'wallet-verifier',
  description: 'EU Digital Identity Wallet verifier (OpenID4VP 1.0 / HAIP)',
  dependsOn: ['audit', 'rp-ca', 'lotl', 'oidc'],
  migrations: sqlMigrations(import.meta.url),
  config: verifierConfig,
  cli: { verifier: verifierCli },
  events: { 'presentation.verified': presentationVerified },
  setup(ctx): VerifierServices {
    const identity = new IdentityStore(ctx.db, ctx.keys, ctx.use(RP_CA), ctx.clock, ctx.log, ctx.config);
    const anchors = new AnchorStore(ctx.db, ctx.clock, ctx.tryUse(LOTL));
    const network = new NetworkProfiles(ctx.db, ctx.keys, ctx.clock);
    const sso = new SsoAssertions(ctx.db, ctx.keys, ctx.users, ctx.clock, ctx.config.signIn);
    // Provided at setup by oidc so grants exist before the token form is composed from them.
    const oidc = ctx.use(OIDC);
    oidc.registerGrant(sso.grant());
    // The login page's "Sign in with your EU wallet" block (the oidc plugin renders registered options).
    oidc.registerLoginOption({ id: 'eu-wallet', html: ({ i, lang }) => walletLoginBlock(i, lang) });
    const service = new VerifierService({
      db: ctx.db,
      keys: ctx.keys,
      clock: ctx.clock,
      audit: ctx.audit,
      events: ctx.events,
      identity,
      anchors,
      presets: new Presets(),
      statusLists: new StatusLists(ctx.db, ctx.clock, ctx.config.statusList, () => ctx.tryUse(OUTBOUND)),
      network,
      sso,
      users: ctx.users,
      config: ctx.config,
    });
    sso.onRedeemed = (tenant, sessionId, who) => service.markCompleted(tenant, sessionId, who, 'sso-assertion');
    return { service, anchors, identity, network, oidc };
  },
  metrics(_s, ctx) {
    const rows = ctx.db.prepare('SELECT status, COUNT(*) AS n FROM vp_session GROUP BY status').all() as { status: string; n: number }[];
    return [
      {
        name: 'verifier_sessions',
        help: 'Wallet presentation sessions kept, by status (pending, requested, verified, error)',
        type: 'gauge',
        labelNames: ['status'],
        samples: ['pending', 'requested', 'verified', 'error'].map((status) => ({ labels: { status }, value: rows.find((r) => r.status === status)?.n ?? 0 })),
      },
    ];
  },
  routes(r, s, ctx) {
    verifierRoutes(r, s.service, s.anchors, s.network, ctx, s.oidc);
  },
  start(s, ctx) {
    s.timer = setInterval(() => {
      try {
        s.service.prune();
      } catch (e) {
        ctx.log.warn({ err: e }, 'verifier session prune failed');
      }
    }, 3600_000);
    s.timer.unref();
  },
  stop(s) {
    if (s.timer) clearInterval(s.timer);
  },
});
