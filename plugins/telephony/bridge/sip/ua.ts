/**
 * A focused SIP user agent: REGISTER (§10) and OPTIONS keepalive (§11) towards trunks, INVITEs out
 * (uac.ts), and requests matched to their dialog (dialog.ts, both roles, §12.2.2). Inbound calls and
 * the desk-phone registrar live in ../inbound/: they take out-of-dialog requests through
 * `incoming` (answering an INVITE with uas.ts); without them an INVITE is answered 480.
 */
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { newBranch, newCallId, newTag, parseCSeq, parseNameAddr, SipHeaders, tagOf, makeResponse, type SipRequest, type SipResponse } from './message.ts';
import { digestAuthorization, pickChallenge } from './digest.ts';
import { TransactionLayer, type ServerRequestContext, type Timers, DEFAULT_TIMERS } from './transaction.ts';
import type { Peer, SipTransport, TransportName } from './transport.ts';
import { ALLOW, USER_AGENT, type Dialog, type DialogHost } from './dialog.ts';
import { hostPort, OutgoingInvite, peerOf, uriHost } from './uac.ts';
import type { SipTarget, Trunk } from '../schemas.ts';

/** RFC 5626 §4.1: a stable instance id per trunk (a UUID, RFC 4122 layout, from the trunk id). */
function instanceUuid(trunkId: string): string {
  const h = createHash('sha256').update(`sovcomms-bridge:${trunkId}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** A trunk as REGISTER needs it: a target that may ask for a binding. */
type RegisterTarget = SipTarget & Pick<Trunk, 'register'>;

export interface TrunkStatus {
  registered: boolean | null;
  lastError: string | null;
}

/** REGISTER binding for one trunk (§10.2), refreshed before it expires. */
class Registration {
  private readonly callId: string;
  private cseq = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  status: TrunkStatus = { registered: false, lastError: null };

  constructor(
    private readonly ua: SipUserAgent,
    readonly trunk: RegisterTarget,
    private readonly expires = 300,
  ) {
    this.callId = newCallId(ua.host);
  }

  start(): void {
    this.send(null);
  }

  private send(auth: [string, string] | null, expires = this.expires, onDone?: () => void): void {
    const domain = this.trunk.fromDomain || this.trunk.host;
    const aor = `sip:${this.trunk.username ?? 'sovcomms'}@${domain}`;
    const uri = `sip:${uriHost(this.trunk)}`;
    this.cseq++;
    const h = new SipHeaders();
    h.append('Via', this.ua.via(this.trunk.transport));
    h.append('Max-Forwards', '70');
    h.append('From', `<${aor}>;tag=${newTag()}`);
    h.append('To', `<${aor}>`);
    h.append('Call-ID', this.callId);
    h.append('CSeq', `${this.cseq} REGISTER`);
    const contact = this.ua.contact(this.trunk.transport, this.trunk.username);
    if (this.trunk.transport === 'tls') {
      // RFC 5626 §4.2.1: one flow (reg-id) of one instance, so the registrar may ask for keepalives.
      h.append('Contact', `${contact};reg-id=1;+sip.instance="<urn:uuid:${instanceUuid(this.trunk.id)}>"`);
      h.append('Supported', 'path, outbound');
    } else h.append('Contact', contact);
    h.append('Expires', String(expires));
    h.append('User-Agent', USER_AGENT);
    if (auth) h.append(auth[0], auth[1]);
    const req: SipRequest = { kind: 'request', method: 'REGISTER', uri, headers: h, body: Buffer.alloc(0) };
    this.ua.layer.sendRequest(req, peerOf(this.trunk), {
      onResponse: (res) => {
        if (res.status < 200) return;
        if ((res.status === 401 || res.status === 407) && !auth && this.trunk.password !== undefined) {
          const ch = pickChallenge(res.headers.getAll(res.status === 401 ? 'WWW-Authenticate' : 'Proxy-Authenticate'));
          if (ch) {
            const value = digestAuthorization(ch, { method: 'REGISTER', uri, username: this.trunk.username ?? '', password: this.trunk.password, nc: 1 });
            this.send([res.status === 401 ? 'Authorization' : 'Proxy-Authorization', value], expires, onDone);
            return;
          }
        }
        if (onDone) return onDone();
        if (res.status >= 200 && res.status < 300) {
          // §10.2.4: the granted expiry is in the Contact's expires param or the Expires header.
          let granted = Number(res.headers.get('Expires') ?? expires);
          for (const c of res.headers.getAll('Contact')) {
            const e = parseNameAddr(c).params.expires;
            if (e !== undefined) granted = Number(e);
          }
          if (!Number.isFinite(granted) || granted <= 0) granted = expires;
          this.status = { registered: true, lastError: null };
          this.keepFlow(res);
          // Refresh well before expiry: at half the granted time, at most 60 s early.
          this.schedule(Math.max(1, Math.max(granted / 2, granted - 60)) * 1000);
        } else {
          this.status = { registered: false, lastError: `SIP ${res.status} ${res.reason}` };
          this.schedule(30_000);
        }
      },
      onTimeout: (reason) => {
        if (onDone) return onDone();
        this.status = { registered: false, lastError: reason };
        this.schedule(30_000);
      },
    });
  }

  /**
   * RFC 5626 §4.4.1: when the registrar asks (Flow-Timer, or Require: outbound), a CRLF keepalive
   * on the flow, every 80 to 100 % of Flow-Timer (default 95 to 120 s for a stream); a flow that
   * fails is registered again at once (§4.5), over a new connection.
   */
  private keepFlow(res: SipResponse): void {
    const flowTimer = Number(res.headers.get('Flow-Timer') ?? NaN);
    const outbound = /(^|,)\s*outbound\s*(,|$)/i.test(res.headers.getAll('Require').join(','));
    if (!(flowTimer > 0) && !outbound) return;
    const sec = flowTimer > 0 ? flowTimer * (0.8 + 0.2 * Math.random()) : 95 + 25 * Math.random();
    const peer = peerOf(this.trunk);
    if (!this.ua.transport.keepFlowAlive(peer, Math.max(1, sec) * 1000)) return;
    this.flowPeer = peer;
  }

  /** The flow this registration keeps alive (RFC 5626), if the registrar asked. */
  flowPeer: Peer | null = null;

  /** Its flow failed: register again now. */
  flowFailed(): void {
    if (this.stopped) return;
    this.status = { registered: false, lastError: 'RFC 5626 keepalive: no pong within 10 s' };
    this.flowPeer = null;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.send(null), ms);
    this.timer.unref();
  }

  /** Removes the binding (Expires: 0) on shutdown or when the trunk is removed. */
  stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (!this.status.registered) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, 2000);
      this.send(null, 0, () => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

export interface UaEvents {
  malformed: [err: Error];
}

export class SipUserAgent extends EventEmitter<UaEvents> implements DialogHost {
  readonly layer: TransactionLayer;
  private readonly registrations = new Map<string, Registration>();
  private readonly keepalive = new Map<string, { timer: NodeJS.Timeout; status: TrunkStatus; target: SipTarget }>();
  /** Every dialog, ours (UAC) or answered (UAS), by Call-ID; a request is its dialog's when the tags match. */
  readonly dialogs = new Map<string, Dialog>();
  /** Out-of-dialog requests (INVITE, CANCEL, REGISTER) another part takes: true when it did. */
  incoming: ((ctx: ServerRequestContext) => boolean) | null = null;

  constructor(
    readonly transport: SipTransport,
    readonly host: string,
    timers: Timers = DEFAULT_TIMERS,
  ) {
    super();
    this.layer = new TransactionLayer(transport, timers);
    transport.on('message', (msg, from) => {
      try {
        if (msg.kind === 'response') this.onResponse(msg);
        else this.onRequest(msg, from);
      } catch (err) {
        this.emit('malformed', err as Error);
      }
    });
    transport.on('malformed', (err) => this.emit('malformed', err));
    transport.on('flowFailed', (peer) => {
      for (const r of this.registrations.values()) if (r.flowPeer && r.flowPeer.host === peer.host && r.flowPeer.port === peer.port) r.flowFailed();
    });
  }

  get port(): number {
    return this.transport.port;
  }

  /**
   * Our Via. Over TLS (RFC 3261 §26, §18.2.1) with `alias` (RFC 5923): the server may send its own
   * requests back over this connection; our certificate-less TLS listener, when there is one,
   * is the sent-by port.
   */
  via(transport: TransportName): string {
    if (transport === 'tls') return `SIP/2.0/TLS ${hostPort(this.host, this.tlsPort)};branch=${newBranch()};rport;alias`;
    return `SIP/2.0/${transport.toUpperCase()} ${hostPort(this.host, this.port)};branch=${newBranch()};rport`;
  }
  /**
   * Our Contact. Over TLS a SIPS URI when the dialog is SIPS (§8.1.1.8), else `sip:` with
   * `transport=tls`: RFC 5630 §3.1.3 deprecates the parameter for SIPS, but a `sip:` target over
   * TLS (a carrier's PSTN numbers, which cannot promise TLS to the end, §3.2) still needs it.
   */
  contact(transport: TransportName, user = 'sovcomms', secure = false): string {
    if (transport === 'tls' && secure) return `<sips:${user}@${hostPort(this.host, this.tlsPort)}>`;
    if (transport === 'tls') return `<sip:${user}@${hostPort(this.host, this.tlsPort)};transport=tls>`;
    return `<sip:${user}@${hostPort(this.host, this.port)};transport=${transport}>`;
  }

  /** The TLS listener's port, else 5061 (§26.3.1: where a TLS peer would look for us). */
  get tlsPort(): number {
    return this.transport.tlsPort ?? 5061;
  }

  /** An INVITE to `number` at `target` (a trunk, or a desk phone's address); `server`: one of its SRV servers. */
  invite(target: SipTarget, number: string, displayName: string, sdpOffer: string, server?: { host: string; port: number }): OutgoingInvite {
    const call = new OutgoingInvite(this, target, number, displayName, sdpOffer, server);
    call.start();
    return call;
  }

  private onResponse(res: SipResponse): void {
    if (this.layer.matchResponse(res)) return;
    // A 2xx to INVITE after its transaction ended is a retransmission: ACK it again (§13.2.2.4).
    const cseq = parseCSeq(res.headers.get('CSeq') as string);
    if (cseq.method === 'INVITE' && res.status >= 200 && res.status < 300) {
      this.dialogs.get(res.headers.get('Call-ID') as string)?.sendAck();
    }
  }

  private onRequest(req: SipRequest, from: Peer): void {
    const ctx = this.layer.acceptRequest(req, from);
    if (!ctx) return;
    const toTag = tagOf(req.headers.get('To'));
    // §12.2.2 puts our tag in To. Some peers (SIPp scenarios that echo [last_From:]/[last_To:])
    // swap the two; the Call-ID plus both tags still identify the dialog unambiguously.
    const dialog = this.dialogs.get(req.headers.get('Call-ID') as string);
    if (dialog?.owns(tagOf(req.headers.get('From')), toTag)) {
      dialog.handleRequest(ctx);
      return;
    }
    if (!toTag && this.incoming?.(ctx)) return;
    switch (req.method) {
      case 'ACK':
        return;
      case 'OPTIONS': {
        const res = makeResponse(req, 200, undefined, newTag());
        res.headers.append('Allow', ALLOW);
        res.headers.append('Accept', 'application/sdp');
        ctx.respond(res);
        return;
      }
      case 'INVITE':
        if (toTag) TransactionLayer.reply(ctx, 481, newTag());
        else ctx.respond(makeResponse(req, 480, 'Temporarily Unavailable', newTag()));
        return;
      case 'CANCEL':
      case 'BYE':
        TransactionLayer.reply(ctx, 481, newTag());
        return;
      default:
        TransactionLayer.reply(ctx, 501, newTag());
    }
  }

  /** Applies a full trunk set: REGISTER where asked, OPTIONS keepalive for all (§11). */
  async setTrunks(trunks: RegisterTarget[], keepaliveMs = 30_000): Promise<void> {
    const ids = new Set(trunks.map((t) => t.id));
    const stops: Promise<void>[] = [];
    for (const [id, reg] of this.registrations) {
      const t = trunks.find((x) => x.id === id);
      if (!t || !t.register || JSON.stringify(t) !== JSON.stringify(reg.trunk)) {
        stops.push(reg.stop());
        this.registrations.delete(id);
      }
    }
    for (const [id, k] of this.keepalive) {
      if (!ids.has(id)) {
        clearInterval(k.timer);
        this.keepalive.delete(id);
      }
    }
    for (const t of trunks) {
      if (t.register && !this.registrations.has(t.id)) {
        const r = new Registration(this, t);
        this.registrations.set(t.id, r);
        r.start();
      }
      const k = this.keepalive.get(t.id);
      if (keepaliveMs <= 0) continue;
      if (k) k.target = t;
      else {
        const entry = {
          timer: setInterval(() => this.ping(entry), keepaliveMs),
          status: { registered: null, lastError: null } as TrunkStatus,
          target: t as SipTarget,
        };
        entry.timer.unref();
        this.keepalive.set(t.id, entry);
        this.ping(entry);
      }
    }
    await Promise.all(stops);
  }

  private ping(entry: { status: TrunkStatus; target: SipTarget }): void {
    const t = entry.target;
    const h = new SipHeaders();
    h.append('Via', this.via(t.transport));
    h.append('Max-Forwards', '70');
    h.append('From', `<sip:sovcomms@${t.fromDomain || this.host}>;tag=${newTag()}`);
    h.append('To', `<sip:${uriHost(t)}>`);
    h.append('Call-ID', newCallId(this.host));
    h.append('CSeq', '1 OPTIONS');
    h.append('Accept', 'application/sdp');
    h.append('User-Agent', USER_AGENT);
    const req: SipRequest = { kind: 'request', method: 'OPTIONS', uri: `sip:${uriHost(t)}`, headers: h, body: Buffer.alloc(0) };
    this.layer.sendRequest(req, peerOf(t), {
      // §11.2: any final response (even 4xx/5xx) proves the trunk is reachable.
      onResponse: (res) => {
        if (res.status >= 200) entry.status.lastError = null;
      },
      onTimeout: (reason) => {
        entry.status.lastError = `OPTIONS keepalive: ${reason}`;
      },
    });
  }

  trunkStatus(id: string): TrunkStatus {
    const reg = this.registrations.get(id);
    const k = this.keepalive.get(id);
    if (reg) return { registered: reg.status.registered, lastError: reg.status.lastError ?? k?.status.lastError ?? null };
    return { registered: null, lastError: k?.status.lastError ?? null };
  }

  async shutdown(): Promise<void> {
    for (const k of this.keepalive.values()) clearInterval(k.timer);
    this.keepalive.clear();
    await Promise.all([...this.registrations.values()].map((r) => r.stop()));
    this.registrations.clear();
    this.layer.shutdown();
  }
}
