import { describe, expect, it } from 'vitest';
import sdpTransform from 'sdp-transform';
import { buildRtp, parseRtp, JitterBuffer, DtmfReceiver, seqDiff } from '../../../plugins/telephony/bridge/media/rtp.ts';
import { Decimator24to8, decodeG711, encodeG711, upsample8to16, pcmFromBytes, pcmToBytes } from '../../../plugins/telephony/bridge/media/audio.ts';
import { buildOffer, parseAnswer, parseReoffer, SdpError } from '../../../plugins/telephony/bridge/media/sdp.ts';
import { IntervalStats, Pacer, type Clocked } from '../../../plugins/telephony/bridge/media/session.ts';

describe('RTP (RFC 3550)', () => {
  it('builds and parses the fixed header, rejecting short or non-v2 packets', () => {
    const b = buildRtp({ marker: true, payloadType: 8, sequence: 65535, timestamp: 0xfffffff0, ssrc: 0x12345678, payload: new Uint8Array(160).fill(0xd5) });
    expect(b.length).toBe(172);
    const p = parseRtp(b)!;
    expect(p).toMatchObject({ version: 2, marker: true, payloadType: 8, sequence: 65535, timestamp: 0xfffffff0, ssrc: 0x12345678 });
    expect(p.payload.length).toBe(160);
    expect(parseRtp(b.subarray(0, 11))).toBeNull();
    const v1 = Buffer.from(b);
    v1[0] = 0x40;
    expect(parseRtp(v1)).toBeNull();
    // CSRC list and header extension are skipped (§5.1, §5.3.1).
    const ext = Buffer.concat([Buffer.from([0x91, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 9, 0xbe, 0xde, 0, 1, 1, 2, 3, 4]), Buffer.from([7, 7])]);
    expect(parseRtp(ext)!.payload).toEqual(Buffer.from([7, 7]));
    expect(seqDiff(1, 65535)).toBe(2);
    expect(seqDiff(65535, 1)).toBe(-2);
  });

  it('jitter buffer reorders, drops duplicates and late packets, and reports gaps', () => {
    const jb = new JitterBuffer(3);
    const f = (n: number) => Buffer.from([n]);
    jb.push(65534, f(1));
    expect(jb.pop()).toBeUndefined(); // not primed yet
    jb.push(0, f(3));
    jb.push(65535, f(2)); // reordered across the wrap
    expect(jb.pop()).toEqual(f(1));
    expect(jb.pop()).toEqual(f(2));
    jb.push(65535, f(2)); // late duplicate
    expect(jb.late).toBe(1);
    expect(jb.pop()).toEqual(f(3));
    jb.push(2, f(5)); // 1 is lost
    jb.push(3, f(6));
    jb.push(4, f(7));
    expect(jb.pop()).toBeNull();
    expect(jb.lost).toBe(1);
    expect(jb.pop()).toEqual(f(5));
  });

  it('reports each RFC 4733 DTMF event once', () => {
    const rx = new DtmfReceiver();
    const pkt = (ts: number, ev: number, end: boolean) =>
      parseRtp(buildRtp({ marker: false, payloadType: 101, sequence: 1, timestamp: ts, ssrc: 1, payload: Buffer.from([ev, end ? 0x8a : 0x0a, 0, 160]) }))!;
    expect(rx.onPacket(pkt(1000, 5, false))).toBe('5');
    expect(rx.onPacket(pkt(1000, 5, false))).toBeNull();
    expect(rx.onPacket(pkt(1000, 5, true))).toBeNull();
    expect(rx.onPacket(pkt(2000, 11, false))).toBe('#');
  });
});

describe('audio', () => {
  it('G.711 round-trips within quantisation error for both laws', () => {
    const pcm = new Int16Array(160).map((_v, i) => Math.round(10000 * Math.sin(i / 5)));
    for (const c of ['PCMU', 'PCMA'] as const) {
      const back = decodeG711(c, encodeG711(c, pcm));
      for (let i = 0; i < pcm.length; i++) expect(Math.abs(back[i] - pcm[i])).toBeLessThan(400);
    }
  });

  it('resamples 8→16 kHz and 24→8 kHz keeping a 440 Hz tone and its length', () => {
    const up = upsample8to16(new Int16Array([0, 100, 200]), 0);
    expect(Array.from(up)).toEqual([0, 0, 50, 100, 150, 200]);
    const d = new Decimator24to8();
    const tone = new Int16Array(2400).map((_v, i) => Math.round(10000 * Math.sin((2 * Math.PI * 440 * i) / 24000)));
    // Arbitrary chunk sizes must not change the result length.
    const out = [d.process(tone.subarray(0, 1001)), d.process(tone.subarray(1001))];
    expect(out[0].length + out[1].length).toBe(800);
    const whole = new Decimator24to8().process(tone);
    expect(Array.from(whole)).toEqual([...Array.from(out[0]), ...Array.from(out[1])]);
    const rms = Math.sqrt(out[1].reduce((a, s) => a + s * s, 0) / out[1].length);
    expect(rms).toBeGreaterThan(6000); // a 440 Hz tone passes the 3.4 kHz low-pass
    const hiss = new Int16Array(2400).map((_v, i) => (i % 2 ? 10000 : -10000)); // 12 kHz
    const hout = new Decimator24to8().process(hiss);
    expect(Math.max(...Array.from(hout.subarray(10)).map(Math.abs))).toBeLessThan(1500);
    expect(pcmFromBytes(pcmToBytes(new Int16Array([-32768, 1, 32767])))).toEqual(new Int16Array([-32768, 1, 32767]));
  });

  it('computes send-interval percentiles', () => {
    const s = new IntervalStats();
    for (let i = 0; i < 99; i++) s.add(0.2);
    s.add(-7);
    expect(s.percentile(0.5)).toBeCloseTo(0.2);
    expect(s.percentile(1)).toBeCloseTo(7);
    expect(s.max).toBeCloseTo(7);
  });
});

describe('SDP offer/answer (RFC 3264)', () => {
  it('offers the trunk codecs plus telephone-event and reads the answer', () => {
    const offer = sdpTransform.parse(buildOffer({ host: '127.0.0.1', port: 20000, codecs: ['PCMA'], sessionId: 1 }));
    expect(offer.media[0]).toMatchObject({ type: 'audio', port: 20000, protocol: 'RTP/AVP', payloads: '8 101', ptime: 20, direction: 'sendrecv' });
    expect(offer.media[0].rtp.map((r) => r.codec)).toEqual(['PCMA', 'telephone-event']);
    const answer =
      'v=0\r\no=- 1 1 IN IP4 10.0.0.2\r\ns=-\r\nc=IN IP4 10.0.0.2\r\nt=0 0\r\nm=audio 30000 RTP/AVP 0 8 96\r\na=rtpmap:96 telephone-event/8000\r\n';
    expect(parseAnswer(answer, ['PCMA', 'PCMU'])).toEqual({
      host: '10.0.0.2',
      port: 30000,
      rtcpPort: 30001,
      codec: 'PCMU',
      payloadType: 0,
      dtmfPayloadType: 96,
      srtp: null, // no SRTP offered: plain RTP
    });
    // RFC 3605: an explicit RTCP port wins over RTP port + 1.
    expect(parseAnswer(answer + 'a=rtcp:40001\r\n', ['PCMU']).rtcpPort).toBe(40001);
    expect(parseAnswer(answer, ['PCMA'])).toMatchObject({ codec: 'PCMA', payloadType: 8 });
    expect(() => parseAnswer(answer.replace('0 8 96', '18'), ['PCMA'])).toThrow(SdpError);
    expect(() => parseAnswer(answer.replace('m=audio 30000', 'm=audio 0'), ['PCMA'])).toThrow(/no active audio/);
  });

  it('reads a re-offer: moved media, hold by direction (RFC 3264 §8.4) or by the 0.0.0.0 address (RFC 2543)', () => {
    const base = 'v=0\r\no=- 1 2 IN IP4 10.0.0.2\r\ns=-\r\nc=IN IP4 10.0.0.9\r\nt=0 0\r\nm=audio 31000 RTP/AVP 0\r\n';
    expect(parseReoffer(base)).toEqual({ host: '10.0.0.9', port: 31000, rtcpPort: 31001, sends: true });
    expect(parseReoffer(base + 'a=sendonly\r\n').sends).toBe(true); // music on hold still flows
    expect(parseReoffer(base + 'a=recvonly\r\n').sends).toBe(false);
    expect(parseReoffer(base + 'a=inactive\r\n').sends).toBe(false);
    expect(parseReoffer(base.replace('c=IN IP4 10.0.0.9', 'c=IN IP4 0.0.0.0'))).toMatchObject({ host: null, sends: false });
    expect(() => parseReoffer(base.replace('m=audio 31000', 'm=audio 0'))).toThrow(SdpError);
  });
});

describe('pacer', () => {
  it('serveDue sends what is due within the 0.5 ms horizon at once, and leaves what is not to the timer', async () => {
    const pacer = new Pacer();
    const sent: string[] = [];
    const clocked = (name: string, inMs: number): Clocked => {
      const c: Clocked = {
        nextDue: process.hrtime.bigint() + BigInt(Math.round(inMs * 1e6)),
        tick: () => {
          sent.push(name);
          c.nextDue += 20_000_000n;
        },
        skip: () => undefined,
      };
      return c;
    };
    const soon = clocked('soon', 0.2);
    const later = clocked('later', 15);
    pacer.add(later, true);
    pacer.add(soon, true);
    pacer.serveDue();
    expect(sent).toEqual(['soon']); // synchronously, not at the timer
    pacer.serveDue();
    expect(sent).toEqual(['soon']); // nothing else is due
    await new Promise((r) => setTimeout(r, 30));
    expect(sent.slice(0, 2)).toEqual(['soon', 'later']); // the timer still runs the rest
    pacer.remove(soon);
    pacer.remove(later);
    pacer.serveDue(); // nothing driven: no timer, nothing to do
  });

  it('a run also sends the frames that came due while it ran, not at a timer 1 ms later', () => {
    const pacer = new Pacer();
    const sent: string[] = [];
    const t0 = process.hrtime.bigint();
    const busy: Clocked = {
      nextDue: t0 + 200_000n,
      tick: () => {
        sent.push('busy');
        busy.nextDue += 20_000_000n;
        while (process.hrtime.bigint() - t0 < 1_200_000n); // a long pass: 1.2 ms of work
      },
      skip: () => undefined,
    };
    const next: Clocked = {
      nextDue: t0 + 1_300_000n, // beyond the first pass's horizon (0.7 ms), due before the pass ends
      tick: () => {
        sent.push('next');
        next.nextDue += 20_000_000n;
      },
      skip: () => undefined,
    };
    pacer.add(busy, true);
    pacer.add(next, true);
    pacer.serveDue();
    expect(sent).toEqual(['busy', 'next']);
    pacer.remove(busy);
    pacer.remove(next);
  });
});
