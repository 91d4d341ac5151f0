/**
 * A focused SIP user agent: outbound INVITE dialogs (RFC 3261 §13, §12), CANCEL (§9), BYE
 * (§15), REFER (RFC 3515), REGISTER (§10) and OPTIONS keepalive (§11) towards trunks.
 * Inbound calls and the desk-phone registrar live in ../inbound/: they take out-of-dialog requests
 * through `incoming` and their dialogs through `dialogs`; without them an INVITE is answered 480.
 */
import { EventEmitter } from 'node:events';
import {
  formatNameAddr,
  newBranch,
  newCallId,
  newTag,
  parseCSeq,
  parseNameAddr,
  SipHeaders,
  tagOf,
  makeResponse,
  type SipRequest,
  type SipResponse,
} from './message.ts';
import { digestAuthorization, pickChallenge } from './digest.ts';
import { TransactionLayer, type ClientTransaction, type ServerRequestContext, type Timers, DEFAULT_TIMERS } from './transaction.ts';
import type { Peer, SipTransport, TransportName } from './transport.ts';

export const USER_AGENT = 'sovcomms-bridge/1';
const ALLOW = 'INVITE, ACK, CANCEL, BYE, OPTIONS, NOTIFY, REFER, INFO';

export interface TrunkTarget {
  id: string;
  host: string;
  port: number;
  transport: TransportName;
  username?: string;
  password?: string;
  fromDomain?: string;
  callerId?: string;
  /** Locate the server by DNS SRV (the bridge fills `addr`). */
  dnsSrv?: boolean;
  /** Resolved address to send to, when it differs from host:port. */
  addr?: { host: string; port: number };
  /** Every SRV target with an address, in RFC 2782 order (`addr` is the first). */
  addrs?: { host: string; port: number }[];
}

function peerOf(t: TrunkTarget): Peer {
  return { host: t.addr?.host ?? t.host, port: t.addr?.port ?? t.port, transport: t.transport };
}
/** The trunk's host as URIs name it: no port when DNS SRV locates the server (RFC 3263 §4.2). */
function uriHost(t: TrunkTarget): string {
  return t.dnsSrv ? (t.host.includes(':') ? `[${t.host}]` : t.host) : hostPort(t.host, t.port);
}
function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export interface OutboundCallEvents {
  provisional: [res: SipResponse];
  answered: [res: SipResponse];
  /** Final failure of the INVITE (non-2xx after auth, or timeout as 408). */
  failed: [status: number, reason: string];
  /** The far end sent BYE. */
  bye: [];
  notify: [req: SipRequest];
  info: [req: SipRequest];
  /** A re-INVITE inside the dialog carried an SDP offer (media moved, hold, session refresh). */
  reoffer: [sdp: string];
}

type CallState = 'calling' | 'early' | 'confirmed' | 'terminated';

export class OutboundCall extends EventEmitter<OutboundCallEvents> {
  readonly callId: string;
  readonly localTag = newTag();
  remoteTag = '';
  state: CallState = 'calling';
  private cseq = 1;
  private invite!: SipRequest;
  private inviteTx: ClientTransaction | null = null;
  private ack: SipRequest | null = null;
  private remoteTarget: string;
  private routeSet: string[] = [];
  private authTried = 0;
  private gotProvisional = false;
  private cancelRequested = false;
  private cancelSent = false;
  /**
   * The TU's bound on an INVITE that a proxy took (100 Trying) but that never progresses, armed
   * with each INVITE for 64*T1 (the Timer B value). The transaction stops Timer B on any 1xx
   * (RFC 3261 §17.1.1.2), so without this a proxy that sends 100 and then nothing would hold the
   * call forever. Modelled on a proxy's Timer C (§16.6 step 11, §16.7 step 2): on expiry after a
   * provisional response, CANCEL and treat the branch as timed out (408). Only a 100 leaves it
   * armed: 100 is hop-by-hop (§8.2.6.1) and says nothing of the callee, while 180/183 come from
   * the callee's side and hand the decision to the ring timeout (the call's own TU timer).
   */
  private progressTimer: NodeJS.Timeout | null = null;
  /** §9.1: 64*T1 after CANCEL without a final response, the INVITE transaction is given up. */
  private cancelTimer: NodeJS.Timeout | null = null;
  readonly localUri: string;
  readonly remoteUri: string;

  /** Where this call's requests go: the trunk's address, or one of its SRV targets (RFC 3263 §4.3). */
  private readonly peer: Peer;

  constructor(
    private readonly ua: SipUserAgent,
    readonly trunk: TrunkTarget,
    readonly number: string,
    private readonly displayName: string,
    private readonly sdpOffer: string,
    target?: { host: string; port: number },
  ) {
    super();
    this.peer = target ? { host: target.host, port: target.port, transport: trunk.transport } : peerOf(trunk);
    this.callId = newCallId(ua.host);
    const domain = trunk.fromDomain || trunk.host;
    const user = trunk.callerId || trunk.username || 'sovcomms';
    this.localUri = `sip:${encodeURIComponent(user).replace(/%2B/g, '+')}@${domain}`;
    this.remoteUri = `sip:${number}@${uriHost(trunk)}`;
    this.remoteTarget = this.remoteUri;
  }

  start(): void {
    this.sendInvite(null);
  }

  private sendInvite(authHeader: [string, string] | null): void {
    const h = new SipHeaders();
    h.append('Via', this.ua.via(this.trunk.transport));
    h.append('Max-Forwards', '70');
    h.append('From', formatNameAddr({ display: this.displayName, uri: this.localUri, params: { tag: this.localTag } }));
    h.append('To', `<${this.remoteUri}>`);
    h.append('Call-ID', this.callId);
    h.append('CSeq', `${this.cseq} INVITE`);
    h.append('Contact', this.ua.contact(this.trunk.transport));
    h.append('Allow', ALLOW);
    h.append('Supported', 'replaces');
    h.append('User-Agent', USER_AGENT);
    h.append('Content-Type', 'application/sdp');
    if (authHeader) h.append(authHeader[0], authHeader[1]);
    this.invite = { kind: 'request', method: 'INVITE', uri: this.remoteUri, headers: h, body: Buffer.from(this.sdpOffer) };
    this.ua.register(this);
    this.inviteTx = this.ua.layer.sendRequest(this.invite, this.peer, {
      onResponse: (res) => this.onInviteResponse(res),
      onTimeout: (reason) => this.fail(408, reason),
    });
    this.clearProgressTimer();
    this.progressTimer = setTimeout(() => this.onNoProgress(), 64 * this.ua.layer.timers.T1);
  }

  /**
   * 64*T1 after the INVITE, still no 180/183 and no final response. In Calling (nothing heard)
   * the transaction's Timer B fires at the same moment and reports the timeout itself. After a
   * 100 (Proceeding) we do what Timer B would have done, plus the CANCEL that §16.6 step 11
   * asks for, since the far end did take the request (and CANCEL needs a 1xx, §9.1).
   */
  private onNoProgress(): void {
    this.progressTimer = null;
    if (this.state !== 'calling' || this.inviteTx?.state !== 'proceeding' || this.cancelSent) return;
    this.cancelRequested = true;
    this.sendCancel();
    this.fail(408, 'SIP transaction timeout (no final response)');
  }

  private clearProgressTimer(): void {
    if (this.progressTimer) clearTimeout(this.progressTimer);
    this.progressTimer = null;
  }

  private onInviteResponse(res: SipResponse): void {
    if (res.status >= 200) {
      if (this.cancelTimer) clearTimeout(this.cancelTimer);
      this.cancelTimer = null;
      this.clearProgressTimer();
    }
    if (this.state === 'terminated') {
      // A 2xx that crossed our CANCEL after we had given up on the call (no-progress timeout):
      // the callee is connected, so ACK and BYE it (§9.1, §15) rather than leave it up.
      if (res.status >= 200 && res.status < 300 && this.cancelSent && !this.ack) this.confirm(res);
      return;
    }
    if (res.status < 200) {
      if (res.status > 100) {
        // The callee's side is alerting (or sending early media): the ring timeout decides now.
        this.clearProgressTimer();
        this.gotProvisional = true;
        if (this.state === 'calling') this.state = 'early';
        this.emit('provisional', res);
      } else this.gotProvisional = true;
      if (this.cancelRequested && !this.cancelSent) this.sendCancel();
      return;
    }
    if (res.status < 300) {
      this.confirm(res);
      return;
    }
    if ((res.status === 401 || res.status === 407) && !this.cancelRequested && this.authTried < 2) {
      const ch = pickChallenge(res.headers.getAll(res.status === 401 ? 'WWW-Authenticate' : 'Proxy-Authenticate'));
      // §22.2: retry once per challenge; a second challenge is accepted only when stale=true.
      if (ch && this.trunk.username !== undefined && this.trunk.password !== undefined && (this.authTried === 0 || ch.stale)) {
        this.authTried++;
        this.cseq++;
        const value = digestAuthorization(ch, { method: 'INVITE', uri: this.remoteUri, username: this.trunk.username, password: this.trunk.password, nc: 1 });
        this.gotProvisional = false;
        this.sendInvite([res.status === 401 ? 'Authorization' : 'Proxy-Authorization', value]);
        return;
      }
    }
    this.fail(res.status, res.reason);
  }

  private confirm(res: SipResponse): void {
    this.remoteTag = tagOf(res.headers.get('To'));
    const contact = res.headers.get('Contact');
    if (contact) this.remoteTarget = parseNameAddr(contact).uri;
    // §12.1.2: the route set is the Record-Route list in reverse order.
    this.routeSet = res.headers.getAll('Record-Route').reverse();
    this.ack = this.buildAck();
    this.sendAck();
    if (this.cancelRequested || this.state === 'terminated') {
      // 2xx crossed our CANCEL (§9.1): the call is up, so end it with BYE.
      this.state = 'confirmed';
      this.bye();
      return;
    }
    this.state = 'confirmed';
    this.emit('answered', res);
  }

  /** §13.2.2.4: the UA (not the transaction) ACKs every 2xx, including retransmissions. */
  on2xxRetransmission(): void {
    if (this.ack) this.sendAck();
  }

  /** §12.2.1.1: the headers every request inside the dialog starts with (new Via, route set). */
  private dialogHeaders(cseq: string): SipHeaders {
    const h = new SipHeaders();
    h.append('Via', this.ua.via(this.trunk.transport));
    for (const r of this.routeSet) h.append('Route', r);
    h.append('Max-Forwards', '70');
    h.append('From', this.invite.headers.get('From') as string);
    h.append('To', `<${this.remoteUri}>;tag=${this.remoteTag}`);
    h.append('Call-ID', this.callId);
    h.append('CSeq', cseq);
    return h;
  }

  private buildAck(): SipRequest {
    const h = this.dialogHeaders(`${this.cseq} ACK`);
    for (const a of this.invite.headers.getAll('Proxy-Authorization')) h.append('Proxy-Authorization', a);
    for (const a of this.invite.headers.getAll('Authorization')) h.append('Authorization', a);
    h.append('User-Agent', USER_AGENT);
    return { kind: 'request', method: 'ACK', uri: this.remoteTarget, headers: h, body: Buffer.alloc(0) };
  }

  private sendAck(): void {
    if (this.ack) this.ua.transport.send(this.ack, this.peer).catch(() => undefined);
  }

  /** True once any provisional response (even 100) arrived for the current INVITE. */
  get provisionalReceived(): boolean {
    return this.gotProvisional;
  }

  /** Ring timeout or hangup before answer. §9.1: CANCEL only after a provisional response. */
  cancel(): void {
    if (this.state === 'confirmed' || this.state === 'terminated') return;
    this.cancelRequested = true;
    if (this.gotProvisional && !this.cancelSent) this.sendCancel();
  }

  private sendCancel(): void {
    this.cancelSent = true;
    this.clearProgressTimer();
    const h = new SipHeaders();
    h.append('Via', this.invite.headers.getAll('Via')[0]); // §9.1: same branch as the INVITE
    for (const r of this.invite.headers.getAll('Route')) h.append('Route', r);
    h.append('Max-Forwards', '70');
    h.append('From', this.invite.headers.get('From') as string);
    h.append('To', this.invite.headers.get('To') as string);
    h.append('Call-ID', this.callId);
    h.append('CSeq', `${this.cseq} CANCEL`);
    h.append('User-Agent', USER_AGENT);
    const cancel: SipRequest = { kind: 'request', method: 'CANCEL', uri: this.invite.uri, headers: h, body: Buffer.alloc(0) };
    this.ua.layer.sendRequest(cancel, this.peer, {
      onResponse: () => undefined,
      onTimeout: () => {
        // No answer to CANCEL either: give up on the INVITE transaction.
        this.inviteTx?.terminate();
        this.fail(408, 'SIP CANCEL timeout');
      },
    });
    // §9.1: the CANCEL was answered but the INVITE got no final response (no 487) within 64*T1:
    // consider it cancelled and destroy its transaction, which in Proceeding has no timer of its
    // own (§17.1.1.2). Not cleared by fail(): the call may have ended before the 487 came.
    this.cancelTimer = setTimeout(() => {
      this.cancelTimer = null;
      const tx = this.inviteTx;
      if (tx && (tx.state === 'calling' || tx.state === 'proceeding')) {
        tx.terminate();
        this.fail(408, 'SIP no final response to the INVITE 64*T1 after CANCEL');
      }
    }, 64 * this.ua.layer.timers.T1);
  }

  private inDialog(method: string, extra: [string, string][] = [], body?: { type: string; data: string }): SipRequest {
    this.cseq++;
    const h = this.dialogHeaders(`${this.cseq} ${method}`);
    h.append('User-Agent', USER_AGENT);
    for (const [n, v] of extra) h.append(n, v);
    if (body) h.append('Content-Type', body.type);
    return { kind: 'request', method, uri: this.remoteTarget, headers: h, body: Buffer.from(body?.data ?? '') };
  }

  /** §15.1.1: BYE from our side; resolves when answered (or after the transaction timeout). */
  bye(): Promise<number> {
    if (this.state !== 'confirmed') {
      this.cancel();
      return Promise.resolve(0);
    }
    this.state = 'terminated';
    return new Promise((resolve) => {
      this.sendWithAuth(this.inDialog('BYE'), (status) => {
        this.ua.unregister(this);
        resolve(status);
      });
    });
  }

  /** RFC 3515 REFER: blind transfer of the far end to `target` (a SIP URI). */
  refer(target: string): Promise<number> {
    if (this.state !== 'confirmed') return Promise.resolve(481);
    return new Promise((resolve) => {
      const req = this.inDialog('REFER', [
        ['Refer-To', `<${target}>`],
        ['Referred-By', `<${this.localUri}>`],
        ['Contact', this.ua.contact(this.trunk.transport)],
      ]);
      this.sendWithAuth(req, resolve);
    });
  }

  /** Sends a non-INVITE request and answers one digest challenge (§22.2). */
  private sendWithAuth(req: SipRequest, done: (status: number) => void, retried = false): void {
    this.ua.layer.sendRequest(req, this.peer, {
      onResponse: (res) => {
        if (res.status < 200) return;
        if ((res.status === 401 || res.status === 407) && !retried && this.trunk.username !== undefined && this.trunk.password !== undefined) {
          const ch = pickChallenge(res.headers.getAll(res.status === 401 ? 'WWW-Authenticate' : 'Proxy-Authenticate'));
          if (ch) {
            const again = this.inDialog(req.method, []);
            for (const n of ['Refer-To', 'Referred-By', 'Contact']) for (const v of req.headers.getAll(n)) again.headers.append(n, v);
            again.headers.append(
              res.status === 401 ? 'Authorization' : 'Proxy-Authorization',
              digestAuthorization(ch, { method: req.method, uri: req.uri, username: this.trunk.username, password: this.trunk.password, nc: 1 }),
            );
            this.sendWithAuth(again, done, true);
            return;
          }
        }
        done(res.status);
      },
      onTimeout: () => done(408),
    });
  }

  private fail(status: number, reason: string): void {
    this.clearProgressTimer();
    if (this.state === 'terminated') return;
    this.state = 'terminated';
    this.ua.unregister(this);
    this.emit('failed', status, reason);
  }

  /** Requests from the far end inside this dialog. */
  handleRequest(ctx: ServerRequestContext): void {
    const { req } = ctx;
    switch (req.method) {
      case 'BYE': {
        TransactionLayer.reply(ctx, 200);
        if (this.state !== 'terminated') {
          this.state = 'terminated';
          this.ua.unregister(this);
          this.emit('bye');
        }
        return;
      }
      case 'INVITE': {
        // Session refresh / re-INVITE (§14.2): our side of the media stays as offered; the far
        // end's new offer may move its media or hold the call (the call logic follows it).
        if (req.body.length) this.emit('reoffer', req.body.toString('utf8'));
        const res = makeResponse(req, 200);
        res.headers.append('Contact', this.ua.contact(this.trunk.transport));
        res.headers.append('Content-Type', 'application/sdp');
        res.body = Buffer.from(this.sdpOffer);
        ctx.respond(res);
        return;
      }
      case 'ACK':
        return;
      case 'NOTIFY':
        TransactionLayer.reply(ctx, 200);
        this.emit('notify', req);
        return;
      case 'INFO':
        TransactionLayer.reply(ctx, 200);
        this.emit('info', req);
        return;
      case 'OPTIONS':
        TransactionLayer.reply(ctx, 200);
        return;
      default:
        TransactionLayer.reply(ctx, 501);
    }
  }
}

export interface TrunkStatus {
  registered: boolean | null;
  lastError: string | null;
}

interface RegisterTarget extends TrunkTarget {
  register: boolean;
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
    h.append('Contact', this.ua.contact(this.trunk.transport, this.trunk.username));
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

/** A dialog the UA does not own (an inbound call's UAS side, ../inbound/uas.ts). */
export interface ForeignDialog {
  readonly localTag: string;
  readonly remoteTag: string;
  handleRequest(ctx: ServerRequestContext): void;
}

export class SipUserAgent extends EventEmitter<UaEvents> {
  readonly layer: TransactionLayer;
  private readonly calls = new Map<string, OutboundCall>();
  private readonly registrations = new Map<string, Registration>();
  private readonly keepalive = new Map<string, { timer: NodeJS.Timeout; status: TrunkStatus; target: TrunkTarget }>();
  /** Dialogs of inbound calls by Call-ID (matched on our tag like the outbound ones). */
  readonly dialogs = new Map<string, ForeignDialog>();
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
  }

  get port(): number {
    return this.transport.port;
  }

  via(transport: TransportName): string {
    return `SIP/2.0/${transport.toUpperCase()} ${hostPort(this.host, this.port)};branch=${newBranch()};rport`;
  }
  contact(transport: TransportName, user = 'sovcomms'): string {
    return `<sip:${user}@${hostPort(this.host, this.port)};transport=${transport}>`;
  }

  register(call: OutboundCall): void {
    this.calls.set(call.callId, call);
  }
  unregister(call: OutboundCall): void {
    // Keep the dialog a few seconds to ACK retransmitted 2xx and answer retransmitted BYEs.
    setTimeout(() => {
      if (this.calls.get(call.callId) === call) this.calls.delete(call.callId);
    }, 5000).unref();
  }

  invite(trunk: TrunkTarget, number: string, displayName: string, sdpOffer: string, target?: { host: string; port: number }): OutboundCall {
    const call = new OutboundCall(this, trunk, number, displayName, sdpOffer, target);
    call.start();
    return call;
  }

  private onResponse(res: SipResponse): void {
    if (this.layer.matchResponse(res)) return;
    // A 2xx to INVITE after its transaction ended is a retransmission: ACK it again (§13.2.2.4).
    const cseq = parseCSeq(res.headers.get('CSeq') as string);
    if (cseq.method === 'INVITE' && res.status >= 200 && res.status < 300) {
      this.calls.get(res.headers.get('Call-ID') as string)?.on2xxRetransmission();
    }
  }

  private onRequest(req: SipRequest, from: Peer): void {
    const ctx = this.layer.acceptRequest(req, from);
    if (!ctx) return;
    const call = this.calls.get(req.headers.get('Call-ID') as string);
    const toTag = tagOf(req.headers.get('To'));
    // §12.2.2 puts our tag in To. Some peers (SIPp scenarios that echo [last_From:]/[last_To:])
    // swap the two; the Call-ID plus both tags still identify the dialog unambiguously.
    const fromTag = tagOf(req.headers.get('From'));
    if (call && (toTag === call.localTag || (fromTag === call.localTag && toTag === call.remoteTag && toTag !== ''))) {
      call.handleRequest(ctx);
      return;
    }
    const dialog = this.dialogs.get(req.headers.get('Call-ID') as string);
    if (dialog && toTag !== '' && (toTag === dialog.localTag || (fromTag === dialog.localTag && toTag === dialog.remoteTag))) {
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
          target: t as TrunkTarget,
        };
        entry.timer.unref();
        this.keepalive.set(t.id, entry);
        this.ping(entry);
      }
    }
    await Promise.all(stops);
  }

  private ping(entry: { status: TrunkStatus; target: TrunkTarget }): void {
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
