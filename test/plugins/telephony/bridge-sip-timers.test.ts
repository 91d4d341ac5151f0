/**
 * RFC 3261 §17.1 client transaction timers and the UA's own INVITE timers, on fake time with the
 * default T1 = 500 ms (so 64*T1 = 32 s, as on the wire). The transport only records what would
 * be sent; responses are fed in as if they had arrived.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SipTransport, type Peer } from '../../../plugins/telephony/bridge/sip/transport.ts';
import { DEFAULT_TIMERS, TransactionLayer } from '../../../plugins/telephony/bridge/sip/transaction.ts';
import { SipUserAgent } from '../../../plugins/telephony/bridge/sip/ua.ts';
import type { OutgoingInvite } from '../../../plugins/telephony/bridge/sip/uac.ts';
import { makeResponse, newBranch, SipHeaders, type SipMessage, type SipRequest, type SipResponse } from '../../../plugins/telephony/bridge/sip/message.ts';

/** Records every message instead of sending it; nothing is bound. */
class RecordingTransport extends SipTransport {
  readonly sent: SipMessage[] = [];
  override async send(msg: SipMessage): Promise<void> {
    this.sent.push(msg);
  }
  requests(method: string): SipRequest[] {
    return this.sent.filter((m): m is SipRequest => m.kind === 'request' && m.method === method);
  }
}

const PEER: Peer = { host: '127.0.0.1', port: 5099, transport: 'udp' };
const B = 64 * DEFAULT_TIMERS.T1; // Timer B / Timer F: 32 s

function request(method: string): SipRequest {
  const h = new SipHeaders();
  h.append('Via', `SIP/2.0/UDP 127.0.0.1:5098;branch=${newBranch()}`);
  h.append('From', '<sip:a@x>;tag=1');
  h.append('To', '<sip:b@y>');
  h.append('Call-ID', `c-${method}@x`);
  h.append('CSeq', `1 ${method}`);
  h.append('Max-Forwards', '70');
  return { kind: 'request', method, uri: 'sip:b@y', headers: h, body: Buffer.alloc(0) };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('client transaction timers (RFC 3261 §17.1, T1 = 500 ms)', () => {
  it('INVITE: a 180 stops Timers A and B (Proceeding has none), the 487 after 45 s is ACKed; a BYE in Proceeding still times out on Timer F', () => {
    const t = new RecordingTransport();
    const layer = new TransactionLayer(t);
    const seen: string[] = [];
    const invite = request('INVITE');
    layer.sendRequest(invite, PEER, { onResponse: (r) => seen.push(`INVITE ${r.status}`), onTimeout: (why) => seen.push(`INVITE timeout: ${why}`) });
    const bye = request('BYE');
    layer.sendRequest(bye, PEER, { onResponse: (r) => seen.push(`BYE ${r.status}`), onTimeout: (why) => seen.push(`BYE timeout: ${why}`) });

    vi.advanceTimersByTime(1600); // Timer A: 0, 0.5, 1.5 s; Timer E: 0, 0.5, 1.5 s
    expect(t.requests('INVITE')).toHaveLength(3);
    expect(t.requests('BYE')).toHaveLength(3);
    layer.matchResponse(makeResponse(invite, 180, 'Ringing', 'tt'));
    layer.matchResponse(makeResponse(bye, 100, 'Trying'));

    vi.advanceTimersByTime(45_000 - 1600);
    expect(t.requests('INVITE')).toHaveLength(3); // §17.1.1.2: no retransmission in Proceeding
    // §17.1.2.2: Timer E goes on in Proceeding every T2 (4 s), Timer F ends it at 64*T1.
    const byes = t.requests('BYE').length;
    expect(byes).toBeGreaterThanOrEqual(3 + 7);
    expect(byes).toBeLessThanOrEqual(3 + 9);
    expect(seen).toEqual(['INVITE 180', 'BYE 100', 'BYE timeout: SIP transaction timeout (no final response)']);

    layer.matchResponse(makeResponse(invite, 487, 'Request Terminated', 'tt'));
    expect(seen.at(-1)).toBe('INVITE 487');
    const acks = t.requests('ACK');
    expect(acks).toHaveLength(1); // §17.1.1.3: the transaction ACKs its non-2xx final, same branch
    expect(acks[0].headers.get('Via')).toBe(invite.headers.get('Via'));
    expect(acks[0].headers.get('CSeq')).toBe('1 ACK');
    // Timer D: a retransmitted 487 within 32 s is ACKed again and not passed up.
    layer.matchResponse(makeResponse(invite, 487, 'Request Terminated', 'tt'));
    expect(t.requests('ACK')).toHaveLength(2);
    expect(seen.filter((s) => s === 'INVITE 487')).toHaveLength(1);
  });
});

describe('the UA bounds what the INVITE transaction no longer does', () => {
  function setup(): {
    t: RecordingTransport;
    call: OutgoingInvite;
    events: string[];
    invite: () => SipRequest;
    respond: (status: number, reason: string, req?: SipRequest) => void;
  } {
    const t = new RecordingTransport();
    const ua = new SipUserAgent(t, '127.0.0.1');
    const call = ua.invite({ id: 't1', host: '127.0.0.1', port: PEER.port, transport: 'udp' }, '+4930123456', 'Acme', 'v=0\r\n');
    const events: string[] = [];
    call.on('provisional', (r) => events.push(`provisional ${r.status}`));
    call.on('answered', () => events.push('answered'));
    call.on('failed', (status, reason) => events.push(`failed ${status} ${reason}`));
    const invite = () => t.requests('INVITE')[0];
    const respond = (status: number, reason: string, req = invite()) => {
      const res: SipResponse = makeResponse(req, status, reason, 'far');
      if (status >= 200 && status < 300) res.headers.append('Contact', `<sip:far@127.0.0.1:${PEER.port}>`);
      t.emit('message', res, PEER);
    };
    return { t, call, events, invite, respond };
  }

  it('100 Trying and then nothing: at 64*T1 the UA CANCELs (Timer C model, §16.6) and fails 408; the late 487 is ACKed', () => {
    const { t, events, respond } = setup();
    respond(100, 'Trying');
    vi.advanceTimersByTime(B - 1);
    expect(events).toEqual([]);
    expect(t.requests('CANCEL')).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(events).toEqual(['failed 408 SIP transaction timeout (no final response)']);
    const cancel = t.requests('CANCEL');
    expect(cancel).toHaveLength(1);
    expect(cancel[0].headers.get('Via')).toBe(t.requests('INVITE')[0].headers.get('Via')); // §9.1
    respond(487, 'Request Terminated');
    expect(t.requests('ACK')).toHaveLength(1);
    expect(events).toHaveLength(1); // the call's outcome was settled at 64*T1
  });

  it('a 200 OK that crosses that CANCEL is ACKed and hung up with BYE', () => {
    const { t, events, respond } = setup();
    respond(100, 'Trying');
    vi.advanceTimersByTime(B);
    expect(t.requests('CANCEL')).toHaveLength(1);
    respond(200, 'OK');
    expect(t.requests('ACK')).toHaveLength(1);
    expect(t.requests('BYE')).toHaveLength(1);
    expect(events).toEqual(['failed 408 SIP transaction timeout (no final response)']);
  });

  it('180 Ringing hands the decision to the ring timeout: no failure at 64*T1, CANCEL at 45 s, 487 ACKed', () => {
    const { t, call, events, respond } = setup();
    respond(100, 'Trying');
    respond(180, 'Ringing');
    vi.advanceTimersByTime(45_000);
    expect(events).toEqual(['provisional 180']);
    expect(t.requests('INVITE')).toHaveLength(1);
    call.cancel(); // the call's ring timeout
    const cancel = t.requests('CANCEL');
    expect(cancel).toHaveLength(1);
    respond(200, 'OK', cancel[0]);
    respond(487, 'Request Terminated');
    expect(events).toEqual(['provisional 180', 'failed 487 Request Terminated']);
    expect(t.requests('ACK')).toHaveLength(1);
    expect(t.requests('ACK')[0].headers.get('CSeq')).toBe('1 ACK');
  });

  it('a callee that answers after 40 s of ringing is answered', () => {
    const { t, events, respond } = setup();
    respond(180, 'Ringing');
    vi.advanceTimersByTime(40_000);
    respond(200, 'OK');
    expect(events).toEqual(['provisional 180', 'answered']);
    expect(t.requests('ACK')).toHaveLength(1);
  });

  it('CANCEL answered but no 487: the INVITE transaction is given up 64*T1 after the CANCEL (§9.1), not before', () => {
    const { t, call, events, respond } = setup();
    respond(180, 'Ringing');
    vi.advanceTimersByTime(10_000);
    call.cancel();
    respond(200, 'OK', t.requests('CANCEL')[0]);
    vi.advanceTimersByTime(B - 1);
    expect(events).toEqual(['provisional 180']);
    vi.advanceTimersByTime(1);
    expect(events).toEqual(['provisional 180', 'failed 408 SIP no final response to the INVITE 64*T1 after CANCEL']);
    respond(487, 'Request Terminated'); // too late: no transaction any more, nothing to report
    expect(events).toHaveLength(2);
  });
});
