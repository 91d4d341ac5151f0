import { describe, expect, it } from 'vitest';
import { backTo8k } from '../../../plugins/telephony/bridge/media/audio.ts';
import { Decimator16to8, UpsamplerTo24 } from '../../../plugins/telephony/bridge/media/resample.ts';
import { OPUS_ENC_FRAME, OPUS_MAX_DEC_SAMPLES, OpusDecoder, OpusEncoder, PcmQueue } from '../../../plugins/telephony/bridge/webrtc/opus.ts';
import { answeredCodec, WebRtcLeg } from '../../../plugins/telephony/bridge/webrtc/leg.ts';
import { tonePower, WebRtcVisitor } from '../../support/webrtc-visitor.ts';

/**
 * Opus in the browser legs (issue 28 item 3): the codec wrapper, the rate changes a wideband leg
 * needs, and a room's WebRTC leg against a werift visitor that offers Opus as a browser does. The
 * wideband checks use tones a G.711 path cannot carry (above 4 kHz): they prove the audio was
 * never narrowed to 8 kHz on the way.
 */
const tone = (hz: number, rate: number, n: number, amp = 8000, from = 0) =>
  Int16Array.from({ length: n }, (_, i) => Math.round(amp * Math.sin((2 * Math.PI * hz * (from + i)) / rate)));

function chunks(pcm: Int16Array, sizes: number[]): Int16Array[] {
  const out: Int16Array[] = [];
  let at = 0;
  for (let k = 0; at < pcm.length; k++) {
    const n = sizes[k % sizes.length]!;
    out.push(pcm.slice(at, at + n));
    at += n;
  }
  return out;
}
const concat = (parts: Int16Array[]) => {
  const all = new Int16Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all;
};

describe('rate changes for wideband legs', () => {
  it('16 → 8 kHz keeps speech-band tones and removes what would fold back (backTo8k folds a 6 kHz tone to 2 kHz)', () => {
    const low = tone(1000, 16000, 16000);
    const d = new Decimator16to8();
    const lowOut = concat(chunks(low, [321, 17, 1280, 1]).map((c) => d.process(c)));
    expect(lowOut.length).toBe(8000);
    expect(tonePower(lowOut.subarray(100), 1000, 8000)).toBeGreaterThan(0.8 * tonePower(low, 1000, 16000));

    const high = tone(6000, 16000, 16000);
    const highOut = new Decimator16to8().process(high);
    const folded = backTo8k(high);
    expect(tonePower(folded, 2000, 8000)).toBeGreaterThan(1e6);
    expect(tonePower(highOut.subarray(100), 2000, 8000)).toBeLessThan(tonePower(folded, 2000, 8000) / 100);
  });

  it('8 and 16 → 24 kHz: three and one and a half samples per input, the same in any chunking, the tone kept', () => {
    for (const from of [8000, 16000] as const) {
      const src = tone(1000, from, from);
      const whole = new UpsamplerTo24(from).process(src);
      expect(whole.length).toBe(24000);
      const u = new UpsamplerTo24(from);
      const pieces = concat(chunks(src, [7, 160, 333, 1]).map((c) => u.process(c)));
      expect(Array.from(pieces)).toEqual(Array.from(whole));
      expect(tonePower(whole.subarray(24), 1000, 24000)).toBeGreaterThan(0.9 * tonePower(src, 1000, from));
    }
  });

  it('a PcmQueue hands out frames across chunk edges and counts what it holds', () => {
    const q = new PcmQueue();
    q.push(Int16Array.of(1, 2, 3));
    q.push(new Int16Array(0));
    q.push(Int16Array.of(4, 5));
    const out = new Int16Array(4);
    expect(q.takeInto(out, 4)).toBe(4);
    expect(Array.from(out)).toEqual([1, 2, 3, 4]);
    expect(q.queued).toBe(1);
    expect(q.takeInto(out, 4)).toBe(1);
    expect(out[0]).toBe(5);
    q.push(Int16Array.of(9));
    q.flush();
    expect(q.queued).toBe(0);
    expect(q.takeInto(out, 4)).toBe(0);
  });
});

describe('Opus (libopus as WebAssembly)', () => {
  it('encodes 24 kHz and decodes 16 kHz: a 6 kHz tone survives (wideband), packets are small', () => {
    const enc = new OpusEncoder();
    const dec = new OpusDecoder();
    const src = tone(6000, 24000, 24000);
    const out = new Int16Array(OPUS_MAX_DEC_SAMPLES);
    const decoded: Int16Array[] = [];
    let bytes = 0;
    for (let at = 0; at + OPUS_ENC_FRAME <= src.length; at += OPUS_ENC_FRAME) {
      const pkt = enc.encode(src.subarray(at, at + OPUS_ENC_FRAME));
      bytes += pkt.length;
      const n = dec.decodeInto(pkt, out);
      expect(n).toBe(320);
      decoded.push(out.slice(0, n));
    }
    const pcm = concat(decoded).subarray(1600);
    expect(tonePower(pcm, 6000, 16000)).toBeGreaterThan(0.3 * tonePower(tone(6000, 16000, 16000), 6000, 16000));
    expect(tonePower(pcm, 6000, 16000)).toBeGreaterThan(100 * tonePower(pcm, 2000, 16000));
    expect(bytes / 50).toBeLessThan(120); // about 32 kbit/s
    // A packet that is not Opus decodes to nothing instead of throwing into the media loop.
    expect(dec.decodeInto(Buffer.from([0xff, 0xff, 0xff]), out)).toBe(0);
    enc.close();
    dec.close();
    expect(() => enc.encode(src.subarray(0, OPUS_ENC_FRAME))).toThrow(/closed/);
    expect(dec.decodeInto(Buffer.from([1]), out)).toBe(0);
  });

  it('the answer names the codec RTP will carry: its audio line’s first payload type', () => {
    const sdp = (pts: string, maps: string) => `v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF ${pts}\r\n${maps}`;
    expect(answeredCodec(sdp('111 0', 'a=rtpmap:111 opus/48000/2\r\na=rtpmap:0 PCMU/8000\r\n'))).toEqual({ codec: 'opus', payloadType: 111 });
    expect(answeredCodec(sdp('109', 'a=rtpmap:109 OPUS/48000/2\r\n'))).toEqual({ codec: 'opus', payloadType: 109 });
    expect(answeredCodec(sdp('0 111', 'a=rtpmap:111 opus/48000/2\r\na=rtpmap:0 PCMU/8000\r\n'))).toEqual({ codec: 'PCMU', payloadType: 0 });
    expect(answeredCodec(sdp('8', ''))).toEqual({ codec: 'PCMA', payloadType: 8 });
    expect(answeredCodec(sdp('9', 'a=rtpmap:9 G722/8000\r\n'))).toBeNull();
    expect(answeredCodec('v=0\r\n')).toBeNull();
  });
});

describe("a room's WebRTC leg with a visitor that offers Opus", () => {
  it('agrees Opus; the visitor’s 5 kHz reaches the engine at 16 kHz and the engine’s 24 kHz 6 kHz tone reaches the visitor', async () => {
    const heard: Int16Array[] = [];
    let voice = false;
    const leg = new WebRtcLeg(
      { onAudio16k: (pcm) => heard.push(pcm), onConnected: () => undefined, onGone: () => undefined, onVoice: () => (voice = true) },
      { hostAddresses: ['127.0.0.1'], iceLite: true },
      0,
    );
    const visitor = new WebRtcVisitor({ toneHz: 5000, codec: 'opus', keepMs: 3000 });
    try {
      await visitor.accept(await leg.answer(await visitor.offer()));
      expect(leg.codec).toBe('opus');
      await visitor.connected;
      leg.play(tone(6000, 24000, 24000 * 2), 24000);
      expect(leg.queuedMs).toBeGreaterThan(1500);
      const until = Date.now() + 15_000;
      while ((visitor.received.length < 48000 * 2.5 || heard.length < 20) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await visitor.close();
    }
    const m = await leg.stop();
    expect(m).toMatchObject({ codec: 'opus', srtp: 'own' });
    expect(m.rxLost).toBe(0);
    // What the engine got: 16 kHz in 80 ms batches, the visitor's 5 kHz tone in it.
    expect(heard.every((b) => b.length >= 1280)).toBe(true);
    const engineIn = concat(heard).subarray(16000 * 0.2);
    expect(tonePower(engineIn, 5000, 16000)).toBeGreaterThan(1e5);
    expect(tonePower(engineIn, 5000, 16000)).toBeGreaterThan(50 * tonePower(engineIn, 3000, 16000));
    expect(voice).toBe(true);
    // What the visitor heard (decoded at 48 kHz): the 6 kHz tone, which G.711 cannot carry.
    const got = Int16Array.from(visitor.received.slice(48000 * 0.3, 48000 * 1.8));
    expect(tonePower(got, 6000, 48000)).toBeGreaterThan(1e5);
    expect(tonePower(got, 6000, 48000)).toBeGreaterThan(50 * tonePower(got, 2000, 48000));
  }, 30_000);

  it('plays 8 and 16 kHz (a desk phone’s or a tab’s audio after a transfer) and a G.711 visitor still gets G.711', async () => {
    const leg = new WebRtcLeg(
      { onAudio16k: () => undefined, onConnected: () => undefined, onGone: () => undefined, onVoice: () => undefined },
      { hostAddresses: ['127.0.0.1'], iceLite: true },
      0,
    );
    const visitor = new WebRtcVisitor({ codec: 'opus', keepMs: 3000 });
    try {
      await visitor.accept(await leg.answer(await visitor.offer()));
      await visitor.connected;
      leg.play(tone(700, 8000, 8000), 8000);
      leg.play(tone(1500, 16000, 16000), 16000);
      const until = Date.now() + 15_000;
      while (visitor.received.length < 48000 * 2.5 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await visitor.close();
    }
    await leg.stop();
    const first = Int16Array.from(visitor.received.slice(48000 * 0.2, 48000 * 0.9));
    const second = Int16Array.from(visitor.received.slice(48000 * 1.2, 48000 * 1.9));
    expect(tonePower(first, 700, 48000)).toBeGreaterThan(50 * tonePower(first, 1500, 48000));
    expect(tonePower(second, 1500, 48000)).toBeGreaterThan(50 * tonePower(second, 700, 48000));

    const g711 = new WebRtcLeg(
      { onAudio16k: () => undefined, onConnected: () => undefined, onGone: () => undefined, onVoice: () => undefined },
      { hostAddresses: ['127.0.0.1'], iceLite: true },
      0,
    );
    const old = new WebRtcVisitor({ keepMs: 2000 });
    try {
      await old.accept(await g711.answer(await old.offer()));
      expect(g711.codec).toBe('PCMU');
      await old.connected;
      // The engine's 24 kHz is decimated to 8 kHz for a G.711 visitor, as for a SIP leg.
      g711.play(tone(440, 24000, 24000), 24000);
      expect(g711.queuedMs).toBeCloseTo(1000, -1);
      const until = Date.now() + 10_000;
      while (old.received.length < 8000 * 1.5 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await old.close();
    }
    await g711.stop();
    expect(old.receivedTone(440)).toBeGreaterThan(1e5);
  }, 30_000);
});
