import { AUDIT_WRITER, definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { AuditRepo } from './repo.ts';
import { AuditService } from './service.ts';
import { auditRoutes } from './routes.ts';
import { auditConfig } from './schemas.ts';

/**
 * The audit log: the service every plugin writes identity and authentication events to
 * (`ctx.audit`), and `GET /api.ashx/v1/auditlog`. The first plugin in the plugin shape.
 */
export default definePlugin({
  name: 'audit',
  description: 'Audit log of identity and authentication events',
  migrations: sqlMigrations(import.meta.url),
  config: auditConfig,
  setup(ctx) {
    const repo = new AuditRepo(ctx.db);
    const service = new AuditService(repo, ctx.clock, ctx.users);
    // The core's ctx.audit writes here from the moment setup ends, for every plugin after it.
    ctx.provide(AUDIT_WRITER, service);
    return { repo, service, pruneTimer: undefined as NodeJS.Timeout | undefined };
  },
  routes(r, s) {
    auditRoutes(r, s.service);
  },
  start(s, ctx) {
    if (ctx.config.retentionDays === 0) return;
    const prune = () => {
      const cutoff = new Date(ctx.clock.now() - ctx.config.retentionDays * 86_400_000).toISOString();
      const n = s.repo.prune(cutoff);
      if (n) ctx.log.info({ deleted: n }, 'audit entries past retention deleted');
    };
    s.pruneTimer = setInterval(prune, 6 * 3600_000);
    s.pruneTimer.unref();
  },
  stop(s) {
    if (s.pruneTimer) clearInterval(s.pruneTimer);
  },
});
