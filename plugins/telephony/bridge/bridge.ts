/**
 * The bridge: SIP UA + calls + the loopback control API of CONTROL-API.md. Plain node:http (no
 * plugin host: this runs in its own process so media timing never shares a loop with the API).
 */
import http from 'node:http';
import { createHash, createPrivateKey, randomBytes, timingSafeEqual } from 'node:crypto';
import type { z } from 'zod';
import { SipTransport } from './sip/transport.ts';
import { SipUserAgent } from './sip/ua.ts';
import { DEFAULT_TIMERS, type Timers } from './sip/transaction.ts';
import type { MediaHost } from './media/leg.ts';
import { InlineMediaHost } from './media/inline.ts';
import { ThreadMediaHost } from './media/thread-host.ts';
import { SipResolver } from './sip/resolve.ts';
import { OutboundCall, type CallMetrics } from './calls/outbound.ts';
import { EventSender } from './events.ts';
import { GeminiLiveEngine } from './engine/gemini-live.ts';
import type { VoiceEngine } from './engine/types.ts';
import { log } from './log.ts';
import { InboundService } from './inbound/service.ts';
import { OfficeTabs } from './inbound/officetab-provider.ts';
import { RoomError, RoomHost, webrtcOptionsFromEnv } from './webrtc/host.ts';
import type { WebRtcOptions } from './webrtc/leg.ts';
import { HangupSchema, PlaceCallSchema, TrunkSchema, TrunksBodySchema, type LocatedTrunk, type PlaceCall, type Trunk } from './schemas.ts';
import { OpenRoomSchema, TlsBodySchema, trunkTenant, type TlsAnswer, type TlsBody } from '../control.ts';
import { fingerprint256, pemChain } from './sip/tls.ts';
import { gcMode } from './node-flags.ts';
import { assertWerift } from './webrtc/werift-check.ts';
import { TrunkMediaTotals } from './trunk-media.ts';
import type { ControlError, HangupAnswer, HealthAnswer, ListCallsAnswer, PlaceCallAnswer, PutTrunksAnswer } from '../control.ts';

export const BRIDGE_VERSION = '1.0.0';

export interface BridgeOptions {
  token: string;
  controlPort: number;
  callbackUrl?: string;
  sipHost: string;
  sipPort: number;
  /** SIP over TLS for desk phones (0: ephemeral; null: off); it listens once the core pushed a certificate (PUT /tls). */
  sipTlsPort?: number | null;
  rtpMin: number;
  rtpMax: number;
  engineUrl?: string;
  maxCalls: number;
  /** OPTIONS keepalive period; 0 disables it (lab peers that reject stray OPTIONS). */
  keepaliveMs: number;
  /** RTP on its own thread (default) or in the main event loop. */
  mediaThread: boolean;
  /** Priority (nice) asked for the media threads; needs CAP_SYS_NICE, else ignored. 0 = leave. */
  mediaNice?: number;
  /** SCHED_FIFO priority asked for the RTP sending thread; needs CAP_SYS_NICE, else nice. 0 = none. */
  mediaRtPriority?: number;
  /** Hang up an answered call after this long without RTP or RTCP from the far end; 0 = never. */
  mediaTimeoutMs?: number;
  /** DNS servers for trunk SRV lookups (`ip[:port]`, comma-separated); default the system's. */
  dnsServers?: string;
  timers?: Timers;
  engineFactory?: (cfg: PlaceCall['engine']) => VoiceEngine;
  /** Browser rooms: extra ICE host addresses and the UDP port range (webrtc/host.ts). */
  webrtc?: WebRtcOptions;
}

/** Options from the environment variables of CONTROL-API.md. */
export function optionsFromEnv(env: NodeJS.ProcessEnv): BridgeOptions {
  const token = env.SOVCOMMS_BRIDGE_TOKEN ?? '';
  if (token.length < 16) throw new Error('SOVCOMMS_BRIDGE_TOKEN must be set (at least 16 characters)');
  const range = /^(\d+)-(\d+)$/.exec(env.SOVCOMMS_BRIDGE_RTP_PORTS ?? '20000-20999');
  if (!range || Number(range[1]) > Number(range[2]) || Number(range[2]) > 65535) throw new Error('SOVCOMMS_BRIDGE_RTP_PORTS must be min-max');
  const int = (v: string | undefined, d: number) => (v === undefined || v === '' ? d : Number.parseInt(v, 10));
  return {
    token,
    controlPort: int(env.SOVCOMMS_BRIDGE_CONTROL_PORT, 0),
    callbackUrl: env.SOVCOMMS_BRIDGE_CALLBACK_URL || undefined,
    sipHost: env.SOVCOMMS_BRIDGE_SIP_HOST || '127.0.0.1',
    sipPort: int(env.SOVCOMMS_BRIDGE_SIP_PORT, 5060),
    sipTlsPort: env.SOVCOMMS_BRIDGE_SIP_TLS_PORT === 'off' ? null : int(env.SOVCOMMS_BRIDGE_SIP_TLS_PORT, 5061),
    rtpMin: Number(range[1]),
    rtpMax: Number(range[2]),
    engineUrl: env.SOVCOMMS_AI_ENGINE_URL || undefined,
    maxCalls: int(env.SOVCOMMS_BRIDGE_MAX_CALLS, 500),
    keepaliveMs: int(env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC, 30) * 1000,
    mediaThread: env.SOVCOMMS_BRIDGE_MEDIA_THREAD !== '0',
    mediaNice: int(env.SOVCOMMS_BRIDGE_MEDIA_NICE, -10) || 0,
    mediaRtPriority: int(env.SOVCOMMS_BRIDGE_MEDIA_RTPRIO, 10) || 0,
    mediaTimeoutMs: (int(env.SOVCOMMS_BRIDGE_MEDIA_TIMEOUT_SEC, 45) || 0) * 1000,
    dnsServers: env.SOVCOMMS_BRIDGE_DNS_SERVERS || undefined,
    webrtc: webrtcOptionsFromEnv(env),
  };
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    description: string,
  ) {
    super(description);
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

const SRV_REFRESH_MS = 5 * 60_000;

/** `PUT /tenants/:tenantId/trunks` (CONTROL-API.md): one tenant's trunk set. */
const TENANT_TRUNKS_PATH = /^\/tenants\/([^/]{1,600})\/trunks$/;

/**
 * Each trunk checked on its own (`TrunkSchema`): one outside it is refused alone, the others
 * apply. In a tenant's set (`tenantId`), a trunk of another tenant is refused too.
 */
function checkTrunks(raws: unknown[], tenantId: string | null): { good: Trunk[]; rejected: PutTrunksAnswer['rejected'] } {
  const good: Trunk[] = [];
  const rejected: PutTrunksAnswer['rejected'] = [];
  raws.forEach((raw, i) => {
    const r = TrunkSchema.safeParse(raw);
    const id = typeof (raw as { id?: unknown })?.id === 'string' ? (raw as { id: string }).id : `#${i}`;
    if (!r.success) {
      const issue = r.error.issues[0];
      rejected.push({ id, error: issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid trunk' });
    } else if (tenantId !== null && trunkTenant(r.data.id) !== tenantId) rejected.push({ id, error: `id: not a trunk of tenant ${tenantId}` });
    else good.push(r.data);
  });
  if (rejected.length) log('warn', 'trunks refused', { rejected });
  return { good, rejected };
}

export class Bridge {
  readonly instanceId = randomBytes(8).toString('hex');
  private readonly transport = new SipTransport();
  private ua!: SipUserAgent;
  private server: http.Server | null = null;
  private readonly trunks = new Map<string, LocatedTrunk>();
  /** The trunks as the core pushed them (before DNS): a tenant's push keeps the others' as they came. */
  private readonly pushed = new Map<string, Trunk>();
  private readonly trunkLoad = new Map<string, number>();
  private readonly calls = new Map<string, OutboundCall>();
  private readonly recent: CallMetrics[] = [];
  /** RTP received per trunk over ended calls, for /health's trunk entries (the core's /metrics). */
  private readonly trunkMedia = new TrunkMediaTotals();
  readonly events: EventSender;
  private media!: MediaHost;
  private readonly tokenDigest: Buffer;
  private readonly resolver: SipResolver;
  /** Inbound calls, the desk-phone registrar and user endpoints (inbound/). */
  inbound!: InboundService;
  /** The users' browser office tabs, one more kind of user endpoint (inbound/officetab-provider.ts). */
  officeTabs!: OfficeTabs;
  controlUrl = '';
  readonly rooms: RoomHost;

  constructor(private readonly o: BridgeOptions) {
    // Before anything starts: the rooms patch werift's internals (webrtc/werift-check.ts).
    assertWerift();
    this.events = new EventSender(o.callbackUrl, o.token, this.instanceId);
    this.tokenDigest = digest(o.token);
    this.resolver = new SipResolver(o.dnsServers);
    this.rooms = new RoomHost({
      engineFactory: (cfg) => (o.engineFactory ?? ((c: PlaceCall['engine']) => new GeminiLiveEngine(c, o.engineUrl)))(cfg),
      emit: (type, callId, fields) => this.events.emit(type, callId, fields),
      // The inbound service is made after the rooms; it is asked only once a room's AI transfers.
      askTransfer: (q) => this.inbound.askTransfer(q),
      ringUser: (r, abort) => this.inbound.endpoints.ring(r, abort),
      pstn: () => ({
        ua: this.ua,
        media: this.media,
        sipHost: this.o.sipHost,
        mediaTimeoutMs: this.o.mediaTimeoutMs ?? 0,
        trunks: this.trunks,
        trunkLoad: this.trunkLoad,
      }),
      webrtc: o.webrtc ?? {},
      thread: o.mediaThread,
      nice: o.mediaNice,
      rtPriority: o.mediaRtPriority,
      onPriority: (priority) => log('info', 'WebRTC thread scheduling', { priority }),
    });
  }

  get sipPort(): number {
    return this.transport.port;
  }

  async start(): Promise<string> {
    await this.transport.listen(this.o.sipHost, this.o.sipPort);
    await this.events.warm();
    this.ua = new SipUserAgent(this.transport, this.o.sipHost, this.o.timers ?? DEFAULT_TIMERS);
    let malformed = 0;
    this.ua.on('malformed', (err) => {
      // Count every one, log the first and then every 100th: a flood must not flood the log.
      if (malformed++ % 100 === 0) log('warn', 'malformed SIP message dropped', { error: err.message, count: malformed });
    });
    this.media = this.o.mediaThread
      ? new ThreadMediaHost({
          min: this.o.rtpMin,
          max: this.o.rtpMax,
          host: this.o.sipHost,
          nice: this.o.mediaNice ?? 0,
          rtPriority: this.o.mediaRtPriority ?? 0,
          onPriority: (role, priority) => {
            // Say it once at start: without CAP_SYS_NICE the sender shares the CPU like any thread.
            if (role !== 'rx' && priority === 'default' && process.platform === 'linux' && (this.o.mediaRtPriority || this.o.mediaNice)) {
              log(
                'warn',
                'the RTP sending thread runs at the default priority; grant CAP_SYS_NICE (systemd AmbientCapabilities=CAP_SYS_NICE, LimitRTPRIO=) for steady 20 ms pacing under load',
                { role },
              );
            } else log('info', 'media thread scheduling', { role, priority });
          },
        })
      : new InlineMediaHost(this.o.rtpMin, this.o.rtpMax, this.o.sipHost);
    this.inbound = new InboundService({
      ua: this.ua,
      media: this.media,
      sipHost: this.o.sipHost,
      mediaTimeoutMs: this.o.mediaTimeoutMs ?? 0,
      engineFactory: this.o.engineFactory ?? ((cfg) => new GeminiLiveEngine(cfg, this.o.engineUrl)),
      emit: (type, callId, fields) => this.events.emit(type, callId, fields),
      trunks: this.trunks,
      trunkLoad: this.trunkLoad,
      onCallEnded: (c) => this.trunkMedia.record(c.trunkId, c.metrics),
      callbackUrl: this.o.callbackUrl,
      token: this.o.token,
      instanceId: this.instanceId,
      hasCapacity: () => this.calls.size + this.inbound.calls.size < this.o.maxCalls,
    });
    this.officeTabs = new OfficeTabs({
      openLeg: (h, ms) => this.rooms.openLeg(h, ms),
      callbackUrl: this.o.callbackUrl,
      token: this.o.token,
      instanceId: this.instanceId,
    });
    this.inbound.endpoints.add(this.officeTabs);
    this.ua.incoming = (ctx) => this.inbound.incoming(ctx);
    this.server = http.createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(this.o.controlPort, '127.0.0.1', () => resolve());
    });
    const addr = this.server.address();
    this.controlUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    return this.controlUrl;
  }

  /** Constant-time bearer check (hash first so lengths never leak through timing). */
  private authorized(req: http.IncomingMessage): boolean {
    const h = req.headers.authorization ?? '';
    const m = /^Bearer (.+)$/.exec(h);
    return m !== null && timingSafeEqual(digest(m[1]), this.tokenDigest);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const send = (status: number, body: unknown) => {
      const data = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), 'x-bridge-instance': this.instanceId });
      res.end(data);
    };
    try {
      if (!this.authorized(req)) throw new HttpError(401, 'invalid_token', 'missing or wrong bearer token');
      const url = new URL(req.url ?? '/', 'http://bridge');
      const path = url.pathname;
      const method = req.method ?? 'GET';
      // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
      if (method === 'GET' && path === '/health') return send(200, this.health());
      if (method === 'PUT' && path === '/trunks') {
        const { good, rejected } = checkTrunks(parse(TrunksBodySchema, await readJson(req, false, TRUNKS_BODY_MAX)).trunks, null);
        await this.serialTrunks(() => this.setTrunks(good));
        // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
        return send(200, { ok: true, count: good.length, rejected } satisfies PutTrunksAnswer);
      }
      const tenantTrunks = method === 'PUT' ? TENANT_TRUNKS_PATH.exec(path) : null;
      if (tenantTrunks) {
        // One tenant's set: replaces that tenant's trunks alone, so no tenant's volume (each
        // request is within the bounds) can take another tenant's trunks off the bridge.
        let tenantId: string;
        try {
          tenantId = decodeURIComponent(tenantTrunks[1]!);
        } catch {
          throw new HttpError(400, 'invalid_request', 'bad tenant id in the path');
        }
        const { good, rejected } = checkTrunks(parse(TrunksBodySchema, await readJson(req, false, TRUNKS_BODY_MAX)).trunks, tenantId);
        // One change of the set at a time: a tenant's push reads the others' trunks as they are.
        await this.serialTrunks(() => this.setTrunks([...[...this.pushed.values()].filter((t) => trunkTenant(t.id) !== tenantId), ...good]));
        // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
        return send(200, { ok: true, count: good.length, rejected } satisfies PutTrunksAnswer);
      }
      // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- send() ends the request; returning it keeps one exit per route, as the routes above
      if (method === 'PUT' && path === '/tls') return send(200, await this.setTls(parse(TlsBodySchema, await readJson(req))));
      if (method === 'POST' && path === '/calls') {
        const body = parse(PlaceCallSchema, await readJson(req));
        this.placeCall(body);
        // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
        return send(202, { accepted: true, callId: body.callId } satisfies PlaceCallAnswer);
      }
      if (method === 'POST' && path === '/rooms') {
        const body = parse(OpenRoomSchema, await readJson(req));
        if (this.calls.has(body.callId)) throw new HttpError(409, 'duplicate_call', `call ${body.callId} is already in progress`);
        // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
        return send(200, await this.rooms.open(body, this.o.maxCalls - this.calls.size - this.rooms.size));
      }
      if (method === 'GET' && path === '/calls') {
        // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
        return send(200, {
          calls: [
            ...[...this.calls.values()].map((c) => ({ callId: c.callId, state: c.state, trunkId: c.trunkId, startedAt: c.startedAt.toISOString() })),
            ...this.rooms.list().map((r) => ({ callId: r.callId, state: r.state, trunkId: null, startedAt: r.startedAt.toISOString() })),
            // Inbound SIP calls too: a core reconciling after a restart ends only what is not here.
            ...[...this.inbound.calls.values()].map((c) => ({ callId: c.callId, state: c.state, trunkId: c.trunkId, startedAt: c.startedAt.toISOString() })),
          ],
        } satisfies ListCallsAnswer);
      }
      const inbound = await this.inbound.control(method, path, () => readJson(req));
      // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
      if (inbound) return send(inbound.status, inbound.body);
      const tabs = await this.officeTabs.control(method, path, () => readJson(req));
      // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
      if (tabs) return send(tabs.status, tabs.body);
      // Not in the v1 contract table: media measurements for the benchmark and diagnostics.
      // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
      if (method === 'GET' && path === '/stats') return send(200, this.stats());
      const hang = /^\/calls\/([^/]+)\/hangup$/.exec(path);
      if (method === 'POST' && hang) {
        const body = parse(HangupSchema, await readJson(req, true));
        const id = decodeURIComponent(hang[1]);
        const room = this.rooms.get(id);
        if (room) {
          const state = room.state;
          room.hangup(room.outcomeFor(body.reason), '');
          // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
          return send(200, { ok: true, state } satisfies HangupAnswer);
        }
        const call = this.calls.get(id) ?? this.inbound.calls.get(id);
        if (!call) throw new HttpError(404, 'not_found', 'the bridge has no such call');
        const state = call.state;
        call.hangup(OutboundCall.outcomeFor(body.reason), '');
        // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
        return send(200, { ok: true, state } satisfies HangupAnswer);
      }
      throw new HttpError(404, 'not_found', `no route ${method} ${path}`);
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
      if (err instanceof RoomError) return send(err.status, { error: err.code, error_description: err.message } satisfies ControlError);
      // eslint-disable-next-line @typescript-eslint/no-confusing-void-expression -- answers and ends the async handler in one step
      if (err instanceof HttpError) return send(err.status, { error: err.code, error_description: err.message } satisfies ControlError);
      log('error', 'control request failed', { error: (err as Error).message });
      send(500, { error: 'server_error', error_description: 'internal bridge error' } satisfies ControlError);
    }
  }

  /**
   * PUT /tls: the appliance's certificate for SIP over TLS (desk phones): the listener opens with
   * the first one and swaps to each later one (a renewal) without dropping registered phones.
   */
  private async setTls(body: TlsBody): Promise<TlsAnswer> {
    const leaf = pemChain(body.cert)[0];
    let fingerprint: string;
    try {
      if (!leaf) throw new Error('no certificate');
      fingerprint = fingerprint256(leaf);
      createPrivateKey(body.key);
    } catch {
      // Never echo the key or the parser's words about it.
      throw new HttpError(400, 'invalid_request', 'cert/key: not a PEM certificate chain and private key');
    }
    if (this.o.sipTlsPort === null || this.o.sipTlsPort === undefined) return { ok: true, port: null, fingerprint };
    try {
      const port = await this.transport.listenTls(this.o.sipTlsPort, body);
      log('info', 'SIP over TLS', { host: this.o.sipHost, port, fingerprint });
      return { ok: true, port, fingerprint };
    } catch (err) {
      const e = err as Error & { code?: string };
      if (e.code === 'EADDRINUSE' || e.code === 'EACCES') throw new HttpError(409, 'tls_unavailable', `SIP TLS port ${this.o.sipTlsPort}: ${e.code}`);
      throw new HttpError(400, 'invalid_request', 'cert/key: the certificate and key do not match');
    }
  }

  health(): HealthAnswer {
    return {
      status: 'ok',
      version: BRIDGE_VERSION,
      sip: { host: this.o.sipHost, port: this.transport.port, tlsPort: this.transport.tlsPort },
      activeCalls: this.calls.size + (this.inbound?.calls.size ?? 0) + this.rooms.size,
      mediaThreads: this.media instanceof ThreadMediaHost ? this.media.priorities : {},
      trunks: [...this.trunks.values()].map((t) => {
        const st = this.ua.trunkStatus(t.id);
        const dns = this.dnsErrors.get(t.id);
        const media = this.trunkMedia.get(t.id);
        return { id: t.id, ...st, lastError: dns ?? st.lastError, ...(media ? { media } : {}) };
      }),
    };
  }

  #trunkChanges: Promise<unknown> = Promise.resolve();
  private serialTrunks(change: () => Promise<void>): Promise<void> {
    const next = this.#trunkChanges.then(change);
    this.#trunkChanges = next.catch(() => undefined);
    return next;
  }

  async setTrunks(trunks: Trunk[]): Promise<void> {
    const ids = new Set<string>();
    for (const t of trunks) {
      if (ids.has(t.id)) throw new HttpError(400, 'invalid_request', `duplicate trunk id ${t.id}`);
      ids.add(t.id);
    }
    const located = await Promise.all(trunks.map((t) => this.locate(t)));
    this.pushed.clear();
    for (const t of trunks) this.pushed.set(t.id, t);
    this.trunks.clear();
    for (const t of located) this.trunks.set(t.id, t);
    this.trunkMedia.keepOnly(this.trunks.keys());
    await this.ua.setTrunks(located, this.o.keepaliveMs > 0 ? this.o.keepaliveMs : 0);
    if (this.srvTimer) clearInterval(this.srvTimer);
    this.srvTimer = null;
    if (located.some((t) => t.dnsSrv)) {
      // SRV answers change (maintenance, failover): look again every 5 minutes.
      this.srvTimer = setInterval(() => void this.relocate(), SRV_REFRESH_MS);
      this.srvTimer.unref();
    }
  }

  private srvTimer: NodeJS.Timeout | null = null;
  private readonly dnsErrors = new Map<string, string>();

  /** A trunk with `dnsSrv` gets the address its SRV records name (RFC 3263); others as given. */
  private async locate(t: Trunk): Promise<LocatedTrunk> {
    if (!t.dnsSrv) {
      this.dnsErrors.delete(t.id);
      return t;
    }
    try {
      const all = (await this.resolver.locateAll(t.host, t.transport, t.port)).map((a) => ({ host: a.host, port: a.port }));
      this.dnsErrors.delete(t.id);
      return { ...t, addr: all[0], addrs: all };
    } catch (err) {
      // Keep the trunk: requests go to the host name (the system resolver, port as configured).
      const msg = (err as Error).message;
      this.dnsErrors.set(t.id, msg);
      log('warn', 'trunk DNS SRV lookup failed', { trunkId: t.id, error: msg });
      return t;
    }
  }

  private async relocate(): Promise<void> {
    for (const t of [...this.trunks.values()]) {
      if (!t.dnsSrv) continue;
      const next = await this.locate(t);
      const cur = this.trunks.get(t.id);
      // Mutated in place: calls and the UA hold the same trunk object.
      if (cur && next !== t) {
        cur.addr = next.addr;
        cur.addrs = next.addrs;
      }
    }
  }

  placeCall(req: PlaceCall): OutboundCall {
    if (this.calls.has(req.callId)) throw new HttpError(409, 'duplicate_call', `call ${req.callId} is already in progress`);
    if (this.calls.size + this.rooms.size >= this.o.maxCalls) throw new HttpError(503, 'no_capacity', 'the bridge carries its maximum number of calls');
    const known = req.trunkIds.filter((id) => this.trunks.has(id));
    if (known.length === 0) throw new HttpError(400, 'invalid_request', 'none of trunkIds is configured on the bridge');
    // Calls still opening their media have not picked a trunk yet: count each against every trunk
    // it may use, so two quick POSTs cannot both pass a trunk with room for one.
    const pending = (id: string) => {
      let n = 0;
      for (const c of this.calls.values()) if (c.trunkId === null && c.trunkIds.includes(id)) n++;
      return n;
    };
    if (known.every((id) => (this.trunkLoad.get(id) ?? 0) + pending(id) >= this.trunks.get(id)!.maxConcurrentCalls)) {
      throw new HttpError(503, 'no_capacity', 'every trunk of the call is at its maximum concurrent calls');
    }
    const factory = this.o.engineFactory ?? ((cfg: PlaceCall['engine']) => new GeminiLiveEngine(cfg, this.o.engineUrl));
    const call = new OutboundCall(req, {
      ua: this.ua,
      media: this.media,
      sipHost: this.o.sipHost,
      trunks: this.trunks,
      trunkLoad: this.trunkLoad,
      mediaTimeoutMs: this.o.mediaTimeoutMs ?? 0,
      engineFactory: factory,
      ringUser: (r, abort) => this.inbound.endpoints.ring(r, abort),
      emit: (type, callId, fields) => this.events.emit(type, callId, fields),
      onDone: (c) => {
        this.calls.delete(c.callId);
        log('info', 'call ended', {
          callId: c.callId,
          outcome: c.outcome,
          trunkId: c.trunkId,
          sipStatus: c.lastSipStatus,
          errorDetail: c.errorDetail || undefined,
        });
        this.trunkMedia.record(c.trunkId, c.metrics);
        if (c.metrics) {
          this.recent.push(c.metrics);
          if (this.recent.length > 2000) this.recent.shift();
        }
      },
    });
    this.calls.set(req.callId, call);
    void call.start();
    return call;
  }

  stats(): object {
    const cpu = process.cpuUsage();
    const mediaThreads = this.media instanceof ThreadMediaHost ? this.media.priorities : {};
    return {
      activeCalls: this.calls.size,
      eventsPending: this.events.pending,
      cpuUserMicros: cpu.user,
      cpuSystemMicros: cpu.system,
      uptimeSec: process.uptime(),
      gc: gcMode(),
      mediaThreads,
      ended: this.recent,
      activeRooms: this.rooms.size,
      webrtcThread: this.rooms.priority,
      webrtcGc: this.rooms.gc,
      roomsEnded: this.rooms.recent,
    };
  }

  async stop(): Promise<void> {
    for (const c of [...this.calls.values()]) c.hangup('failed', 'bridge shutting down');
    this.inbound?.stop();
    this.officeTabs?.stop();
    this.rooms.stopAll();
    // `ended` is emitted once each media leg has reported (a round trip to the media thread).
    const until = Date.now() + 2000;
    while ((this.calls.size || this.inbound?.calls.size || this.rooms.size) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    await this.events.drain(3000);
    this.events.stop();
    await this.ua?.shutdown();
    await this.transport.close();
    if (this.srvTimer) clearInterval(this.srvTimer);
    await this.media?.close();
    await this.rooms.close();
    await new Promise<void>((r) => {
      if (!this.server) return r();
      this.server.closeAllConnections();
      this.server.close(() => r());
    });
  }
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0];
    const where = issue?.path.join('.') || 'body';
    throw new HttpError(400, 'invalid_request', `${where}: ${issue?.message ?? 'invalid'}`);
  }
  return r.data;
}

/** A trunk set: 1000 trunks, each with a TLS CA of up to 16000 characters (control.ts). */
const TRUNKS_BODY_MAX = 20_000_000;

async function readJson(req: http.IncomingMessage, allowEmpty = false, max = 1_000_000): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > max) throw new HttpError(413, 'payload_too_large', `body larger than ${max / 1_000_000} MB`);
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text.trim()) {
    if (allowEmpty) return {};
    throw new HttpError(400, 'invalid_request', 'a JSON body is required');
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'invalid_request', 'body is not valid JSON');
  }
}
