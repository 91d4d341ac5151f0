/**
 * The answering side of an inbound call (RFC 3261 §13.3, §12.1.1, §15): provisional and final
 * responses to the INVITE, the 2xx retransmitted until the ACK (§13.3.1.4), CANCEL (§9.2), BYE
 * both ways, and re-INVITEs answered with our media unchanged.
 */
import { EventEmitter } from 'node:events';
import { makeResponse, newTag, parseCSeq, parseNameAddr, SipHeaders, tagOf, type SipRequest } from '../sip/message.ts';
import type { ForeignDialog, SipUserAgent } from '../sip/ua.ts';
import { USER_AGENT } from '../sip/ua.ts';
import { TransactionLayer, type ServerRequestContext } from '../sip/transaction.ts';
import type { Peer } from '../sip/transport.ts';

export interface InboundDialogEvents {
  /** The ACK for our 2xx arrived. */
  confirmed: [];
  /** The caller hung up (BYE), cancelled before the answer (CANCEL), or never ACKed our 2xx. */
  ended: [why: 'bye' | 'cancel' | 'no-ack'];
  reoffer: [sdp: string];
}

export class InboundDialog extends EventEmitter<InboundDialogEvents> implements ForeignDialog {
  readonly localTag = newTag();
  readonly remoteTag: string;
  readonly sipCallId: string;
  readonly invite: SipRequest;
  readonly receivedAt = process.hrtime.bigint();
  state: 'proceeding' | 'answered' | 'confirmed' | 'terminated' = 'proceeding';
  private readonly peer: Peer;
  private readonly remoteTarget: string;
  private readonly routeSet: string[];
  private cseq = 1;
  private sdp = '';
  private retransmit: NodeJS.Timeout | null = null;

  constructor(
    private readonly ua: SipUserAgent,
    private readonly ctx: ServerRequestContext,
  ) {
    super();
    this.invite = ctx.req;
    this.peer = ctx.from;
    this.sipCallId = ctx.req.headers.get('Call-ID') as string;
    this.remoteTag = tagOf(ctx.req.headers.get('From'));
    const contact = ctx.req.headers.get('Contact');
    this.remoteTarget = contact ? parseNameAddr(contact).uri : parseNameAddr(ctx.req.headers.get('From') as string).uri;
    // §12.1.1: the UAS's route set is the Record-Route list in order.
    this.routeSet = ctx.req.headers.getAll('Record-Route');
    ua.dialogs.set(this.sipCallId, this);
  }

  private response(status: number, reason?: string) {
    const res = makeResponse(this.invite, status, reason, status > 100 ? this.localTag : undefined);
    for (const r of this.routeSet) res.headers.append('Record-Route', r);
    return res;
  }

  trying(): void {
    this.ctx.respond(this.response(100));
  }

  ringing(): void {
    if (this.state !== 'proceeding') return;
    const res = this.response(180, 'Ringing');
    res.headers.append('Contact', this.ua.contact(this.peer.transport));
    this.ctx.respond(res);
  }

  /** 200 OK with our SDP answer; retransmitted (UDP) until the ACK, given up after 64*T1. */
  answer(sdp: string): void {
    if (this.state !== 'proceeding') return;
    this.state = 'answered';
    this.sdp = sdp;
    const res = this.response(200, 'OK');
    res.headers.append('Contact', this.ua.contact(this.peer.transport));
    res.headers.append('Allow', 'INVITE, ACK, CANCEL, BYE, OPTIONS');
    res.headers.append('User-Agent', USER_AGENT);
    res.headers.append('Content-Type', 'application/sdp');
    res.body = Buffer.from(sdp);
    this.ctx.respond(res);
    const { T1, T2 } = this.ua.layer.timers;
    const started = Date.now();
    let interval = T1;
    const again = () => {
      if (this.state !== 'answered') return;
      if (Date.now() - started >= 64 * T1) {
        // §13.3.1.4: no ACK; the dialog is confirmed nonetheless and ended with BYE.
        this.state = 'confirmed';
        void this.bye();
        this.emit('ended', 'no-ack');
        return;
      }
      if (this.peer.transport === 'udp') this.ua.transport.send(res, this.peer).catch(() => undefined);
      interval = Math.min(interval * 2, T2);
      this.retransmit = setTimeout(again, interval);
    };
    this.retransmit = setTimeout(again, interval);
  }

  /** A final refusal before the answer. */
  reject(status: number, reason?: string): void {
    if (this.state !== 'proceeding') return;
    this.state = 'terminated';
    this.ctx.respond(this.response(status, reason));
    this.forget();
  }

  /** §9.2: the caller's CANCEL (the InboundService matched it by Call-ID and branch). */
  cancel(cancel: ServerRequestContext): void {
    TransactionLayer.reply(cancel, 200, this.localTag);
    if (this.state !== 'proceeding') return;
    this.reject(487, 'Request Terminated');
    this.emit('ended', 'cancel');
  }

  handleRequest(ctx: ServerRequestContext): void {
    const { req } = ctx;
    switch (req.method) {
      case 'ACK':
        if (this.state === 'answered') {
          if (this.retransmit) clearTimeout(this.retransmit);
          this.state = 'confirmed';
          this.emit('confirmed');
        }
        return;
      case 'BYE':
        TransactionLayer.reply(ctx, 200);
        if (this.state !== 'terminated') {
          this.terminate();
          this.emit('ended', 'bye');
        }
        return;
      case 'INVITE': {
        if (req.body.length) this.emit('reoffer', req.body.toString('utf8'));
        const res = makeResponse(req, 200);
        res.headers.append('Contact', this.ua.contact(this.peer.transport));
        res.headers.append('Content-Type', 'application/sdp');
        res.body = Buffer.from(this.sdp);
        ctx.respond(res);
        return;
      }
      case 'OPTIONS':
      case 'INFO':
      case 'NOTIFY':
      case 'UPDATE':
        TransactionLayer.reply(ctx, 200);
        return;
      default:
        TransactionLayer.reply(ctx, 501);
    }
  }

  /** §15.1.1: BYE from our side (once answered); resolves with the status (408 on timeout). */
  bye(): Promise<number> {
    if (this.state === 'proceeding') {
      this.reject(480, 'Temporarily Unavailable');
      return Promise.resolve(0);
    }
    if (this.state === 'terminated') return Promise.resolve(0);
    this.terminate();
    const h = new SipHeaders();
    h.append('Via', this.ua.via(this.peer.transport));
    for (const r of [...this.routeSet].reverse()) h.append('Route', r);
    h.append('Max-Forwards', '70');
    // Our From is the INVITE's To with our tag; our To is its From (§12.2.1.1).
    h.append('From', `${this.invite.headers.get('To') as string};tag=${this.localTag}`);
    h.append('To', this.invite.headers.get('From') as string);
    h.append('Call-ID', this.sipCallId);
    this.cseq = Math.max(this.cseq, parseCSeq(this.invite.headers.get('CSeq') as string).seq) + 1;
    h.append('CSeq', `${this.cseq} BYE`);
    h.append('User-Agent', USER_AGENT);
    const bye: SipRequest = { kind: 'request', method: 'BYE', uri: this.remoteTarget, headers: h, body: Buffer.alloc(0) };
    return new Promise((resolve) => {
      this.ua.layer.sendRequest(bye, this.peer, {
        onResponse: (res) => {
          if (res.status >= 200) resolve(res.status);
        },
        onTimeout: () => resolve(408),
      });
    });
  }

  private terminate(): void {
    if (this.retransmit) clearTimeout(this.retransmit);
    this.state = 'terminated';
    this.forget();
  }

  private forget(): void {
    // Keep the dialog a few seconds to answer retransmitted BYEs and ACKs.
    setTimeout(() => {
      if (this.ua.dialogs.get(this.sipCallId) === this) this.ua.dialogs.delete(this.sipCallId);
    }, 5000).unref();
  }
}
