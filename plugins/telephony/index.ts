import { definePlugin, type PluginContext, sqlMigrations } from '../../server/sdk.ts';
import { TelephonyAdmin } from './admin.ts';
import { BridgeLink } from './bridge-link.ts';
import { CallService, DIAL_QUEUE, MAIL_QUEUE, type DialJob, type MailJob } from './calls.ts';
import { numberCommand, trunkCommand } from './cli.ts';
import { OutcomeMailer } from './mail.ts';
import { TelephonyRepo } from './repo.ts';
import { telephonyRoutes, type Services } from './routes.ts';
import { eventSchemas, telephonyConfig, type TelephonyConfig } from './schemas.ts';
import { TranscriptStore } from './transcripts.ts';

export const BRIDGE_VERIFIER = 'telephony-bridge';

/**
 * Telephony: SIP trunks, outbound and inbound routes, the PSTN whitelist, outbound AI calls and
 * their transcripts, virtual numbers, and the supervision of the telephony bridge process that
 * speaks SIP/RTP and the voice AI (CONTROL-API.md is the contract between the two).
 */
export default definePlugin(() => {
  let svc: (Services & { repo: TelephonyRepo; mailer: OutcomeMailer }) | undefined;
  let pushTimer: NodeJS.Timeout | undefined;
  let watchTimer: NodeJS.Timeout | undefined;
  let stopped = false;
  let lastPush = '';

  const fingerprint = (repo: TelephonyRepo) =>
    JSON.stringify(repo.db.prepare('SELECT COUNT(*) AS n, MAX(updated_at) AS u FROM tel_trunks').get());

  /** PUT /trunks with the full set (CONTROL-API.md): on bridge start and after every change. */
  async function pushTrunks(ctx: PluginContext<TelephonyConfig>): Promise<void> {
    if (!svc || svc.bridge.state !== 'ready') return;
    const fp = fingerprint(svc.repo);
    const trunks = svc.admin.bridgeTrunks();
    try {
      const ans = await svc.bridge.request('PUT', '/trunks', { trunks });
      if (ans.status >= 300) ctx.log.warn({ status: ans.status, error: ans.body.error }, 'bridge refused the trunk set');
      else lastPush = fp;
    } catch (e) {
      ctx.log.warn({ err: (e as Error).message }, 'trunk push to the bridge failed');
    }
  }

  async function watch(ctx: PluginContext<TelephonyConfig>): Promise<void> {
    const s = svc;
    if (!s || stopped) return;
    if (s.bridge.mode !== 'remote') {
      if (s.bridge.state === 'ready' && fingerprint(s.repo) !== lastPush) await pushTrunks(ctx);
      return;
    }
    let health;
    try {
      health = await s.bridge.request('GET', '/health');
    } catch {
      if (s.bridge.state === 'ready') ctx.log.warn('remote bridge stopped answering');
      s.bridge.markRemote(false);
      return;
    }
    const wasDown = s.bridge.state !== 'ready';
    s.bridge.markRemote(true);
    const theirs = Array.isArray(health.body.trunks) ? health.body.trunks.length : -1;
    if (wasDown || fingerprint(s.repo) !== lastPush || theirs !== s.admin.bridgeTrunks().length) await pushTrunks(ctx);
    if (wasDown) await reconcile(ctx, null);
  }

  async function reconcile(ctx: PluginContext<TelephonyConfig>, instance: string | null): Promise<void> {
    try {
      const n = (await svc?.calls.reconcile(instance)) ?? 0;
      if (n) ctx.log.warn({ calls: n }, 'calls the bridge no longer has ended as failed');
    } catch (e) {
      ctx.log.warn({ err: (e as Error).message }, 'bridge reconcile failed');
    }
  }

  return {
    name: 'telephony',
    description: 'SIP trunks, routes, whitelist, outbound AI calls, transcripts, virtual numbers; supervises the telephony bridge',
    migrations: sqlMigrations(import.meta.url),
    config: telephonyConfig,
    events: eventSchemas,
    cli: { trunk: trunkCommand, number: numberCommand },

    routes(r, ctx) {
      const repo = new TelephonyRepo(ctx.db);
      const nowIso = () => new Date(ctx.clock.now()).toISOString();
      const schedulePush = () => {
        if (pushTimer) clearTimeout(pushTimer);
        pushTimer = setTimeout(() => void pushTrunks(ctx), 20);
        pushTimer.unref();
      };
      const admin = new TelephonyAdmin(repo, ctx.keys, nowIso, schedulePush);
      const transcripts = new TranscriptStore(repo, ctx.paths);
      const mailer = new OutcomeMailer(ctx.config.mail);
      let calls: CallService | undefined;
      const bridge = new BridgeLink(ctx.config.bridge, ctx.log.child({ part: 'bridge' }), {
        onReady: async () => {
          await pushTrunks(ctx);
        },
        onDied: (reason) => {
          const n = calls?.failCallsAtBridge('bridge restarted') ?? 0;
          if (n) ctx.log.warn({ calls: n, reason }, 'calls in flight ended as failed: the bridge restarted');
        },
      });
      calls = new CallService({
        repo, admin, bridge, jobs: ctx.jobs, events: ctx.events, keys: ctx.keys, clock: ctx.clock, log: ctx.log,
        tenants: ctx.tenants, transcripts, mailer, config: ctx.config,
      });
      let lastInstance = '';
      const instanceSeen = (instance: string) => {
        const prev = lastInstance;
        lastInstance = instance;
        // A bridge that restarted behind our back (remote mode): its old calls are gone.
        if (prev && prev !== instance) {
          ctx.log.warn({ instance }, 'new bridge instance');
          void pushTrunks(ctx);
          void reconcile(ctx, instance);
        }
      };
      svc = { admin, calls, transcripts, bridge, repo, mailer, instanceSeen, audit: ctx.audit };
      ctx.auth.registerVerifier(BRIDGE_VERIFIER, async ({ headers, tenant }) => {
        const h = headers.authorization;
        const m = /^Bearer\s+(\S+)\s*$/i.exec(Array.isArray(h) ? h[0] ?? '' : h ?? '');
        if (!m || !bridge.checkToken(m[1]!)) return null;
        return { kind: 'client', tenantId: tenant.id, subject: 'telephony-bridge', userName: 'telephony-bridge', scopes: [], superAdmin: false };
      });
      telephonyRoutes(r, () => svc!);
    },

    async start(ctx) {
      const s = svc!;
      stopped = false;
      ctx.jobs.define<DialJob>({
        queue: DIAL_QUEUE,
        parseData: (d) => d as DialJob,
        maxAttempts: 6,
        backoffMs: (n) => Math.min(60_000, 2000 * 2 ** n),
        run: async (job) => {
          await s.calls.dial(job.data, 'job', job.attempt >= job.maxAttempts);
        },
      });
      ctx.jobs.define<MailJob>({
        queue: MAIL_QUEUE,
        parseData: (d) => d as MailJob,
        maxAttempts: 8,
        run: async (job) => s.calls.sendMail(job.data),
      });
      if (s.bridge.mode === 'embedded') {
        // A new core starts a new bridge: whatever the old one carried is gone.
        const n = s.calls.failCallsAtBridge('bridge restarted');
        if (n) ctx.log.warn({ calls: n }, 'calls in flight at the last shutdown ended as failed');
      }
      if (s.bridge.configured) {
        void (async () => {
          const cb = ctx.config.bridge.callbackUrl ?? (ctx.listening ? `${(await ctx.listening).url}/internal/bridge/events` : undefined);
          if (!cb) {
            ctx.log.error('telephony: no callback URL for the bridge (set plugins.telephony.bridge.callbackUrl)');
            return;
          }
          if (stopped) return;
          await s.bridge.start(cb);
        })().catch((e) => ctx.log.error({ err: (e as Error).message }, 'bridge start failed'));
        // Trunks changed by the CLI (another process) reach the bridge within seconds; a remote
        // bridge that restarted (empty trunk set) or came back gets the set again and is reconciled.
        let watching = false;
        watchTimer = setInterval(() => {
          if (watching) return;
          watching = true;
          void watch(ctx).finally(() => { watching = false; });
        }, ctx.config.bridge.healthPollMs);
        watchTimer.unref();
      }
    },

    async stop() {
      stopped = true;
      if (pushTimer) clearTimeout(pushTimer);
      if (watchTimer) clearInterval(watchTimer);
      await svc?.bridge.stop();
      svc?.mailer.close();
    },

    health() {
      const b = svc?.bridge;
      if (!b || b.mode === 'off') return { status: 'ok', detail: { bridge: 'off' } };
      return b.state === 'ready'
        ? { status: 'ok', detail: { bridge: b.mode, state: b.state } }
        : { status: 'degraded', reason: `bridge ${b.state}`, detail: { bridge: b.mode, lastExit: b.lastExit } };
    },
  };
});
