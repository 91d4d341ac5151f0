/**
 * One call's RTP media: a UDP socket, a 20 ms sender paced from the monotonic clock (never from
 * timer counts, which drift and catch up in bursts), a playback queue the AI fills, a jitter
 * buffer for the far end's audio and RFC 4733 DTMF.
 */
import dgram from 'node:dgram';
import dns from 'node:dns';
import { isIP } from 'node:net';
import { randomInt } from 'node:crypto';
import { DtmfReceiver, JitterBuffer, parseRtp } from './rtp.ts';
import { decodeG711Into, encodeG711Into, silenceFrame, type Codec } from './audio.ts';

const FRAME_NS = 20_000_000n;
const FRAME_SAMPLES = 160;

/** Histogram of send-interval deviation from 20 ms, 0.1 ms bins up to 200 ms. */
export class IntervalStats {
  readonly bins = new Uint32Array(2001);
  count = 0;
  max = 0;
  add(deviationMs: number): void {
    const d = Math.abs(deviationMs);
    this.bins[Math.min(2000, Math.round(d * 10))]++;
    this.count++;
    if (d > this.max) this.max = d;
  }
  percentile(p: number): number {
    if (this.count === 0) return 0;
    const want = Math.ceil(this.count * p);
    let acc = 0;
    for (let i = 0; i < this.bins.length; i++) {
      acc += this.bins[i];
      if (acc >= want) return i / 10;
    }
    return this.max;
  }
  merge(o: IntervalStats): void {
    for (let i = 0; i < this.bins.length; i++) this.bins[i] += o.bins[i];
    this.count += o.count;
    this.max = Math.max(this.max, o.max);
  }
}

/**
 * One timer for all sessions: it wakes at the earliest due frame and sends every frame that is
 * due, so 200 calls cost at most ~1000 wakeups per second and frames are never skipped.
 */
class Pacer {
  private readonly sessions = new Set<MediaSession>();
  private timer: NodeJS.Timeout | null = null;
  private wakeAt = 0n;

  add(s: MediaSession): void {
    this.sessions.add(s);
    this.arm();
  }
  remove(s: MediaSession): void {
    this.sessions.delete(s);
    if (this.sessions.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }
  /** Re-arms when a session's next deadline moved earlier. */
  arm(): void {
    let earliest: bigint | null = null;
    for (const s of this.sessions) if (earliest === null || s.nextDue < earliest) earliest = s.nextDue;
    if (earliest === null) return;
    if (this.timer && earliest >= this.wakeAt) return;
    if (this.timer) clearTimeout(this.timer);
    const now = process.hrtime.bigint();
    const delayMs = Number(earliest - now) / 1e6;
    this.wakeAt = earliest;
    // setTimeout rounds up to whole ms; wake ~0.5 ms early and send what is due by then.
    this.timer = setTimeout(() => this.run(), Math.max(0, Math.floor(delayMs - 0.5)));
  }
  private run(): void {
    this.timer = null;
    const now = process.hrtime.bigint();
    const horizon = now + 500_000n;
    for (const s of this.sessions) {
      if (s.nextDue > horizon) continue;
      // After a stall (descheduled process, GC) do not burst the missed frames out back to
      // back: skip their slots like silence suppression (RTP timestamp jumps, sequence stays
      // contiguous, marker on the next packet; RFC 3551 §4.1). Queued AI audio is kept, only
      // delayed. One frame of lateness is absorbed by sending the due frame now.
      const behind = now - s.nextDue;
      if (behind >= 2n * FRAME_NS) s.skip(Number(behind / FRAME_NS));
      s.tick(now);
    }
    this.arm();
  }
}
const pacer = new Pacer();

export interface MediaOptions {
  socket: dgram.Socket;
  codec: Codec;
  payloadType: number;
  dtmfPayloadType: number | null;
  remoteHost: string;
  remotePort: number;
  /**
   * Decoded far-end audio, 160 samples at 8 kHz per 20 ms (gaps concealed with silence). The
   * array is reused for the next frame: copy what you keep.
   */
  onAudio?: (pcm8k: Int16Array) => void;
  onDtmf?: (digit: string) => void;
}

export class MediaSession {
  readonly stats = new IntervalStats();
  nextDue = 0n;
  private lastSent = 0n;
  private seq = randomInt(0, 0xffff);
  private ts = randomInt(0, 0x7fffffff);
  private readonly ssrc = randomInt(1, 0x7fffffff);
  private queue: Int16Array[] = [];
  private queueOffset = 0;
  private queued = 0;
  private jitter = new JitterBuffer(3);
  private readonly dtmf = new DtmfReceiver();
  private remoteSsrc: number | null = null;
  private talking = false;
  /** The grid was moved for the first AI audio: that one interval is not a jitter sample. */
  private rephased = false;
  private running = false;
  private readonly silence: Uint8Array;
  /** Reused for every far-end frame handed to onAudio (decoded / concealed gap). */
  private decoded = new Int16Array(FRAME_SAMPLES);
  private readonly zero = new Int16Array(FRAME_SAMPLES);
  packetsSent = 0;
  packetsReceived = 0;
  /** hrtime of the first packet that carried AI audio (not silence). */
  firstAudioSentAt: bigint | null = null;
  /** Frames sent more than one frame late; should stay 0. */
  lateFrames = 0;
  /** 20 ms slots skipped after stalls of two frames or more (no packet sent for them). */
  skippedSlots = 0;

  constructor(private readonly o: MediaOptions) {
    this.silence = silenceFrame(o.codec);
    o.socket.on('message', (buf, rinfo) => this.onPacket(buf, rinfo.address, rinfo.port));
  }

  get localPort(): number {
    return this.o.socket.address().port;
  }
  get jitterStats(): { lost: number; late: number; received: number } {
    return { lost: this.jitter.lost, late: this.jitter.late, received: this.jitter.received };
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.nextDue = process.hrtime.bigint();
    pacer.add(this);
  }

  /** Queues 8 kHz PCM for playout. The first audio after silence starts right away (new spurt). */
  play(pcm8k: Int16Array): void {
    if (pcm8k.length === 0) return;
    this.queue.push(pcm8k);
    this.queued += pcm8k.length;
    if (!this.talking && this.running && this.firstAudioSentAt === null) {
      // Re-phase the 20 ms grid to now so the first AI word does not wait up to one frame.
      const now = process.hrtime.bigint();
      if (this.nextDue > now) {
        this.ts = (this.ts + Math.round((Number(now - this.lastSent) / 1e6) * 8) - FRAME_SAMPLES) >>> 0;
        this.nextDue = now;
        this.rephased = true;
        pacer.arm();
      }
    }
  }
  /** Barge-in: drop everything not yet sent. */
  flush(): void {
    this.queue = [];
    this.queueOffset = 0;
    this.queued = 0;
  }

  get queuedMs(): number {
    return this.queued / 8;
  }

  /**
   * Encodes the next frame of queued audio straight into `out` at `at` (RTP payload) and returns
   * true, or returns false when nothing is queued. A short tail is padded with encoded zeros,
   * exactly as a zero-filled 160-sample frame would be.
   */
  private writeFrame(out: Uint8Array, at: number): boolean {
    if (this.queued === 0) return false;
    let n = 0;
    while (n < FRAME_SAMPLES && this.queue.length) {
      const head = this.queue[0];
      const take = Math.min(FRAME_SAMPLES - n, head.length - this.queueOffset);
      encodeG711Into(this.o.codec, head, this.queueOffset, take, out, at + n);
      n += take;
      this.queueOffset += take;
      if (this.queueOffset >= head.length) {
        this.queue.shift();
        this.queueOffset = 0;
      }
    }
    if (n < FRAME_SAMPLES) out.set(this.silence.subarray(n), at + n);
    this.queued -= n;
    return true;
  }

  /** Skips `n` 20 ms slots that passed while the process could not run. */
  skip(n: number): void {
    this.nextDue += BigInt(n) * FRAME_NS;
    this.ts = (this.ts + n * FRAME_SAMPLES) >>> 0;
    this.skippedSlots += n;
    this.talking = false; // the next packet starts a new spurt (marker bit)
    // The far end's frames kept arriving meanwhile: play out as many so the buffer stays small.
    for (let i = 0; i < n; i++) this.playoutOne();
  }

  /** Sends the frame due at `nextDue` and plays out one far-end frame. */
  tick(now: bigint): void {
    if (now - this.nextDue > FRAME_NS) this.lateFrames++;
    // Header and payload written into one packet buffer (Buffer.allocUnsafe takes it from the
    // shared 8 KiB pool: no ArrayBuffer per packet). Not reused: an EAGAIN send may still hold it.
    const pkt = Buffer.allocUnsafe(12 + FRAME_SAMPLES);
    const hasAudio = this.writeFrame(pkt, 12);
    if (!hasAudio) pkt.set(this.silence, 12);
    const marker = hasAudio && !this.talking; // RFC 3551 §4.1: first packet of a talk spurt
    this.talking = hasAudio;
    // RFC 3550 §5.1 fixed header, V=2, no padding/extension/CSRC.
    pkt[0] = 0x80;
    pkt[1] = (marker ? 0x80 : 0) | (this.o.payloadType & 0x7f);
    pkt.writeUInt16BE(this.seq & 0xffff, 2);
    pkt.writeUInt32BE(this.ts >>> 0, 4);
    pkt.writeUInt32BE(this.ssrc >>> 0, 8);
    this.seq = (this.seq + 1) & 0xffff;
    this.ts = (this.ts + FRAME_SAMPLES) >>> 0;
    const sendAt = process.hrtime.bigint();
    if (this.lastSent !== 0n && !this.rephased) this.stats.add(Number(sendAt - this.lastSent) / 1e6 - 20);
    this.rephased = false;
    this.lastSent = sendAt;
    this.o.socket.send(pkt, this.o.remotePort, this.o.remoteHost);
    this.packetsSent++;
    if (hasAudio && this.firstAudioSentAt === null) this.firstAudioSentAt = sendAt;
    this.nextDue += FRAME_NS;

    this.playoutOne();
  }

  private playoutOne(): void {
    const incoming = this.jitter.pop();
    if (incoming === undefined || !this.o.onAudio) return;
    if (incoming === null) {
      this.zero.fill(0); // a consumer may not write it, but stay safe: 160 stores
      this.o.onAudio(this.zero);
      return;
    }
    if (incoming.length !== this.decoded.length) this.decoded = new Int16Array(incoming.length);
    decodeG711Into(this.o.codec, incoming, this.decoded);
    this.o.onAudio(this.decoded);
  }

  private onPacket(buf: Buffer, host: string, _port: number): void {
    const p = parseRtp(buf);
    if (!p) return;
    // Accept media only from the negotiated peer address (RFC 3550 §8.2 spirit: ignore strays).
    if (host !== this.o.remoteHost) return;
    this.packetsReceived++;
    if (this.o.dtmfPayloadType !== null && p.payloadType === this.o.dtmfPayloadType) {
      const d = this.dtmf.onPacket(p);
      if (d && this.o.onDtmf) this.o.onDtmf(d);
      return;
    }
    if (p.payloadType !== this.o.payloadType) return;
    if (this.remoteSsrc !== null && p.ssrc !== this.remoteSsrc) this.jitter = new JitterBuffer(3); // new source: new sequence space
    this.remoteSsrc = p.ssrc;
    // `buf` is this packet's own memory (dgram allocates per datagram): keep a view, no copy.
    this.jitter.push(p.sequence, p.payload);
  }

  metrics(): import('./leg.ts').LegMetrics {
    return {
      sendJitterP99Ms: this.stats.percentile(0.99),
      sendJitterMaxMs: this.stats.max,
      intervals: this.stats.count,
      lateFrames: this.lateFrames,
      skippedSlots: this.skippedSlots,
      packetsSent: this.packetsSent,
      packetsReceived: this.packetsReceived,
      rxLost: this.jitter.lost,
      firstAudioSentAt: this.firstAudioSentAt,
    };
  }

  stop(): void {
    if (!this.running) {
      this.o.socket.close();
      return;
    }
    this.running = false;
    pacer.remove(this);
    try {
      this.o.socket.close();
    } catch {
      // already closed
    }
  }
}

/**
 * dgram resolves the destination of every send() through dns.lookup, which for an IP literal
 * still defers the send to a nextTick with a closure per packet. The SDP `c=` address is almost
 * always a literal: hand it back synchronously and fall back to dns.lookup for a name.
 */
function literalLookup(host: string, family: unknown, cb: (err: Error | null, address: string, family: number) => void): void {
  const v = isIP(host);
  if (v) cb(null, host, v);
  // dgram passes a bare family number here; dns.lookup accepts it as options.
  else dns.lookup(host, family as number, cb as (err: NodeJS.ErrnoException | null, address: string, family: number) => void);
}

/** RTP port allocator over the configured range (even ports, RFC 3550 §11). */
export class PortPool {
  private next: number;
  constructor(
    private readonly min: number,
    private readonly max: number,
    private readonly host: string,
  ) {
    this.next = min + (min % 2);
  }

  async open(): Promise<dgram.Socket> {
    const span = Math.floor((this.max - this.min) / 2) + 1;
    for (let i = 0; i < span; i++) {
      const port = this.next;
      this.next += 2;
      if (this.next > this.max) this.next = this.min + (this.min % 2);
      const sock = dgram.createSocket({ type: 'udp4', lookup: literalLookup });
      const ok = await new Promise<boolean>((res) => {
        sock.once('error', () => res(false));
        sock.bind(port, this.host, () => res(true));
      });
      if (ok) {
        sock.removeAllListeners('error');
        sock.on('error', () => undefined);
        return sock;
      }
      try {
        sock.close();
      } catch {
        // never bound
      }
    }
    throw new Error('no free RTP port in range');
  }
}
