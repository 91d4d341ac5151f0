/**
 * Inbound SIP at the bridge: INVITEs from configured trunks only (by source address, or digest
 * per trunk; anything else 403 and nothing more), the core's routing decision for each accepted
 * INVITE, the calls that follow, and the desk-phone registrar with its control endpoints
 * (PUT/GET /phones). bridge.ts wires it to the UA and the control server.
 */
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import type { z } from 'zod';
import { makeResponse, newTag, parseNameAddr, parseUri } from '../sip/message.ts';
import { IncomingInvite } from '../sip/uas.ts';
import type { ServerRequestContext } from '../sip/transaction.ts';
import type { LocatedTrunk } from '../schemas.ts';
import { log } from '../log.ts';
import { addressOf, DigestGuard } from './auth.ts';
import {
  InboundDecisionSchema,
  PhonesBodySchema,
  TransferDecisionSchema,
  type InboundDecision,
  type InboundQuery,
  type TransferDecision,
  type TransferQuery,
} from './control.ts';
import { InboundCall, type InboundCallDeps } from '../calls/inbound.ts';
import { DeskPhones } from './deskphones.ts';
import { UserEndpoints } from './endpoints.ts';
import { Registrar } from './registrar.ts';

/** What the inbound calls need (calls/inbound.ts), and how to ask the core. */
export interface InboundDeps extends Omit<InboundCallDeps, 'endpoints' | 'askTransfer' | 'onDone'> {
  callbackUrl: string | undefined;
  token: string;
  instanceId: string;
  /** Whether one more call fits (the bridge's maxCalls over outbound and inbound together). */
  hasCapacity: () => boolean;
  /** An inbound call ended (its media figures set), for the bridge's per-trunk totals. */
  onCallEnded?: (c: InboundCall) => void;
}

/** A control request the inbound part answers: the status and body, or null when it is not ours. */
export type ControlAnswer = { status: number; body: unknown } | null;

const ADDR_TTL_MS = 60_000;

export class InboundService {
  readonly registrar = new Registrar('sovcomms');
  /** The seam the browser office tab plugs into (endpoints.ts). */
  readonly endpoints = new UserEndpoints();
  readonly calls = new Map<string, InboundCall>();
  private readonly bySipCallId = new Map<string, InboundCall | 'pending'>();
  private readonly trunkDigest = new DigestGuard({ realm: 'sovcomms-trunk', proxy: true });
  private readonly addrCache = new Map<string, { at: number; ips: string[] }>();
  private refused = 0;

  constructor(private readonly d: InboundDeps) {
    this.endpoints.add(new DeskPhones(this.registrar, { ua: d.ua, media: d.media, sipHost: d.sipHost, mediaTimeoutMs: d.mediaTimeoutMs }));
  }

  /** Out-of-dialog requests from the UA: true when taken here. */
  incoming(ctx: ServerRequestContext): boolean {
    switch (ctx.req.method) {
      case 'REGISTER':
        this.registrar.handle(ctx);
        return true;
      case 'INVITE':
        // eslint-disable-next-line @typescript-eslint/use-unknown-in-catch-callback-variable -- the engine's, the transport's and our own rejections are Errors
        void this.onInvite(ctx).catch((err: Error) => {
          log('error', 'inbound INVITE failed', { error: err.message });
          ctx.respond(makeResponse(ctx.req, 500, 'Server Internal Error', newTag()));
        });
        return true;
      case 'CANCEL': {
        const c = this.bySipCallId.get(ctx.req.headers.get('Call-ID') as string);
        if (!c || c === 'pending') return false;
        c.dialog.cancel(ctx);
        return true;
      }
      default:
        return false;
    }
  }

  // ---- trunk check ------------------------------------------------------------------------------

  private async addressesOf(t: LocatedTrunk): Promise<string[]> {
    const hosts = [t.host, ...(t.addr ? [t.addr.host] : []), ...(t.addrs ?? []).map((a) => a.host)];
    const out: string[] = [];
    for (const h of hosts) {
      if (net.isIP(h)) {
        out.push(h);
        continue;
      }
      const hit = this.addrCache.get(h);
      if (hit && Date.now() - hit.at < ADDR_TTL_MS) {
        out.push(...hit.ips);
        continue;
      }
      try {
        const ips = (await lookup(h, { all: true })).map((a) => a.address);
        this.addrCache.set(h, { at: Date.now(), ips });
        out.push(...ips);
      } catch {
        this.addrCache.set(h, { at: Date.now(), ips: [] });
      }
    }
    return out;
  }

  /** The trunk the INVITE comes from, or null once it was answered (403, 407, or 503 while guesses wait). */
  private async authenticate(ctx: ServerRequestContext): Promise<LocatedTrunk | null> {
    const from = addressOf(ctx);
    const digestTrunks: LocatedTrunk[] = [];
    for (const t of this.d.trunks.values()) {
      if (t.inboundAuth === 'digest') digestTrunks.push(t);
      else if ((await this.addressesOf(t)).includes(from)) return t;
    }
    if (!digestTrunks.length) {
      // Count, log the first and every 100th: a scanner must not flood the log either.
      if (this.refused++ % 100 === 0) log('warn', 'inbound INVITE refused (no trunk matches)', { from, count: this.refused });
      ctx.respond(makeResponse(ctx.req, 403, 'Forbidden', newTag()));
      return null;
    }
    const withLogin = (u: string) => digestTrunks.find((x) => x.username !== undefined && x.password !== undefined && x.username === u);
    const username = this.trunkDigest.check(ctx, (u) => withLogin(u)?.password);
    return username === null ? null : (withLogin(username) ?? null);
  }

  // ---- calls ------------------------------------------------------------------------------------

  private async onInvite(ctx: ServerRequestContext): Promise<void> {
    const sipCallId = ctx.req.headers.get('Call-ID') as string;
    if (this.bySipCallId.has(sipCallId)) return; // a retransmission that outlived the transaction cache
    const trunk = await this.authenticate(ctx);
    if (!trunk) return;
    this.bySipCallId.set(sipCallId, 'pending');
    const dialog = new IncomingInvite(this.d.ua, ctx);
    const forget = () => setTimeout(() => this.bySipCallId.delete(sipCallId), 32_000).unref();
    const addressed = addressing(ctx);
    if (!addressed) {
      // RFC 3261 §21.4.1: a number that does not decode to text is a malformed request.
      dialog.reject(400, 'Bad Request');
      forget();
      return;
    }
    dialog.trying();
    if (!this.d.hasCapacity()) {
      dialog.reject(503, 'Service Unavailable');
      forget();
      return;
    }
    const { did, from, fromName } = addressed;
    let decision: InboundDecision;
    try {
      decision = await this.ask('inbound', { trunkId: trunk.id, did, from, fromName }, InboundDecisionSchema);
    } catch (err) {
      log('warn', 'inbound routing lookup failed', { error: (err as Error).message });
      dialog.reject(503, 'Service Unavailable');
      forget();
      return;
    }
    if (!decision.accept) {
      dialog.reject(decision.status, decision.reason);
      forget();
      return;
    }
    const call = new InboundCall(
      decision.callId,
      decision.tenantId,
      trunk.id,
      dialog,
      decision.targets,
      { number: from, name: fromName },
      {
        ...this.d,
        endpoints: this.endpoints,
        askTransfer: (q) => this.askTransfer(q),
        onDone: (c) => {
          this.calls.delete(c.callId);
          forget();
          log('info', 'inbound call ended', { callId: c.callId, outcome: c.outcome, trunkId: c.trunkId });
          this.d.onCallEnded?.(c);
        },
      },
    );
    this.calls.set(call.callId, call);
    this.bySipCallId.set(sipCallId, call);
    log('info', 'inbound call', { callId: call.callId, trunkId: trunk.id, targets: decision.targets.map((t) => t.kind) });
    await call.start();
  }

  askTransfer(q: TransferQuery): Promise<TransferDecision> {
    return this.ask('transfer', q, TransferDecisionSchema);
  }

  /** POST to the core's /internal/bridge/<what> (next to the events callback). */
  private async ask<T extends z.ZodType>(what: 'inbound' | 'transfer', body: InboundQuery | TransferQuery, schema: T): Promise<z.infer<T>> {
    if (!this.d.callbackUrl) throw new Error('no core callback URL');
    const res = await fetch(new URL(what, this.d.callbackUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.d.token}`, 'x-bridge-instance': this.d.instanceId },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5000),
    });
    const json = (await res.json().catch(() => null)) as unknown;
    if (!res.ok) throw new Error(`core answered ${res.status}`);
    const r = schema.safeParse(json);
    if (!r.success) throw new Error(`core answer outside the contract: ${r.error.issues[0]?.path.join('.')}`);
    return r.data;
  }

  // ---- control ----------------------------------------------------------------------------------

  control(method: string, path: string, body: () => Promise<unknown>): Promise<ControlAnswer> | ControlAnswer {
    if (path !== '/phones') return null;
    if (method === 'GET') return { status: 200, body: { phones: this.registrar.status() } };
    if (method !== 'PUT') return null;
    return body().then((b) => {
      const r = PhonesBodySchema.safeParse(b);
      if (!r.success) {
        const i = r.error.issues[0];
        return { status: 400, body: { error: 'invalid_request', error_description: `${i?.path.join('.') || 'body'}: ${i?.message ?? 'invalid'}` } };
      }
      this.registrar.setAccounts(r.data.phones);
      return { status: 200, body: { ok: true, count: r.data.phones.length } };
    });
  }

  stop(): void {
    for (const c of [...this.calls.values()]) c.hangup('failed', 'bridge shutting down');
  }
}

/**
 * The user part of a SIP URI as text: RFC 3261 §19.1.2 lets it carry `%HH` escapes (`%2B` for a
 * `+`), UTF-8 bytes once unescaped. Null for a malformed escape, bytes that are not UTF-8, or a
 * control character (U+0000-U+001F, U+007F) after unescaping: the number reaches routing, logs,
 * events and transcripts, where a line break or an escape sequence must never arrive.
 */
export function uriUserText(user: string): string | null {
  let text: string;
  try {
    text = decodeURIComponent(user);
  } catch {
    return null;
  }
  // eslint-disable-next-line no-control-regex -- the control characters are exactly what is refused
  return /[\u0000-\u001f\u007f]/.test(text) ? null : text.slice(0, 64);
}

/**
 * The dialled number (Request-URI user, else To user) and the caller (From user and display
 * name); null when either number holds what uriUserText refuses.
 */
function addressing(ctx: ServerRequestContext): { did: string; from: string; fromName: string } | null {
  const userOf = (uri: string): string | null => {
    let user: string;
    try {
      user = parseUri(uri).user;
    } catch {
      return '';
    }
    return uriUserText(user);
  };
  let did = userOf(ctx.req.uri);
  if (did === '') {
    try {
      did = userOf(parseNameAddr(ctx.req.headers.get('To') ?? '').uri);
    } catch {
      did = '';
    }
  }
  let from: string | null = '';
  let fromName = '';
  try {
    const na = parseNameAddr(ctx.req.headers.get('From') ?? '');
    from = userOf(na.uri);
    fromName = na.display.slice(0, 200);
  } catch {
    // no usable From: anonymous
  }
  if (did === null || from === null) return null;
  if (/^anonymous$/i.test(from)) from = '';
  return { did, from, fromName };
}
