/**
 * A SIP trunk over TLS for tests: a Node `tls` server that speaks real SIP (Debian's SIPp is built
 * without TLS: `sipp -v` says v3.6.1-SCTP-PCAP-RTPSTREAM, and `sipp -t l1` exits with "To use a
 * TLS transport you must compile SIPp with OpenSSL"; nor does it protect SRTP itself). With
 * `srtp`, it answers an RTP/SAVP offer with SDES (RFC 4568: the offer's first crypto line's tag
 * and suite, a key of its own) and protects and checks its media with the bridge's own SDES code. It answers REGISTER with a digest
 * challenge, then 200 with `Require: outbound` and `Flow-Timer` (RFC 5626 §4.4), pongs CRLF pings,
 * answers OPTIONS, and takes an INVITE (100, 180, 200 with its own RTP socket in the SDP, which
 * sends a tone and keeps what it receives), and answers BYE. It records every connection (its SNI)
 * and every request as received.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import type net from 'node:net';
import tls from 'node:tls';
import { decodeG711, encodeG711 } from '../../plugins/telephony/bridge/media/audio.ts';
import { buildRtp, parseRtp } from '../../plugins/telephony/bridge/media/rtp.ts';
import { SdesSrtp, type SdesSuite } from '../../plugins/telephony/bridge/media/sdes.ts';
import { StreamFramer, type SipRequest } from '../../plugins/telephony/bridge/sip/message.ts';
import { sine } from './tones.ts';

export interface TrunkConnection {
  servername: string | false | null;
  remotePort: number;
  requests: SipRequest[];
  pings: number;
}

export class SipTlsTrunk {
  readonly connections: TrunkConnection[] = [];
  port = 0;
  /** What the callee's RTP socket received (PCMA decoded), frame by frame. */
  readonly heard: Int16Array[] = [];
  private server: tls.Server | null = null;
  private rtp: dgram.Socket | null = null;
  private rtpTimer: NodeJS.Timeout | null = null;
  private rtpPeer: { host: string; port: number } | null = null;
  private readonly sockets: tls.TLSSocket[] = [];
  private srtp: SdesSrtp | null = null;
  /** With `srtp`: SRTP packets received that authenticated, and those that did not. */
  readonly srtpStats = { ok: 0, failed: 0 };
  /** The last INVITE's offer and our answer (SDP). */
  lastOffer = '';
  lastAnswer = '';

  constructor(
    private readonly creds: { cert: string; key: string },
    /** `pong: false`: a server whose flow died (RFC 5626 §4.4.1: no pong to a ping). */
    private readonly o: { flowTimerSec: number; toneHz: number; pong?: boolean; srtp?: boolean },
  ) {}

  async start(): Promise<void> {
    this.rtp = dgram.createSocket('udp4');
    await new Promise<void>((r) => this.rtp!.bind(0, '127.0.0.1', r));
    this.rtp.on('message', (buf, rinfo) => {
      this.rtpPeer ??= { host: rinfo.address, port: rinfo.port };
      let pkt: Buffer | null = buf;
      if (this.srtp) {
        pkt = this.srtp.unprotect(buf);
        if (!pkt) {
          this.srtpStats.failed++;
          return;
        }
        this.srtpStats.ok++;
      }
      const p = parseRtp(pkt);
      if (p && p.payloadType === 8) this.heard.push(decodeG711('PCMA', p.payload));
    });
    this.server = tls.createServer({ ...this.creds, minVersion: 'TLSv1.2' }, (s) => this.adopt(s));
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  get requests(): SipRequest[] {
    return this.connections.flatMap((c) => c.requests);
  }

  private adopt(s: tls.TLSSocket): void {
    const conn: TrunkConnection = { servername: s.servername, remotePort: s.remotePort ?? 0, requests: [], pings: 0 };
    this.connections.push(conn);
    this.sockets.push(s);
    const framer = new StreamFramer((kind) => {
      if (kind !== 'ping') return;
      conn.pings++;
      if (this.o.pong !== false) s.write('\r\n');
    });
    s.on('data', (d: Buffer) => {
      for (const m of framer.push(d)) if (m.kind === 'request') this.onRequest(s, conn, m);
    });
    s.on('error', () => undefined);
  }

  private onRequest(s: tls.TLSSocket, conn: TrunkConnection, req: SipRequest): void {
    conn.requests.push(req);
    const h = (n: string) => req.headers.get(n) ?? '';
    const reply = (status: string, extra: string[] = [], body = '') => {
      const lines = [
        `SIP/2.0 ${status}`,
        ...req.headers.getAll('Via').map((v) => `Via: ${v}`),
        `From: ${h('From')}`,
        `To: ${h('To')}${/;tag=/.test(h('To')) || status.startsWith('100') ? '' : ';tag=trunk1'}`,
        `Call-ID: ${h('Call-ID')}`,
        `CSeq: ${h('CSeq')}`,
        ...extra,
        `Content-Length: ${Buffer.byteLength(body)}`,
        '',
        body,
      ];
      s.write(lines.join('\r\n'));
    };
    switch (req.method) {
      case 'REGISTER':
        if (!h('Authorization')) return reply('401 Unauthorized', ['WWW-Authenticate: Digest realm="trunk.test", nonce="n0nce42", algorithm=MD5, qop="auth"']);
        return reply('200 OK', [`Contact: ${h('Contact')};expires=300`, 'Require: outbound', `Flow-Timer: ${this.o.flowTimerSec}`]);
      case 'OPTIONS':
        return reply('200 OK');
      case 'INVITE': {
        reply('100 Trying');
        reply('180 Ringing', ['Contact: <sip:callee@127.0.0.1;transport=tls>']);
        const offer = req.body.toString();
        this.lastOffer = offer;
        let media = 'RTP/AVP';
        let crypto: string[] = [];
        this.srtp = null;
        if (this.o.srtp) {
          // RFC 4568 §5.1.2: accept the first crypto line, same tag and suite, our own key.
          const m = /a=crypto:(\d+) (AES_CM_128_HMAC_SHA1_(?:80|32)) inline:([A-Za-z0-9+/=]+)/.exec(offer);
          if (!m) return reply('488 Not Acceptable Here');
          const ours = randomBytes(30).toString('base64');
          this.srtp = new SdesSrtp({ suite: m[2] as SdesSuite, local: ours, remote: m[3]! });
          media = 'RTP/SAVP';
          crypto = [`a=crypto:${m[1]} ${m[2]} inline:${ours}`];
        }
        const sdp = [
          'v=0',
          'o=trunk 1 1 IN IP4 127.0.0.1',
          's=-',
          'c=IN IP4 127.0.0.1',
          't=0 0',
          `m=audio ${(this.rtp!.address() as net.AddressInfo).port} ${media} 8`,
          'a=rtpmap:8 PCMA/8000',
          ...crypto,
          '',
        ].join('\r\n');
        this.lastAnswer = sdp;
        const port = Number(/m=audio (\d+)/.exec(offer)?.[1] ?? 0);
        this.rtpPeer = { host: '127.0.0.1', port };
        reply('200 OK', ['Contact: <sip:callee@127.0.0.1;transport=tls>', 'Content-Type: application/sdp'], sdp);
        return;
      }
      case 'ACK':
        this.startTone();
        return;
      case 'BYE':
        this.stopTone();
        return reply('200 OK');
      default:
        return reply('501 Not Implemented');
    }
  }

  /** The callee "speaks": a tone, 20 ms PCMA frames, to the port the offer named. */
  private startTone(): void {
    if (this.rtpTimer) return;
    let seq = 0;
    let n = 0;
    this.rtpTimer = setInterval(() => {
      if (!this.rtpPeer) return;
      const payload = encodeG711('PCMA', sine(this.o.toneHz, 160, n));
      const pkt = this.srtp
        ? this.srtp.protect(8, seq === 0, seq, n, 0x1234abcd, payload)
        : buildRtp({ marker: seq === 0, payloadType: 8, sequence: seq, timestamp: n, ssrc: 0x1234abcd, payload });
      seq++;
      this.rtp!.send(pkt, this.rtpPeer.port, this.rtpPeer.host);
      n += 160;
    }, 20);
  }

  private stopTone(): void {
    if (this.rtpTimer) clearInterval(this.rtpTimer);
    this.rtpTimer = null;
  }

  async stop(): Promise<void> {
    this.stopTone();
    this.rtp?.close();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
