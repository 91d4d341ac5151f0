/**
 * One browser visitor's media: a werift RTCPeerConnection terminated in the bridge (ICE host
 * candidates, DTLS-SRTP), G.711 audio both ways. werift carries RTP but encodes no codec, and no
 * Opus library is installed: the answer offers PCMU and PCMA only (every browser has both), the
 * same 8 kHz audio the SIP legs carry, so the engine path (16 kHz up, 24 → 8 kHz down) is shared.
 *
 * Sending uses the outbound legs' pacer and send-jitter measure (media/session.ts): one timer for
 * every room of the thread, a frame every 20 ms from the playback queue, silence when it is empty.
 * Every room of a thread sends on the thread's one 20 ms grid (`nextGridPoint`), so their frames
 * leave in one burst and the rest of the 20 ms is a gap the thread can use (gaps.ts). Unlike a SIP
 * leg, a room does not re-phase its grid for the AI's first audio: that waits up to 20 ms.
 */
import { randomInt } from 'node:crypto';
import { RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket, type RTCRtpTransceiver } from 'werift';
import { ArrayQueue, IntervalStats, pacer, type Clocked } from '../media/session.ts';
import { decodeG711Into, silenceFrame, upsample8to16Into, type Codec } from '../media/audio.ts';
import { InputBatcher } from '../media/leg.ts';
import { dropSendHistory } from './send-history.ts';
import { SrtpOut, offerAesCmOnly } from './srtp.ts';

const FRAME_NS = 20_000_000n;
const FRAME_SAMPLES = 160;
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
  readonly codec: Codec | null;
  play(pcm8k: Int16Array): void;
  flush(): void;
  readonly queuedMs: number;
  stop(): Promise<WebRtcMetrics>;
}

export interface WebRtcMetrics {
  codec: Codec | null;
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
  codec: Codec | null = null;
  private payloadType = 0;
  private readonly queue = new ArrayQueue();
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
    tr.setDirection('sendrecv');
    await this.pc.setLocalDescription(await this.pc.createAnswer());
    const until = Date.now() + 5000;
    while (this.pc.iceGatheringState !== 'complete' && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    const sdp = this.pc.localDescription?.sdp;
    if (!sdp) throw new Error('no local description');
    const m = /^a=rtpmap:(\d+) (PCMU|PCMA)\/8000/m.exec(sdp);
    if (!m) throw new Error('the offer has neither PCMU nor PCMA');
    this.payloadType = Number(m[1]);
    this.codec = m[2] as Codec;
    this.silence = silenceFrame(this.codec);
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
    if (pt !== 0 && pt !== 8) return; // comfort noise, telephone-event: not audio
    this.lastRxAt = Date.now();
    this.packetsReceived++;
    const seq = rtp.header.sequenceNumber;
    if (this.lastSeq >= 0) {
      const gap = (seq - this.lastSeq - 1) & 0xffff;
      if (gap > 0 && gap < 1000) this.rxLost += gap;
    }
    this.lastSeq = seq;
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

  /** Queues 8 kHz PCM for the visitor. */
  play(pcm8k: Int16Array): void {
    if (pcm8k.length === 0 || this.gone) return;
    this.queue.push(pcm8k);
  }

  flush(): void {
    this.queue.flush();
  }

  get queuedMs(): number {
    return this.queue.queued / 8;
  }

  skip(n: number): void {
    this.nextDue += BigInt(n) * FRAME_NS;
    this.ts = (this.ts + n * FRAME_SAMPLES) >>> 0;
    this.skippedSlots += n;
    this.talking = false;
  }

  tick(now: bigint): void {
    if (now - this.nextDue > FRAME_NS) this.lateFrames++;
    const payload = Buffer.allocUnsafe(FRAME_SAMPLES);
    const n = this.codec ? this.queue.encodeInto(this.codec, payload, 0, FRAME_SAMPLES) : 0;
    if (n < FRAME_SAMPLES) payload.set(this.silence.subarray(n), n);
    const hasAudio = n > 0;
    if (hasAudio && this.queue.queued === 0) this.h.onDrained?.();
    const marker = hasAudio && !this.talking;
    this.talking = hasAudio;
    const seq = this.seq;
    const ts = this.ts >>> 0;
    this.seq = (this.seq + 1) & 0xffff;
    this.ts = (this.ts + FRAME_SAMPLES) >>> 0;
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
    return m;
  }
}
