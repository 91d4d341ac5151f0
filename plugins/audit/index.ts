import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { AuditRepo } from './repo.ts';
import { AuditService } from './service.ts';
import { auditRoutes } from './routes.ts';
import { auditConfig } from './schemas.ts';

/**
 * The audit log: the service every plugin writes identity and authentication events to
 * (`ctx.audit`), and `GET /api.ashx/v1/auditlog`. The first plugin in the plugin shape.
 */
export default definePlugin(() => {
  let service: AuditService | undefined;
  let pruneTimer: NodeJS.Timeout | undefined;
  return {
    name: 'audit',
    description: 'Audit log of identity and authentication events',
    migrations: sqlMigrations(import.meta.url),
    config: auditConfig,
    routes(r, ctx) {
      service = new AuditService(new AuditRepo(ctx.db), ctx.clock);
      // Provided at route time: ctx.audit must work for every plugin's start().
      ctx.provide('audit', service);
      auditRoutes(r, () => service!);
    },
    start(ctx) {
      if (ctx.config.retentionDays === 0) return;
      const repo = new AuditRepo(ctx.db);
      const prune = () => {
        const cutoff = new Date(ctx.clock.now() - ctx.config.retentionDays * 86_400_000).toISOString();
        const n = repo.prune(cutoff);
        if (n) ctx.log.info({ deleted: n }, 'audit entries past retention deleted');
      };
      pruneTimer = setInterval(prune, 6 * 3600_000);
      pruneTimer.unref();
    },
    stop() {
      if (pruneTimer) clearInterval(pruneTimer);
    },
  };
});
