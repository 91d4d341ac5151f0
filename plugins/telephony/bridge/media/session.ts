/**
 * One call's RTP media: a 20 ms sender paced from the monotonic clock (never from timer counts,
 * which drift and catch up in bursts) with the playback queue the AI fills, and a receiver with a
 * jitter buffer for the far end's audio and RFC 4733 DTMF. The two halves can run on one socket in
 * one thread (MediaSession) or on two threads (media/thread.ts), each with its own pacer.
 */
import dgram from 'node:dgram';
import dns from 'node:dns';
import { isIP } from 'node:net';
import { randomInt } from 'node:crypto';
import { DtmfReceiver, JitterBuffer, parseRtp } from './rtp.ts';
import { decodeG711Into, frameEncoder, isWideband, legRate, silenceFrame, type Codec, type FrameEncoder, type SipCodec } from './audio.ts';
import { PcmQueue } from './pcm-queue.ts';
import { G722Decoder, G722Encoder } from './g722.ts';
import { SdesSrtp, type SdesKeys } from './sdes.ts';
import type { SrtpProtector } from '../webrtc/srtp.ts';
import type { LegMetrics, LegTarget } from './leg.ts';
import { ReceptionStats, RtcpSession, SenderInfo, type RtcpMetrics } from './rtcp.ts';

const FRAME_NS = 20_000_000n;
/** RTP clock ticks and payload octets per 20 ms, G.711 and G.722 alike (RFC 3551 §4.5.2). */
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

/** Something the pacer drives every 20 ms: an RTP sender or a far-end playout clock. */
export interface Clocked {
  /** hrtime (ns) at which the next frame is due. */
  nextDue: bigint;
  /** Handles the frame due at `nextDue` and advances it by one frame. */
  tick(now: bigint): void;
  /** Skips `n` frames that passed while the thread could not run. */
  skip(n: number): void;
}

/**
 * One timer for all calls of a thread: it wakes at the earliest due frame and handles every frame
 * that is due, so 200 calls cost at most ~1000 wakeups per second. Senders go first in each run;
 * playout (decode, resample, hand-off) runs after every due packet has left.
 */
export class Pacer {
  private readonly senders = new Set<Clocked>();
  private readonly others = new Set<Clocked>();
  private timer: NodeJS.Timeout | null = null;
  private wakeAt = 0n;
  /** Called after every run, once its due frames have left (the WebRTC thread's gaps.ts). */
  afterRun: (() => void) | null = null;

  add(s: Clocked, sender: boolean): void {
    (sender ? this.senders : this.others).add(s);
    this.arm();
  }
  remove(s: Clocked): void {
    this.senders.delete(s);
    this.others.delete(s);
    if (this.senders.size + this.others.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }
  /** The earliest frame due (hrtime ns), null when nothing is driven. */
  earliestDue(): bigint | null {
    let earliest: bigint | null = null;
    for (const s of this.senders) if (earliest === null || s.nextDue < earliest) earliest = s.nextDue;
    for (const s of this.others) if (earliest === null || s.nextDue < earliest) earliest = s.nextDue;
    return earliest;
  }
  /** Re-arms when a deadline moved earlier. */
  arm(): void {
    const earliest = this.earliestDue();
    if (earliest === null) return;
    if (this.timer && earliest >= this.wakeAt) return;
    if (this.timer) clearTimeout(this.timer);
    const now = process.hrtime.bigint();
    const delayMs = Number(earliest - now) / 1e6;
    this.wakeAt = earliest;
    // setTimeout rounds up to whole ms; wake ~0.5 ms early and handle what is due by then.
    this.timer = setTimeout(() => this.run(), Math.max(0, Math.floor(delayMs - 0.5)));
  }
  /**
   * Sends what is due now (or within the run's 0.5 ms horizon) before the caller goes on, instead
   * of at the timer. A media thread calls it before each control message: a worker's port hands
   * over every queued message in one go, so a dialer's batch of answered calls (ten binds, starts
   * and kicks; two hundred stops at the end of a campaign) would otherwise hold the timer, and
   * every call's packet due meanwhile, for the sum of their handling; now for one message's.
   * One clock read when nothing is due.
   */
  serveDue(): void {
    if (this.timer && process.hrtime.bigint() + 500_000n >= this.wakeAt) {
      clearTimeout(this.timer);
      this.run();
    }
  }
  private run(): void {
    this.timer = null;
    const now = process.hrtime.bigint();
    // Frames that came due while this pass ran (a pass of ~15 G.722 + SRTP frames takes about
    // half a millisecond) leave now, in another pass: a timer for them fires no sooner than 1 ms
    // later (setTimeout's floor), and they would leave that much late.
    let at = now;
    for (let pass = 1; Pacer.due(this.senders, at, at + 500_000n) > 0 && pass < 8; pass++) at = process.hrtime.bigint();
    Pacer.due(this.others, at, at + 500_000n);
    this.afterRun?.();
    this.arm();
  }
  /** Handles every frame of `set` due by `horizon`; returns how many. */
  private static due(set: Set<Clocked>, now: bigint, horizon: bigint): number {
    let n = 0;
    for (const s of set) {
      if (s.nextDue > horizon) continue;
      n++;
      // After a stall (descheduled thread, GC) do not burst the missed frames out back to
      // back: skip their slots like silence suppression (RTP timestamp jumps, sequence stays
      // contiguous, marker on the next packet; RFC 3551 §4.1). Queued AI audio is kept, only
      // delayed. One frame of lateness is absorbed by handling the due frame now.
      const behind = now - s.nextDue;
      if (behind >= 2n * FRAME_NS) s.skip(Number(behind / FRAME_NS));
      s.tick(now);
    }
    return n;
  }
}
/** The pacer of this thread (each worker thread has its own module instance). */
export const pacer = new Pacer();

/** Where a sender takes its audio from: samples queued at the leg's rate, encoded straight into a packet. */
export interface FrameSource {
  /** Samples queued. */
  readonly queued: number;
  /** Encodes up to `n` queued samples into `out` at `at`; returns the octets written. */
  encodeInto(enc: FrameEncoder, out: Uint8Array, at: number, n: number): number;
}

export interface SenderOptions {
  socket: dgram.Socket;
  codec: SipCodec;
  /** SDES-keyed SRTP (media/sdes.ts); plain RTP without it. */
  srtp?: SdesKeys;
  payloadType: number;
  remoteHost: string;
  remotePort: number;
  /** Audio filled by another thread (media/ring.ts); without it play() fills a queue of its own. */
  source?: FrameSource;
  /** Where the sender publishes what it sent, for RTCP sender reports (possibly on another thread). */
  info?: SenderInfo;
}

/**
 * The sending half of a call's media: paced RTP from a playback queue at the leg's rate, G.711
 * (160 samples at 8 kHz a frame) or G.722 (320 samples at 16 kHz make its 160 octets, still 160
 * RTP clock ticks: RFC 3551 §4.5.2), protected with SRTP when the leg negotiated it.
 */
export class RtpSender implements Clocked {
  readonly stats = new IntervalStats();
  nextDue = 0n;
  private lastSent = 0n;
  private seq = randomInt(0, 0xffff);
  private ts = randomInt(0, 0x7fffffff);
  private readonly ssrc = randomInt(1, 0x7fffffff);
  private readonly own: PcmQueue | null;
  /** Samples of the leg's rate per 20 ms frame (160 at 8 kHz, 320 at 16 kHz). */
  private readonly frameSamples: number;
  private readonly source: FrameSource;
  private talking = false;
  /** The grid was moved for the first AI audio: that one interval is not a jitter sample. */
  private rephased = false;
  private running = false;
  private readonly silence: Uint8Array | null;
  private readonly enc: FrameEncoder;
  /** A G.722 leg's encoder (also behind `enc`), which encodes silence at a lower cost. */
  private readonly g722: G722Encoder | null;
  /** The sending direction's SRTP (SDES keys); plain RTP without it. */
  private readonly srtp: SrtpProtector | null;
  packetsSent = 0;
  /** hrtime of the first packet that carried AI audio (not silence). */
  firstAudioSentAt: bigint | null = null;
  /** Frames sent more than one frame late; should stay 0. */
  lateFrames = 0;
  /** 20 ms slots skipped after stalls of two frames or more (no packet sent for them). */
  skippedSlots = 0;

  constructor(private readonly o: SenderOptions) {
    if (o.codec === 'G722') {
      const g722 = new G722Encoder();
      this.g722 = g722;
      this.enc = (pcm, from, n, out, at) => g722.encodeWide(pcm, from, n, out, at);
    } else {
      this.g722 = null;
      this.enc = frameEncoder(o.codec);
    }
    this.frameSamples = legRate(o.codec) / 50;
    // G.722 is adaptive: silence goes through the encoder, so the far end's decoder stays in step.
    this.silence = o.codec === 'G722' ? null : silenceFrame(o.codec);
    // Only the sending direction's protector (SdesSrtp builds each direction on first use), now
    // rather than at the first packet's deadline.
    this.srtp = o.srtp ? new SdesSrtp(o.srtp).sender() : null;
    this.own = o.source ? null : new PcmQueue();
    this.source = o.source ?? this.own!;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.nextDue = process.hrtime.bigint();
    pacer.add(this, true);
  }

  /** Queues PCM at the leg's rate for playout (own queue only; a shared source is filled by its writer). */
  play(pcm: Int16Array): void {
    if (pcm.length === 0 || !this.own) return;
    this.own.push(pcm);
    this.audioQueued();
  }

  /**
   * New audio was queued. The first AI audio of the call starts right away: the 20 ms grid is
   * re-phased to now, so the first word does not wait up to one frame.
   */
  audioQueued(): void {
    if (!this.talking && this.running && this.firstAudioSentAt === null) {
      const now = process.hrtime.bigint();
      if (this.nextDue > now) {
        this.ts = (this.ts + Math.round((Number(now - this.lastSent) / 1e6) * 8) - FRAME_SAMPLES) >>> 0;
        this.nextDue = now;
        this.rephased = true;
        pacer.arm();
      }
    }
  }
  /** The far end's media moved (re-INVITE). */
  retarget(host: string, port: number): void {
    this.o.remoteHost = host;
    this.o.remotePort = port;
  }

  /** Barge-in: drop everything not yet sent (own queue; a shared source is flushed by its writer). */
  flush(): void {
    this.own?.flush();
  }

  get queuedMs(): number {
    return (this.source.queued * 20) / this.frameSamples;
  }

  /**
   * Encodes the next frame of queued audio straight into `out` at `at` (RTP payload) and returns
   * true, or returns false when nothing is queued. A short tail is padded with encoded zeros,
   * exactly as a zero-filled 160-sample frame would be.
   */
  private writeFrame(out: Uint8Array, at: number): boolean {
    const n = this.source.encodeInto(this.enc, out, at, this.frameSamples);
    if (n === 0) return false;
    if (n < FRAME_SAMPLES) this.writeSilence(out, at + n, FRAME_SAMPLES - n);
    return true;
  }

  /** `n` octets of silence (G.722: zeros through the encoder, two samples an octet). */
  private writeSilence(out: Uint8Array, at: number, n: number): void {
    if (this.silence) out.set(this.silence.subarray(0, n), at);
    else this.g722!.encodeZeros(2 * n, out, at);
  }

  skip(n: number): void {
    this.nextDue += BigInt(n) * FRAME_NS;
    this.ts = (this.ts + n * FRAME_SAMPLES) >>> 0;
    this.skippedSlots += n;
    this.talking = false; // the next packet starts a new spurt (marker bit)
  }

  /** Sends the frame due at `nextDue`. */
  tick(now: bigint): void {
    if (now - this.nextDue > FRAME_NS) this.lateFrames++;
    // Header and payload written into one packet buffer (Buffer.allocUnsafe takes it from the
    // shared 8 KiB pool: no ArrayBuffer per packet). Not reused: an EAGAIN send may still hold it.
    // With SRTP the frame is encoded straight into the packet that leaves and protected in place.
    const pkt = this.srtp ? this.srtp.packet(FRAME_SAMPLES) : Buffer.allocUnsafe(12 + FRAME_SAMPLES);
    const hasAudio = this.writeFrame(pkt, 12);
    if (!hasAudio) this.writeSilence(pkt, 12, FRAME_SAMPLES);
    const marker = hasAudio && !this.talking; // RFC 3551 §4.1: first packet of a talk spurt
    this.talking = hasAudio;
    const ts = this.ts >>> 0;
    const sendAt = this.srtp ? this.sendSrtp(pkt, marker, ts) : this.sendRtp(pkt, marker, ts);
    this.packetsSent++;
    // Sender report figures (RFC 3550 §6.4.1: payload octets only). A few plain stores.
    this.o.info?.update(this.ssrc, this.packetsSent, this.packetsSent * FRAME_SAMPLES, ts, Number(sendAt) / 1e6);
    if (hasAudio && this.firstAudioSentAt === null) this.firstAudioSentAt = sendAt;
    this.nextDue += FRAME_NS;
  }

  /** The frame already in the srtp.packet() `pkt`, protected in place; returns when it left. */
  private sendSrtp(pkt: Buffer, marker: boolean, ts: number): bigint {
    this.srtp!.seal(pkt, FRAME_SAMPLES, this.o.payloadType, marker, this.seq, ts, this.ssrc);
    this.seq = (this.seq + 1) & 0xffff;
    this.ts = (this.ts + FRAME_SAMPLES) >>> 0;
    return this.sent(pkt);
  }

  private sent(pkt: Buffer): bigint {
    const sendAt = process.hrtime.bigint();
    if (this.lastSent !== 0n && !this.rephased) this.stats.add(Number(sendAt - this.lastSent) / 1e6 - 20);
    this.rephased = false;
    this.lastSent = sendAt;
    this.o.socket.send(pkt, this.o.remotePort, this.o.remoteHost);
    return sendAt;
  }

  /** The RTP header written in front of the frame already in `pkt`; returns when it left. */
  private sendRtp(pkt: Buffer, marker: boolean, ts: number): bigint {
    // RFC 3550 §5.1 fixed header, V=2, no padding/extension/CSRC.
    pkt[0] = 0x80;
    pkt[1] = (marker ? 0x80 : 0) | (this.o.payloadType & 0x7f);
    pkt.writeUInt16BE(this.seq & 0xffff, 2);
    pkt.writeUInt32BE(ts, 4);
    pkt.writeUInt32BE(this.ssrc >>> 0, 8);
    this.seq = (this.seq + 1) & 0xffff;
    this.ts = (this.ts + FRAME_SAMPLES) >>> 0;
    return this.sent(pkt);
  }

  metrics(): SenderMetrics {
    return {
      sendJitterP99Ms: this.stats.percentile(0.99),
      sendJitterMaxMs: this.stats.max,
      intervals: this.stats.count,
      lateFrames: this.lateFrames,
      skippedSlots: this.skippedSlots,
      packetsSent: this.packetsSent,
      firstAudioSentAt: this.firstAudioSentAt,
    };
  }

  stop(): void {
    if (!this.running) return;
    this.running = false;
    pacer.remove(this);
  }
}

export type SenderMetrics = Omit<LegMetrics, 'packetsReceived' | 'rxLost' | 'relayedFrames' | keyof RtcpMetrics>;
export type ReceiverMetrics = Pick<LegMetrics, 'packetsReceived' | 'rxLost' | 'relayedFrames' | keyof RtcpMetrics>;

export interface ReceiverOptions {
  socket: dgram.Socket;
  codec: SipCodec;
  /** SDES-keyed SRTP and SRTCP (media/sdes.ts); plain RTP without it. */
  srtp?: SdesKeys;
  payloadType: number;
  dtmfPayloadType: number | null;
  remoteHost: string;
  /** Connect the socket to the far end (the two-thread split: see PortPool). */
  connectTo?: number;
  /** RTCP (RFC 3550 §6) on RTP port + 1, reporting what `info`'s sender sent. */
  rtcp?: { socket: dgram.Socket; remotePort: number; info: SenderInfo; intervalMs?: number };
  /**
   * Decoded far-end audio, 160 samples at 8 kHz per 20 ms (gaps concealed with silence). The
   * array is reused for the next frame: copy what you keep.
   */
  onAudio?: (pcm8k: Int16Array) => void;
  /**
   * A wideband (G.722) leg's far-end audio instead: 320 samples at 16 kHz per 20 ms, decoded
   * straight to the engine's rate (no 8→16 kHz interpolation). Reused like onAudio's.
   */
  onAudio16k?: (pcm16k: Int16Array) => void;
  onDtmf?: (digit: string) => void;
  /** See LegStart.mediaTimeoutMs. */
  mediaTimeoutMs?: number;
  onMediaTimeout?: () => void;
}

/** A G.722 receiver's decoder and its 16 kHz frame. */
interface WideRx {
  dec: G722Decoder;
  pcm: Int16Array;
  zero: Int16Array;
}

/**
 * The receiving half: RTP from the negotiated peer into a jitter buffer, RFC 4733 DTMF, and a
 * 20 ms playout clock that decodes one frame per tick (a gap is concealed with silence).
 */
export class RtpReceiver implements Clocked {
  nextDue = 0n;
  private jitter = new JitterBuffer(3);
  private readonly dtmf = new DtmfReceiver();
  private remoteSsrc: number | null = null;
  private running = false;
  /** Reused for every far-end frame handed to onAudio (decoded / concealed gap). */
  private decoded = new Int16Array(FRAME_SAMPLES);
  private readonly zero = new Int16Array(FRAME_SAMPLES);
  /** G.722: its decoder and the 16 kHz frame. */
  private readonly g722: WideRx | null;
  private readonly srtp: SdesSrtp | null;
  packetsReceived = 0;
  private readonly reception = new ReceptionStats();
  private readonly rtcp: RtcpSession | null;
  /** performance.now() of the last RTP or RTCP from the far end (or of start). */
  private heardAt = 0;
  private timedOut = false;
  private expectMedia = true;

  constructor(private readonly o: ReceiverOptions) {
    this.g722 = isWideband(o.codec)
      ? {
          dec: new G722Decoder(),
          pcm: new Int16Array(2 * FRAME_SAMPLES),
          zero: new Int16Array(2 * FRAME_SAMPLES),
        }
      : null;
    const srtp = o.srtp ? new SdesSrtp(o.srtp) : null;
    this.srtp = srtp;
    o.socket.on('message', (buf, rinfo) => this.onPacket(buf, rinfo.address));
    this.rtcp = o.rtcp
      ? new RtcpSession({
          socket: o.rtcp.socket,
          remoteHost: o.remoteHost,
          remotePort: o.rtcp.remotePort,
          sender: o.rtcp.info,
          reception: this.reception,
          intervalMs: o.rtcp.intervalMs,
          onValid: () => (this.heardAt = performance.now()),
          srtcp: srtp ? { protect: (p) => srtp.protectRtcp(p), unprotect: (p) => srtp.unprotectRtcp(p) } : undefined,
        })
      : null;
    if (o.connectTo !== undefined) {
      try {
        // Errors (an unresolvable name) arrive on the socket's 'error' listener: it stays unconnected.
        o.socket.connect(o.connectTo, o.remoteHost);
      } catch {
        // already connected
      }
    }
  }

  /** Starts the playout clock; `ownClock` false when a sender's tick drives it instead. */
  start(ownClock = true): void {
    if (this.running) return;
    this.running = true;
    this.nextDue = process.hrtime.bigint() + FRAME_NS;
    this.heardAt = performance.now();
    if (ownClock) pacer.add(this, false);
    this.rtcp?.start();
  }

  tick(_now: bigint): void {
    this.nextDue += FRAME_NS;
    this.playoutOne();
    this.checkTimeout();
  }

  /**
   * Second-leg transfer: decoded far-end frames go here instead of to onAudio, at the leg's rate
   * (16 kHz from G.722, 8 kHz from G.711; the sink brings them to its own). Reused like onAudio's.
   */
  forward: ((pcm: Int16Array) => void) | null = null;

  /** The far end's media moved, or it holds the call (no media expected, no timeout meanwhile). */
  retarget(t: LegTarget): void {
    this.expectMedia = t.expectMedia;
    this.heardAt = performance.now();
    if (t.remoteHost !== this.o.remoteHost || t.remotePort !== this.o.connectTo) {
      this.o.remoteHost = t.remoteHost;
      this.jitter = new JitterBuffer(3); // a new source, likely a new sequence space
      this.remoteSsrc = null;
      if (this.o.connectTo !== undefined) {
        this.o.connectTo = t.remotePort;
        try {
          this.o.socket.disconnect();
          this.o.socket.connect(t.remotePort, t.remoteHost);
        } catch {
          // not connected yet: stays as it is
        }
      }
    }
    this.rtcp?.retarget(t.remoteHost, t.remoteRtcpPort);
  }

  private checkTimeout(): void {
    const limit = this.o.mediaTimeoutMs ?? 0;
    if (limit <= 0 || this.timedOut || !this.expectMedia || performance.now() - this.heardAt < limit) return;
    this.timedOut = true;
    this.o.onMediaTimeout?.();
  }

  skip(n: number): void {
    this.nextDue += BigInt(n) * FRAME_NS;
    // The far end's frames kept arriving meanwhile: play out as many so the buffer stays small.
    for (let i = 0; i < n; i++) this.playoutOne();
  }

  relayedFrames = 0;

  playoutOne(): void {
    if (this.g722) return this.playoutWide(this.g722);
    const incoming = this.jitter.pop();
    const sink = this.forward ?? this.o.onAudio;
    if (incoming === undefined || !sink) return;
    if (this.forward) this.relayedFrames++;
    if (incoming === null) {
      this.zero.fill(0); // a consumer may not write it, but stay safe: 160 stores
      sink(this.zero);
      return;
    }
    if (incoming.length !== this.decoded.length) this.decoded = new Int16Array(incoming.length);
    decodeG711Into(this.o.codec as Codec, incoming, this.decoded); // G.722 went to playoutWide
    sink(this.decoded);
  }

  /** playoutOne for G.722: 16 kHz to onAudio16k, or to a bridged leg's playback. */
  private playoutWide(w: WideRx): void {
    const incoming = this.jitter.pop();
    if (incoming === undefined || (!this.forward && !this.o.onAudio16k)) return;
    let pcm = w.zero;
    if (incoming !== null) {
      if (incoming.length * 2 !== w.pcm.length) w.pcm = new Int16Array(incoming.length * 2);
      w.dec.decode(incoming, w.pcm, 0);
      pcm = w.pcm;
    } else w.zero.fill(0);
    if (this.forward) {
      this.relayedFrames++;
      this.forward(pcm);
      return;
    }
    this.o.onAudio16k!(pcm);
  }

  private onPacket(srtpOrRtp: Buffer, host: string): void {
    // Before anything else: a packet that does not authenticate is not from the far end.
    const buf = this.srtp ? this.srtp.unprotect(srtpOrRtp) : srtpOrRtp;
    if (!buf) return;
    const p = parseRtp(buf);
    if (!p) return;
    // Accept media only from the negotiated peer address (RFC 3550 §8.2 spirit: ignore strays).
    if (host !== this.o.remoteHost) return;
    this.packetsReceived++;
    this.heardAt = performance.now();
    this.reception.onRtp(p.ssrc, p.sequence, p.timestamp, performance.now());
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

  get jitterStats(): { lost: number; late: number; received: number } {
    return { lost: this.jitter.lost, late: this.jitter.late, received: this.jitter.received };
  }

  metrics(): ReceiverMetrics {
    const rtcp = this.rtcp?.metrics() ?? {
      rtcpSent: 0,
      rtcpReceived: 0,
      rttMs: null,
      remoteFractionLostMax: null,
      remoteJitterMs: null,
      rxJitterMs: (this.reception.jitter / 8000) * 1000,
    };
    return { packetsReceived: this.packetsReceived, rxLost: this.jitter.lost, relayedFrames: this.relayedFrames, ...rtcp };
  }

  /** Stops the playout clock; RTCP says BYE (§6.6) and its socket is closed. */
  stop(): void {
    if (this.running) {
      this.running = false;
      pacer.remove(this);
    }
    this.rtcp?.stop();
    try {
      this.o.rtcp?.socket.close();
    } catch {
      // already closed
    }
  }
}

export interface MediaOptions extends SenderOptions, Omit<ReceiverOptions, 'socket' | 'codec' | 'payloadType' | 'remoteHost' | 'rtcp'> {
  /** RTCP socket (RTP port + 1) and the far end's RTCP port. */
  rtcp?: { socket: dgram.Socket; remotePort: number; intervalMs?: number };
}

/**
 * Both halves on one socket in one thread (media inline, or where the two-thread split is not
 * available): the sender's tick also plays out one far-end frame, after the packet left.
 */
export class MediaSession {
  private readonly tx: RtpSender;
  private readonly rx: RtpReceiver;

  constructor(private readonly o: MediaOptions) {
    const info = o.info ?? new SenderInfo();
    this.tx = new RtpSender({ ...o, info });
    this.rx = new RtpReceiver({ ...o, rtcp: o.rtcp ? { ...o.rtcp, info } : undefined });
  }

  get localPort(): number {
    return this.o.socket.address().port;
  }
  get stats(): IntervalStats {
    return this.tx.stats;
  }
  get packetsSent(): number {
    return this.tx.packetsSent;
  }
  get firstAudioSentAt(): bigint | null {
    return this.tx.firstAudioSentAt;
  }
  get jitterStats(): { lost: number; late: number; received: number } {
    return this.rx.jitterStats;
  }
  get queuedMs(): number {
    return this.tx.queuedMs;
  }

  start(): void {
    this.tx.start();
    this.rx.start();
  }
  /** Queues PCM at the leg's rate. */
  play(pcm: Int16Array): void {
    this.tx.play(pcm);
  }
  audioQueued(): void {
    this.tx.audioQueued();
  }
  retarget(t: LegTarget): void {
    this.tx.retarget(t.remoteHost, t.remotePort);
    this.rx.retarget(t);
  }
  /** Far-end audio (at the leg's rate) goes to `sink` (another call's playback) instead of onAudio. */
  forwardTo(sink: (pcm: Int16Array) => void): void {
    this.rx.forward = sink;
  }
  flush(): void {
    this.tx.flush();
  }

  metrics(): LegMetrics {
    return { ...this.tx.metrics(), ...this.rx.metrics() };
  }

  stop(): void {
    this.tx.stop();
    this.rx.stop();
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
let lastLiteral = '';
let lastFamily = 0;
function literalLookup(host: string, family: unknown, cb: (err: Error | null, address: string, family: number) => void): void {
  // Every packet of a call goes to the same address: remember the last literal (no regex per send).
  if (host === lastLiteral) return cb(null, host, lastFamily);
  const v = isIP(host);
  if (v) {
    lastLiteral = host;
    lastFamily = v;
    cb(null, host, v);
  }
  // dgram passes a bare family number here; dns.lookup accepts it as options.
  else dns.lookup(host, family as number, cb as (err: NodeJS.ErrnoException | null, address: string, family: number) => void);
}

/**
 * RTP port allocator over the configured range (even ports, RFC 3550 §11).
 *
 * `open()` binds a socket of its own. The two-thread media (media/thread.ts) needs two sockets on
 * one port instead: `reserve()` finds a port nothing else holds (an exclusive probe bind), then
 * each thread binds it with SO_REUSEADDR (`bindSocket(…, true)`). Linux hands unicast datagrams
 * to the socket bound last, so the receiving thread binds after the sending one, and connects to
 * the far end once it is known (RtpReceiver): a connected socket outranks any unconnected one on
 * the port, so another local process binding it with SO_REUSEADDR later still gets nothing.
 */
export class PortPool {
  private next: number;
  constructor(
    private readonly min: number,
    private readonly max: number,
    private readonly host: string,
  ) {
    this.next = min + (min % 2);
  }

  /** Tries even ports P (with P + 1 for RTCP inside the range) from where the last one ended. */
  private async firstFree<T>(take: (port: number) => Promise<T | null>): Promise<T> {
    const first = this.min + (this.min % 2);
    const span = Math.floor((this.max - 1 - first) / 2) + 1;
    for (let i = 0; i < span; i++) {
      if (this.next + 1 > this.max) this.next = first;
      const port = this.next;
      this.next += 2;
      const got = await take(port);
      if (got !== null) return got;
    }
    throw new Error('no free RTP port in range');
  }

  /** RTP socket on P and RTCP socket on P + 1, both exclusive. */
  open(): Promise<{ rtp: dgram.Socket; rtcp: dgram.Socket }> {
    return this.firstFree(async (port) => {
      const rtp = await bindSocket(port, this.host, false);
      if (!rtp) return null;
      const rtcp = await bindSocket(port + 1, this.host, false);
      if (!rtcp) {
        rtp.close();
        return null;
      }
      return { rtp, rtcp };
    });
  }

  /** A port P nothing holds (probed, then let go for the two shared binds) and the RTCP socket on P + 1. */
  reserve(): Promise<{ port: number; rtcp: dgram.Socket }> {
    return this.firstFree(async (port) => {
      const probe = await bindSocket(port, this.host, false);
      if (!probe) return null;
      const rtcp = await bindSocket(port + 1, this.host, false);
      await new Promise<void>((r) => probe.close(() => r()));
      return rtcp ? { port, rtcp } : null;
    });
  }
}

/** Binds a UDP socket for RTP, or resolves null when the port is taken. */
export async function bindSocket(port: number, host: string, shared: boolean): Promise<dgram.Socket | null> {
  const sock = dgram.createSocket({ type: 'udp4', lookup: literalLookup, reuseAddr: shared });
  const ok = await new Promise<boolean>((res) => {
    sock.once('error', () => res(false));
    sock.bind(port, host, () => res(true));
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
  return null;
}
