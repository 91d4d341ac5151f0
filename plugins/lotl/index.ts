import { type Clock, definePlugin, type JobQueue, sqlMigrations } from '../../server/sdk.ts';
import { lotlCli } from './cli.ts';
import { LotlRepo } from './repo.ts';
import { lotlRoutes } from './routes.ts';
import { lotlConfig, type LotlConfig } from './schemas.ts';
import { LotlService } from './service.ts';

export const REFRESH_QUEUE = 'lotl.refresh';

/**
 * Delay before the next scheduled refresh: the interval, or after `failures` runs in a row that
 * could not fetch the LOTL, the retry ladder (capped at the interval).
 */
export function nextDelayMs(cfg: Pick<LotlConfig, 'refreshIntervalHours' | 'retryMinutes'>, failures: number): number {
  const interval = cfg.refreshIntervalHours * 3600_000;
  if (failures <= 0) return interval;
  const minutes = cfg.retryMinutes[Math.min(failures, cfg.retryMinutes.length) - 1]!;
  return Math.min(interval, minutes * 60_000);
}

/**
 * The EU trusted-list cache (ETSI TS 119 612): the LOTL and the national lists, their XAdES
 * signatures checked against pinned signers, and the service certificates kept as trust anchors
 * for the wallet verifier (`ctx.use('lotl')` gives the LotlService). Online refresh on a
 * schedule, air-gapped import by upload or CLI.
 */
export default definePlugin(() => {
  let service: LotlService | undefined;
  let repo: LotlRepo | undefined;
  let jobs: JobQueue | undefined;
  let clock: Clock | undefined;
  let cfg: LotlConfig | undefined;

  const nextRefreshAt = (): string | null => {
    const id = Number(repo?.getState('refresh_job') ?? NaN);
    const job = Number.isFinite(id) ? jobs?.get(id) : undefined;
    return job && (job.state === 'pending' || job.state === 'running') ? new Date(job.run_at).toISOString() : null;
  };

  const refreshFailures = (): number => Number(repo?.getState('refresh_failures') ?? 0) || 0;

  /** Keeps exactly one pending refresh job; its dedupe key is its time, so a restart reuses it. */
  const schedule = (delayMs: number) => {
    if (!jobs || !repo || !clock || !cfg?.autoRefresh) return;
    if (nextRefreshAt()) return;
    const at = clock.now() + delayMs;
    const id = jobs.enqueue(REFRESH_QUEUE, {}, { dedupeKey: `refresh:${at}`, runAt: at, maxAttempts: 1 });
    repo.setState('refresh_job', String(id));
  };

  return {
    name: 'lotl',
    description: 'EU trusted lists (LOTL and national lists): verified trust anchors, online refresh and air-gapped import',
    required: false,
    migrations: sqlMigrations(import.meta.url),
    config: lotlConfig,
    cli: lotlCli,
    routes(r, ctx) {
      cfg = ctx.config;
      repo = new LotlRepo(ctx.db);
      service = new LotlService(repo, ctx.config, ctx.clock, ctx.log);
      jobs = ctx.jobs;
      clock = ctx.clock;
      ctx.provide('lotl', service);
      lotlRoutes(r, () => service!, () => cfg!, () => ({ at: nextRefreshAt(), failures: refreshFailures() }), ctx.audit);
    },
    start(ctx) {
      // Fail the start (with its reason) when the pinned signer set cannot be read.
      service!.lotlSigners();
      ctx.jobs.define<Record<string, never>>({
        queue: REFRESH_QUEUE,
        parseData: () => ({}),
        maxAttempts: 1,
        concurrency: 1,
        leaseMs: ctx.config.refreshBudgetMs + 60_000,
        run: async (job) => {
          if (!ctx.config.autoRefresh) return; // switched off after this job was queued
          let lotlFetched = false;
          try {
            const r = await service!.refresh(job.signal, { scheduled: true });
            lotlFetched = !r.lists.some((l) => l.territory === 'EU' && l.outcome === 'failed');
            ctx.log.info({ accepted: r.accepted, rejected: r.rejected, anchors: r.anchor_count, lotlFetched }, 'scheduled trusted-list refresh');
          } finally {
            repo!.setState('refresh_job', '');
            const failures = lotlFetched ? 0 : refreshFailures() + 1;
            repo!.setState('refresh_failures', String(failures));
            schedule(nextDelayMs(ctx.config, failures));
          }
        },
      });
      const hasLotl = repo!.lists().some((l) => l.is_lotl);
      schedule(hasLotl ? ctx.config.refreshIntervalHours * 3600_000 : ctx.config.firstRefreshDelayMinutes * 60_000);
    },
    health() {
      return service ? service.health() : { status: 'ok' };
    },
  };
});
