import { z } from 'zod';
import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { LOTL } from './api.ts';
import { lotlCommand } from './cli.ts';
import { LotlRepo } from './repo.ts';
import { lotlRoutes } from './routes.ts';
import { RefreshSchedule, REFRESH_QUEUE } from './schedule.ts';
import { lotlConfig, type LotlServices } from './schemas.ts';
import { LotlService } from './service.ts';

export { nextDelayMs, REFRESH_QUEUE } from './schedule.ts';

/**
 * The EU trusted-list cache (ETSI TS 119 612): the LOTL and the national lists, their XAdES
 * signatures checked against pinned signers, and the service certificates kept as trust anchors
 * for the wallet verifier (`ctx.use(LOTL)` gives the LotlService). Online refresh on a schedule,
 * air-gapped import by upload or CLI.
 */
export default definePlugin({
  name: 'lotl',
  description: 'EU trusted lists (LOTL and national lists): verified trust anchors, online refresh and air-gapped import',
  required: false,
  migrations: sqlMigrations(import.meta.url),
  config: lotlConfig,
  setup(ctx): LotlServices {
    const repo = new LotlRepo(ctx.db);
    const service = new LotlService(repo, ctx.config, ctx.clock, ctx.log);
    ctx.provide(LOTL, service);
    return { repo, service, schedule: new RefreshSchedule(repo, ctx.jobs, ctx.clock, ctx.config), config: ctx.config };
  },
  cli: { lotl: lotlCommand },
  routes(r, s, ctx) {
    lotlRoutes(r, s, ctx.audit);
  },
  start(s, ctx) {
    // Fail the start (with its reason) when the pinned signer set cannot be read.
    s.service.lotlSigners();
    ctx.jobs.define({
      name: REFRESH_QUEUE,
      schema: z.object({}),
      maxAttempts: 1,
      concurrency: 1,
      leaseMs: ctx.config.refreshBudgetMs + 60_000,
      run: (job) => s.schedule.run(job, s.service, ctx.log),
    });
    s.schedule.scheduleFirst();
  },
  // The list-check thread ends with the plugin (CLI runs and tests never wait for it: it is unref'd).
  stop: (s) => s.service.close(),
  health: (s) => s.service.health(),
  metrics(_s, ctx) {
    const now = ctx.clock.now();
    const row = ctx.db
      .prepare(
        'SELECT (SELECT MIN(issued) FROM lotl_lists WHERE is_lotl = 1) AS lotl, (SELECT MIN(issued) FROM lotl_lists WHERE is_lotl = 0) AS national, (SELECT COUNT(*) FROM lotl_lists WHERE next_update IS NOT NULL AND next_update < ?) AS overdue, (SELECT COUNT(*) FROM lotl_anchors) AS anchors',
      )
      .get(new Date(now).toISOString()) as { lotl: string | null; national: string | null; overdue: number; anchors: number };
    const age = (iso: string | null) => (iso ? Math.max(0, (now - Date.parse(iso)) / 1000) : -1);
    return [
      {
        name: 'trusted_list_age_seconds',
        help: 'Age of the imported trusted lists by their issue date: the LOTL, and the oldest national list (-1: none imported)',
        type: 'gauge',
        labelNames: ['list'],
        samples: [
          { labels: { list: 'lotl' }, value: age(row.lotl) },
          { labels: { list: 'oldest_national' }, value: age(row.national) },
        ],
      },
      { name: 'trusted_lists_overdue', help: 'Trusted lists past their NextUpdate', type: 'gauge', samples: [{ value: row.overdue }] },
      { name: 'trust_anchors', help: 'Trust anchors taken from the trusted lists', type: 'gauge', samples: [{ value: row.anchors }] },
    ];
  },
});
