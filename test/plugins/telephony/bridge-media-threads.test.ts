/**
 * The media threads (media/thread.ts, thread-host.ts) and the shared playback ring (media/ring.ts):
 * real worker threads, real UDP sockets on loopback, a test socket as the far end.
 */
import { describe, expect, it } from 'vitest';
import dgram from 'node:dgram';
import { RingReader, RingWriter, createRing } from '../../../plugins/telephony/bridge/media/ring.ts';
import { ThreadMediaHost } from '../../../plugins/telephony/bridge/media/thread-host.ts';
import { raisePriority } from '../../../plugins/telephony/bridge/media/thread.ts';
import { bindSocket } from '../../../plugins/telephony/bridge/media/session.ts';
import { buildRtp, parseRtp } from '../../../plugins/telephony/bridge/media/rtp.ts';
import { buildReport, parseRtcp, type RtcpPacket } from '../../../plugins/telephony/bridge/media/rtcp.ts';
import { decodeG711, encodeG711 } from '../../../plugins/telephony/bridge/media/audio.ts';
import type { MediaHost, MediaLeg } from '../../../plugins/telephony/bridge/media/leg.ts';
import { InlineMediaHost } from '../../../plugins/telephony/bridge/media/inline.ts';
import { until } from '../../support/until.ts';
import { cleanupsAfterEach } from '../../support/cleanup.ts';
import type { execFileSync } from 'node:child_process';

const cleanups = cleanupsAfterEach();

function ramp(n: number, from = 0): Int16Array {
  return Int16Array.from({ length: n }, (_v, i) => ((from + i) % 2000) * 10 - 10000);
}

describe('playback ring (SharedArrayBuffer, one writer, one reader)', () => {
  it('hands samples over in order across the wrap, and encodes them exactly as G.711 does', () => {
    const sab = createRing(256);
    const w = new RingWriter(sab);
    const r = new RingReader(sab);
    const out = new Uint8Array(160);
    let fed = 0;
    let read = 0;
    for (let round = 0; round < 10; round++) {
      // 100 in, 160 out (or what there is): the indexes wrap the 256-sample ring several times.
      expect(w.write(ramp(100, fed))).toBe(false);
      fed += 100;
      expect(w.queued).toBe(fed - read);
      const n = r.encodeInto('PCMU', out, 0, 160);
      expect(n).toBe(Math.min(160, fed - read));
      expect(Buffer.from(out.subarray(0, n))).toEqual(Buffer.from(encodeG711('PCMU', ramp(n, read))));
      read += n;
    }
    expect(r.encodeInto('PCMU', out, 0, 160)).toBe(0);
    expect(w.queued).toBe(0);
  });

  it('holds what does not fit and moves it in as the reader frees space (pump)', () => {
    const sab = createRing(256);
    const w = new RingWriter(sab);
    const r = new RingReader(sab);
    expect(w.write(ramp(600))).toBe(true); // 256 in the ring, 344 held
    expect(w.queued).toBe(600);
    const got: number[] = [];
    const out = new Uint8Array(160);
    for (let i = 0; i < 10 && got.length < 600; i++) {
      const n = r.encodeInto('PCMA', out, 0, 160);
      got.push(...decodeG711('PCMA', out.subarray(0, n)));
      w.pump();
    }
    expect(got.length).toBe(600);
    expect(got).toEqual(Array.from(decodeG711('PCMA', encodeG711('PCMA', ramp(600)))));
    expect(w.pump()).toBe(false);
  });

  it('flush (barge-in) drops the ring and the held audio; audio written after it still plays', () => {
    const sab = createRing(256);
    const w = new RingWriter(sab);
    const r = new RingReader(sab);
    w.write(ramp(500));
    const out = new Uint8Array(160);
    r.encodeInto('PCMU', out, 0, 160);
    w.flush();
    expect(w.queued).toBe(0);
    w.write(new Int16Array(80).fill(1234));
    expect(w.queued).toBe(80);
    expect(r.queued).toBe(80); // the reader jumped to the flush point
    expect(r.encodeInto('PCMU', out, 0, 160)).toBe(80);
    expect(Array.from(decodeG711('PCMU', out.subarray(0, 80)))).toEqual(Array(80).fill(decodeG711('PCMU', encodeG711('PCMU', Int16Array.of(1234)))[0]));
    expect(w.queued).toBe(0);
  });

  it('a flush that happened before the reader existed still applies', () => {
    const sab = createRing(256);
    const w = new RingWriter(sab);
    w.write(ramp(200));
    w.flush();
    const r = new RingReader(sab); // the media thread takes the call up only now
    expect(r.queued).toBe(0);
    expect(r.encodeInto('PCMU', new Uint8Array(160), 0, 160)).toBe(0);
  });

  it('refuses a capacity that is not a power of two', () => {
    expect(() => createRing(1000)).toThrow(/power of two/);
  });
});

describe('scheduling priority of the media threads', () => {
  it('asks chrt for SCHED_FIFO on the thread id, and falls back when refused', () => {
    const calls: string[][] = [];
    const ok = ((cmd: string, args: string[]) => {
      calls.push([cmd, ...args]);
      return Buffer.alloc(0);
    }) as unknown as typeof execFileSync;
    const refused = (() => {
      throw new Error('chrt: failed to set pid 1 policy: Operation not permitted');
    }) as unknown as typeof execFileSync;
    if (process.platform !== 'linux') {
      expect(raisePriority(10, 0, ok)).toBe('default');
      return;
    }
    expect(raisePriority(10, 0, ok)).toBe('fifo:10');
    expect(calls[0].slice(0, 4)).toEqual(['chrt', '-f', '-p', '10']);
    expect(Number(calls[0][4])).toBeGreaterThan(0); // this thread's TID
    expect(raisePriority(10, 0, refused)).toBe('default'); // nice 0: left as it is
    expect(raisePriority(0, 0, ok)).toBe('default');
    expect(calls).toHaveLength(1);
  });
});

interface FarEnd {
  sock: dgram.Socket;
  port: number;
  got: { port: number; payload: Buffer; seq: number; ssrc: number }[];
  rtcpSock: dgram.Socket;
  rtcpPort: number;
  rtcp: { port: number; packets: RtcpPacket[] }[];
}

async function farEnd(): Promise<FarEnd> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  const got: FarEnd['got'] = [];
  sock.on('message', (b, rinfo) => {
    const p = parseRtp(b);
    if (p) got.push({ port: rinfo.port, payload: Buffer.from(p.payload), seq: p.sequence, ssrc: p.ssrc });
  });
  const rtcpSock = dgram.createSocket('udp4');
  await new Promise<void>((r) => rtcpSock.bind(0, '127.0.0.1', r));
  const rtcp: FarEnd['rtcp'] = [];
  rtcpSock.on('message', (b, rinfo) => {
    const packets = parseRtcp(b);
    if (packets) rtcp.push({ port: rinfo.port, packets });
  });
  cleanups.push(
    () => sock.close(),
    () => rtcpSock.close(),
  );
  return { sock, port: sock.address().port, got, rtcpSock, rtcpPort: rtcpSock.address().port, rtcp };
}

const hosts: [string, (min: number) => MediaHost][] = [
  [
    'two media threads (sender and receiver share the port)',
    (min) => new ThreadMediaHost({ min, max: min + 199, host: '127.0.0.1', split: true, rtcpIntervalMs: 100 }),
  ],
  ['one media thread', (min) => new ThreadMediaHost({ min, max: min + 199, host: '127.0.0.1', split: false, rtcpIntervalMs: 100 })],
  ['media inline (SOVCOMMS_BRIDGE_MEDIA_THREAD=0)', (min) => new InlineMediaHost(min, min + 199, '127.0.0.1', 100)],
];
for (const [i, [title, make]] of hosts.entries()) {
  describe(title, () => {
    it("sends paced RTP from the advertised port, plays the queued audio, hands the far end's audio up, and reports the figures", async () => {
      const host = make(41000 + i * 200);
      cleanups.push(() => host.close());
      const far = await farEnd();
      const legs: MediaLeg[] = [await host.open(), await host.open()];
      expect(legs[0].port % 2).toBe(0);
      expect(legs[1].port).not.toBe(legs[0].port);
      const heard: Int16Array[] = [];
      const leg = legs[0];
      leg.start(
        { codec: 'PCMU', payloadType: 0, dtmfPayloadType: 101, remoteHost: '127.0.0.1', remotePort: far.port, remoteRtcpPort: far.rtcpPort },
        { onAudio16k: (pcm) => heard.push(pcm), onDtmf: () => undefined },
      );
      await until(() => far.got.length >= 3, 5000, 'silence packets');
      const loud = new Int16Array(800).fill(6000); // 100 ms
      leg.play(loud);
      expect(leg.queuedMs).toBeGreaterThan(0);
      await until(() => far.got.filter((g) => g.payload[0] !== 0xff).length >= 5, 5000, 'the played audio');
      await until(() => leg.queuedMs === 0, 5000, 'the queue to drain');
      // Symmetric RTP (RFC 4961): every packet leaves from the port in our SDP.
      expect(new Set(far.got.map((g) => g.port))).toEqual(new Set([leg.port]));
      const audible = far.got.filter((g) => g.payload[0] !== 0xff);
      expect(audible).toHaveLength(5);
      // Contiguous sequence numbers throughout.
      for (let i = 1; i < far.got.length; i++) expect((far.got[i].seq - far.got[i - 1].seq) & 0xffff).toBe(1);

      // The far end talks: 20 frames in, 80 ms batches of 16 kHz PCM out.
      const frame = encodeG711('PCMU', new Int16Array(160).fill(3000));
      for (let i = 0; i < 20; i++)
        far.sock.send(buildRtp({ marker: i === 0, payloadType: 0, sequence: 100 + i, timestamp: i * 160, ssrc: 77, payload: frame }), leg.port, '127.0.0.1');
      await until(() => heard.length >= 3, 5000, 'far-end audio');
      expect(heard[0].length).toBe(1280);
      expect(Math.abs(heard[1][600] - 3000)).toBeLessThan(200);

      leg.play(new Int16Array(8000).fill(6000));
      leg.flush(); // barge-in: nothing of it is sent
      expect(leg.queuedMs).toBe(0);
      const before = far.got.length;
      await new Promise((r) => setTimeout(r, 120));
      expect(far.got.slice(before).every((g) => g.payload[0] === 0xff)).toBe(true);

      // RTCP from RTP port + 1: a sender report about the stream the far end has been receiving.
      // (The first ones may predate the far end's audio: take one with a report block.)
      const report = await until(() => far.rtcp.find((r) => r.packets[0]?.type === 'sr' && r.packets[0].blocks.length > 0), 5000, 'a sender report');
      expect(report.port).toBe(leg.port + 1);
      const sr = report.packets[0] as Extract<RtcpPacket, { type: 'sr' }>;
      expect(sr.ssrc).toBe(far.got[0].ssrc);
      expect(sr.sender.packets).toBeGreaterThan(0);
      expect(sr.sender.octets).toBe(sr.sender.packets * 160);
      expect(report.packets[1]).toMatchObject({ type: 'sdes', chunks: [{ ssrc: sr.ssrc, cname: expect.stringMatching(/@sovcomms$/) }] });
      expect(sr.blocks[0]).toMatchObject({ ssrc: 77, cumulativeLost: 0 }); // what we heard of the far end's 20 frames
      // The far end answers with a receiver report about our stream: loss 25/256, LSR/DLSR for the RTT.
      const lsr = ((sr.sender.ntpSec & 0xffff) * 65536 + (sr.sender.ntpFrac >>> 16)) >>> 0;
      far.rtcpSock.send(
        buildReport(77, null, { ssrc: sr.ssrc, fractionLost: 25, cumulativeLost: 3, extendedMax: 100, jitter: 80, lsr, dlsr: 0 }),
        leg.port + 1,
        '127.0.0.1',
      );
      await new Promise((r) => setTimeout(r, 100));

      const m = await leg.stop();
      expect(m.rtcpSent).toBeGreaterThanOrEqual(1);
      expect(m.rtcpReceived).toBe(1);
      expect(m.remoteFractionLostMax).toBeCloseTo(25 / 256, 5);
      expect(m.remoteJitterMs).toBe(10); // 80 timestamp units at 8 kHz
      expect(m.rttMs).not.toBeNull();
      expect(m.rttMs!).toBeGreaterThanOrEqual(0);
      expect(m.rttMs!).toBeLessThan(2000);
      await until(() => far.rtcp.find((r) => r.packets.some((p) => p.type === 'bye')), 5000, 'RTCP BYE');
      expect(m.packetsSent).toBeGreaterThanOrEqual(far.got.length);
      expect(m.packetsReceived).toBe(20);
      expect(m.intervals).toBeGreaterThan(5);
      expect(m.firstAudioSentAt).not.toBeNull();
      expect(m.sendJitterMaxMs).toBeGreaterThanOrEqual(m.sendJitterP99Ms - 0.05); // p99 is a 0.1 ms bin
      // The other leg never started: its stop still answers, and its port is free again.
      await legs[1].stop();
      for (const p of [leg.port, leg.port + 1, legs[1].port, legs[1].port + 1]) {
        const again = await bindSocket(p, '127.0.0.1', false);
        expect(again, `port ${p} free again`).not.toBeNull();
        again!.close();
      }
    });
  });
}

for (const [i, [title, make]] of hosts.entries()) {
  describe(`${title}: bridged transfer`, () => {
    it("bridgeTo relays each far end's audio to the other party at 8 kHz, without the engine", async () => {
      const host = make(42000 + i * 100);
      cleanups.push(() => host.close());
      const [farA, farB] = [await farEnd(), await farEnd()];
      const [a, b] = [await host.open(), await host.open()];
      let toEngine = 0;
      // eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator -- counts calls in a handler that must return nothing
      const handlers = { onAudio16k: () => void toEngine++, onDtmf: () => undefined };
      a.start(
        { codec: 'PCMU', payloadType: 0, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: farA.port, remoteRtcpPort: farA.rtcpPort },
        handlers,
      );
      b.start(
        { codec: 'PCMA', payloadType: 8, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: farB.port, remoteRtcpPort: farB.rtcpPort },
        handlers,
      );
      a.play(new Int16Array(8000).fill(5000)); // the AI was talking: dropped at the bridge
      a.bridgeTo(b);
      b.bridgeTo(a);
      // Far end A talks (μ-law); far end B must hear it (A-law, re-encoded), and nothing of the AI.
      const tone = encodeG711('PCMU', new Int16Array(160).fill(2000));
      for (let k = 0; k < 25; k++) {
        farA.sock.send(buildRtp({ marker: k === 0, payloadType: 0, sequence: k, timestamp: k * 160, ssrc: 1, payload: tone }), a.port, '127.0.0.1');
        await new Promise((r) => setTimeout(r, 20));
      }
      const loud = (g: { payload: Buffer }) => Math.abs(decodeG711('PCMA', g.payload.subarray(0, 1))[0]) > 1500;
      await until(() => farB.got.filter(loud).length >= 15 || undefined, 5000, "A's audio at B");
      expect(farB.got.filter(loud).every((g) => Math.abs(decodeG711('PCMA', g.payload.subarray(0, 1))[0] - 2000) < 150)).toBe(true);
      expect(farA.got.filter((g) => g.payload[0] !== 0xff).length).toBe(0); // the AI's queued audio never played
      expect(toEngine).toBe(0);
      // 25 sent; a fully loaded machine can bunch a few past the jitter buffer, as for the loud check above.
      expect((await a.stop()).relayedFrames).toBeGreaterThanOrEqual(15);
      await b.stop();
    });
  });
}

describe('two media threads: the port stays ours', () => {
  it("a later SO_REUSEADDR socket of another program on the port does not receive the call's media", async () => {
    if (process.platform !== 'linux') return;
    const host = new ThreadMediaHost({ min: 41700, max: 41799, host: '127.0.0.1', split: true });
    cleanups.push(() => host.close());
    const far = await farEnd();
    const leg = await host.open();
    const heard: Int16Array[] = [];
    leg.start(
      { codec: 'PCMA', payloadType: 8, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: far.port },
      { onAudio16k: (pcm) => heard.push(pcm), onDtmf: () => undefined },
    );
    await until(() => far.got.length >= 2, 5000, 'first packets');
    const frame = encodeG711('PCMA', new Int16Array(160).fill(1000));
    const burst = (from: number) => {
      for (let i = from; i < from + 12; i++)
        far.sock.send(buildRtp({ marker: false, payloadType: 8, sequence: i, timestamp: i * 160, ssrc: 5, payload: frame }), leg.port, '127.0.0.1');
    };
    // Audio coming up means the receiver runs (and its connect(), issued before, has long completed).
    burst(0);
    await until(() => heard.length >= 2, 5000, 'far-end audio');
    const intruder = await bindSocket(leg.port, '127.0.0.1', true);
    expect(intruder).not.toBeNull();
    cleanups.push(() => intruder!.close());
    let stolen = 0;
    intruder!.on('message', () => stolen++);
    burst(12);
    await until(() => heard.length >= 5, 5000, 'far-end audio after the intruder bound');
    expect(stolen).toBe(0);
    expect((await leg.stop()).packetsReceived).toBe(24);
  });
});

describe('media timeout', () => {
  it('fires once after the far end went quiet, and not while it holds the call', async () => {
    const host = new InlineMediaHost(41900, 41999, '127.0.0.1');
    cleanups.push(() => host.close());
    const far = await farEnd();
    const leg = await host.open();
    let timeouts = 0;
    const target = { remoteHost: '127.0.0.1', remotePort: far.port, remoteRtcpPort: far.rtcpPort };
    leg.start(
      { codec: 'PCMU', payloadType: 0, dtmfPayloadType: null, ...target, mediaTimeoutMs: 300 },
      { onAudio16k: () => undefined, onDtmf: () => undefined, onMediaTimeout: () => timeouts++ },
    );
    leg.retarget({ ...target, expectMedia: false }); // on hold: silence is expected
    await new Promise((r) => setTimeout(r, 600));
    expect(timeouts).toBe(0);
    leg.retarget({ ...target, expectMedia: true }); // off hold, and still nothing comes
    await until(() => timeouts === 1 || undefined, 3000, 'the timeout');
    await new Promise((r) => setTimeout(r, 400));
    expect(timeouts).toBe(1);
    await leg.stop();
  });
});
