/**
 * G.711 (ITU-T G.711 via `alawmulaw`) and the two resamplers the bridge needs:
 * 8 kHz → 16 kHz for the engine's input, 24 kHz → 8 kHz for its output. Pure functions.
 */
import alawmulaw from 'alawmulaw';

export type Codec = 'PCMU' | 'PCMA';
/** RFC 3551 §6 static payload types. */
export const STATIC_PT: Record<Codec, number> = { PCMU: 0, PCMA: 8 };

export function encodeG711(codec: Codec, pcm: Int16Array): Uint8Array {
  return codec === 'PCMU' ? alawmulaw.mulaw.encode(pcm) : alawmulaw.alaw.encode(pcm);
}
export function decodeG711(codec: Codec, data: Uint8Array): Int16Array {
  return codec === 'PCMU' ? alawmulaw.mulaw.decode(data) : alawmulaw.alaw.decode(data);
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

/**
 * 24 kHz → 8 kHz decimator with a short low-pass FIR (anti-aliasing below 4 kHz). Stateful so
 * chunk boundaries from the engine (arbitrary sizes) do not matter.
 */
export class Decimator24to8 {
  // 9-tap windowed-sinc low-pass, cutoff ~3.4 kHz at 24 kHz; coefficients sum to 1.
  private static readonly TAPS = [0.0165, 0.0533, 0.1223, 0.1847, 0.2464, 0.1847, 0.1223, 0.0533, 0.0165].map((t, _i, a) => t / a.reduce((x, y) => x + y, 0));
  private readonly hist = new Float32Array(9);
  private phase = 0;

  process(input: Int16Array): Int16Array {
    const taps = Decimator24to8.TAPS;
    const out = new Int16Array(Math.ceil((input.length + this.phase) / 3));
    let n = 0;
    for (let i = 0; i < input.length; i++) {
      this.hist.copyWithin(0, 1);
      this.hist[8] = input[i];
      this.phase++;
      if (this.phase === 3) {
        this.phase = 0;
        let acc = 0;
        for (let k = 0; k < 9; k++) acc += this.hist[k] * taps[k];
        out[n++] = Math.max(-32768, Math.min(32767, Math.round(acc)));
      }
    }
    return out.subarray(0, n);
  }
}

/** Little-endian PCM16 bytes ⇄ samples (the Live API's `audio/pcm` is LE mono). */
export function pcmFromBytes(buf: Buffer): Int16Array {
  const n = buf.length >> 1;
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) out[i] = buf.readInt16LE(2 * i);
  return out;
}
export function pcmToBytes(pcm: Int16Array): Buffer {
  const buf = Buffer.allocUnsafe(pcm.length * 2);
  for (let i = 0; i < pcm.length; i++) buf.writeInt16LE(pcm[i], 2 * i);
  return buf;
}
