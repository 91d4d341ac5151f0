import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { z } from 'zod';
import {
  HangupSchema,
  PlaceCallSchema,
  TrunkSchema,
  TrunksBodySchema,
  trunkTenant,
  type BridgeCallState,
  type ControlError,
  type HangupAnswer,
  type HealthAnswer,
  type ListCallsAnswer,
  type PlaceCall,
  type PlaceCallAnswer,
  type PutTrunksAnswer,
  type Trunk,
} from '../../plugins/telephony/control.ts';

/**
 * A loopback stand-in for the telephony bridge that speaks the control contract
 * (plugins/telephony/control.ts, CONTROL-API.md): GET /health, PUT /trunks, POST /calls,
 * POST /calls/:id/hangup, GET /calls, bearer token on every request, and events POSTed to the
 * callback URL with seq and X-Bridge-Instance. Requests are checked with the contract's schemas,
 * as the real bridge checks them, so a core that sends something the bridge would refuse fails
 * here too. Tests drive the far end with emit() (loosely typed: tests send malformed events on
 * purpose); `/_test/*` endpoints do the same for a fake run as a process.
 */
export type FakeTrunk = Trunk;
export interface FakeCall {
  callId: string;
  state: BridgeCallState;
  trunkId: string;
  startedAt: string;
  place: PlaceCall;
}
/** The control requests whose answer a test may replace (an error, or a body outside the contract). */
export type FakeRoute = 'health' | 'putTrunks' | 'listCalls' | 'hangup';

export class FakeBridge {
  readonly instance = crypto.randomBytes(6).toString('hex');
  url = '';
  trunks: FakeTrunk[] = [];
  trunkPuts = 0;
  calls = new Map<string, FakeCall>();
  placed: PlaceCall[] = [];
  hangups: string[] = [];
  /** Answer POST /calls with this status and body instead of 202 (e.g. 503 no_capacity). */
  placeOverride: { status: number; body: unknown } | undefined;
  /** Answer the other requests with this status and body instead of the contract's answer. */
  answerOverride: Partial<Record<FakeRoute, { status: number; body: unknown }>> = {};
  /** Delay before answering POST /calls (a slow bridge: hangups that race the dial). */
  placeDelayMs = 0;
  /** Every POST /calls received, in order, before any delay (re-sent dials show up twice). */
  placeRequests: string[] = [];
  /** Told when a POST /calls arrives (before the delay). */
  onPlace: ((callId: string) => void) | undefined;
  /** After a hangup, report `ended` with outcome cancelled, as a real bridge does after BYE. */
  endOnHangup = true;
  #seq = 0;
  #server: http.Server;

  constructor(
    public token: string,
    public callbackUrl: string,
  ) {
    this.#server = http.createServer((req, res) => void this.handle(req, res));
  }

  async start(port = 0): Promise<string> {
    await new Promise<void>((r) => this.#server.listen(port, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  /** POSTs one event to the core; returns the HTTP status and body. */
  async emit(
    ev: Record<string, unknown> & { type: string; callId: string },
    opts: { seq?: number; token?: string } = {},
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const seq = opts.seq ?? ++this.#seq;
    const res = await fetch(this.callbackUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${opts.token ?? this.token}`, 'x-bridge-instance': this.instance },
      body: JSON.stringify({ seq, ts: new Date().toISOString(), ...ev }),
    });
    const text = await res.text();
    let body: Record<string, unknown> = { raw: text };
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      /* keep the raw text */
    }
    if (ev.type === 'ended') this.calls.delete(ev.callId);
    if (ev.type === 'answered') {
      const c = this.calls.get(ev.callId);
      if (c) c.state = 'answered';
    }
    return { status: res.status, body };
  }

  /**
   * Asks the core where an inbound INVITE goes (`POST /internal/bridge/inbound`, next to the
   * callback URL), as the real bridge does when a trunk sends one. An accepted call is carried from
   * then on (GET /calls lists it, state ringing) until its `ended` is emitted.
   */
  async askInbound(q: { trunkId: string; did: string; from: string; fromName?: string }): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(this.callbackUrl.replace(/\/events$/, '/inbound'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.token}`, 'x-bridge-instance': this.instance },
      body: JSON.stringify(q),
    });
    const body = (await res.json()) as Record<string, unknown>;
    if (res.status === 200 && body.accept === true) this.carry(String(body.callId), q.trunkId);
    return { status: res.status, body };
  }

  /** Lists `callId` as carried by this bridge (GET /calls), as a bridge that came back with it would. */
  carry(callId: string, trunkId: string): void {
    this.calls.set(callId, { callId, state: 'ringing', trunkId, startedAt: new Date().toISOString(), place: {} as PlaceCall });
  }

  /** The `ended` event of an answered conversation, with a small transcript. */
  static ended(callId: string, outcome: string, extra: Record<string, unknown> = {}): Record<string, unknown> & { type: string; callId: string } {
    const answered = !['no-answer', 'busy', 'failed'].includes(outcome);
    const t0 = Date.parse('2026-01-01T00:00:10Z');
    return {
      type: 'ended',
      callId,
      outcome,
      answered,
      answeredAt: answered ? new Date(t0).toISOString() : null,
      endedAt: new Date(t0 + 42_000).toISOString(),
      talkSec: answered ? 42 : 0,
      trunkId: null,
      errorDetail: outcome === 'failed' ? 'SIP 503 from trunk' : '',
      sipStatus: outcome === 'busy' ? 486 : outcome === 'failed' ? 503 : answered ? 200 : null,
      transcript: answered
        ? {
            turns: [
              { speaker: 'AI', text: 'Hello, this is the practice calling about your appointment.', ts: new Date(t0 + 1000).toISOString() },
              { speaker: 'Caller', text: 'Oh hi, yes, Tuesday works.', ts: new Date(t0 + 5000).toISOString() },
              { speaker: 'AI', text: 'Great, see you Tuesday. Goodbye!', ts: new Date(t0 + 9000).toISOString() },
            ],
            tokensTotal: 1234,
            tokensPrompt: 800,
            inputTurns: 1,
            outputTurns: 2,
            model: 'gemini-live-test',
            voice: 'Aoede',
            language: 'en-US',
          }
        : { turns: [], tokensTotal: 0, tokensPrompt: 0, inputTurns: 0, outputTurns: 0, model: '', voice: '', language: '' },
      ...extra,
    };
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const url = new URL(req.url ?? '/', 'http://x');
    let body: Record<string, unknown> = {};
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      return send(400, { error: 'invalid_request', error_description: 'bad JSON' });
    }
    // Test-only controls (no token: they exist only in this fake).
    if (url.pathname === '/_test/emit' && req.method === 'POST') {
      const out = await this.emit(body as Record<string, unknown> & { type: string; callId: string });
      return send(200, out);
    }
    if (url.pathname === '/_test/state') {
      return send(200, {
        instance: this.instance,
        trunks: this.trunks,
        trunkPuts: this.trunkPuts,
        calls: [...this.calls.values()],
        placed: this.placed,
        hangups: this.hangups,
      });
    }
    if (url.pathname === '/_test/inbound' && req.method === 'POST') {
      return send(200, await this.askInbound(body as { trunkId: string; did: string; from: string }));
    }
    if (url.pathname === '/_test/crash') {
      send(200, { ok: true });
      setTimeout(() => process.exit(3), 20);
      return;
    }
    const fail = (status: number, error: string, description: string) => send(status, { error, error_description: description } satisfies ControlError);
    /** The contract's check of a request body, answered as the real bridge answers it (400 invalid_request). */
    const parse = <T extends z.ZodType>(schema: T, value: unknown): z.infer<T> | undefined => {
      const r = schema.safeParse(value);
      if (r.success) return r.data;
      const i = r.error.issues[0];
      fail(400, 'invalid_request', `${i?.path.join('.') || 'body'}: ${i?.message ?? 'invalid'}`);
      return undefined;
    };
    const override = (route: FakeRoute): boolean => {
      const o = this.answerOverride[route];
      if (o) send(o.status, o.body);
      return o !== undefined;
    };
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- a fake reads headers as text, whatever arrives
    const auth = String(req.headers.authorization ?? '');
    if (auth !== `Bearer ${this.token}`) return fail(401, 'invalid_token', 'bad control token');
    if (req.method === 'GET' && url.pathname === '/health') {
      if (override('health')) return;
      return send(200, {
        status: 'ok',
        version: 'fake-1',
        sip: { host: '127.0.0.1', port: 5060 },
        activeCalls: this.calls.size,
        trunks: this.trunks.map((t) => ({ id: t.id, registered: t.register ? true : null, lastError: null })),
      } satisfies HealthAnswer);
    }
    const tenantPath = /^\/tenants\/([^/]+)\/trunks$/.exec(url.pathname);
    if (req.method === 'PUT' && (url.pathname === '/trunks' || tenantPath)) {
      const put = parse(TrunksBodySchema, body);
      if (!put) return;
      if (override('putTrunks')) return;
      // As the real bridge: each trunk on its own; one outside TrunkSchema (or, in a tenant's set,
      // another tenant's) is refused alone. A tenant's set replaces that tenant's trunks only.
      const tenantId = tenantPath ? decodeURIComponent(tenantPath[1]!) : null;
      const rejected: PutTrunksAnswer['rejected'] = [];
      const good: FakeTrunk[] = [];
      put.trunks.forEach((raw, i) => {
        const r = TrunkSchema.safeParse(raw);
        const id = (raw as { id?: unknown } | null)?.id;
        if (r.success && (tenantId === null || trunkTenant(r.data.id) === tenantId)) good.push(r.data);
        else {
          const issue = r.success ? { path: ['id'], message: `not a trunk of tenant ${tenantId}` } : r.error.issues[0];
          rejected.push({ id: typeof id === 'string' ? id : `#${i}`, error: issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid trunk' });
        }
      });
      this.trunks = [...(tenantId === null ? [] : this.trunks.filter((t) => trunkTenant(t.id) !== tenantId)), ...good];
      this.trunkPuts++;
      return send(200, { ok: true, count: good.length, rejected } satisfies PutTrunksAnswer);
    }
    if (req.method === 'GET' && url.pathname === '/calls') {
      if (override('listCalls')) return;
      return send(200, { calls: [...this.calls.values()].map(({ place: _p, ...c }) => c) } satisfies ListCallsAnswer);
    }
    if (req.method === 'POST' && url.pathname === '/calls') {
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the request's callId is a string
      this.placeRequests.push(String(body.callId ?? ''));
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the request's callId is a string
      this.onPlace?.(String(body.callId ?? ''));
      if (this.placeDelayMs) await new Promise((r) => setTimeout(r, this.placeDelayMs));
      if (this.placeOverride) return send(this.placeOverride.status, this.placeOverride.body);
      const place = parse(PlaceCallSchema, body);
      if (!place) return;
      const callId = place.callId;
      if (this.calls.has(callId)) return fail(409, 'duplicate_call', `call ${callId} exists`);
      this.placed.push(place);
      this.calls.set(callId, { callId, state: 'dialing', trunkId: place.trunkIds[0]!, startedAt: new Date().toISOString(), place });
      return send(202, { accepted: true, callId } satisfies PlaceCallAnswer);
    }
    const m = /^\/calls\/([^/]+)\/hangup$/.exec(url.pathname);
    if (req.method === 'POST' && m) {
      if (!parse(HangupSchema, body)) return;
      if (override('hangup')) return;
      const id = decodeURIComponent(m[1]!);
      const c = this.calls.get(id);
      if (!c) return fail(404, 'not_found', `no call ${id}`);
      this.hangups.push(id);
      const wasAnswered = c.state === 'answered';
      c.state = 'ending';
      send(200, { ok: true, state: 'ending' } satisfies HangupAnswer);
      if (this.endOnHangup) {
        setTimeout(
          () =>
            void this.emit({
              ...FakeBridge.ended(id, 'cancelled'),
              answered: wasAnswered,
              answeredAt: wasAnswered ? new Date().toISOString() : null,
              talkSec: wasAnswered ? 3 : 0,
              ...(wasAnswered ? {} : { transcript: FakeBridge.ended(id, 'no-answer').transcript }),
            }).catch(() => {}),
          10,
        );
      }
      return;
    }
    fail(404, 'not_found', `no ${req.method} ${url.pathname}`);
  }
}
