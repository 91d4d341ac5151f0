import { bearerToken, boundedCounts, definePlugin, readBackupState, sqlMigrations, TLS_AUTO } from '../../server/sdk.ts';
import { SipTls } from './inbound/sip-tls.ts';
import { TelephonyAdmin } from './trunks/admin.ts';
import { BridgeLink } from './bridge-link/link.ts';
import { CallKinds } from './calls/kinds.ts';
import { CallService, DIAL_QUEUE, dialJob, MAIL_QUEUE, mailJob } from './calls/outbound.ts';
import { numberCommand, phoneCommand, trunkCommand } from './cli.ts';
import { InboundCalls } from './inbound/calls.ts';
import { InboundRoutes } from './inbound/routes.ts';
import { PhoneAccounts } from './inbound/phones.ts';
import { OfficeTabService } from './officetab/service.ts';
import { officeTabRoutes } from './officetab/http.ts';
import { bridgeHttp } from './bridge-link/http.ts';
import { callHttp } from './calls/http.ts';
import { inboundHttp, inboundRouteHttp } from './inbound/http.ts';
import { transcriptHttp } from './transcripts/http.ts';
import { numberHttp, outboundRouteHttp, trunkAdminHttp } from './trunks/http.ts';
import { OutcomeMailer } from './calls/mail.ts';
import { TelephonyRepo } from './repo.ts';
import { roomRoutes } from './rooms/http.ts';
import { RoomService } from './rooms/calls.ts';
import { RoomSignIn } from './rooms/sign-in.ts';
import { OIDC } from '../oidc/api.ts';
import { eventSchemas, telephonyConfig } from './schemas.ts';
import type { TelephonyServices } from './services.ts';
import { BridgeSupervisor } from './bridge-link/supervisor.ts';
import { TrunkMediaWatch } from './metrics-trunk-media.ts';
import { TranscriptShares } from './transcripts/shares.ts';
import { TranscriptStore } from './transcripts/store.ts';
import { Prompts } from './prompts/prompts.ts';
import { promptHttp } from './prompts/http.ts';
import { promptCommand } from './prompts/cli.ts';
import { routeCommand } from './inbound/cli.ts';
import { setupHttp } from './setup/http.ts';
import { setupItems, sipListening } from './setup/checklist.ts';

export const BRIDGE_VERIFIER = 'telephony-bridge';

/**
 * Telephony: SIP trunks, outbound and inbound routes, the PSTN whitelist, outbound AI calls and
 * their transcripts (with share links), virtual numbers, and the supervision of the telephony bridge process that
 * speaks SIP/RTP and the voice AI (CONTROL-API.md is the contract between the two).
 */
export default definePlugin({
  name: 'telephony',
  description: 'SIP trunks, routes, whitelist, outbound AI calls, transcripts, virtual numbers; supervises the telephony bridge',
  migrations: sqlMigrations(import.meta.url),
  config: telephonyConfig,
  events: eventSchemas,
  cli: { trunk: trunkCommand, number: numberCommand, phone: phoneCommand, prompt: promptCommand, route: routeCommand },

  setup(ctx): TelephonyServices {
    // Every call's change reaches open consoles at once (a live notice, not a webhook event).
    const repo = new TelephonyRepo(ctx.db, (tenantId, callId, status) => ctx.events.notify(tenantId, 'call.state', { callId, status }));
    const supervisor = new BridgeSupervisor(repo, ctx.log);
    const admin = new TelephonyAdmin(
      repo,
      ctx.keys,
      () => new Date(ctx.clock.now()).toISOString(),
      () => supervisor.schedulePush(),
      ctx.config.limits,
    );
    const transcripts = new TranscriptStore(repo, ctx.paths);
    const shares = new TranscriptShares(repo, transcripts, ctx.events, ctx.clock);
    const mailer = new OutcomeMailer(ctx.config.mail);
    const bridge = new BridgeLink(ctx.config.bridge, ctx.log.child({ part: 'bridge' }), {
      onReady: () => supervisor.bridgeStarted(),
      onDied: () => callKinds.bridgeRestarted(),
    });
    const prompts = new Prompts(ctx.db, () => new Date(ctx.clock.now()).toISOString(), ctx.config.limits.prompts);
    const calls: CallService = new CallService({
      repo,
      prompts,
      admin,
      bridge,
      jobs: ctx.jobs,
      events: ctx.events,
      keys: ctx.keys,
      clock: ctx.clock,
      log: ctx.log,
      tenants: ctx.tenants,
      transcripts,
      mailer,
      config: ctx.config,
    });
    const phones = new PhoneAccounts(
      repo,
      ctx.keys,
      () => new Date(ctx.clock.now()).toISOString(),
      () => supervisor.schedulePush(),
      ctx.config.limits.phones,
    );
    const rooms = new RoomService({
      db: ctx.db,
      repo,
      admin,
      bridge,
      keys: ctx.keys,
      clock: ctx.clock,
      log: ctx.log,
      config: ctx.config,
    });
    const inboundRoutes = new InboundRoutes(repo, ctx.config.limits.routes, (t, user) => inbound.unusable(t, user));
    const inbound: InboundCalls = new InboundCalls({
      repo,
      admin,
      routes: inboundRoutes,
      keys: ctx.keys,
      clock: ctx.clock,
      log: ctx.log,
      tenants: ctx.tenants,
      config: ctx.config,
    });
    // The kinds of call the bridge carries: a new kind is a new entry here (calls/kinds.ts).
    const callKinds = new CallKinds([calls, inbound, rooms], {
      repo,
      events: ctx.events,
      tenants: ctx.tenants,
      transcripts,
      clock: ctx.clock,
      log: ctx.log,
    });
    const officeTabs = new OfficeTabService(bridge, ctx.log.child({ part: 'officetab' }));
    // The OpenID Provider is looked up when a signed-in room is used (every setup has run by then):
    // no dependency on the oidc plugin, and without it only signed-in rooms are unavailable.
    const roomSignIn = new RoomSignIn({
      oidc: () => ctx.tryUse(OIDC),
      keys: ctx.keys,
      clock: ctx.clock,
      log: ctx.log.child({ part: 'rooms' }),
      sessionTtlSec: ctx.config.rooms.sessionTtlSec,
    });
    const sipTls = new SipTls(ctx.config.bridge, () => ctx.tryUse(TLS_AUTO), bridge, ctx.log.child({ part: 'sip-tls' }));
    supervisor.attach({ admin, bridge, callKinds, phones, officeTabs, sipTls });
    // The bridge's callbacks carry the token it was started with (CONTROL-API.md "Authentication").
    ctx.auth.registerVerifier(BRIDGE_VERIFIER, async ({ headers, tenant }) => {
      const token = bearerToken(headers.authorization);
      if (!token || !bridge.checkToken(token)) return null;
      return { kind: 'client', tenantId: tenant.id, subject: 'telephony-bridge', userName: 'telephony-bridge', scopes: [], superAdmin: false };
    });
    return {
      repo,
      admin,
      calls,
      callKinds,
      inbound,
      inboundRoutes,
      phones,
      prompts,
      sip: sipListening(ctx.config.bridge),
      officeTabs,
      sipTls,
      rooms,
      roomSignIn,
      transcripts,
      shares,
      bridge,
      mailer,
      supervisor,
      trunkMedia: new TrunkMediaWatch(bridge),
      audit: ctx.audit,
      instanceSeen: (i) => supervisor.instanceSeen(i),
    };
  },

  routes(r, s, ctx) {
    // In this order, the README's endpoint overview and /openapi.json list them as before.
    inboundHttp(r, s);
    callHttp(r, s);
    numberHttp(r, s);
    transcriptHttp(r, s, { shareViewsPerMinute: ctx.config.shares.viewsPerMinutePerIp });
    outboundRouteHttp(r, s);
    inboundRouteHttp(r, s);
    trunkAdminHttp(r, s);
    bridgeHttp(r, s);
    officeTabRoutes(r, s.officeTabs);
    promptHttp(r, s);
    setupHttp(
      r,
      s,
      setupItems({
        admin: s.admin,
        config: ctx.config,
        // The appliance's backup schedule (core, `sovcomms backup schedule`): its target once set.
        backup: () => ({ target: readBackupState(ctx.db, ctx.paths.dataDir, ctx.clock.now()).schedule?.target ?? null }),
      }),
    );
    roomRoutes(r, s.rooms, s.roomSignIn, ctx.auth, ctx.audit, {
      joinsPerMinute: ctx.config.rooms.joinsPerMinutePerIp,
      viewsPerMinute: ctx.config.shares.viewsPerMinutePerIp,
    });
  },

  async start(s, ctx) {
    ctx.jobs.define({
      name: DIAL_QUEUE,
      schema: dialJob,
      maxAttempts: 6,
      backoffMs: (n) => Math.min(60_000, 2000 * 2 ** n),
      run: async (job) => {
        await s.calls.dial(job.data, 'job', job.attempt >= job.maxAttempts);
      },
    });
    ctx.jobs.define({ name: MAIL_QUEUE, schema: mailJob, maxAttempts: 8, run: (job) => s.calls.sendMail(job.data) });
    if (s.bridge.mode === 'embedded') {
      // A new core starts a new bridge: whatever the old one carried is gone.
      s.callKinds.bridgeRestarted();
    }
    if (!s.bridge.configured) return;
    void (async () => {
      const cb = ctx.config.bridge.callbackUrl ?? (ctx.listening ? `${(await ctx.listening).url}/internal/bridge/events` : undefined);
      if (!cb) {
        ctx.log.error('telephony: no callback URL for the bridge (set plugins.telephony.bridge.callbackUrl)');
        return;
      }
      // One turn of the event loop after the listener opens: spawning the bridge (a fork of this
      // process, tens of milliseconds on a loaded machine) must not hold up the first requests,
      // and nothing a request may need waits on it (the bridge takes seconds to come up anyway).
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (s.supervisor.stopped) return;
      await s.bridge.start(cb);
    })().catch((e: unknown) => ctx.log.error({ err: (e as Error).message }, 'bridge start failed'));
    s.supervisor.start(ctx.config.bridge.healthPollMs);
    s.trunkMedia.start(ctx.config.bridge.healthPollMs);
  },

  async stop(s) {
    s.supervisor.stop();
    s.trunkMedia.stop();
    s.sipTls.stop();
    s.officeTabs.closeAll();
    await s.bridge.stop();
    s.mailer.close();
  },

  metrics(s) {
    const db = s.repo.db;
    const n = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
    const ended = (kind: string, sql: string) =>
      boundedCounts(db.prepare(sql).all() as { label: string; n: number }[]).map((r) => ({ labels: { kind, outcome: r.label }, value: r.n }));
    const b = s.bridge;
    return [
      {
        name: 'calls_in_flight',
        help: 'Calls the bridge carries now, by kind (outbound AI calls, inbound SIP calls, browser rooms)',
        type: 'gauge',
        labelNames: ['kind'],
        samples: [
          { labels: { kind: 'outbound' }, value: n("SELECT COUNT(*) AS n FROM tel_calls WHERE status IN ('dispatching', 'in-flight')") },
          { labels: { kind: 'inbound' }, value: n('SELECT COUNT(*) AS n FROM tel_inbound_calls WHERE ended_at IS NULL') },
          { labels: { kind: 'room' }, value: n('SELECT COUNT(*) AS n FROM tel_room_calls WHERE ended_at IS NULL') },
        ],
      },
      {
        name: 'calls_ended_total',
        help: 'Ended calls by kind and outcome (outbound: its final status), as stored',
        type: 'counter',
        labelNames: ['kind', 'outcome'],
        samples: [
          ...ended(
            'outbound',
            "SELECT status AS label, COUNT(*) AS n FROM tel_calls WHERE status IN ('ended-success', 'ended-failed-final', 'cancelled') GROUP BY status",
          ),
          ...ended('inbound', 'SELECT outcome AS label, COUNT(*) AS n FROM tel_inbound_calls WHERE ended_at IS NOT NULL GROUP BY outcome'),
          ...ended('room', 'SELECT outcome AS label, COUNT(*) AS n FROM tel_room_calls WHERE ended_at IS NOT NULL GROUP BY outcome'),
        ],
      },
      {
        name: 'bridge_up',
        help: 'The telephony bridge answers (1) or not (0; also when none is configured)',
        type: 'gauge',
        samples: [{ value: b.state === 'ready' ? 1 : 0 }],
      },
      {
        name: 'bridge_restarts_total',
        help: 'Restarts of the embedded telephony bridge since this core started',
        type: 'counter',
        samples: [{ value: b.restartCount }],
      },
      ...s.trunkMedia.families(),
    ];
  },

  health(s) {
    const b = s.bridge;
    if (b.mode === 'off') return { status: 'ok', detail: { bridge: 'off' } };
    // Where desk phones and carriers reach SIP (README "Settings"), for /readyz and the dashboard.
    const sip = s.sip;
    return b.state === 'ready'
      ? { status: 'ok', detail: { bridge: b.mode, state: b.state, ...(sip ? { sip } : {}) } }
      : {
          status: 'degraded',
          // The bridge's own account of why it cannot start (the SIP port taken) is what the operator must act on.
          reason: b.lastFailure ? `bridge ${b.state}: ${b.lastFailure.message}` : `bridge ${b.state}`,
          detail: { bridge: b.mode, lastExit: b.lastExit, ...(b.lastFailure ? { failure: b.lastFailure.reason } : {}), ...(sip ? { sip } : {}) },
        };
  },
});
