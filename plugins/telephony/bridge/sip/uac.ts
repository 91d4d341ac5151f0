/**
 * The UAC side of a dialog (RFC 3261 §13.2): our INVITE towards a trunk or a desk phone, a digest
 * challenge answered (§22.2), CANCEL (§9.1), the TU's bound on an INVITE that never progresses,
 * and the 2xx that establishes the dialog (dialog.ts), which carries everything after it.
 */
import { EventEmitter } from 'node:events';
import { formatNameAddr, newCallId, newTag, parseNameAddr, SipHeaders, tagOf, type SipRequest, type SipResponse } from './message.ts';
import { digestAuthorization, pickChallenge } from './digest.ts';
import type { ClientTransaction } from './transaction.ts';
import type { Peer } from './transport.ts';
import { ALLOW, Dialog, USER_AGENT, type DialogHost } from './dialog.ts';
import type { SipTarget } from '../schemas.ts';

export interface OutgoingInviteEvents {
  provisional: [res: SipResponse];
  answered: [res: SipResponse];
  /** Final failure of the INVITE (non-2xx after auth, or timeout as 408). */
  failed: [status: number, reason: string];
}

/**
 * Where a target's requests go: its resolved address (DNS SRV) or host:port (`server`: one SRV
 * target of it). Over TLS the certificate must name the trunk's host (sip/tls.ts); a desk phone's
 * address (no `id` of a trunk, no name to check) is reached on the phone's own connection.
 */
export function peerOf(t: SipTarget, server?: { host: string; port: number }): Peer {
  const host = server?.host ?? t.addr?.host ?? t.host;
  const port = server?.port ?? t.addr?.port ?? t.port;
  if (t.transport !== 'tls' || t.phone) return { host, port, transport: t.transport };
  return { host, port, transport: 'tls', tls: { servername: t.host.replace(/^\[(.*)\]$/, '$1'), ca: t.tlsCaPem } };
}
/** The target's host as URIs name it: no port when DNS SRV locates the server (RFC 3263 §4.2). */
export function uriHost(t: SipTarget): string {
  return t.dnsSrv ? (t.host.includes(':') ? `[${t.host}]` : t.host) : hostPort(t.host, t.port);
}
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export class OutgoingInvite extends EventEmitter<OutgoingInviteEvents> {
  /** The dialog, early from our INVITE on, confirmed by the 2xx. */
  readonly dialog: Dialog;
  private phase: 'calling' | 'early' | 'confirmed' | 'terminated' = 'calling';
  private invite!: SipRequest;
  private inviteTx: ClientTransaction | null = null;
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
  private readonly remoteUri: string;

  constructor(
    private readonly ua: DialogHost & { readonly host: string },
    readonly target: SipTarget,
    readonly number: string,
    displayName: string,
    sdpOffer: string,
    /** One of the target's SRV servers (RFC 3263 §4.3), else its own address. */
    server?: { host: string; port: number },
  ) {
    super();
    const peer = peerOf(target, server);
    const domain = target.fromDomain || target.host;
    const user = target.callerId || target.username || 'sovcomms';
    const localUri = `sip:${encodeURIComponent(user).replace(/%2B/g, '+')}@${domain}`;
    this.remoteUri = `sip:${number}@${uriHost(target)}`;
    const localTag = newTag();
    this.dialog = new Dialog(ua, {
      role: 'uac',
      callId: newCallId(ua.host),
      localTag,
      local: formatNameAddr({ display: displayName, uri: localUri, params: { tag: localTag } }),
      localUri,
      remote: `<${this.remoteUri}>`,
      remoteTag: '',
      remoteTarget: this.remoteUri,
      routeSet: [],
      cseq: 0,
      peer,
      credentials: target.username !== undefined && target.password !== undefined ? { username: target.username, password: target.password } : undefined,
      localSdp: sdpOffer,
      secure: this.remoteUri.startsWith('sips:'),
    });
  }

  get callId(): string {
    return this.dialog.callId;
  }

  /** calling → early (180/183) → confirmed (2xx) → terminated (either side's BYE, or a failure). */
  get state(): 'calling' | 'early' | 'confirmed' | 'terminated' {
    return this.dialog.state === 'terminated' && this.phase === 'confirmed' ? 'terminated' : this.phase;
  }

  start(): void {
    this.dialog.cseq++;
    this.sendInvite(null);
  }

  private sendInvite(authHeader: [string, string] | null): void {
    const d = this.dialog;
    const h = new SipHeaders();
    h.append('Via', this.ua.via(d.peer.transport));
    h.append('Max-Forwards', '70');
    h.append('From', d.local);
    h.append('To', `<${this.remoteUri}>`);
    h.append('Call-ID', d.callId);
    h.append('CSeq', `${d.cseq} INVITE`);
    h.append('Contact', this.ua.contact(d.peer.transport, undefined, d.secure));
    h.append('Allow', ALLOW);
    h.append('Supported', 'replaces');
    h.append('User-Agent', USER_AGENT);
    h.append('Content-Type', 'application/sdp');
    if (authHeader) h.append(authHeader[0], authHeader[1]);
    this.invite = { kind: 'request', method: 'INVITE', uri: this.remoteUri, headers: h, body: Buffer.from(d.localSdp) };
    this.inviteTx = this.ua.layer.sendRequest(this.invite, d.peer, {
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
      if (res.status >= 200 && res.status < 300 && this.cancelSent && !this.dialog.ack) this.confirm(res);
      return;
    }
    if (res.status < 200) {
      if (res.status > 100) {
        // The callee's side is alerting (or sending early media): the ring timeout decides now.
        this.clearProgressTimer();
        this.gotProvisional = true;
        if (this.phase === 'calling') this.phase = 'early';
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
      const t = this.target;
      // §22.2: retry once per challenge; a second challenge is accepted only when stale=true.
      if (ch && t.username !== undefined && t.password !== undefined && (this.authTried === 0 || ch.stale)) {
        this.authTried++;
        this.dialog.cseq++;
        const value = digestAuthorization(ch, { method: 'INVITE', uri: this.remoteUri, username: t.username, password: t.password, nc: 1 });
        this.gotProvisional = false;
        this.sendInvite([res.status === 401 ? 'Authorization' : 'Proxy-Authorization', value]);
        return;
      }
    }
    this.fail(res.status, res.reason);
  }

  private confirm(res: SipResponse): void {
    const d = this.dialog;
    const contact = res.headers.get('Contact');
    d.establish(tagOf(res.headers.get('To')), contact ? parseNameAddr(contact).uri : null, res.headers.getAll('Record-Route'));
    // §13.2.2.4: the ACK carries the INVITE's CSeq number and its credentials.
    const h = d.headers(`${d.cseq} ACK`);
    for (const a of this.invite.headers.getAll('Proxy-Authorization')) h.append('Proxy-Authorization', a);
    for (const a of this.invite.headers.getAll('Authorization')) h.append('Authorization', a);
    h.append('User-Agent', USER_AGENT);
    d.ack = { kind: 'request', method: 'ACK', uri: d.remoteTarget, headers: h, body: Buffer.alloc(0) };
    d.sendAck();
    const late = this.cancelRequested || this.state === 'terminated';
    this.phase = 'confirmed';
    d.state = 'confirmed';
    if (late) {
      // 2xx crossed our CANCEL (§9.1): the call is up, so end it with BYE.
      void this.bye();
      return;
    }
    this.emit('answered', res);
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

  /** Ends the call from our side: BYE once answered, else CANCEL (resolves 0 then). */
  bye(): Promise<number> {
    if (this.state !== 'confirmed') {
      this.cancel();
      return Promise.resolve(0);
    }
    this.phase = 'terminated';
    return this.dialog.bye();
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
    h.append('CSeq', `${this.dialog.cseq} CANCEL`);
    h.append('User-Agent', USER_AGENT);
    const cancel: SipRequest = { kind: 'request', method: 'CANCEL', uri: this.invite.uri, headers: h, body: Buffer.alloc(0) };
    this.ua.layer.sendRequest(cancel, this.dialog.peer, {
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

  private fail(status: number, reason: string): void {
    this.clearProgressTimer();
    if (this.state === 'terminated') return;
    this.phase = 'terminated';
    this.dialog.end();
    this.emit('failed', status, reason);
  }
}
