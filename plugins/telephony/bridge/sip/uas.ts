/**
 * The UAS side of a dialog (RFC 3261 §13.3): the answers to an incoming INVITE, provisional and
 * final, the 2xx retransmitted until its ACK (§13.3.1.4), the caller's CANCEL (§9.2). The dialog
 * (dialog.ts) exists from our first answer with a tag and carries everything inside it: the
 * caller's BYE, re-INVITEs, ours.
 */
import { EventEmitter } from 'node:events';
import { makeResponse, newTag, parseCSeq, parseNameAddr, tagOf, type SipRequest } from './message.ts';
import { TransactionLayer, type ServerRequestContext } from './transaction.ts';
import { Dialog, USER_AGENT, type DialogHost } from './dialog.ts';

export interface IncomingInviteEvents {
  /** The ACK for our 2xx arrived. */
  confirmed: [];
  /** The caller hung up (BYE), cancelled before the answer (CANCEL), or never ACKed our 2xx. */
  ended: [why: 'bye' | 'cancel' | 'no-ack'];
}

export class IncomingInvite extends EventEmitter<IncomingInviteEvents> {
  readonly dialog: Dialog;
  readonly invite: SipRequest;
  readonly receivedAt = process.hrtime.bigint();
  state: 'proceeding' | 'answered' | 'confirmed' | 'terminated' = 'proceeding';
  private retransmit: NodeJS.Timeout | null = null;

  constructor(
    private readonly ua: DialogHost,
    private readonly ctx: ServerRequestContext,
  ) {
    super();
    const req = ctx.req;
    this.invite = req;
    const localTag = newTag();
    const contact = req.headers.get('Contact');
    const from = req.headers.get('From') as string;
    const to = req.headers.get('To') as string;
    this.dialog = new Dialog(ua, {
      role: 'uas',
      callId: req.headers.get('Call-ID') as string,
      localTag,
      // Our From is the INVITE's To with our tag; our To is its From (§12.2.1.1).
      local: `${to};tag=${localTag}`,
      localUri: parseNameAddr(to).uri,
      remote: from,
      remoteTag: tagOf(from),
      remoteTarget: contact ? parseNameAddr(contact).uri : parseNameAddr(from).uri,
      // §12.1.1: the UAS's route set is the Record-Route list in order.
      routeSet: req.headers.getAll('Record-Route'),
      cseq: Math.max(1, parseCSeq(req.headers.get('CSeq') as string).seq),
      peer: ctx.from,
      localSdp: '',
      secure: /^sips:/i.test(req.uri),
    });
    this.dialog.on('ack', () => {
      if (this.state !== 'answered') return;
      if (this.retransmit) clearTimeout(this.retransmit);
      this.state = 'confirmed';
      this.emit('confirmed');
    });
    this.dialog.on('bye', () => {
      this.stop();
      this.emit('ended', 'bye');
    });
  }

  private response(status: number, reason?: string) {
    const res = makeResponse(this.invite, status, reason, status > 100 ? this.dialog.localTag : undefined);
    for (const r of this.invite.headers.getAll('Record-Route')) res.headers.append('Record-Route', r);
    return res;
  }

  trying(): void {
    this.ctx.respond(this.response(100));
  }

  ringing(): void {
    if (this.state !== 'proceeding') return;
    const res = this.response(180, 'Ringing');
    res.headers.append('Contact', this.ua.contact(this.dialog.peer.transport, undefined, this.dialog.secure));
    this.ctx.respond(res);
  }

  /** 200 OK with our SDP answer; retransmitted (UDP) until the ACK, given up after 64*T1. */
  answer(sdp: string): void {
    if (this.state !== 'proceeding') return;
    this.state = 'answered';
    this.dialog.localSdp = sdp;
    this.dialog.state = 'confirmed';
    const peer = this.dialog.peer;
    const res = this.response(200, 'OK');
    res.headers.append('Contact', this.ua.contact(peer.transport, undefined, this.dialog.secure));
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
      if (peer.transport === 'udp') this.ua.transport.send(res, peer).catch(() => undefined);
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
    this.dialog.end();
  }

  /** §9.2: the caller's CANCEL (the InboundService matched it by Call-ID). */
  cancel(cancel: ServerRequestContext): void {
    TransactionLayer.reply(cancel, 200, this.dialog.localTag);
    if (this.state !== 'proceeding') return;
    this.reject(487, 'Request Terminated');
    this.emit('ended', 'cancel');
  }

  /** Ends from our side: BYE once answered (resolves with its status, 408 on timeout), 480 before. */
  bye(): Promise<number> {
    if (this.state === 'proceeding') {
      this.reject(480, 'Temporarily Unavailable');
      return Promise.resolve(0);
    }
    if (this.state === 'terminated') return Promise.resolve(0);
    this.stop();
    return this.dialog.bye();
  }

  private stop(): void {
    if (this.retransmit) clearTimeout(this.retransmit);
    this.state = 'terminated';
  }
}
