/**
 * One SIP dialog (RFC 3261 §12), whichever side made it: the UAC's outgoing INVITE (uac.ts) or
 * the UAS's answer to an incoming one (uas.ts). It owns the dialog state of §12.1 (Call-ID, both
 * tags, both parties, the remote target, the route set, our CSeq) and everything inside the
 * dialog both ways: requests from the far end (BYE, re-INVITE, ACK, INFO, NOTIFY, OPTIONS,
 * UPDATE; §12.2.2) and ours (BYE, REFER, the 2xx ACK; §12.2.1.1), answering a digest challenge
 * with the trunk's credentials where there are some (§22.2). Outbound calls, inbound calls,
 * desk-phone and PSTN legs and transfers all use this one dialog.
 */
import { EventEmitter } from 'node:events';
import { makeResponse, SipHeaders, type SipRequest } from './message.ts';
import { digestAuthorization, pickChallenge } from './digest.ts';
import { TransactionLayer, type ServerRequestContext } from './transaction.ts';
import type { Peer, SipTransport, TransportName } from './transport.ts';

export const USER_AGENT = 'sovcomms-bridge/1';
export const ALLOW = 'INVITE, ACK, CANCEL, BYE, OPTIONS, NOTIFY, REFER, INFO';

/** What a dialog needs of the user agent (ua.ts implements it). */
export interface DialogHost {
  readonly layer: TransactionLayer;
  readonly transport: SipTransport;
  via(transport: TransportName): string;
  /** `secure`: a SIPS dialog, whose Contact must be a SIPS URI (RFC 3261 §8.1.1.8, §12.1.1). */
  contact(transport: TransportName, user?: string, secure?: boolean): string;
  /** The dialogs requests are matched to, by Call-ID (then both tags). */
  readonly dialogs: Map<string, Dialog>;
}

export interface DialogEvents {
  /** The far end hung up (its BYE was answered 200). */
  bye: [];
  /** A re-INVITE carried an SDP offer (media moved, hold, session refresh); answered with our SDP unchanged. */
  reoffer: [sdp: string];
  /** The ACK of our 2xx arrived (UAS). */
  ack: [];
  notify: [req: SipRequest];
  info: [req: SipRequest];
}

export interface DialogInit {
  role: 'uac' | 'uas';
  callId: string;
  localTag: string;
  /** Our party as From of our requests, with our tag (§12.2.1.1). */
  local: string;
  /** Our party's URI (Referred-By of a REFER). */
  localUri: string;
  /** The far party as To of our requests; its tag is added once known. */
  remote: string;
  remoteTag: string;
  remoteTarget: string;
  /** §12.1: the Route headers of our requests, in order. */
  routeSet: string[];
  /** Our last CSeq number (the next request takes one more). */
  cseq: number;
  peer: Peer;
  /** Answers a 401/407 to our in-dialog requests (the trunk's account). */
  credentials?: { username: string; password: string };
  /** Our SDP, which a re-INVITE is answered with. */
  localSdp: string;
  /** The INVITE's Request-URI was a SIPS URI (RFC 3261 §26.2: TLS on every hop, our Contact `sips:`). */
  secure?: boolean;
}

export type DialogState = 'early' | 'confirmed' | 'terminated';

export class Dialog extends EventEmitter<DialogEvents> {
  readonly role: 'uac' | 'uas';
  readonly callId: string;
  readonly localTag: string;
  remoteTag: string;
  state: DialogState = 'early';
  cseq: number;
  remoteTarget: string;
  routeSet: string[];
  readonly peer: Peer;
  localSdp: string;
  /** A SIPS dialog (DialogInit.secure). */
  readonly secure: boolean;
  /** UAC: the ACK of the 2xx, sent again for each retransmitted 2xx (§13.2.2.4). */
  ack: SipRequest | null = null;
  /** Our party as the From of our requests. */
  readonly local: string;
  private readonly localUri: string;
  private remote: string;
  private readonly credentials: DialogInit['credentials'];

  constructor(
    private readonly ua: DialogHost,
    init: DialogInit,
  ) {
    super();
    this.role = init.role;
    this.callId = init.callId;
    this.localTag = init.localTag;
    this.remoteTag = init.remoteTag;
    this.local = init.local;
    this.localUri = init.localUri;
    this.remote = init.remote;
    this.remoteTarget = init.remoteTarget;
    this.routeSet = init.routeSet;
    this.cseq = init.cseq;
    this.peer = init.peer;
    this.credentials = init.credentials;
    this.localSdp = init.localSdp;
    this.secure = init.secure ?? false;
    ua.dialogs.set(this.callId, this);
  }

  /** §12.2.2 (and peers that swap From and To): the request belongs to this dialog. */
  owns(fromTag: string, toTag: string): boolean {
    return toTag !== '' && (toTag === this.localTag || (fromTag === this.localTag && toTag === this.remoteTag));
  }

  /** UAC, §12.1.2: the 2xx names the far end's tag, its Contact (remote target) and the route set. */
  establish(remoteTag: string, remoteTarget: string | null, recordRoute: string[]): void {
    this.remoteTag = remoteTag;
    this.remote = `${this.remote};tag=${remoteTag}`;
    if (remoteTarget) this.remoteTarget = remoteTarget;
    this.routeSet = [...recordRoute].reverse();
  }

  /** §12.2.1.1: the headers every request inside the dialog starts with (a new Via, the route set). */
  headers(cseq: string): SipHeaders {
    const h = new SipHeaders();
    h.append('Via', this.ua.via(this.peer.transport));
    for (const r of this.routeSet) h.append('Route', r);
    h.append('Max-Forwards', '70');
    h.append('From', this.local);
    h.append('To', this.remote);
    h.append('Call-ID', this.callId);
    h.append('CSeq', cseq);
    return h;
  }

  /** Our next request inside the dialog. */
  request(method: string, extra: [string, string][] = [], body?: { type: string; data: string }): SipRequest {
    this.cseq++;
    const h = this.headers(`${this.cseq} ${method}`);
    h.append('User-Agent', USER_AGENT);
    for (const [n, v] of extra) h.append(n, v);
    if (body) h.append('Content-Type', body.type);
    return { kind: 'request', method, uri: this.remoteTarget, headers: h, body: Buffer.from(body?.data ?? '') };
  }

  /** Sends one of our requests; resolves with the final status (408 on timeout), one digest challenge answered. */
  send(method: string, extra: [string, string][] = []): Promise<number> {
    return new Promise((resolve) => this.sendWithAuth(this.request(method, extra), extra, resolve, false));
  }

  private sendWithAuth(req: SipRequest, extra: [string, string][], done: (status: number) => void, retried: boolean): void {
    this.ua.layer.sendRequest(req, this.peer, {
      onResponse: (res) => {
        if (res.status < 200) return;
        const cred = this.credentials;
        if ((res.status === 401 || res.status === 407) && !retried && cred) {
          const ch = pickChallenge(res.headers.getAll(res.status === 401 ? 'WWW-Authenticate' : 'Proxy-Authenticate'));
          if (ch) {
            const again = this.request(req.method, extra);
            again.headers.append(
              res.status === 401 ? 'Authorization' : 'Proxy-Authorization',
              digestAuthorization(ch, { method: req.method, uri: req.uri, username: cred.username, password: cred.password, nc: 1 }),
            );
            this.sendWithAuth(again, extra, done, true);
            return;
          }
        }
        done(res.status);
      },
      onTimeout: () => done(408),
    });
  }

  /** §15.1.1: BYE from our side; resolves when answered (408 after the transaction timeout). */
  bye(): Promise<number> {
    if (this.state === 'terminated') return Promise.resolve(0);
    this.state = 'terminated';
    return this.send('BYE').then((status) => {
      this.forget();
      return status;
    });
  }

  /** RFC 3515 REFER: blind transfer of the far end to `target` (a SIP URI). */
  refer(target: string): Promise<number> {
    if (this.state !== 'confirmed') return Promise.resolve(481);
    return this.send('REFER', [
      ['Refer-To', `<${target}>`],
      ['Referred-By', `<${this.localUri}>`],
      ['Contact', this.ua.contact(this.peer.transport, undefined, this.secure)],
    ]);
  }

  /** UAC, §13.2.2.4: the UA (not the transaction) ACKs every 2xx, retransmissions too. */
  sendAck(): void {
    if (this.ack) this.ua.transport.send(this.ack, this.peer).catch(() => undefined);
  }

  /** Requests from the far end inside this dialog. */
  handleRequest(ctx: ServerRequestContext): void {
    const { req } = ctx;
    switch (req.method) {
      case 'ACK':
        if (this.role === 'uas') this.emit('ack');
        return;
      case 'BYE':
        TransactionLayer.reply(ctx, 200);
        if (this.state !== 'terminated') {
          this.end();
          this.emit('bye');
        }
        return;
      case 'INVITE': {
        // §14.2: our side of the media stays as it is; the far end's offer may move its media or
        // hold the call (the call logic follows it).
        if (req.body.length) this.emit('reoffer', req.body.toString('utf8'));
        const res = makeResponse(req, 200);
        res.headers.append('Contact', this.ua.contact(this.peer.transport, undefined, this.secure));
        res.headers.append('Content-Type', 'application/sdp');
        res.body = Buffer.from(this.localSdp);
        ctx.respond(res);
        return;
      }
      case 'NOTIFY':
        TransactionLayer.reply(ctx, 200);
        this.emit('notify', req);
        return;
      case 'INFO':
        TransactionLayer.reply(ctx, 200);
        this.emit('info', req);
        return;
      case 'OPTIONS':
      case 'UPDATE':
        TransactionLayer.reply(ctx, 200);
        return;
      default:
        TransactionLayer.reply(ctx, 501);
    }
  }

  /** Over without a BYE of ours (theirs, a refusal, a failed INVITE). */
  end(): void {
    this.state = 'terminated';
    this.forget();
  }

  /** Kept a few seconds after the end, to ACK retransmitted 2xx and answer retransmitted BYEs. */
  private forget(): void {
    setTimeout(() => {
      if (this.ua.dialogs.get(this.callId) === this) this.ua.dialogs.delete(this.callId);
    }, 5000).unref();
  }
}
