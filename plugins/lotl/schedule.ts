import type { Clock, JobQueue, Logger, RunningJob } from '../../server/sdk.ts';
import type { LotlRepo } from './repo.ts';
import type { LotlConfig } from './schemas.ts';
import type { LotlService } from './service.ts';

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
 * The scheduled online refresh: exactly one pending job at a time (its id kept in the plugin's
 * state table), the failure count that drives the retry ladder, and the run itself. The server
 * and `sovcomms lotl status` read the same numbers from here.
 */
export class RefreshSchedule {
  constructor(
    private readonly repo: LotlRepo,
    private readonly jobs: JobQueue,
    private readonly clock: Clock,
    private readonly cfg: LotlConfig,
  ) {}

  /** When the pending (or running) refresh job runs; null when none is queued. */
  nextRefreshAt(): string | null {
    const id = Number(this.repo.getState('refresh_job') ?? NaN);
    const job = Number.isFinite(id) ? this.jobs.get(id) : undefined;
    return job && (job.state === 'pending' || job.state === 'running') ? new Date(job.run_at).toISOString() : null;
  }

  /** Scheduled runs in a row that could not fetch the LOTL. */
  failures(): number {
    return Number(this.repo.getState('refresh_failures') ?? 0) || 0;
  }

  /** Keeps exactly one pending refresh job; its dedupe key is its time, so a restart reuses it. */
  schedule(delayMs: number): void {
    if (!this.cfg.autoRefresh || this.nextRefreshAt()) return;
    const at = this.clock.now() + delayMs;
    const id = this.jobs.enqueue(REFRESH_QUEUE, {}, { dedupeKey: `refresh:${at}`, runAt: at, maxAttempts: 1 });
    this.repo.setState('refresh_job', String(id));
  }

  /** The first job after a start: soon when no LOTL was ever loaded, else after the interval. */
  scheduleFirst(): void {
    const hasLotl = this.repo.lists().some((l) => l.is_lotl);
    this.schedule(hasLotl ? this.cfg.refreshIntervalHours * 3600_000 : this.cfg.firstRefreshDelayMinutes * 60_000);
  }

  /** One scheduled refresh, then the next one queued (sooner after a failure to fetch the LOTL). */
  async run(job: RunningJob<unknown>, service: LotlService, log: Logger): Promise<void> {
    if (!this.cfg.autoRefresh) return; // switched off after this job was queued
    let lotlFetched = false;
    try {
      const r = await service.refresh(job.signal, { scheduled: true });
      lotlFetched = !r.lists.some((l) => l.territory === 'EU' && l.outcome === 'failed');
      log.info({ accepted: r.accepted, rejected: r.rejected, anchors: r.anchor_count, lotlFetched }, 'scheduled trusted-list refresh');
    } finally {
      this.repo.setState('refresh_job', '');
      const failures = lotlFetched ? 0 : this.failures() + 1;
      this.repo.setState('refresh_failures', String(failures));
      this.schedule(nextDelayMs(this.cfg, failures));
    }
  }
}
