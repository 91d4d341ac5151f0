import { describe, expect, it } from 'vitest';
import dgram from 'node:dgram';
import net from 'node:net';
import { SipTransport } from '../../../plugins/telephony/bridge/sip/transport.ts';
import { TransactionLayer } from '../../../plugins/telephony/bridge/sip/transaction.ts';
import {
  makeResponse,
  newBranch,
  parseDatagram,
  serialize,
  SipHeaders,
  StreamFramer,
  type SipRequest,
  type SipResponse,
} from '../../../plugins/telephony/bridge/sip/message.ts';
import { cleanupsAfterEach } from '../../support/cleanup.ts';

const T = { T1: 100, T2: 400, T4: 200 };
const cleanups = cleanupsAfterEach();

async function transport(): Promise<SipTransport> {
  const t = new SipTransport();
  await t.listen('127.0.0.1', 0);
  cleanups.push(() => t.close());
  return t;
}
async function udpPeer(): Promise<{ sock: dgram.Socket; port: number; got: SipRequest[]; onReq: (fn: (r: SipRequest, port: number) => void) => void }> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  cleanups.push(() => sock.close());
  const got: SipRequest[] = [];
  let handler: (r: SipRequest, port: number) => void = () => undefined;
  sock.on('message', (b, rinfo) => {
    const m = parseDatagram(b);
    if (m.kind === 'request') {
      got.push(m);
      handler(m, rinfo.port);
    }
  });
  return { sock, port: sock.address().port, got, onReq: (fn) => (handler = fn) };
}

function request(method: string, viaHost: string, transport = 'UDP'): SipRequest {
  const h = new SipHeaders();
  h.append('Via', `SIP/2.0/${transport} ${viaHost};branch=${newBranch()}`);
  h.append('From', '<sip:a@x>;tag=1');
  h.append('To', '<sip:b@y>');
  h.append('Call-ID', 'c1@x');
  h.append('CSeq', `1 ${method}`);
  h.append('Max-Forwards', '70');
  return { kind: 'request', method, uri: 'sip:b@y', headers: h, body: Buffer.alloc(0) };
}

describe('SIP client transactions (RFC 3261 §17.1)', () => {
  it('retransmits an INVITE on Timer A over UDP, stops on 1xx, ACKs a non-2xx final in the transaction', async () => {
    const t = await transport();
    const layer = new TransactionLayer(t, T);
    t.on('message', (m) => m.kind === 'response' && layer.matchResponse(m));
    const peer = await udpPeer();
    let invites = 0;
    peer.onReq((r, port) => {
      const send = (res: SipResponse) => peer.sock.send(serialize(res), port, '127.0.0.1');
      if (r.method === 'INVITE' && ++invites === 3) {
        send(makeResponse(r, 180, 'Ringing', 'tt'));
        setTimeout(() => {
          send(makeResponse(r, 486, 'Busy Here', 'tt'));
          setTimeout(() => send(makeResponse(r, 486, 'Busy Here', 'tt')), 30); // retransmitted final
        }, 150);
      }
    });
    const seen: number[] = [];
    const inv = request('INVITE', `127.0.0.1:${t.port}`);
    layer.sendRequest(
      inv,
      { host: '127.0.0.1', port: peer.port, transport: 'udp' },
      { onResponse: (r) => seen.push(r.status), onTimeout: () => seen.push(-1) },
    );
    // Wait for both finals (timing on a loaded machine varies; the order does not).
    for (let i = 0; i < 100 && peer.got.filter((r) => r.method === 'ACK').length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 4 * T.T1));
    expect(invites).toBe(3); // sent at 0, T1, 3*T1; none after the 180 (Timer A stops in Proceeding)
    expect(seen).toEqual([180, 486]);
    const acks = peer.got.filter((r) => r.method === 'ACK');
    expect(acks).toHaveLength(2); // one per final response received
    expect(acks[0].headers.get('Via')).toBe(inv.headers.get('Via'));
    expect(acks[0].headers.get('To')).toContain('tag=tt');
    expect(acks[0].headers.get('CSeq')).toBe('1 ACK');
  });

  it('times out with Timer B (64*T1) when nothing answers', async () => {
    const t = await transport();
    const layer = new TransactionLayer(t, { T1: 10, T2: 40, T4: 50 });
    const peer = await udpPeer();
    const reason = await new Promise<string>((resolve) =>
      layer.sendRequest(
        request('INVITE', `127.0.0.1:${t.port}`),
        { host: '127.0.0.1', port: peer.port, transport: 'udp' },
        { onResponse: () => undefined, onTimeout: resolve },
      ),
    );
    expect(reason).toMatch(/timeout/);
    expect(peer.got.length).toBeGreaterThanOrEqual(6); // 0, 10, 30, 70, 150, 310 ms < 640
  });

  it('does not retransmit over TCP and frames responses on the stream', async () => {
    const t = await transport();
    const layer = new TransactionLayer(t, T);
    t.on('message', (m) => m.kind === 'response' && layer.matchResponse(m));
    let count = 0;
    const conns: net.Socket[] = [];
    const server = net.createServer((s) => {
      conns.push(s);
      const f = new StreamFramer();
      s.on('data', (c) => {
        for (const m of f.push(c)) {
          count++;
          if (m.kind === 'request') setTimeout(() => s.write(serialize(makeResponse(m, 200, 'OK', 'z'))), 150);
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(
      () =>
        new Promise((r) => {
          for (const c of conns) c.destroy();
          server.close(r);
        }),
    );
    const port = (server.address() as net.AddressInfo).port;
    const status = await new Promise<number>((resolve) =>
      layer.sendRequest(
        request('OPTIONS', `127.0.0.1:${t.port}`, 'TCP'),
        { host: '127.0.0.1', port, transport: 'tcp' },
        { onResponse: (r) => resolve(r.status), onTimeout: () => resolve(-1) },
      ),
    );
    expect(status).toBe(200);
    expect(count).toBe(1);
  });

  it('answers a retransmitted request from the server cache without a new transaction (§17.2)', async () => {
    const t = await transport();
    const layer = new TransactionLayer(t, T);
    const peer = await udpPeer();
    const bye = request('BYE', `127.0.0.1:${peer.port}`);
    const from = { host: '127.0.0.1', port: peer.port, transport: 'udp' as const };
    const ctx = layer.acceptRequest(bye, from);
    expect(ctx).not.toBeNull();
    TransactionLayer.reply(ctx!, 200);
    expect(layer.acceptRequest(bye, from)).toBeNull();
    const responses: number[] = [];
    peer.sock.on('message', (b) => {
      const m = parseDatagram(b);
      if (m.kind === 'response') responses.push(m.status);
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(responses).toEqual([200, 200]);
  });
});
