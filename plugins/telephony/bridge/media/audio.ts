/**
 * G.711 (ITU-T G.711 via `alawmulaw`), the per-stream frame encoders (G.711 tables, G.722), and
 * the two resamplers a G.711 leg needs: 8 kHz → 16 kHz for the engine's input, 24 kHz → 8 kHz for
 * its output (the wideband ones are in resample.ts).
 */
import alawmulaw from 'alawmulaw';
import { G722Encoder } from './g722.ts';

export type Codec = 'PCMU' | 'PCMA';
/** RFC 3551 §6 static payload types. */
export const STATIC_PT: Record<Codec, number> = { PCMU: 0, PCMA: 8 };

/** What a SIP leg may carry: G.711, or G.722 (media/g722.ts; RFC 3551 §4.5.2, payload type 9). */
export type SipCodec = Codec | 'G722';
export const SIP_STATIC_PT: Record<SipCodec, number> = { ...STATIC_PT, G722: 9 };
/** G.722's far-end audio is 16 kHz (one octet per two samples); G.711's 8 kHz. */
export const isWideband = (c: SipCodec): c is 'G722' => c === 'G722';

/** The rate a leg's audio runs at, both ways: G.722's 16 kHz, G.711's 8 kHz. */
export const legRate = (c: SipCodec): 8000 | 16000 => (isWideband(c) ? 16000 : 8000);

/**
 * Encodes `n` samples of `pcm` from `from` into `out` at `at` and returns the octets written: G.711
 * by table (one octet a sample, 8 kHz), G.722 through its (stateful) encoder from 16 kHz (one
 * octet a pair; an odd sample waits in the encoder for its partner). One per stream.
 */
export type FrameEncoder = (pcm: Int16Array, from: number, n: number, out: Uint8Array, at: number) => number;
export function frameEncoder(codec: SipCodec): FrameEncoder {
  if (codec === 'G722') {
    const enc = new G722Encoder();
    return (pcm, from, n, out, at) => enc.encodeWide(pcm, from, n, out, at);
  }
  return G711_ENCODERS[codec];
}
/** The G.711 encoders (stateless: one each, shared). */
const G711_ENCODERS: Record<Codec, FrameEncoder> = {
  PCMU: (pcm, from, n, out, at) => {
    encodeG711Into('PCMU', pcm, from, n, out, at);
    return n;
  },
  PCMA: (pcm, from, n, out, at) => {
    encodeG711Into('PCMA', pcm, from, n, out, at);
    return n;
  },
};
/** A frame encoder, or a G.711 law naming its shared one (the rooms pass the law). */
export const encoderOf = (e: FrameEncoder | Codec): FrameEncoder => (typeof e === 'string' ? G711_ENCODERS[e] : e);

export function encodeG711(codec: Codec, pcm: Int16Array): Uint8Array {
  return codec === 'PCMU' ? alawmulaw.mulaw.encode(pcm) : alawmulaw.alaw.encode(pcm);
}
export function decodeG711(codec: Codec, data: Uint8Array): Int16Array {
  return codec === 'PCMU' ? alawmulaw.mulaw.decode(data) : alawmulaw.alaw.decode(data);
}

/*
 * Table codecs for the per-packet path of the media thread: they write into buffers the caller
 * owns, so a frame costs no allocation (each small typed array is an off-heap ArrayBuffer; at
 * 10,000 packets/s both ways those drove a 15-20 ms mark-compact every ~1.5 s on the media
 * thread). The tables are built from `alawmulaw`'s own per-sample functions, so the bytes are
 * identical to encodeG711/decodeG711.
 */
let encTables: Record<Codec, Uint8Array> | null = null;
let decTables: Record<Codec, Int16Array> | null = null;
function tables(): { enc: Record<Codec, Uint8Array>; dec: Record<Codec, Int16Array> } {
  if (!encTables || !decTables) {
    const mu = new Uint8Array(65536);
    const a = new Uint8Array(65536);
    for (let i = 0; i < 65536; i++) {
      const sample = i - 32768;
      mu[i] = alawmulaw.mulaw.encodeSample(sample);
      a[i] = alawmulaw.alaw.encodeSample(sample);
    }
    const dmu = new Int16Array(256);
    const da = new Int16Array(256);
    for (let i = 0; i < 256; i++) {
      dmu[i] = alawmulaw.mulaw.decodeSample(i);
      da[i] = alawmulaw.alaw.decodeSample(i);
    }
    encTables = { PCMU: mu, PCMA: a };
    decTables = { PCMU: dmu, PCMA: da };
  }
  return { enc: encTables, dec: decTables };
}
/** Encodes `n` samples of `pcm` from `from` into `out` at `at` (no allocation). */
export function encodeG711Into(codec: Codec, pcm: Int16Array, from: number, n: number, out: Uint8Array, at: number): void {
  const t = tables().enc[codec];
  for (let i = 0; i < n; i++) out[at + i] = t[pcm[from + i] + 32768];
}
/** Decodes `data` into `out` (which must hold data.length samples; no allocation). */
export function decodeG711Into(codec: Codec, data: Uint8Array, out: Int16Array): void {
  const t = tables().dec[codec];
  for (let i = 0; i < data.length; i++) out[i] = t[data[i]];
}

/** Silence payload per codec (the encoding of sample 0). */
export function silenceFrame(codec: Codec, samples = 160): Uint8Array {
  return encodeG711(codec, new Int16Array(samples));
}

/**
 * 8 kHz → 16 kHz by linear interpolation. `prev` carries the last sample of the previous
 * frame so consecutive frames join without a click.
 */
export function upsample8to16(input: Int16Array, prev = 0): Int16Array {
  const out = new Int16Array(input.length * 2);
  let last = prev;
  for (let i = 0; i < input.length; i++) {
    const s = input[i];
    out[2 * i] = (last + s) >> 1;
    out[2 * i + 1] = s;
    last = s;
  }
  return out;
}

/** upsample8to16 written into `out` at `at` (2 × input.length samples); returns the new `prev`. */
export function upsample8to16Into(input: Int16Array, prev: number, out: Int16Array, at: number): number {
  let last = prev;
  for (let i = 0; i < input.length; i++) {
    const s = input[i];
    out[at + 2 * i] = (last + s) >> 1;
    out[at + 2 * i + 1] = s;
    last = s;
  }
  return last;
}

/** 16 kHz from upsample8to16 → the 8 kHz samples it was made of (its odd samples). */
export function backTo8k(pcm16k: Int16Array): Int16Array {
  const out = new Int16Array(pcm16k.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = pcm16k[2 * i + 1]!;
  return out;
}

/**
 * 24 kHz → 8 kHz decimator with a short low-pass FIR (anti-aliasing below 4 kHz). Stateful so
 * chunk boundaries from the engine (arbitrary sizes) do not matter: the last 8 input samples and
 * the phase carry over. Only every third output of the filter is computed.
 */
export class Decimator24to8 {
  // 9-tap windowed-sinc low-pass, cutoff ~3.4 kHz at 24 kHz; coefficients sum to 1.
  private static readonly TAPS = Float64Array.from(
    [0.0165, 0.0533, 0.1223, 0.1847, 0.2464, 0.1847, 0.1223, 0.0533, 0.0165].map((t, _i, a) => t / a.reduce((x, y) => x + y, 0)),
  );
  private tail = new Float64Array(8);
  /** Index (in the joined tail+input sequence) of the next sample that completes an output. */
  private next = 10; // first output once 3 new samples joined the (zero) history

  process(input: Int16Array): Int16Array {
    const taps = Decimator24to8.TAPS;
    const n = input.length;
    const total = 8 + n;
    const at = (i: number) => (i < 8 ? this.tail[i] : input[i - 8]);
    const out = new Int16Array(Math.max(0, Math.floor((total - this.next + 2) / 3)));
    let k = 0;
    let i = this.next;
    for (; i < total; i += 3) {
      let acc = 0;
      const base = i - 8;
      if (base >= 8) for (let t = 0; t < 9; t++) acc += input[base - 8 + t] * taps[t];
      else for (let t = 0; t < 9; t++) acc += at(base + t) * taps[t];
      out[k++] = acc > 32767 ? 32767 : acc < -32768 ? -32768 : Math.round(acc);
    }
    this.next = i - n;
    const nt = new Float64Array(8);
    for (let t = 0; t < 8; t++) nt[t] = at(total - 8 + t);
    this.tail = nt;
    return out.subarray(0, k);
  }
}

/** Little-endian PCM16 bytes ⇄ samples (the Live API's `audio/pcm` is LE mono). */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function pcmFromBytes(buf: Buffer): Int16Array {
  const n = buf.length >> 1;
  if (LITTLE_ENDIAN) {
    // One copy into an aligned buffer instead of n readInt16LE calls.
    const out = new Int16Array(n);
    new Uint8Array(out.buffer).set(buf.subarray(0, n * 2));
    return out;
  }
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) out[i] = buf.readInt16LE(2 * i);
  return out;
}
export function pcmToBytes(pcm: Int16Array): Buffer {
  if (LITTLE_ENDIAN) return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const buf = Buffer.allocUnsafe(pcm.length * 2);
  for (let i = 0; i < pcm.length; i++) buf.writeInt16LE(pcm[i], 2 * i);
  return buf;
}
