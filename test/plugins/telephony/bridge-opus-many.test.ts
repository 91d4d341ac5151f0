import { describe, expect, it } from 'vitest';
import { OPUS_ENC_FRAME, OPUS_MAX_DEC_SAMPLES, OpusDecoder, OpusEncoder } from '../../../plugins/telephony/bridge/webrtc/opus.ts';
import { tonePower } from '../../support/webrtc-visitor.ts';

/**
 * Many Opus rooms on one WebRTC thread (one WebAssembly module): every room's encoder and decoder
 * keep working however many there are. opusscript's own wrapper put its buffers at twice the
 * address it allocated: from about the 40th room of a thread every decode failed and every
 * encode threw (out of the pacer: the thread and all its rooms died), the bench's 50 Opus
 * visitors in one load client never came up, and a heap growth would have detached the views it
 * kept.
 */
const tone = (hz: number, rate: number, n: number, from = 0) =>
  Int16Array.from({ length: n }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * hz * (from + i)) / rate)));

interface Room {
  enc: OpusEncoder;
  dec: OpusDecoder;
  hz: number;
  heard: Int16Array[];
}

/** 20 ms frames of each room's tone through its encoder and decoder, the rooms interleaved as the pacer does. */
function carry(rooms: Room[], frames: number, from: number): void {
  const out = new Int16Array(OPUS_MAX_DEC_SAMPLES);
  for (let f = 0; f < frames; f++) {
    for (const r of rooms) {
      const pkt = r.enc.encode(tone(r.hz, 24000, OPUS_ENC_FRAME, (from + f) * OPUS_ENC_FRAME));
      const n = r.dec.decodeInto(pkt, out);
      expect(n).toBe(320);
      r.heard.push(out.slice(0, n));
    }
  }
}

/** The power of a room's own tone in what its decoder gave, after the codec's first frames. */
function heardTone(r: Room, skipFrames: number): number {
  const parts = r.heard.slice(skipFrames);
  const pcm = new Int16Array(parts.length * 320);
  parts.forEach((p, i) => pcm.set(p, i * 320));
  return tonePower(pcm, r.hz, 16000);
}

describe('Opus with many rooms on one thread', () => {
  it('120 rooms at once (past the initial 16 MiB heap, which grows): each room’s tone comes back, also for rooms made before the growth', () => {
    const rooms: Room[] = [];
    for (let i = 0; i < 120; i++) {
      rooms.push({ enc: new OpusEncoder(), dec: new OpusDecoder(), hz: 600 + 100 * (i % 30), heard: [] });
      // The first rooms carry audio while the later ones are made (and the heap grows under them).
      if (i % 10 === 9) carry(rooms.slice(0, 2), 1, i);
    }
    for (const r of rooms.slice(0, 2)) r.heard.length = 0;
    carry(rooms, 10, 200);
    for (const r of rooms) {
      expect(heardTone(r, 4), `room at ${r.hz} Hz`).toBeGreaterThan(0.3 * tonePower(tone(r.hz, 16000, 1600), r.hz, 16000));
      r.enc.close();
      r.dec.close();
    }
  });

  it('a room’s packets do not depend on what the other rooms encode (no codec writes into another’s memory)', () => {
    const frames = Array.from({ length: 15 }, (_, f) => tone(900, 24000, OPUS_ENC_FRAME, f * OPUS_ENC_FRAME));
    const alone = new OpusEncoder();
    const expected = frames.map((fr) => alone.encode(fr).toString('hex'));
    alone.close();
    const others = Array.from({ length: 60 }, () => new OpusEncoder());
    const watched = new OpusEncoder();
    const more = Array.from({ length: 60 }, () => new OpusEncoder());
    const got: string[] = [];
    const loud = tone(3000, 24000, OPUS_ENC_FRAME);
    for (const fr of frames) {
      for (const o of others) o.encode(loud);
      got.push(watched.encode(fr).toString('hex'));
      for (const o of more) o.encode(loud);
    }
    expect(got).toEqual(expected);
    for (const e of [...others, watched, ...more]) e.close();
  });

  it('a browser’s 48 kHz (the bench’s visitors: 50 of them hold 100 codecs in one process) round-trips', () => {
    const pairs = Array.from({ length: 100 }, () => ({ enc: new OpusEncoder({ rate: 48000 }), dec: new OpusDecoder(48000) }));
    const out = new Int16Array(pairs[0]!.dec.maxSamples);
    expect(out.length).toBe(5760);
    let last = new Int16Array(0);
    for (const p of pairs) {
      for (let f = 0; f < 10; f++) {
        const n = p.dec.decodeInto(p.enc.encode(tone(2000, 48000, 960, f * 960)), out);
        expect(n).toBe(960);
        last = out.slice(0, n);
      }
    }
    expect(tonePower(last, 2000, 48000)).toBeGreaterThan(100 * tonePower(last, 500, 48000));
    for (const p of pairs) {
      p.enc.close();
      p.dec.close();
    }
  });

  it('digital silence becomes a 3-octet packet after two silent frames, the same octets for every further silent frame (the legs resend it instead of encoding)', () => {
    const enc = new OpusEncoder();
    const dec = new OpusDecoder();
    const out = new Int16Array(OPUS_MAX_DEC_SAMPLES);
    for (let f = 0; f < 20; f++) dec.decodeInto(enc.encode(tone(440, 24000, OPUS_ENC_FRAME, f * OPUS_ENC_FRAME)), out);
    const sizes = [0, 1, 2, 3].map(() => enc.encode(new Int16Array(OPUS_ENC_FRAME)));
    expect(sizes.map((p) => p.length > 3)).toEqual([true, true, false, false]);
    const silent = sizes[3]!;
    expect(silent.equals(sizes[2]!)).toBe(true);
    // Sending it again is what encoding would have sent: the same octets frame after frame.
    for (let f = 0; f < 20; f++) expect(enc.encode(new Int16Array(OPUS_ENC_FRAME)).equals(silent)).toBe(true);
    for (const p of sizes) dec.decodeInto(p, out);
    expect(dec.decodeInto(silent, out)).toBe(320);
    expect(out.subarray(0, 320).every((x) => x === 0)).toBe(true);
    // Audio after it is encoded as usual.
    expect(enc.encode(tone(440, 24000, OPUS_ENC_FRAME)).length).toBeGreaterThan(20);
    for (const c of [enc, dec]) c.close();
  });

  it('refuses what libopus cannot take, as an error and not a crash', () => {
    expect(() => new OpusEncoder({ rate: 44100 })).toThrow(/44100 Hz/);
    const enc = new OpusEncoder();
    expect(() => enc.encode(new Int16Array(477))).toThrow(/opus encode: bad argument/);
    expect(() => enc.encode(new Int16Array(24000))).toThrow(/over 60 ms/);
    const dec = new OpusDecoder();
    const out = new Int16Array(OPUS_MAX_DEC_SAMPLES);
    expect(dec.decodeInto(new Uint8Array(4000), out)).toBe(0);
    enc.close();
    dec.close();
    enc.close(); // twice is harmless
  });
});
