/**
 * Rate changes the wideband legs need besides audio.ts's two (8 → 16 kHz for the engine's input,
 * 24 → 8 kHz for its output): 16 → 8 kHz for wideband speech going to a narrowband leg, 24 → 16
 * kHz for the engine's speech to a G.722 leg, an up-sampler to the 24 kHz an Opus leg encodes at
 * from 8 or 16 kHz sources, and `ToLegRate`, which brings audio of any of those rates to a SIP
 * leg's own in one step. All stateful across chunks (the engine's and the legs' chunk sizes are
 * arbitrary), all without an allocation beyond the output array.
 */
import { Decimator24to8, upsample8to16Into } from './audio.ts';
import type { PlayRate } from './leg.ts';

/** Windowed-sinc low-pass taps (Hamming) at `offset + i - (n - 1) / 2`, cutoff `fc` of the rate, summing to 1. */
function lowPass(n: number, fc: number, offset = 0): Float64Array {
  const t: number[] = [];
  for (let i = 0; i < n; i++) {
    const m = i - (n - 1) / 2 + offset;
    const sinc = m === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * m) / (Math.PI * m);
    t.push(sinc * (0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (n - 1))));
  }
  const sum = t.reduce((x, y) => x + y, 0);
  return Float64Array.from(t.map((x) => x / sum));
}

const clamp16 = (v: number): number => (v > 32767 ? 32767 : v < -32768 ? -32768 : Math.round(v));

/**
 * 16 kHz → 8 kHz with a low-pass before dropping every second sample. audio.ts's `backTo8k`
 * picks the odd samples, which is exact for 16 kHz that was made from 8 kHz but folds anything
 * above 4 kHz of real wideband audio (an Opus or G.722 leg) back into the band as noise.
 */
export class Decimator16to8 {
  // 15-tap windowed-sinc half-band low-pass (cutoff 3.8 kHz at 16 kHz, Hamming); sums to 1.
  private static readonly TAPS = lowPass(15, 3800 / 16000);
  /**
   * The input as a sliding window: the newest 14 samples before the current one are the filter's
   * history, moved back to the start only when the buffer is full (no shift per sample).
   */
  private readonly win = new Float64Array(14 + 1024);
  private at = 0;
  /** Whether the next input sample is an odd one (the phase across chunks). */
  private odd = false;

  process(input: Int16Array): Int16Array {
    const out = new Int16Array((input.length + (this.odd ? 1 : 0)) >> 1);
    const k = this.processInto(input, out);
    return k === out.length ? out : out.subarray(0, k);
  }

  /** process() into `out` (room for ⌈input.length / 2⌉ samples); returns how many it wrote. */
  processInto(input: Int16Array, out: Int16Array): number {
    const taps = Decimator16to8.TAPS;
    const w = this.win;
    let k = 0;
    for (const x of input) {
      if (this.at + 15 > w.length) {
        w.copyWithin(0, this.at, this.at + 14);
        this.at = 0;
      }
      w[this.at + 14] = x;
      if (this.odd) {
        let acc = 0;
        for (let t = 0; t < 15; t++) acc += taps[t]! * w[this.at + t]!;
        out[k++] = clamp16(acc);
      }
      this.at++;
      this.odd = !this.odd;
    }
    return k;
  }
}

/**
 * 24 kHz → 16 kHz (the engine's speech to a G.722 leg) in one step: a polyphase windowed-sinc
 * low-pass (cutoff 7.2 kHz, 25 taps at 24 kHz) evaluated at every 1.5th input sample, so the
 * outputs alternate between the taps at whole and at half sample offsets. Nothing goes through
 * 8 kHz: a G.722 caller hears the AI up to 7 kHz. Stateful across chunks of any size.
 */
export class Decimator24to16 {
  private static readonly HALF = 12;
  /** Taps for an output on an input sample (25) and halfway between two (24, at ±0.5 … ±11.5). */
  private static readonly WHOLE = lowPass(25, 7200 / 24000);
  private static readonly MID = lowPass(24, 7200 / 24000);
  /** The last 24 input samples, then the chunk being processed. */
  private buf = new Float64Array(24 + 960);
  /** Position of the next output in half input samples from buf[0]: on sample p/2 (even) or between. */
  private pos = 2 * Decimator24to16.HALF;

  process(input: Int16Array): Int16Array {
    const L = Decimator24to16.HALF;
    const total = 2 * L + input.length;
    if (this.buf.length < total) {
      const bigger = new Float64Array(total);
      bigger.set(this.buf.subarray(0, 2 * L));
      this.buf = bigger;
    }
    const b = this.buf;
    b.set(input, 2 * L);
    const out = new Int16Array(Math.floor((2 * total - this.pos) / 3) + 1);
    let k = 0;
    let pos = this.pos;
    const whole = Decimator24to16.WHOLE;
    const mid = Decimator24to16.MID;
    // An output at sample c needs c + L; one between c and c + 1 needs c + L as well (24 taps from c - L + 1).
    for (; (pos >> 1) + L < total; pos += 3) {
      const c = pos >> 1;
      // Both tap sets are symmetric (a linear-phase low-pass): the samples that share a tap are
      // added first, which halves the multiplies (25 → 13 and 24 → 12 per output), and two
      // accumulators halve the chain of dependent additions.
      let acc0 = 0;
      let acc1 = 0;
      if ((pos & 1) === 0) {
        const taps = whole;
        const lo = c - L;
        for (let t = 0; t < L; t += 2) {
          acc0 += taps[t]! * (b[lo + t]! + b[lo + 2 * L - t]!);
          acc1 += taps[t + 1]! * (b[lo + t + 1]! + b[lo + 2 * L - t - 1]!);
        }
        acc0 += taps[L]! * b[c]!;
      } else {
        const taps = mid;
        const lo = c - L + 1;
        for (let t = 0; t < L; t += 2) {
          acc0 += taps[t]! * (b[lo + t]! + b[lo + 2 * L - 1 - t]!);
          acc1 += taps[t + 1]! * (b[lo + t + 1]! + b[lo + 2 * L - 2 - t]!);
        }
      }
      out[k++] = clamp16(acc0 + acc1);
    }
    // Keep the last 2L samples as the next chunk's history; positions move back by what was dropped.
    const drop = total - 2 * L;
    b.copyWithin(0, drop, total);
    this.pos = pos - 2 * drop;
    return out.subarray(0, k);
  }
}

/**
 * 8 or 16 kHz → 24 kHz by linear interpolation (factors 3 and 1.5). Speech at 8 or 16 kHz has
 * nothing above 4 or 8 kHz to keep, so interpolating adds no audible image worth a longer filter
 * at the rate an Opus encoder then band-limits anyway.
 */
export class UpsamplerTo24 {
  /** Input advance per output sample, in thirds of an input sample: 1 from 8 kHz, 2 from 16 kHz. */
  private readonly step: number;
  private prev = 0;
  /** Where the next output lies between `prev` (0) and the next input sample (3), in thirds. */
  private pos = 0;

  constructor(readonly fromRate: 8000 | 16000) {
    this.step = fromRate / 8000;
  }

  process(input: Int16Array): Int16Array {
    const out = new Int16Array(Math.ceil(((input.length + 1) * 3) / this.step));
    let k = 0;
    let prev = this.prev;
    let pos = this.pos;
    for (const x of input) {
      for (; pos < 3; pos += this.step) out[k++] = Math.round(prev + ((x - prev) * pos) / 3);
      pos -= 3;
      prev = x;
    }
    this.prev = prev;
    this.pos = pos;
    return out.subarray(0, k);
  }
}

/**
 * Audio for a SIP leg's playback at the leg's own rate (8 kHz G.711, 16 kHz G.722) from whatever
 * rate it comes at, in one step: the engine's 24 kHz decimated straight to the leg's rate (never
 * through 8 kHz on a G.722 leg), another leg's or a browser's 16 kHz low-passed to 8 kHz or taken
 * as it is, 8 kHz interpolated to 16 kHz. One converter per source rate, each keeping its state
 * across chunks. Returns `pcm` itself when the rates agree.
 */
export class ToLegRate {
  private from24: Decimator24to8 | Decimator24to16 | null = null;
  private from16: Decimator16to8 | null = null;
  private last8 = 0;

  constructor(readonly rate: 8000 | 16000) {}

  convert(pcm: Int16Array, from: PlayRate): Int16Array {
    if (from === this.rate) return pcm;
    if (from === 24000) return (this.from24 ??= this.rate === 16000 ? new Decimator24to16() : new Decimator24to8()).process(pcm);
    if (from === 16000) return (this.from16 ??= new Decimator16to8()).process(pcm);
    const out = new Int16Array(pcm.length * 2);
    this.last8 = upsample8to16Into(pcm, this.last8, out, 0);
    return out;
  }
}
