/**
 * Rate changes a wideband leg needs besides audio.ts's two (8 → 16 kHz for the engine's input,
 * 24 → 8 kHz for its output): a 16 → 8 kHz decimator for wideband speech going to a narrowband
 * leg, and an up-sampler to the 24 kHz an Opus leg encodes at from 8 or 16 kHz sources. All
 * stateful across chunks (the engine's and the legs' chunk sizes are arbitrary), all without an
 * allocation beyond the output array.
 */

/**
 * 16 kHz → 8 kHz with a low-pass before dropping every second sample. audio.ts's `backTo8k`
 * picks the odd samples, which is exact for 16 kHz that was made from 8 kHz but folds anything
 * above 4 kHz of real wideband audio (an Opus or G.722 leg) back into the band as noise.
 */
export class Decimator16to8 {
  // 15-tap windowed-sinc half-band low-pass (cutoff 3.8 kHz at 16 kHz, Hamming); sums to 1.
  private static readonly TAPS = (() => {
    const n = 15;
    const fc = 3800 / 16000;
    const t: number[] = [];
    for (let i = 0; i < n; i++) {
      const m = i - (n - 1) / 2;
      const sinc = m === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * m) / (Math.PI * m);
      t.push(sinc * (0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (n - 1))));
    }
    const sum = t.reduce((a, b) => a + b, 0);
    return Float64Array.from(t.map((x) => x / sum));
  })();
  /** The last 14 input samples (the filter's history). */
  private readonly hist = new Float64Array(14);
  /** Whether the next input sample is an odd one (the phase across chunks). */
  private odd = false;

  process(input: Int16Array): Int16Array {
    const taps = Decimator16to8.TAPS;
    const h = this.hist;
    const out = new Int16Array((input.length + (this.odd ? 1 : 0)) >> 1);
    let k = 0;
    for (const x of input) {
      if (this.odd) {
        let acc = taps[14]! * x;
        for (let t = 0; t < 14; t++) acc += taps[t]! * h[t]!;
        out[k++] = acc > 32767 ? 32767 : acc < -32768 ? -32768 : Math.round(acc);
      }
      // Shift the history by one and append the sample: 14 moves per input sample keep the code
      // simple, and at 16 kHz per leg that is nothing next to the codec.
      for (let t = 0; t < 13; t++) h[t] = h[t + 1]!;
      h[13] = x;
      this.odd = !this.odd;
    }
    return k === out.length ? out : out.subarray(0, k);
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
