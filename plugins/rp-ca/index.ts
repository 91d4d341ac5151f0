import { z } from 'zod';
import { definePlugin, type PluginHealth, sqlMigrations, TLS_AUTO } from '../../server/sdk.ts';
import { caCommand } from './cli.ts';
import { rpCaRoutes } from './routes.ts';
import { rpCaConfig } from './schemas.ts';
import { lazyCaService, TlsAutoService } from './lazy.ts';
import { CaRepo } from './repo.ts';
import { RP_CA } from './api.ts';
import { OIDC } from '../oidc/api.ts';

const RENEW_QUEUE = 'rp-ca.tls-renew';

export interface RpCaServices {
  /** The CA service, loaded on first use (see lazy.ts). */
  ca: ReturnType<typeof lazyCaService>;
  tlsAuto: TlsAutoService;
  health: PluginHealth;
}

/**
 * The relying-party certificate authority: one CA per tenant (key in software or in a PKCS#11
 * HSM), `/rp-cert.ashx?ca|issue|list|revoke|crl|cps`, the `sovcomms ca` commands, and the
 * appliance's own HTTPS certificate for `serve --tls auto` (service TLS_AUTO).
 */
export default definePlugin({
  name: 'rp-ca',
  description: 'Relying-party certificate authority (software or PKCS#11 key), CRL, and the appliance HTTPS certificate',
  migrations: sqlMigrations(import.meta.url),
  config: rpCaConfig,
  cli: { ca: caCommand },
  setup(ctx): RpCaServices {
    const tlsAuto = new TlsAutoService();
    ctx.provide(TLS_AUTO, tlsAuto);
    const ca = lazyCaService({ db: ctx.db, keys: ctx.keys, clock: ctx.clock, log: ctx.log, config: ctx.config });
    // Another listener (SIP over TLS) may want the certificate without HTTPS on "auto".
    tlsAuto.make = async () => {
      const { TlsAuto } = await import('./tls.ts');
      return new TlsAuto(new CaRepo(ctx.db), ca.get, ctx.tenants, ctx.keys, ctx.clock, ctx.log, ctx.config.tls);
    };
    ctx.provide(RP_CA, {
      async issueFor(tenant, r) {
        const {
          der,
          ca: loaded,
          row,
        } = await (
          await ca.get()
        ).issueLeaf(tenant, {
          purpose: 'rp',
          clientId: `x509_san_dns:${r.host}`,
          subjectCn: r.host,
          dnsNames: [r.host],
          ipAddresses: [],
          spki: r.spki,
          keySource: 'public_key',
          days: r.days,
          issuedBy: r.issuedBy,
        });
        return { chainDer: [der, loaded.der], serial: row.serial, notBefore: row.not_before, notAfter: row.not_after };
      },
      caDer: async (tenant) => (await (await ca.get()).ca(tenant)).der,
    });
    return { ca, tlsAuto, health: { status: 'ok' } };
  },
  routes(r, s, ctx) {
    rpCaRoutes(r, s.ca.get, ctx.audit, ctx.config, (tenant, names) => {
      const oidc = ctx.tryUse(OIDC);
      return oidc && names.some((n) => oidc.isClient(tenant, n));
    });
  },
  async start(s, ctx) {
    // Without HTTPS on "auto" the certificate exists once a listener requires it (SIP over TLS),
    // which then asks again (`require`) to have it renewed.
    if (ctx.core.http.tls !== 'auto') return;
    const t = (s.tlsAuto.impl ??= await s.tlsAuto.make!());
    // The listener needs a certificate before it opens: issue (or load) it now.
    await t.ensure();
    const everyMs = ctx.config.tls.checkIntervalMinutes * 60_000;
    const scheduleNext = () => {
      const at = ctx.clock.now() + everyMs;
      // One pending check per slot: restarts and several nodes do not pile checks up.
      ctx.jobs.enqueue(RENEW_QUEUE, {}, { runAt: at, dedupeKey: `check:${Math.floor(at / everyMs)}`, maxAttempts: 3 });
    };
    ctx.jobs.define({
      name: RENEW_QUEUE,
      schema: z.object({}),
      concurrency: 1,
      run: async () => {
        try {
          await t.ensure();
          s.health = { status: 'ok' };
        } catch (e) {
          s.health = { status: 'degraded', reason: `HTTPS certificate renewal failed: ${(e as Error).message}` };
          throw e;
        } finally {
          scheduleNext();
        }
      },
    });
    scheduleNext();
  },
  stop(s) {
    s.ca.loaded()?.close();
  },
  health: (s) => s.health,
});
