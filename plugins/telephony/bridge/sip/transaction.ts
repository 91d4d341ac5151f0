/**
 * Client transactions (RFC 3261 §17.1) and a small server-transaction cache (§17.2) for the
 * requests the bridge receives (BYE, OPTIONS, NOTIFY, CANCEL...).
 *
 * Timers follow §17.1.1.2 / §17.1.2.2 and Table 4. Retransmissions happen only on UDP.
 *
 * INVITE (§17.1.1.2): Timer A retransmits in Calling (T1, doubling, no cap), Timer B (64*T1)
 * gives up in Calling only. A provisional response moves the transaction to Proceeding, where
 * the transaction runs no timer at all: how long a phone may ring is the TU's decision (our ring
 * timeout, then CANCEL, §9.1), and the TU bounds a Proceeding that never progresses (see
 * the dialog, sip/dialog.ts). Timer D (>= 32 s UDP, 0 TCP) absorbs retransmitted non-2xx finals.
 *
 * Non-INVITE (§17.1.2.2): Timer E retransmits (T1 doubling up to T2; T2 once in Proceeding),
 * Timer F (64*T1) gives up in Trying *and* Proceeding, Timer K (T4 UDP, 0 TCP) absorbs
 * retransmitted finals.
 */
import { branchOf, makeResponse, parseCSeq, SipHeaders, type SipRequest, type SipResponse } from './message.ts';
import type { Peer, SipTransport } from './transport.ts';

export interface Timers {
  T1: number;
  T2: number;
  T4: number;
}
export const DEFAULT_TIMERS: Timers = { T1: 500, T2: 4000, T4: 5000 };

export type TxState = 'calling' | 'trying' | 'proceeding' | 'completed' | 'terminated';

export interface ClientTxHandlers {
  /** Every response that the TU must see (1xx, the final response once; §17.1.1.2). */
  onResponse(res: SipResponse): void;
  /** Timer B / F fired, or the transport failed: §8.1.3.1 treats it as a 408. */
  onTimeout(reason: string): void;
}

export class ClientTransaction {
  state: TxState;
  readonly branch: string;
  readonly method: string;
  /** Timer A (INVITE) / Timer E (non-INVITE): retransmission over UDP. */
  private timerA: NodeJS.Timeout | null = null;
  /** Timer B (INVITE, Calling only) / Timer F (non-INVITE, Trying and Proceeding). */
  private timerB: NodeJS.Timeout | null = null;
  /** Timer D (INVITE) / Timer K (non-INVITE): the Completed state's lifetime. */
  private timerD: NodeJS.Timeout | null = null;
  private interval: number;
  private ackForFailure: SipRequest | null = null;

  constructor(
    private readonly layer: TransactionLayer,
    readonly request: SipRequest,
    readonly peer: Peer,
    private readonly handlers: ClientTxHandlers,
  ) {
    this.branch = branchOf(request);
    this.method = request.method;
    this.state = request.method === 'INVITE' ? 'calling' : 'trying';
    this.interval = layer.timers.T1;
  }

  start(): void {
    this.transmit();
    const { T1 } = this.layer.timers;
    if (this.peer.transport === 'udp') this.scheduleRetransmit();
    // Timer B (INVITE) / Timer F (non-INVITE): 64*T1 transaction timeout.
    this.timerB = setTimeout(() => this.timeout('SIP transaction timeout (no final response)'), 64 * T1);
  }

  private transmit(): void {
    // eslint-disable-next-line @typescript-eslint/use-unknown-in-catch-callback-variable -- the engine's, the transport's and our own rejections are Errors
    this.layer.transport.send(this.request, this.peer).catch((err: Error) => this.timeout(`SIP transport error: ${err.message}`));
  }

  private scheduleRetransmit(): void {
    this.timerA = setTimeout(() => {
      if (this.state === 'calling' || this.state === 'trying' || (this.state === 'proceeding' && this.method !== 'INVITE')) {
        this.transmit();
        // §17.1.1.2 Timer A doubles without cap for INVITE; §17.1.2.2 Timer E caps at T2.
        this.interval = this.method === 'INVITE' ? this.interval * 2 : Math.min(this.interval * 2, this.layer.timers.T2);
        if (this.state === 'proceeding') this.interval = this.layer.timers.T2;
        this.scheduleRetransmit();
      }
    }, this.interval);
  }

  private timeout(reason: string): void {
    if (this.state === 'terminated' || this.state === 'completed') return;
    this.terminate();
    this.handlers.onTimeout(reason);
  }

  receive(res: SipResponse): void {
    if (this.state === 'terminated') return;
    const isInvite = this.method === 'INVITE';
    if (res.status < 200) {
      if (this.state === 'calling' || this.state === 'trying' || this.state === 'proceeding') {
        this.state = 'proceeding';
        if (isInvite) {
          // §17.1.1.2: Timer A and Timer B belong to Calling. In Proceeding the INVITE is no
          // longer retransmitted and does not time out here: a callee may ring for minutes, and
          // the TU decides when to stop (ring timeout → CANCEL). Non-INVITE keeps Timer F running
          // in Proceeding (§17.1.2.2), so BYE, CANCEL, REFER... still give up after 64*T1.
          if (this.timerA) clearTimeout(this.timerA);
          if (this.timerB) clearTimeout(this.timerB);
          this.timerA = this.timerB = null;
        }
        this.handlers.onResponse(res);
      }
      return;
    }
    if (isInvite) {
      if (res.status < 300) {
        // §17.1.1.2 (as updated by RFC 6026): 2xx goes to the TU, which sends the ACK itself.
        if (this.state !== 'completed') {
          this.terminate();
          this.handlers.onResponse(res);
        }
        return;
      }
      // Non-2xx final: ACK within the transaction (§17.1.1.3), same branch as the INVITE.
      if (!this.ackForFailure) this.ackForFailure = buildNon2xxAck(this.request, res);
      this.layer.transport.send(this.ackForFailure, this.peer).catch(() => undefined);
      if (this.state === 'completed') return; // retransmitted final: ACK again only
      this.clearTimers();
      this.state = 'completed';
      // Timer D: 32 s on UDP to absorb retransmissions of the final response, 0 on TCP.
      const d = this.peer.transport === 'udp' ? Math.max(32_000, 64 * this.layer.timers.T1) : 0;
      this.timerD = setTimeout(() => this.terminate(), d);
      this.handlers.onResponse(res);
      return;
    }
    if (this.state === 'completed') return;
    this.clearTimers();
    this.state = 'completed';
    // Timer K: T4 on UDP, 0 on TCP.
    this.timerD = setTimeout(() => this.terminate(), this.peer.transport === 'udp' ? this.layer.timers.T4 : 0);
    this.handlers.onResponse(res);
  }

  private clearTimers(): void {
    for (const t of [this.timerA, this.timerB, this.timerD]) if (t) clearTimeout(t);
    this.timerA = this.timerB = this.timerD = null;
  }

  terminate(): void {
    this.clearTimers();
    this.state = 'terminated';
    this.layer.forget(this);
  }
}

/** §17.1.1.3: the ACK for a non-2xx final response. */
function buildNon2xxAck(invite: SipRequest, res: SipResponse): SipRequest {
  const h = new SipHeaders();
  h.append('Via', invite.headers.getAll('Via')[0]);
  for (const r of invite.headers.getAll('Route')) h.append('Route', r);
  h.append('Max-Forwards', '70');
  h.append('From', invite.headers.get('From') as string);
  h.append('To', res.headers.get('To') as string);
  h.append('Call-ID', invite.headers.get('Call-ID') as string);
  h.append('CSeq', `${parseCSeq(invite.headers.get('CSeq') as string).seq} ACK`);
  return { kind: 'request', method: 'ACK', uri: invite.uri, headers: h, body: Buffer.alloc(0) };
}

export interface ServerRequestContext {
  req: SipRequest;
  from: Peer;
  respond(res: SipResponse): void;
}

/**
 * Matches responses to client transactions by (branch, CSeq method) (§17.1.3) and absorbs
 * retransmitted requests by replaying the cached response (§17.2.2).
 */
export class TransactionLayer {
  private readonly client = new Map<string, ClientTransaction>();
  private readonly serverCache = new Map<string, { res: SipResponse | null; expires: number }>();

  constructor(
    readonly transport: SipTransport,
    readonly timers: Timers = DEFAULT_TIMERS,
  ) {}

  sendRequest(req: SipRequest, peer: Peer, handlers: ClientTxHandlers): ClientTransaction {
    const tx = new ClientTransaction(this, req, peer, handlers);
    this.client.set(`${tx.branch}|${tx.method}`, tx);
    tx.start();
    return tx;
  }

  forget(tx: ClientTransaction): void {
    const key = `${tx.branch}|${tx.method}`;
    if (this.client.get(key) === tx) this.client.delete(key);
  }

  /** Returns true when the response belonged to a live client transaction. */
  matchResponse(res: SipResponse): boolean {
    const method = parseCSeq(res.headers.get('CSeq') as string).method;
    const tx = this.client.get(`${branchOf(res)}|${method}`);
    if (!tx) return false;
    tx.receive(res);
    return true;
  }

  /**
   * Server side: returns a context for a new request, or null when it is a retransmission
   * (whose cached response is re-sent here). ACKs never create server transactions.
   */
  acceptRequest(req: SipRequest, from: Peer): ServerRequestContext | null {
    const now = Date.now();
    if (this.serverCache.size > 2000) for (const [k, v] of this.serverCache) if (v.expires < now) this.serverCache.delete(k);
    const key = `${branchOf(req)}|${req.method}|${from.host}:${from.port}`;
    if (req.method !== 'ACK') {
      const cached = this.serverCache.get(key);
      if (cached && cached.expires >= now) {
        if (cached.res) this.transport.send(cached.res, from).catch(() => undefined);
        return null;
      }
    }
    const entry = { res: null as SipResponse | null, expires: now + 64 * this.timers.T1 };
    if (req.method !== 'ACK') this.serverCache.set(key, entry);
    return {
      req,
      from,
      respond: (res) => {
        if (res.status >= 200) entry.res = res;
        this.transport.send(res, from).catch(() => undefined);
      },
    };
  }

  static reply(ctx: ServerRequestContext, status: number, toTag?: string): void {
    ctx.respond(makeResponse(ctx.req, status, undefined, toTag));
  }

  shutdown(): void {
    for (const tx of [...this.client.values()]) tx.terminate();
    this.serverCache.clear();
  }
}
