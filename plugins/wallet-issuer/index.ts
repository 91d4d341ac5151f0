import { bearerToken, definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { OIDC } from '../oidc/api.ts';
import { CREDENTIAL_VERIFIER, WALLET_ISSUER } from './api.ts';
import { issuerCli } from './cli.ts';
import { issuerRoutes } from './routes.ts';
import { issuerConfig, PRE_AUTH_GRANT } from './schemas.ts';
import { IssuerService } from './service.ts';

export interface IssuerServices {
  service: IssuerService;
  timer?: NodeJS.Timeout;
}

const STATUS_PATH = /[?&]status-list=(\d{1,7})(?:&|$)/;

/**
 * The EU wallet issuer (OpenID4VCI 1.0 and the seed's shapes): PID-shaped SD-JWT VC and mdoc
 * credentials from offers (QR code), the pre-authorized and authorization code flows, issuer
 * keys and an IACA per tenant (software or HSM), and a Token Status List for revocation.
 */
export default definePlugin({
  name: 'wallet-issuer',
  description: 'EU wallet issuer: OpenID4VCI offers, tokens and credentials (SD-JWT VC, mdoc), IACA, status list',
  dependsOn: ['oidc', 'audit'],
  migrations: sqlMigrations(import.meta.url),
  config: issuerConfig,
  cli: { issuer: issuerCli },
  setup(ctx): IssuerServices {
    const oidc = ctx.use(OIDC);
    const service = new IssuerService({
      db: ctx.db,
      keys: ctx.keys,
      clock: ctx.clock,
      config: ctx.config,
      log: ctx.log,
      paths: ctx.paths,
      audit: ctx.audit,
      users: ctx.users,
      oidc,
    });
    // The OpenID4VCI pre-authorized grant at the OIDC token endpoint too (one grant, two
    // addresses); a wallet may use it without a client (OpenID4VCI 1.0 §6.1).
    oidc.registerGrant({
      type: PRE_AUTH_GRANT,
      parameters: ['pre-authorized_code', 'tx_code'],
      clientAuth: 'optional',
      handler: (g) => service.preAuthorizedGrant(g.tenant, g.form),
    });
    ctx.auth.registerVerifier(CREDENTIAL_VERIFIER, async ({ headers, tenant }) => {
      const token = bearerToken(headers.authorization);
      if (!token || !service.accessToken(tenant, token)) return null;
      return { kind: 'credential', tenantId: tenant.id, subject: token, scopes: [], superAdmin: false };
    });
    ctx.provide(WALLET_ISSUER, {
      iaca: (t) => service.iaca(t),
      jwks: (t) => service.jwks(t),
      statusListToken: (t, origin, listId) => service.statusList(t, origin, listId),
      credentialStatus: (t, ref) => {
        const m = STATUS_PATH.exec(ref.uri);
        if (!m || !/\/vci\.ashx\?/.test(ref.uri) || !Number.isInteger(ref.idx) || ref.idx < 0) return undefined;
        return service.status(t, Number(m[1]), ref.idx);
      },
    });
    return { service };
  },
  metrics(_s, ctx) {
    const c = ctx.db
      .prepare(
        'SELECT (SELECT COUNT(*) FROM wi_credential) AS issued, (SELECT COUNT(*) FROM wi_credential WHERE revoked_at IS NOT NULL) AS revoked, (SELECT COUNT(*) FROM wi_offer) AS offers',
      )
      .get() as { issued: number; revoked: number; offers: number };
    return [
      { name: 'issuer_credentials_issued_total', help: 'Credentials the wallet issuer issued (as stored)', type: 'counter', samples: [{ value: c.issued }] },
      { name: 'issuer_credentials_revoked', help: 'Issued credentials now revoked', type: 'gauge', samples: [{ value: c.revoked }] },
      { name: 'issuer_offers', help: 'Credential offers kept (open and redeemed)', type: 'gauge', samples: [{ value: c.offers }] },
    ];
  },
  routes(r, s, ctx) {
    issuerRoutes(r, s.service, ctx.audit, ctx.config, ctx.use(OIDC));
  },
  start(s, ctx) {
    s.timer = setInterval(() => {
      try {
        s.service.prune();
      } catch (e) {
        ctx.log.warn({ err: (e as Error).message }, 'wallet issuer prune failed');
      }
    }, 60_000);
    s.timer.unref();
  },
  stop(s) {
    if (s.timer) clearInterval(s.timer);
    s.service.close();
  },
  health: () => ({ status: 'ok' }),
});
