import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { z } from 'zod';
import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { WebhookRepo } from './repo.ts';
import { webhookRoutes } from './routes.ts';
import { webhookTestEvent, webhooksConfig } from './schemas.ts';
import { BACKOFF_MS, MAX_ATTEMPTS, QUEUE, TEST_EVENT, WebhookService, backoffMs } from './service.ts';
import { webhookCli } from './cli.ts';

const jobData = z.object({ deliveryId: z.string().min(1) });

/**
 * Webhook delivery (issue 5): subscriptions per tenant, signed deliveries of every event through
 * the core outbox and job queue, retries, auto-pause, the delivery log and redelivery.
 */
export default definePlugin(() => {
  let service: WebhookService | undefined;
  let timer: NodeJS.Timeout | undefined;
  return {
    name: 'webhooks',
    description: 'Webhook subscriptions and signed, retried, at-least-once event delivery',
    migrations: sqlMigrations(import.meta.url),
    config: webhooksConfig,
    events: { [TEST_EVENT]: webhookTestEvent },
    cli: { webhook: webhookCli },
    routes(r, ctx) {
      // A missing or unreadable CA file stops the start with its path (better than failing every delivery).
      const ca = ctx.config.caFile
        ? [...tls.rootCertificates, fs.readFileSync(path.resolve(ctx.paths.dataDir, ctx.config.caFile), 'utf8')]
        : undefined;
      service = new WebhookService({
        repo: new WebhookRepo(ctx.db), keys: ctx.keys, clock: ctx.clock, events: ctx.events, jobs: ctx.jobs, tenants: ctx.tenants,
        log: ctx.log, config: ctx.config, ca,
      });
      ctx.provide('webhooks', service);
      webhookRoutes(r, () => service!, ctx);
    },
    start(ctx) {
      const svc = service!;
      ctx.jobs.define({
        queue: QUEUE,
        parseData: (d) => jobData.parse(d),
        run: (job) => svc.runJob(job),
        maxAttempts: MAX_ATTEMPTS,
        backoffMs: backoffMs,
        concurrency: ctx.config.concurrency,
        // Longer than one attempt can take, so a slow receiver's job is never leased twice.
        leaseMs: ctx.config.timeoutMs + 60_000,
      });
      // The durable consumer: fan-out runs in the dispatcher's transaction with the cursor move.
      ctx.events.subscribe({ name: 'webhooks', events: '*', handle: (ev) => svc.fanOut(ev) });
      svc.sweep();
      timer = setInterval(() => {
        try {
          svc.sweep();
          svc.prune();
        } catch (e) {
          ctx.log.warn({ err: e }, 'webhook sweep failed');
        }
      }, 60_000);
      timer.unref();
      ctx.log.debug({ backoff: BACKOFF_MS }, 'webhooks started');
    },
    stop() {
      if (timer) clearInterval(timer);
      service?.close();
    },
    health() {
      const db = service!.repo.db;
      const counts = db.prepare("SELECT state, COUNT(*) AS n FROM webhook_deliveries WHERE state IN ('queued', 'pending') GROUP BY state").all() as { state: string; n: number }[];
      const paused = (db.prepare('SELECT COUNT(*) AS n FROM webhook_subscriptions WHERE active = 0').get() as { n: number }).n;
      return { status: 'ok', detail: { ...Object.fromEntries(counts.map((c) => [c.state, c.n])), pausedSubscriptions: paused } };
    },
  };
});
