/**
 * One SIP dialog for both roles (bridge/sip/dialog.ts, RFC 3261 §12): the UAC's (our INVITE,
 * uac.ts) and the UAS's (an INVITE we answer, uas.ts), fed messages as if they had arrived; the
 * transport only records what would be sent.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SipTransport, type Peer } from '../../../plugins/telephony/bridge/sip/transport.ts';
import { SipUserAgent } from '../../../plugins/telephony/bridge/sip/ua.ts';
import { IncomingInvite } from '../../../plugins/telephony/bridge/sip/uas.ts';
import {
  makeResponse,
  newBranch,
  SipHeaders,
  tagOf,
  type SipMessage,
  type SipRequest,
  type SipResponse,
} from '../../../plugins/telephony/bridge/sip/message.ts';

class RecordingTransport extends SipTransport {
  readonly sent: SipMessage[] = [];
  override async send(msg: SipMessage): Promise<void> {
    this.sent.push(msg);
  }
  requests(method: string): SipRequest[] {
    return this.sent.filter((m): m is SipRequest => m.kind === 'request' && m.method === method);
  }
  responses(status: number): SipResponse[] {
    return this.sent.filter((m): m is SipResponse => m.kind === 'response' && m.status === status);
  }
}

const FAR: Peer = { host: '127.0.0.1', port: 5099, transport: 'udp' };

/** A request from the far end inside the dialog (or an INVITE opening one). */
function fromFar(method: string, o: { callId: string; from: string; to: string; cseq: number; body?: string; extra?: [string, string][] }): SipRequest {
  const h = new SipHeaders();
  h.append('Via', `SIP/2.0/UDP 127.0.0.1:5099;branch=${newBranch()}`);
  h.append('From', o.from);
  h.append('To', o.to);
  h.append('Call-ID', o.callId);
  h.append('CSeq', `${o.cseq} ${method}`);
  h.append('Max-Forwards', '70');
  for (const [n, v] of o.extra ?? []) h.append(n, v);
  return { kind: 'request', method, uri: 'sip:bridge@127.0.0.1', headers: h, body: Buffer.from(o.body ?? '') };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('one SIP dialog, UAC and UAS (RFC 3261 §12)', () => {
  it("UAC: the 2xx's Record-Route, reversed, is the route set (§12.1.2); its Contact the target; BYE and REFER carry them with rising CSeq", async () => {
    const t = new RecordingTransport();
    const ua = new SipUserAgent(t, '127.0.0.1');
    const leg = ua.invite({ id: 't1', host: '127.0.0.1', port: FAR.port, transport: 'udp' }, '+4930123456', 'Acme', 'v=0\r\nours\r\n');
    const invite = t.requests('INVITE')[0];
    const ok = makeResponse(invite, 200, 'OK', 'far');
    ok.headers.append('Contact', '<sip:callee@10.0.0.9:5070>');
    ok.headers.append('Record-Route', '<sip:p1.example;lr>');
    ok.headers.append('Record-Route', '<sip:p2.example;lr>');
    t.emit('message', ok, FAR);
    expect(leg.state).toBe('confirmed');
    expect(leg.dialog.role).toBe('uac');
    const ack = t.requests('ACK')[0];
    expect(ack.uri).toBe('sip:callee@10.0.0.9:5070');
    expect(ack.headers.getAll('Route')).toEqual(['<sip:p2.example;lr>', '<sip:p1.example;lr>']);
    expect(ack.headers.get('CSeq')).toBe('1 ACK');

    const refer = leg.dialog.refer('sip:+4930999@127.0.0.1:5099');
    const r = t.requests('REFER')[0];
    expect(r.headers.get('CSeq')).toBe('2 REFER');
    expect(r.headers.getAll('Route')).toEqual(['<sip:p2.example;lr>', '<sip:p1.example;lr>']);
    expect(tagOf(r.headers.get('To'))).toBe('far');
    t.emit('message', makeResponse(r, 202, 'Accepted'), FAR);
    expect(await refer).toBe(202);

    void leg.bye();
    const bye = t.requests('BYE')[0];
    expect(bye.headers.get('CSeq')).toBe('3 BYE');
    expect(bye.uri).toBe('sip:callee@10.0.0.9:5070');
    expect(leg.state).toBe('terminated');
  });

  it("UAS: the INVITE's Record-Route in order is the route set (§12.1.1); our BYE swaps From and To, its CSeq above the caller's", () => {
    const t = new RecordingTransport();
    const ua = new SipUserAgent(t, '127.0.0.1');
    const callId = 'in-1@far';
    const from = '"Caller" <sip:+4930111@far.example>;tag=caller';
    const to = '<sip:+4930222@bridge.example>';
    const req = fromFar('INVITE', {
      callId,
      from,
      to,
      cseq: 7,
      body: 'v=0\r\n',
      extra: [
        ['Contact', '<sip:caller@10.0.0.5:5062>'],
        ['Record-Route', '<sip:p1.example;lr>'],
        ['Record-Route', '<sip:p2.example;lr>'],
      ],
    });
    const ctx = ua.layer.acceptRequest(req, FAR)!;
    const call = new IncomingInvite(ua, ctx);
    call.answer('v=0\r\nanswer\r\n');
    const ok = t.responses(200)[0];
    expect(ok.headers.getAll('Record-Route')).toEqual(['<sip:p1.example;lr>', '<sip:p2.example;lr>']);
    const ourTag = tagOf(ok.headers.get('To'));
    expect(ourTag).toBe(call.dialog.localTag);
    expect(call.dialog.role).toBe('uas');

    void call.bye();
    const bye = t.requests('BYE')[0];
    expect(bye.uri).toBe('sip:caller@10.0.0.5:5062');
    expect(bye.headers.getAll('Route')).toEqual(['<sip:p1.example;lr>', '<sip:p2.example;lr>']);
    expect(bye.headers.get('From')).toBe(`${to};tag=${ourTag}`);
    expect(bye.headers.get('To')).toBe(from);
    expect(bye.headers.get('CSeq')).toBe('8 BYE');
  });

  it('the same in-dialog switch for both roles: re-INVITE answered with our SDP, INFO and NOTIFY passed on, OPTIONS/UPDATE 200, others 501, the BYE once', () => {
    const t = new RecordingTransport();
    const ua = new SipUserAgent(t, '127.0.0.1');
    // UAC
    const leg = ua.invite({ id: 't1', host: '127.0.0.1', port: FAR.port, transport: 'udp' }, '+4930123456', 'Acme', 'v=0\r\nuac\r\n');
    const invite = t.requests('INVITE')[0];
    const ok = makeResponse(invite, 200, 'OK', 'far');
    ok.headers.append('Contact', '<sip:callee@127.0.0.1:5099>');
    t.emit('message', ok, FAR);
    // UAS
    const req = fromFar('INVITE', { callId: 'in-2@far', from: '<sip:a@far>;tag=caller', to: '<sip:b@bridge>', cseq: 1, body: 'v=0\r\n' });
    const uas = new IncomingInvite(ua, ua.layer.acceptRequest(req, FAR)!);
    uas.answer('v=0\r\nuas\r\n');

    const dialogs = [
      { d: leg.dialog, callId: leg.callId, from: '<sip:callee@far>;tag=far', to: `<sip:me@bridge>;tag=${leg.dialog.localTag}`, sdp: 'v=0\r\nuac\r\n' },
      { d: uas.dialog, callId: 'in-2@far', from: '<sip:a@far>;tag=caller', to: `<sip:b@bridge>;tag=${uas.dialog.localTag}`, sdp: 'v=0\r\nuas\r\n' },
    ];
    for (const { d, callId, from, to, sdp } of dialogs) {
      const seen: string[] = [];
      d.on('reoffer', () => seen.push('reoffer'));
      d.on('info', () => seen.push('info'));
      d.on('notify', () => seen.push('notify'));
      d.on('bye', () => seen.push('bye'));
      t.sent.length = 0;
      let cseq = 10;
      const send = (method: string, body?: string) => t.emit('message', fromFar(method, { callId, from, to, cseq: cseq++, body }), FAR);
      send('INVITE', 'v=0\r\nmoved\r\n');
      send('INFO');
      send('NOTIFY');
      send('OPTIONS');
      send('UPDATE');
      send('MESSAGE');
      send('BYE');
      send('BYE');
      const statuses = t.sent.filter((m): m is SipResponse => m.kind === 'response').map((m) => `${m.status}`);
      expect(statuses).toEqual(['200', '200', '200', '200', '200', '501', '200', '200']);
      expect((t.sent[0] as SipResponse).body.toString()).toBe(sdp);
      expect(seen).toEqual(['reoffer', 'info', 'notify', 'bye']);
      expect(d.state).toBe('terminated');
    }
    // A request whose To tag is not ours is no dialog's.
    t.sent.length = 0;
    t.emit('message', fromFar('BYE', { callId: 'in-2@far', from: '<sip:a@far>;tag=caller', to: '<sip:b@bridge>;tag=other', cseq: 99 }), FAR);
    expect(t.responses(481)).toHaveLength(1);
  });
});
