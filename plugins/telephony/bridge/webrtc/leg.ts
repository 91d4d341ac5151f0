/**
 * One browser visitor's media: a werift RTCPeerConnection terminated in the bridge (ICE host
 * candidates, DTLS-SRTP). werift carries RTP but encodes no codec: the audio is Opus (opus.ts,
 * libopus as WebAssembly) when the browser offers it, as every browser does, and G.711 (PCMU,
 * PCMA) otherwise. Opus is wideband both ways: the visitor's voice reaches the engine at 16 kHz
 * as decoded, and the engine's 24 kHz speech is encoded as it comes. A G.711 leg carries the SIP
 * legs' 8 kHz audio (16 kHz up for the engine, 24 → 8 kHz down for the visitor).
 *
 * Sending uses the outbound legs' pacer and send-jitter measure (media/session.ts): one timer for
 * every room of the thread, a frame every 20 ms from the playback queue, silence when it is empty.
 * Every room of a thread sends on the thread's one 20 ms grid (`nextGridPoint`), so their frames
 * leave in one burst and the rest of the 20 ms is a gap the thread can use (gaps.ts). Unlike a SIP
 * leg, a room does not re-phase its grid for the AI's first audio: that waits up to 20 ms.
 */
import { randomInt } from 'node:crypto';
import { RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket, type RTCRtpTransceiver } from 'werift';
import { IntervalStats, pacer, type Clocked } from '../media/session.ts';
import { backTo8k, Decimator24to8, decodeG711Into, silenceFrame, upsample8to16Into, type Codec } from '../media/audio.ts';
import { InputBatcher, type PlayRate } from '../media/leg.ts';
import { UpsamplerTo24 } from '../media/resample.ts';
import { OPUS_ENC_FRAME, OPUS_MAX_DEC_SAMPLES, OPUS_TICKS_PER_FRAME, OpusDecoder, OpusEncoder, PcmQueue } from './opus.ts';
import { toleratingRepeatedHelloVerify } from './dtls-hvr.ts';
import { dropSendHistory } from './send-history.ts';
import { SrtpOut, offerAesCmOnly } from './srtp.ts';

const FRAME_NS = 20_000_000n;
const FRAME_SAMPLES = 160;
/** The 16 kHz samples the engine gets at once from an Opus leg (80 ms, as InputBatcher sends). */
const WIDE_BATCH = 1280;

/** A browser leg's codec: Opus when the browser offers it, else G.711. */
export type WebRtcCodec = Codec | 'opus';
/** The rates a room leg plays: 8 kHz (SIP legs' audio), 16 kHz (wideband legs'), 24 kHz (the engine's). */
export type { PlayRate };
/** Mean absolute sample value above which a 20 ms frame counts as voice (about -36 dBFS). */
const VOICE_LEVEL = 500;
/** Voiced frames (100 ms) before the visitor counts as having spoken. */
const VOICE_FRAMES = 5;

export interface WebRtcOptions {
  /** Extra host candidate addresses (e.g. 127.0.0.1: loopback is not gathered by default). */
  hostAddresses?: string[];
  /** UDP port range of the ICE candidates. */
  portRange?: [number, number];
  /**
   * ICE lite (RFC 8445 §2.5): host candidates only, the far end runs the checks. werift's full
   * agent always gathers a server-reflexive candidate from stun.l.google.com, even without
   * iceServers: a DNS lookup and a request to Google per connection.
   */
  iceLite?: boolean;
}

export interface WebRtcHandlers {
  onAudio16k: (pcm: Int16Array) => void;
  /** ICE and DTLS are up: media flows (once). */
  onConnected: () => void;
  /** The visitor left: the connection closed or failed, or no media came for the media timeout (once). */
  onGone: (why: string) => void;
  /** The visitor's voice was first heard (once). */
  onVoice: () => void;
  /** The playback queue ran empty (after audio was queued). */
  onDrained?: () => void;
}

/** A room's media as the room logic sees it, on this thread or on the WebRTC thread (thread-host.ts). */
export interface RoomLeg {
  answer(offerSdp: string): Promise<string>;
  readonly codec: WebRtcCodec | null;
  /** Queues audio for the visitor at `rate` (default 8 kHz); the leg converts it for its codec. */
  play(pcm: Int16Array, rate?: PlayRate): void;
  flush(): void;
  readonly queuedMs: number;
  stop(): Promise<WebRtcMetrics>;
}

export interface WebRtcMetrics {
  codec: WebRtcCodec | null;
  sendJitterP99Ms: number;
  sendJitterMaxMs: number;
  intervals: number;
  lateFrames: number;
  skippedSlots: number;
  packetsSent: number;
  packetsReceived: number;
  rxLost: number;
  voicedFrames: number;
  /** Whose SRTP carried the room's RTP: the bridge's own (srtp.ts) or werift's. */
  srtp: 'own' | 'werift';
  firstAudioSentAt: bigint | null;
}

export const EMPTY_WEBRTC_METRICS: WebRtcMetrics = {
  codec: null,
  sendJitterP99Ms: 0,
  sendJitterMaxMs: 0,
  intervals: 0,
  lateFrames: 0,
  skippedSlots: 0,
  packetsSent: 0,
  packetsReceived: 0,
  rxLost: 0,
  voicedFrames: 0,
  srtp: 'werift',
  firstAudioSentAt: null,
};

/** This thread's 20 ms grid (hrtime ns of one of its points), set by its first room. */
let gridBase: bigint | null = null;

/** The first point of this thread's 20 ms grid at or after `now`. */
export function nextGridPoint(now: bigint): bigint {
  gridBase ??= now;
  const behind = now - gridBase;
  if (behind <= 0n) return gridBase - (-behind / FRAME_NS) * FRAME_NS;
  return gridBase + ((behind + FRAME_NS - 1n) / FRAME_NS) * FRAME_NS;
}

export class WebRtcLeg implements Clocked, RoomLeg {
  readonly pc: RTCPeerConnection;
  private transceiver: RTCRtpTransceiver | null = null;
  /** The bridge's own RTP/SRTP send path (srtp.ts); null → werift's sendRtp. */
  private out: SrtpOut | null = null;
  codec: WebRtcCodec | null = null;
  private payloadType = 0;
  /** G.711's playback queue (8 kHz). */
  private readonly queue = new PcmQueue();
  /** Opus's (24 kHz), its codec state, and the converters into it; made when Opus is agreed. */
  private wide: {
    queue: PcmQueue;
    enc: OpusEncoder;
    dec: OpusDecoder;
    from8: UpsamplerTo24;
    from16: UpsamplerTo24;
    frame: Int16Array;
    decoded: Int16Array;
    batch: Int16Array;
    batched: number;
    /** The encoder's digital-silence packet, once it made one (sent again while nothing is queued). */
    silent: Buffer | null;
  } | null = null;
  /** The engine's 24 kHz speech for a G.711 leg. */
  private down24: Decimator24to8 | null = null;
  private readonly stats = new IntervalStats();
  nextDue = 0n;
  private lastSent = 0n;
  private seq = randomInt(0, 0xffff);
  private ts = randomInt(0, 0x7fffffff);
  private readonly ssrc = randomInt(1, 0x7fffffff);
  private talking = false;
  private running = false;
  private connected = false;
  private gone = false;
  private silence: Uint8Array = silenceFrame('PCMU');
  private lateFrames = 0;
  private skippedSlots = 0;
  private packetsSent = 0;
  private packetsReceived = 0;
  private rxLost = 0;
  private lastSeq = -1;
  private voicedFrames = 0;
  private firstAudioSentAt: bigint | null = null;
  private lastRxAt = 0;
  private watch: NodeJS.Timeout | null = null;
  private readonly frame = new Int16Array(FRAME_SAMPLES);
  private readonly batcher: InputBatcher;

  constructor(
    private readonly h: WebRtcHandlers,
    o: WebRtcOptions = {},
    /** No RTP from the visitor this long after connecting → gone (a tab closed without a goodbye). */
    private readonly mediaTimeoutMs = 10_000,
  ) {
    this.batcher = new InputBatcher((pcm) => this.h.onAudio16k(pcm), 1280, upsample8to16Into);
    this.pc = new RTCPeerConnection({
      codecs: {
        audio: [
          // RFC 7587 §7: opus/48000/2 whatever is sent; the browser's offer decides the payload type.
          new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111, parameters: 'minptime=10;useinbandfec=1' }),
          new RTCRtpCodecParameters({ mimeType: 'audio/PCMU', clockRate: 8000, channels: 1, payloadType: 0 }),
          new RTCRtpCodecParameters({ mimeType: 'audio/PCMA', clockRate: 8000, channels: 1, payloadType: 8 }),
        ],
        video: [],
      },
      iceAdditionalHostAddresses: o.hostAddresses,
      icePortRange: o.portRange,
      iceUseIpv6: false,
      iceLite: o.iceLite ?? false,
      headerExtensions: { audio: [], video: [] },
    });
    this.pc.connectionStateChange.subscribe((s) => {
      if (s === 'connected') this.onConnected();
      else if (s === 'failed' || s === 'closed') this.leave(`connection ${s}`);
    });
    this.pc.onTrack.subscribe((track) => {
      track.onReceiveRtp.subscribe((rtp) => this.onRtp(rtp));
    });
  }

  /** Applies the visitor's offer (all candidates gathered: no trickle) and returns the answer SDP. */
  async answer(offerSdp: string): Promise<string> {
    await this.pc.setRemoteDescription({ type: 'offer', sdp: offerSdp });
    const tr = this.pc.getTransceivers().find((t) => t.kind === 'audio');
    if (!tr) throw new Error('the offer has no audio');
    this.transceiver = tr;
    dropSendHistory(tr.sender);
    // SRTP without an OpenSSL object per packet (srtp.ts): AES-CM, which every browser has.
    offerAesCmOnly(tr.sender);
    // A second HelloVerifyRequest (its answer to our repeated ClientHello) must not end the room.
    toleratingRepeatedHelloVerify((tr.sender as unknown as { dtlsTransport?: unknown }).dtlsTransport);
    tr.setDirection('sendrecv');
    await this.pc.setLocalDescription(await this.pc.createAnswer());
    const until = Date.now() + 5000;
    while (this.pc.iceGatheringState !== 'complete' && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    const sdp = this.pc.localDescription?.sdp;
    if (!sdp) throw new Error('no local description');
    const chosen = answeredCodec(sdp);
    if (!chosen) throw new Error('the offer has neither Opus nor PCMU nor PCMA');
    this.payloadType = chosen.payloadType;
    this.codec = chosen.codec;
    if (chosen.codec === 'opus') {
      this.wide = {
        queue: new PcmQueue(),
        enc: new OpusEncoder(),
        dec: new OpusDecoder(),
        from8: new UpsamplerTo24(8000),
        from16: new UpsamplerTo24(16000),
        frame: new Int16Array(OPUS_ENC_FRAME),
        decoded: new Int16Array(OPUS_MAX_DEC_SAMPLES),
        batch: new Int16Array(WIDE_BATCH + OPUS_MAX_DEC_SAMPLES),
        batched: 0,
        silent: null,
      };
    } else this.silence = silenceFrame(chosen.codec);
    return sdp;
  }

  private onConnected(): void {
    if (this.connected || this.gone) return;
    this.connected = true;
    this.lastRxAt = Date.now();
    this.running = true;
    // DTLS is up (the connection state says so): the SRTP keys are there to send with.
    this.out = this.transceiver ? SrtpOut.bind(this.transceiver.sender) : null;
    this.nextDue = nextGridPoint(process.hrtime.bigint());
    pacer.add(this, true);
    if (this.mediaTimeoutMs > 0) {
      this.watch = setInterval(() => {
        if (Date.now() - this.lastRxAt > this.mediaTimeoutMs) this.leave(`no media from the visitor for ${Math.round(this.mediaTimeoutMs / 1000)} s`);
      }, 500);
      this.watch.unref();
    }
    this.h.onConnected();
  }

  private onRtp(rtp: RtpPacket): void {
    if (this.gone || !this.codec) return;
    const pt = rtp.header.payloadType;
    if (this.wide) {
      if (pt === this.payloadType) this.onOpus(rtp);
      return;
    }
    if (pt !== 0 && pt !== 8) return; // comfort noise, telephone-event: not audio
    this.countRx(rtp.header.sequenceNumber);
    const payload = rtp.payload;
    const codec: Codec = pt === 8 ? 'PCMA' : 'PCMU';
    const n = Math.min(FRAME_SAMPLES, payload.length);
    decodeG711Into(codec, payload.subarray(0, n), this.frame);
    if (n < FRAME_SAMPLES) this.frame.fill(0, n);
    let sum = 0;
    for (let i = 0; i < FRAME_SAMPLES; i++) sum += Math.abs(this.frame[i]);
    if (sum / FRAME_SAMPLES > VOICE_LEVEL && ++this.voicedFrames === VOICE_FRAMES) this.h.onVoice();
    this.batcher.push(this.frame);
  }

  /** An Opus packet: decoded at 16 kHz, voice detected, batched for the engine as G.711's are. */
  private onOpus(rtp: RtpPacket): void {
    const w = this.wide!;
    this.countRx(rtp.header.sequenceNumber);
    const n = w.dec.decodeInto(rtp.payload, w.decoded);
    if (n === 0) return;
    let sum = 0;
    for (let i = 0; i < n; i++) sum += Math.abs(w.decoded[i]!);
    if (sum / n > VOICE_LEVEL && ++this.voicedFrames === VOICE_FRAMES) this.h.onVoice();
    w.batch.set(w.decoded.subarray(0, n), w.batched);
    w.batched += n;
    if (w.batched < WIDE_BATCH) return;
    const all = w.batch.slice(0, w.batched);
    w.batched = 0;
    this.h.onAudio16k(all);
  }

  private countRx(seq: number): void {
    this.lastRxAt = Date.now();
    this.packetsReceived++;
    if (this.lastSeq >= 0) {
      const gap = (seq - this.lastSeq - 1) & 0xffff;
      if (gap > 0 && gap < 1000) this.rxLost += gap;
    }
    this.lastSeq = seq;
  }

  /**
   * Queues PCM for the visitor. An Opus leg keeps 24 kHz (8 and 16 kHz are up-sampled); a G.711
   * leg keeps 8 kHz (the engine's 24 kHz decimated as the SIP legs do; 16 kHz is a SIP leg's
   * 8 kHz made wide for the engine, whose odd samples are the original).
   */
  play(pcm: Int16Array, rate: PlayRate = 8000): void {
    if (pcm.length === 0 || this.gone) return;
    const w = this.wide;
    if (w) {
      w.queue.push(rate === 24000 ? pcm : rate === 16000 ? w.from16.process(pcm) : w.from8.process(pcm));
      return;
    }
    if (rate === 24000) this.queue.push((this.down24 ??= new Decimator24to8()).process(pcm));
    else this.queue.push(rate === 16000 ? backTo8k(pcm) : pcm);
  }

  flush(): void {
    this.queue.flush();
    this.wide?.queue.flush();
  }

  get queuedMs(): number {
    return this.wide ? this.wide.queue.queued / 24 : this.queue.queued / 8;
  }

  /** RTP clock ticks per 20 ms: 160 at G.711's 8 kHz, 960 at Opus's 48 kHz (RFC 7587 §4.1). */
  private get ticksPerFrame(): number {
    return this.wide ? OPUS_TICKS_PER_FRAME : FRAME_SAMPLES;
  }

  skip(n: number): void {
    this.nextDue += BigInt(n) * FRAME_NS;
    this.ts = (this.ts + n * this.ticksPerFrame) >>> 0;
    this.skippedSlots += n;
    this.talking = false;
  }

  /** The next 20 ms for the visitor (silence when nothing is queued) and whether it carries audio. */
  private nextPayload(): { payload: Buffer; hasAudio: boolean; queued: number } {
    const w = this.wide;
    if (w) {
      const n = w.queue.takeInto(w.frame, OPUS_ENC_FRAME);
      if (n === 0 && w.silent) return { payload: w.silent, hasAudio: false, queued: w.queue.queued };
      if (n < OPUS_ENC_FRAME) w.frame.fill(0, n);
      const pl = w.enc.encode(w.frame);
      // Two silent frames in, libopus codes digital silence as a 3-octet packet (TOC and a silence
      // flag) that decodes to zeros whatever came before: while nothing is queued it is sent as
      // it is, not encoded again. Encoding silence cost 275 µs a frame in WebAssembly, speech 75.
      w.silent = n === 0 && pl.length <= 3 ? pl : null;
      return { payload: pl, hasAudio: n > 0, queued: w.queue.queued };
    }
    const payload = Buffer.allocUnsafe(FRAME_SAMPLES);
    const codec = this.codec === 'opus' ? null : this.codec;
    const n = codec ? this.queue.encodeInto(codec, payload, 0, FRAME_SAMPLES) : 0;
    if (n < FRAME_SAMPLES) payload.set(this.silence.subarray(n), n);
    return { payload, hasAudio: n > 0, queued: this.queue.queued };
  }

  tick(now: bigint): void {
    if (now - this.nextDue > FRAME_NS) this.lateFrames++;
    let next: { payload: Buffer; hasAudio: boolean; queued: number };
    try {
      next = this.nextPayload();
    } catch (err) {
      // One room's codec failing ends that room, not the thread's pacer and every room on it.
      this.leave(`${this.codec ?? 'audio'} encoding failed: ${(err as Error).message}`);
      return;
    }
    const { payload, hasAudio, queued } = next;
    if (hasAudio && queued === 0) this.h.onDrained?.();
    const marker = hasAudio && !this.talking;
    this.talking = hasAudio;
    const seq = this.seq;
    const ts = this.ts >>> 0;
    this.seq = (this.seq + 1) & 0xffff;
    this.ts = (this.ts + this.ticksPerFrame) >>> 0;
    const sendAt = process.hrtime.bigint();
    if (this.lastSent !== 0n) this.stats.add(Number(sendAt - this.lastSent) / 1e6 - 20);
    this.lastSent = sendAt;
    if (this.out) this.out.sendRtp(this.payloadType, marker, seq, ts, payload);
    else {
      const header = new RtpHeader({ payloadType: this.payloadType, sequenceNumber: seq, timestamp: ts, ssrc: this.ssrc, marker });
      this.transceiver?.sender.sendRtp(new RtpPacket(header, payload)).catch(() => undefined);
    }
    this.packetsSent++;
    if (hasAudio && this.firstAudioSentAt === null) this.firstAudioSentAt = sendAt;
    this.nextDue += FRAME_NS;
  }

  private leave(why: string): void {
    if (this.gone) return;
    this.gone = true;
    this.stopSending();
    this.h.onGone(why);
  }

  private stopSending(): void {
    if (this.running) {
      this.running = false;
      pacer.remove(this);
    }
    if (this.watch) clearInterval(this.watch);
    this.watch = null;
  }

  metrics(): WebRtcMetrics {
    return {
      codec: this.codec,
      sendJitterP99Ms: this.stats.percentile(0.99),
      sendJitterMaxMs: this.stats.max,
      intervals: this.stats.count,
      lateFrames: this.lateFrames,
      skippedSlots: this.skippedSlots,
      packetsSent: this.packetsSent,
      packetsReceived: this.packetsReceived,
      rxLost: this.rxLost,
      voicedFrames: this.voicedFrames,
      srtp: this.out ? 'own' : 'werift',
      firstAudioSentAt: this.firstAudioSentAt,
    };
  }

  /** Stops sending and closes the connection (DTLS close_notify to the visitor). */
  async stop(): Promise<WebRtcMetrics> {
    this.gone = true;
    this.stopSending();
    const m = this.metrics();
    await this.pc.close().catch(() => undefined);
    this.wide?.enc.close();
    this.wide?.dec.close();
    return m;
  }
}

/**
 * The codec of an answer: the first payload type of its audio m-line (the one RTP will carry) and
 * its rtpmap, when it is one the leg speaks.
 */
export function answeredCodec(sdp: string): { codec: WebRtcCodec; payloadType: number } | null {
  const m = /^m=audio \d+ [A-Z/]+ ([\d ]+)$/m.exec(sdp.replace(/\r/g, ''));
  if (!m) return null;
  const first = Number(m[1]!.trim().split(' ')[0]);
  const rtpmap = new RegExp(`^a=rtpmap:${first} ([A-Za-z0-9-]+)/(\\d+)`, 'm').exec(sdp);
  const name = rtpmap ? rtpmap[1]!.toUpperCase() : first === 0 ? 'PCMU' : first === 8 ? 'PCMA' : '';
  if (name === 'OPUS' && rtpmap?.[2] === '48000') return { codec: 'opus', payloadType: first };
  if (name === 'PCMU' || name === 'PCMA') return { codec: name, payloadType: first };
  return null;
}
