import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { z } from 'zod';
import { definePlugin, sqlMigrations } from '../../server/sdk.ts';
import { OUTBOUND, WEBHOOKS } from './api.ts';
import { WebhookRepo } from './repo.ts';
import { webhookRoutes } from './routes.ts';
import { webhookTestEvent, webhooksConfig } from './schemas.ts';
import { BACKOFF_MS, MAX_ATTEMPTS, QUEUE, TEST_EVENT, WebhookService, backoffMs } from './service.ts';
import { webhookCli } from './cli.ts';

const jobData = z.object({ deliveryId: z.string().min(1) });

/** What setup builds; routes, the delivery job and `sovcomms webhook` share it. */
export interface WebhookServices {
  service: WebhookService;
  timer?: NodeJS.Timeout;
}

/**
 * Webhook delivery: subscriptions per tenant, signed deliveries of every event through the core
 * outbox and job queue, retries, auto-pause, the delivery log and redelivery.
 */
export default definePlugin({
  name: 'webhooks',
  description: 'Webhook subscriptions and signed, retried, at-least-once event delivery',
  migrations: sqlMigrations(import.meta.url),
  config: webhooksConfig,
  events: { [TEST_EVENT]: webhookTestEvent },
  cli: { webhook: webhookCli },
  setup(ctx): WebhookServices {
    // A missing or unreadable CA file stops the start with its path (better than failing every delivery).
    const ca = ctx.config.caFile ? [...tls.rootCertificates, fs.readFileSync(path.resolve(ctx.paths.dataDir, ctx.config.caFile), 'utf8')] : undefined;
    const service = new WebhookService({
      repo: new WebhookRepo(ctx.db),
      keys: ctx.keys,
      clock: ctx.clock,
      events: ctx.events,
      jobs: ctx.jobs,
      tenants: ctx.tenants,
      log: ctx.log,
      config: ctx.config,
      ca,
    });
    ctx.provide(WEBHOOKS, service);
    ctx.provide(OUTBOUND, { get: (tenant, url, o) => service.outboundGet(tenant, url, o) });
    return { service };
  },
  routes(r, s, ctx) {
    webhookRoutes(r, s.service, ctx);
  },
  start(s, ctx) {
    const svc = s.service;
    ctx.jobs.define({
      name: QUEUE,
      schema: jobData,
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
    s.timer = setInterval(() => {
      try {
        svc.sweep();
        svc.prune();
      } catch (e) {
        ctx.log.warn({ err: e }, 'webhook sweep failed');
      }
    }, 60_000);
    s.timer.unref();
    ctx.log.debug({ backoff: BACKOFF_MS }, 'webhooks started');
  },
  stop(s) {
    if (s.timer) clearInterval(s.timer);
    s.service.close();
  },
  metrics(_s, ctx) {
    const states = ctx.db.prepare('SELECT state, COUNT(*) AS n FROM webhook_deliveries GROUP BY state').all() as { state: string; n: number }[];
    const failed = ctx.db.prepare('SELECT COUNT(*) AS n FROM webhook_attempts WHERE status IS NULL OR status < 200 OR status > 299').get() as { n: number };
    return [
      {
        name: 'webhook_deliveries',
        help: 'Webhook deliveries by state (queued and pending are the backlog); finished ones are pruned after their retention',
        type: 'gauge',
        labelNames: ['state'],
        samples: ['queued', 'pending', 'delivered', 'failed', 'skipped'].map((state) => ({
          labels: { state },
          value: states.find((r) => r.state === state)?.n ?? 0,
        })),
      },
      {
        name: 'webhook_attempt_failures_total',
        help: 'Webhook delivery attempts without a 2xx answer (as stored)',
        type: 'counter',
        samples: [{ value: failed.n }],
      },
    ];
  },
  health(s) {
    const { backlog, pausedSubscriptions } = s.service.repo.health();
    return { status: 'ok', detail: { ...backlog, pausedSubscriptions } };
  },
});
