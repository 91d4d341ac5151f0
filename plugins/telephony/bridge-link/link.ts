import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { z } from 'zod';
import { AppError, BadGatewayError, type Logger, ServiceUnavailableError, zodMessage } from '../../../server/sdk.ts';
import {
  ControlErrorSchema,
  HangupAnswerSchema,
  HealthAnswerSchema,
  ListCallsAnswerSchema,
  OpenRoomAnswerSchema,
  PlaceCallAnswerSchema,
  type OpenRoom,
  type OpenRoomAnswer,
  PutTrunksAnswerSchema,
  TlsAnswerSchema,
  type TlsAnswer,
  type TlsBody,
  type ControlError,
  type HangupAnswer,
  type HealthAnswer,
  type ListCallsAnswer,
  type PlaceCall,
  type PlaceCallAnswer,
  type PutTrunksAnswer,
  type Trunk,
} from '../control.ts';
import type { TelephonyConfig } from '../schemas.ts';
import { BRIDGE_NODE_FLAGS } from '../bridge/node-flags.ts';
import { BridgeFailedSchema, describeFailure, type BridgeFailed } from '../bridge/start-failure.ts';
import { ControlAnswerTooLarge, ControlHttp, type ControlHttpAnswer, ControlUnreachable } from './control-http.ts';
import { PhonesAnswerSchema, PhonesStatusSchema, type PhoneAccount } from '../bridge/inbound/control.ts';
import { OfficeTabAnswerAnswerSchema, OfficeTabOkSchema, OfficeTabsAnswerSchema, type OfficeTab } from '../bridge/inbound/officetab-control.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** Running from `dist/` (compiled JavaScript): no TypeScript loader exists there. */
const COMPILED = import.meta.url.endsWith('.js');
/** POST /rooms may start the bridge's WebRTC thread first (see openRoom). */
const ROOM_OPEN_TIMEOUT_MS = 15_000;

/**
 * The command line of the embedded bridge (after the Node binary): the bridge's Node flags
 * (bridge/node-flags.ts), then, from the TypeScript tree, the entry through bin/run-ts.mjs; from
 * `dist/` the configured `.ts` entry names its compiled `.js` twin, run by plain Node. The working directory is the project root, except inside an asar archive (the
 * packaged app), which is not a directory the OS can enter.
 */
export function bridgeCommand(entryCfg: string, root = ROOT, compiled = COMPILED): { argv: string[]; cwd: string } {
  const entry = path.resolve(root, compiled ? entryCfg.replace(/\.ts$/, '.js') : entryCfg);
  const cwd = root.includes(`.asar${path.sep}`) || root.endsWith('.asar') ? path.dirname(root.split('.asar')[0]!) : root;
  return { argv: [...BRIDGE_NODE_FLAGS, ...(entry.endsWith('.ts') ? [path.join(root, 'bin/run-ts.mjs'), entry] : [entry])], cwd };
}

interface BridgeAnswer {
  status: number;
  body: Record<string, unknown>;
  text: string;
}

/** A control answer: the contract's body for a 2xx, the error body otherwise. */
export type ControlAnswer<T> = { ok: true; status: number; body: T; text: string } | { ok: false; status: number; error: ControlError; text: string };

export type BridgeState = 'off' | 'starting' | 'ready' | 'down' | 'stopped';

export interface BridgeHooks {
  /** A bridge (new process, or the remote one) answers: push trunks, reconcile. */
  onReady(): Promise<void>;
  /** The embedded bridge died: its calls are gone. */
  onDied(reason: string): void;
}

/**
 * The core's side of CONTROL-API.md: the bridge's address and control token, the embedded
 * process supervisor (spawn, wait for `bridge-ready`, restart with backoff), and control requests
 * (503 bridge_not_configured when off, 502 bridge_unreachable when it does not answer).
 */
export class BridgeLink {
  state: BridgeState;
  #url: string | undefined;
  #token: string;
  readonly #http = new ControlHttp();
  #child: ChildProcess | undefined;
  #restarts = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  /** When the running bridge reported ready (performance.now()); null while it has not (yet). */
  #upSince: number | null = null;
  #stopping = false;
  #readyWaiters = new Set<() => void>();
  lastExit: string | null = null;
  /** What the last bridge reported before it exited (the SIP port taken...), until one gets ready. */
  lastFailure: { reason: string; message: string } | null = null;
  /** Restarts of the embedded bridge since this core started (metrics). */
  restartCount = 0;

  constructor(
    private readonly cfg: TelephonyConfig['bridge'],
    private readonly log: Logger,
    private readonly hooks: BridgeHooks,
  ) {
    this.state = cfg.mode === 'off' ? 'off' : 'starting';
    this.#url = cfg.mode === 'remote' ? cfg.url : undefined;
    this.#token = cfg.mode === 'remote' ? (cfg.token ?? '') : '';
  }

  get configured(): boolean {
    return this.cfg.mode !== 'off';
  }

  get mode(): TelephonyConfig['bridge']['mode'] {
    return this.cfg.mode;
  }

  /** The control URL (loopback) while the bridge is up. */
  get controlUrl(): string | undefined {
    return this.#url;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Constant-time check of a callback's bearer against the current control token. */
  checkToken(presented: string): boolean {
    if (!this.#token) return false;
    const a = crypto.createHash('sha256').update(presented).digest();
    const b = crypto.createHash('sha256').update(this.#token).digest();
    return crypto.timingSafeEqual(a, b);
  }

  /** Starts the embedded bridge (once the core listens: it needs the callback URL) or greets the remote one. */
  async start(callbackUrl: string): Promise<void> {
    if (this.cfg.mode === 'off') return;
    if (this.cfg.mode === 'remote') {
      if (!this.cfg.url || !this.cfg.token) throw new Error('telephony: bridge.mode remote needs bridge.url and bridge.token');
      try {
        // Through the contract, as the health watch does: a server that answers, but with 401 (a
        // wrong token) or not as a bridge, is not a bridge we can use.
        await this.health();
        this.setReady();
        await this.hooks.onReady();
      } catch (e) {
        this.state = 'down';
        this.log.warn({ err: (e as Error).message }, 'remote bridge not usable at start');
      }
      return;
    }
    this.spawnEmbedded(callbackUrl);
  }

  private spawnEmbedded(callbackUrl: string): void {
    if (this.#stopping) return;
    this.state = 'starting';
    this.#token = crypto.randomBytes(32).toString('base64url');
    this.#url = undefined;
    const env: NodeJS.ProcessEnv = { ...process.env };
    // The master key and the core's config never reach the bridge process.
    delete env.SOVCOMMS_MASTER_KEY;
    delete env.SOVCOMMS_CONFIG_JSON;
    Object.assign(env, {
      SOVCOMMS_BRIDGE_CONTROL_PORT: '0',
      SOVCOMMS_BRIDGE_TOKEN: this.#token,
      SOVCOMMS_BRIDGE_CALLBACK_URL: callbackUrl,
      SOVCOMMS_BRIDGE_SIP_PORT: String(this.cfg.sipPort),
      SOVCOMMS_BRIDGE_SIP_HOST: this.cfg.sipHost,
      SOVCOMMS_BRIDGE_SIP_TLS_PORT: this.cfg.sipTlsPort === false ? 'off' : String(this.cfg.sipTlsPort),
      SOVCOMMS_BRIDGE_RTP_PORTS: this.cfg.rtpPorts,
    });
    if (this.cfg.aiEngineUrl) env.SOVCOMMS_AI_ENGINE_URL = this.cfg.aiEngineUrl;
    if (this.cfg.callbackCaFile) env.NODE_EXTRA_CA_CERTS = path.resolve(this.cfg.callbackCaFile);
    else if (callbackUrl.startsWith('https:')) {
      this.log.warn({ callbackUrl }, "https callback URL without bridge.callbackCaFile: the bridge must trust this server's certificate");
    }
    const { argv, cwd } = bridgeCommand(this.cfg.entry);
    // Under Electron (the desktop appliance) process.execPath is the Electron binary: this makes
    // it run the bridge as plain Node instead of opening a second app.
    if (process.versions.electron) env.ELECTRON_RUN_AS_NODE = '1';
    const child = spawn(process.execPath, argv, {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    this.#child = child;
    this.#upSince = null;
    let failed: BridgeFailed | undefined;
    const readyTimer = setTimeout(() => {
      if (this.#child === child && this.state === 'starting') {
        this.log.error({ pid: child.pid }, 'bridge did not report ready in time; killing it');
        child.kill('SIGKILL');
      }
    }, this.cfg.readyTimeoutMs);
    readyTimer.unref();
    const onReadyMsg = (msg: unknown) => {
      const m = msg as { type?: string; controlUrl?: string } | null;
      if (m?.type === 'bridge-failed') {
        const f = BridgeFailedSchema.safeParse(m);
        if (f.success && this.#child === child) failed = f.data;
        return;
      }
      if (!m || m.type !== 'bridge-ready' || typeof m.controlUrl !== 'string' || this.#child !== child || this.state === 'ready') return;
      clearTimeout(readyTimer);
      this.#url = m.controlUrl;
      this.setReady();
      this.log.info({ pid: child.pid, controlUrl: m.controlUrl }, 'bridge ready');
      this.hooks.onReady().catch((e: unknown) => this.log.warn({ err: (e as Error).message }, 'bridge ready hook failed'));
    };
    child.on('message', onReadyMsg);
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('{') && (line.includes('bridge-ready') || line.includes('bridge-failed'))) {
        try {
          onReadyMsg(JSON.parse(line));
          return;
        } catch {
          // Not the ready line after all: log it below.
        }
      }
      this.log.info({ bridge: line.slice(0, 500) }, 'bridge output');
    });
    // The bridge logs JSON lines ({level, msg, ...fields}) to stderr: keep their level.
    readline.createInterface({ input: child.stderr! }).on('line', (line) => {
      let rec: Record<string, unknown> | undefined;
      try {
        const v = JSON.parse(line) as unknown;
        if (v && typeof v === 'object' && !Array.isArray(v)) rec = v as Record<string, unknown>;
      } catch {
        rec = undefined;
      }
      if (!rec) return this.log.warn({ bridge: line.slice(0, 500) }, 'bridge stderr');
      const { level, msg, time: _t, name: _n, ...fields } = rec;
      const lv = level === 'error' || level === 'warn' || level === 'debug' ? level : 'info';
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the bridge's log line: its msg is a string, anything else is logged as it prints
      this.log[lv]({ bridge: fields }, `bridge: ${String(msg ?? '').slice(0, 300)}`);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(readyTimer);
      if (this.#child !== child) return;
      this.#child = undefined;
      this.#url = undefined;
      const reason = `bridge exited (${signal ?? `code ${code}`})`;
      this.lastExit = reason;
      if (this.#stopping) {
        this.state = 'stopped';
        return;
      }
      this.state = 'down';
      // Backoff: doubles per death, capped; it resets only after a minute of good health, so a
      // bridge that never gets ready (its SIP port taken) is retried ever more slowly.
      if (this.#upSince !== null && performance.now() - this.#upSince > 60_000) this.#restarts = 0;
      const delay = Math.min(this.cfg.restartMaxMs, this.cfg.restartMinMs * 2 ** this.#restarts);
      this.#restarts++;
      this.restartCount++;
      if (failed) {
        // The bridge said why: that sentence is the one line (no stack trace, none per restart but this).
        const message = describeFailure(failed, { port: 'plugins.telephony.bridge.sipPort', host: 'plugins.telephony.bridge.sipHost' });
        this.lastFailure = { reason: failed.reason, message };
        this.log.error(
          { code, signal, reason: failed.reason, address: failed.address, port: failed.port, retryInMs: delay },
          `telephony bridge could not start: ${message}; retrying in ${Math.round(delay / 100) / 10} s`,
        );
      } else this.log.error({ code, signal, retryInMs: delay }, 'bridge died; restarting');
      this.hooks.onDied(reason);
      this.#restartTimer = setTimeout(() => this.spawnEmbedded(callbackUrl), delay);
      this.#restartTimer.unref();
    });
  }

  /** Remote mode: the health watch saw the bridge answer again, or stop answering. */
  markRemote(up: boolean): void {
    if (this.cfg.mode !== 'remote') return;
    if (up) this.setReady();
    else this.state = 'down';
  }

  private setReady(): void {
    this.state = 'ready';
    this.lastFailure = null;
    this.#upSince = performance.now();
    for (const w of this.#readyWaiters) w();
    this.#readyWaiters.clear();
  }

  /** Waits (bounded) for a starting or restarting bridge. */
  async waitReady(ms: number): Promise<boolean> {
    if (this.state === 'ready') return true;
    if (this.state === 'off' || this.state === 'stopped') return false;
    return new Promise<boolean>((resolve) => {
      const done = () => {
        clearTimeout(t);
        resolve(true);
      };
      const t = setTimeout(() => {
        this.#readyWaiters.delete(done);
        resolve(this.state === 'ready');
      }, ms);
      this.#readyWaiters.add(done);
    });
  }

  // ---- the control API, typed (control.ts is the contract) --------------------------------------
  // Each method throws 503 bridge_not_configured (mode off), 502 bridge_unreachable (no answer, or
  // the embedded bridge is not up) or 502 bridge_protocol (a 2xx outside the contract, naming the
  // field); the REST layer renders those as they are.

  /** GET /health. A 2xx outside the contract, or any error answer, is a 502. */
  async health(): Promise<HealthAnswer> {
    return this.expectOk('GET /health', await this.request('GET', '/health'), HealthAnswerSchema);
  }

  /** PUT /trunks with the full set (it replaces the bridge's). */
  async putTrunks(trunks: Trunk[]): Promise<ControlAnswer<PutTrunksAnswer>> {
    return this.answer('PUT /trunks', await this.request('PUT', '/trunks', { trunks }), PutTrunksAnswerSchema);
  }

  /** PUT /tenants/:tenantId/trunks: one tenant's set (replaces that tenant's trunks only; an older bridge: 404). */
  async putTenantTrunks(tenantId: string, trunks: Trunk[]): Promise<ControlAnswer<PutTrunksAnswer>> {
    const path = `/tenants/${encodeURIComponent(tenantId)}/trunks`;
    return this.answer(`PUT ${path}`, await this.request('PUT', path, { trunks }), PutTrunksAnswerSchema);
  }

  /** POST /calls: 202 when the bridge took the call; 409 duplicate_call, 400, 503 no_capacity as error answers. */
  async placeCall(call: PlaceCall): Promise<ControlAnswer<PlaceCallAnswer>> {
    return this.answer('POST /calls', await this.request('POST', '/calls', call), PlaceCallAnswerSchema);
  }

  /** POST /rooms: a browser visitor's offer; the answer carries the bridge's SDP. */
  async openRoom(room: OpenRoom): Promise<ControlAnswer<OpenRoomAnswer>> {
    // The bridge's first room starts its WebRTC thread (a worker loading werift) before it can
    // answer: about 1 s on an idle machine, 3 to 6 s on a loaded 2-core VM. Later joins take ~0.1 s.
    const ms = Math.max(this.cfg.requestTimeoutMs, ROOM_OPEN_TIMEOUT_MS);
    return this.answer('POST /rooms', await this.request('POST', '/rooms', room, ms), OpenRoomAnswerSchema);
  }

  /** POST /calls/:id/hangup: 404 not_found as an error answer when the bridge has no such call. */
  async hangup(callId: string, reason: string): Promise<ControlAnswer<HangupAnswer>> {
    return this.answer('POST /calls/:id/hangup', await this.request('POST', `/calls/${encodeURIComponent(callId)}/hangup`, { reason }), HangupAnswerSchema);
  }

  /** GET /calls: the calls the bridge carries now. */
  async listCalls(): Promise<ListCallsAnswer> {
    return this.expectOk('GET /calls', await this.request('GET', '/calls'), ListCallsAnswerSchema);
  }

  /** PUT /phones: the full set of desk-phone logins of the registrar (CONTROL-API.md "Inbound"). */
  async putPhones(phones: PhoneAccount[]): Promise<ControlAnswer<z.infer<typeof PhonesAnswerSchema>>> {
    return this.answer('PUT /phones', await this.request('PUT', '/phones', { phones }), PhonesAnswerSchema);
  }

  /** PUT /tls: the certificate and key of SIP over TLS (the key only on this hop, never logged). */
  async putTls(body: TlsBody): Promise<ControlAnswer<TlsAnswer>> {
    return this.answer('PUT /tls', await this.request('PUT', '/tls', body), TlsAnswerSchema);
  }

  /** GET /phones: how many phones are registered per account. */
  async phones(): Promise<z.infer<typeof PhonesStatusSchema>> {
    return this.expectOk('GET /phones', await this.request('GET', '/phones'), PhonesStatusSchema);
  }

  /** PUT /officetabs: the full set of office tabs open now (CONTROL-API.md "Office tab"). */
  async putOfficeTabs(tabs: OfficeTab[]): Promise<ControlAnswer<z.infer<typeof OfficeTabsAnswerSchema>>> {
    return this.answer('PUT /officetabs', await this.request('PUT', '/officetabs', { tabs }), OfficeTabsAnswerSchema);
  }

  /** POST /officetabs/answer: the user accepted in a tab; the tab's offer in, the bridge's answer out. */
  async answerOfficeTab(b: { ringId: string; tabId: string; offerSdp: string }): Promise<ControlAnswer<z.infer<typeof OfficeTabAnswerAnswerSchema>>> {
    return this.answer('POST /officetabs/answer', await this.request('POST', '/officetabs/answer', b), OfficeTabAnswerAnswerSchema);
  }

  /** POST /officetabs/decline|hangup: the user declined a ringing call or hung up in a tab. */
  async releaseOfficeTab(what: 'decline' | 'hangup', b: { ringId: string; tabId: string }): Promise<ControlAnswer<z.infer<typeof OfficeTabOkSchema>>> {
    return this.answer(`POST /officetabs/${what}`, await this.request('POST', `/officetabs/${what}`, b), OfficeTabOkSchema);
  }

  /** A 2xx body checked against its schema, or the error body of any other status. */
  private answer<T>(what: string, a: BridgeAnswer, schema: z.ZodType<T>): ControlAnswer<T> {
    if (a.status >= 200 && a.status < 300) return { ok: true, status: a.status, body: this.conform(what, a, schema), text: a.text };
    const err = ControlErrorSchema.safeParse(a.body);
    return { ok: false, status: a.status, error: err.success ? err.data : { error: 'bridge_error', error_description: a.text.slice(0, 200) }, text: a.text };
  }

  private expectOk<T>(what: string, a: BridgeAnswer, schema: z.ZodType<T>): T {
    const r = this.answer(what, a, schema);
    if (!r.ok) throw bridgeError(what, r);
    return r.body;
  }

  private conform<T>(what: string, a: BridgeAnswer, schema: z.ZodType<T>): T {
    const r = schema.safeParse(a.body);
    if (!r.success) throw new BadGatewayError('bridge_protocol', `the telephony bridge answered ${what} outside the control contract: ${zodMessage(r.error)}`);
    return r.data;
  }

  /**
   * One raw request of the control API (the typed methods above are what callers use): any HTTP
   * answer is returned as is; no answer is 502 bridge_unreachable, an answer past the transport's
   * bound (control-http.ts) 502 bridge_protocol.
   */
  private async request(method: string, p: string, body?: unknown, timeoutMs = this.cfg.requestTimeoutMs): Promise<BridgeAnswer> {
    if (this.cfg.mode === 'off') {
      throw new ServiceUnavailableError('bridge_not_configured', 'no telephony bridge is configured (plugins.telephony.bridge.mode is off)');
    }
    if (this.cfg.mode === 'embedded' && this.state !== 'ready') await this.waitReady(Math.min(this.cfg.readyTimeoutMs, 5000));
    const url = this.#url;
    if (!url)
      throw new BadGatewayError('bridge_unreachable', `the telephony bridge is not running (${this.state}${this.lastExit ? `; last: ${this.lastExit}` : ''})`);
    let a: ControlHttpAnswer;
    try {
      a = await this.#http.request(
        method,
        url + p,
        { authorization: `Bearer ${this.#token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body === undefined ? undefined : JSON.stringify(body),
        timeoutMs,
      );
    } catch (e) {
      if (e instanceof ControlAnswerTooLarge) {
        throw new BadGatewayError('bridge_protocol', `the telephony bridge at ${url} answered ${method} ${p} with ${e.message}`);
      }
      const cause = e instanceof ControlUnreachable ? e.reason : (e as Error).name;
      throw new BadGatewayError('bridge_unreachable', `the telephony bridge at ${url} did not answer (${cause})`);
    }
    const text = a.text;
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      parsed = { raw: text.slice(0, 500) };
    }
    return { status: a.status, body: parsed, text: text.slice(0, 2000) };
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    this.#http.close();
    const child = this.#child;
    if (!child) {
      this.state = this.cfg.mode === 'off' ? 'off' : 'stopped';
      return;
    }
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(t);
    this.state = 'stopped';
  }
}

/**
 * 502 bridge_error for a bridge answer that is not 2xx, with its stable reason: `rejected` (the
 * bridge refused the request, 4xx), `failed` (it failed, 5xx) or `unreadable` (no control error
 * body); the operation, the bridge's status and its own error code (when it is a code) as params.
 */
export function bridgeError(operation: string, a: { status: number; error: { error: string } }): AppError<'bridge_error'> {
  const code = a.error.error;
  // answer() fills in bridge_error when the body was no control error.
  const readable = code !== 'bridge_error';
  return new AppError(502, 'bridge_error', `the telephony bridge answered ${operation} with ${a.status} ${code}`, {
    reason: !readable ? 'unreadable' : a.status >= 500 ? 'failed' : 'rejected',
    params: { operation, bridge_status: a.status, ...(readable && /^[a-z][a-z0-9_]{0,63}$/.test(code) ? { bridge_code: code } : {}) },
  });
}
