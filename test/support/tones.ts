/**
 * Tones for audio checks in the telephony tests: a tone is sent one way and recognised on the far
 * side by its frequency (Goertzel) and energy, so a test proves audio, not only that packets flowed.
 * `rtpParty` is the far end of a call's media as a plain RTP socket (PCMA, payload type 8).
 */
import dgram from 'node:dgram';
import { decodeG711, encodeG711 } from '../../plugins/telephony/bridge/media/audio.ts';
import { buildRtp, parseRtp } from '../../plugins/telephony/bridge/media/rtp.ts';

/** Power of `freq` (Goertzel) over the total power: near 1 for a pure tone, near 0 without it. */
export function toneShare(x: Int16Array, freq: number, rate = 8000): number {
  const k = 2 * Math.cos((2 * Math.PI * freq) / rate);
  let s1 = 0;
  let s2 = 0;
  let total = 0;
  for (const v of x) {
    const s0 = v + k * s1 - s2;
    s2 = s1;
    s1 = s0;
    total += v * v;
  }
  const power = s1 * s1 + s2 * s2 - k * s1 * s2;
  return total ? (2 * power) / (x.length * total) : 0;
}

/**
 * The median of `toneShare` over the 20 ms frames louder than `minRms`: robust to the gaps and
 * phase jumps a jitter buffer or packet-loss concealment puts in a recording.
 */
export function frameShare(x: Int16Array, freq: number, rate = 8000, minRms = 300): number {
  const n = rate / 50;
  const shares: number[] = [];
  for (let at = 0; at + n <= x.length; at += n) {
    const f = x.subarray(at, at + n);
    if (rms(f) > minRms) shares.push(toneShare(f, freq, rate));
  }
  shares.sort((a, b) => a - b);
  return shares.length ? shares[Math.floor(shares.length / 2)]! : 0;
}

export function rms(x: Int16Array): number {
  let t = 0;
  for (const v of x) t += v * v;
  return x.length ? Math.sqrt(t / x.length) : 0;
}

export function concat(chunks: Int16Array[]): Int16Array {
  const out = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** `n` samples of a sine of `hz` at `rate`, starting at sample `from` (so frames join without a phase jump). */
export function sine(hz: number, n: number, from = 0, rate = 8000, amplitude = 8000): Int16Array {
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * (from + i)) / rate));
  return out;
}

export interface RtpParty {
  /** The port to name in the SDP (SIPp's `[rtpport]` key, a trunk's answer). */
  port: number;
  /** Every PCMA frame received, decoded. */
  readonly heard: Int16Array[];
  /** What was heard, all frames or only those louder than `minRms` (speech, not silence). */
  samples(minRms?: number): Int16Array;
  packets(): number;
  close(): void;
}

/**
 * One side of a call's media on a UDP socket: keeps what it hears (PCMA) and, from the first
 * packet on (which shows where the far side's media is: symmetric RTP), either sends a `toneHz`
 * tone there in 20 ms PCMA frames or echoes every packet back (`echo`).
 */
export async function rtpParty(o: { toneHz?: number; echo?: boolean; ip?: string } = {}): Promise<RtpParty> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, o.ip ?? '127.0.0.1', r));
  const heard: Int16Array[] = [];
  let peer: { address: string; port: number } | null = null;
  sock.on('message', (buf, rinfo) => {
    peer ??= { address: rinfo.address, port: rinfo.port };
    if (o.echo) sock.send(buf, rinfo.port, rinfo.address);
    const p = parseRtp(buf);
    if (p && p.payloadType === 8) heard.push(decodeG711('PCMA', p.payload));
  });
  let seq = 0;
  let n = 0;
  const timer =
    o.toneHz === undefined
      ? null
      : setInterval(() => {
          if (!peer) return;
          const payload = encodeG711('PCMA', sine(o.toneHz!, 160, n));
          sock.send(buildRtp({ marker: seq === 0, payloadType: 8, sequence: seq++, timestamp: n, ssrc: 0x5eed, payload }), peer.port, peer.address);
          n += 160;
        }, 20);
  return {
    port: sock.address().port,
    heard,
    samples: (minRms = 0) => concat(heard.filter((c) => rms(c) >= minRms)),
    packets: () => heard.length,
    close: () => {
      if (timer) clearInterval(timer);
      sock.close();
    },
  };
}
