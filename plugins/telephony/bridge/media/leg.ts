/**
 * A call's media as the call logic sees it, wherever it runs: inline (same event loop) or on the
 * media thread (media/thread.ts). Far-end audio arrives already at 16 kHz in 80 ms batches; audio
 * to play goes in at the rate it has and is brought to the leg's own rate (8 kHz G.711, 16 kHz
 * G.722) in one step (resample.ts `ToLegRate`).
 */
import type { SipCodec } from './audio.ts';
import type { RtcpMetrics } from './rtcp.ts';
import type { SdesKeys } from './sdes.ts';

/** The rates audio is handed to a leg at: G.711's, the engine's input and G.722's, the engine's output. */
export type PlayRate = 8000 | 16000 | 24000;

export interface LegStart {
  codec: SipCodec;
  /** SRTP keyed by SDES (RFC 4568) when the leg negotiated it: secrets, never logged. */
  srtp?: SdesKeys;
  payloadType: number;
  dtmfPayloadType: number | null;
  remoteHost: string;
  remotePort: number;
  /** Far end's RTCP port (default remotePort + 1). */
  remoteRtcpPort?: number;
  /**
   * Report the far end as gone when neither RTP nor RTCP came from it for this long (0 = never).
   * RTCP counts too, so a far end that suppresses silence (RFC 3389) but keeps reporting is alive.
   */
  mediaTimeoutMs?: number;
}

/** Where the far end now wants media (a re-INVITE's offer, RFC 3264 §8). */
export interface LegTarget {
  remoteHost: string;
  remotePort: number;
  remoteRtcpPort: number;
  /** false while the far end holds the call (recvonly/inactive): no media expected from it. */
  expectMedia: boolean;
}

export interface LegMetrics extends RtcpMetrics {
  sendJitterP99Ms: number;
  sendJitterMaxMs: number;
  intervals: number;
  lateFrames: number;
  skippedSlots: number;
  packetsSent: number;
  packetsReceived: number;
  rxLost: number;
  /** Far-end frames handed to the other party of a bridged transfer. */
  relayedFrames: number;
  firstAudioSentAt: bigint | null;
}

export const EMPTY_METRICS: LegMetrics = {
  sendJitterP99Ms: 0,
  sendJitterMaxMs: 0,
  intervals: 0,
  lateFrames: 0,
  skippedSlots: 0,
  packetsSent: 0,
  packetsReceived: 0,
  rxLost: 0,
  relayedFrames: 0,
  firstAudioSentAt: null,
  rtcpSent: 0,
  rtcpReceived: 0,
  rttMs: null,
  remoteFractionLostMax: null,
  remoteJitterMs: null,
  rxJitterMs: 0,
};

export interface LegHandlers {
  onAudio16k: (pcm: Int16Array) => void;
  onDtmf: (digit: string) => void;
  /** Nothing came from the far end for LegStart.mediaTimeoutMs (called once). */
  onMediaTimeout?: () => void;
}

export interface MediaLeg {
  /** Local RTP port (for the SDP offer). */
  readonly port: number;
  start(o: LegStart, h: LegHandlers): void;
  /** Queue PCM at `rate` (default 8 kHz) for playout; the leg brings it to its own rate. */
  play(pcm: Int16Array, rate?: PlayRate): void;
  /** Barge-in: drop what is queued. */
  flush(): void;
  /** The far end moved its media or put the call on/off hold (re-INVITE). */
  retarget(t: LegTarget): void;
  /**
   * Second-leg transfer: from now on this leg's far-end audio goes straight into `other`'s
   * playback (at `other`'s rate: two G.722 legs stay wideband; no engine in between) instead of to
   * onAudio16k. Call it on both legs.
   */
  bridgeTo(other: MediaLeg): void;
  /** Approximate ms of audio still queued (0 once the queue drained). */
  readonly queuedMs: number;
  readonly firstAudioSentAt: bigint | null;
  /** Stops sending, closes the socket and returns the figures. */
  stop(): Promise<LegMetrics>;
}

export interface MediaHost {
  open(): Promise<MediaLeg>;
  close(): Promise<void>;
}

/**
 * Upsamples 8 kHz frames to 16 kHz and hands them on in `batch`-sample chunks. The input frame
 * is consumed at once (callers may reuse it); samples are upsampled straight into one growing
 * accumulator, so a batch costs one allocation (the array handed on) instead of one per frame.
 */
export class InputBatcher {
  private acc: Int16Array;
  private size = 0;
  private last = 0;
  constructor(
    private readonly out: (pcm16k: Int16Array) => void,
    private readonly batch = 1280,
    private readonly upInto: (pcm: Int16Array, prev: number, out: Int16Array, at: number) => number,
  ) {
    this.acc = new Int16Array(batch + 640);
  }
  push(pcm8k: Int16Array): void {
    const need = this.grow(pcm8k.length * 2);
    this.last = this.upInto(pcm8k, this.last, this.acc, this.size);
    this.size = need;
    this.flushIfFull();
  }
  /** A wideband (G.722) leg's frame, already at 16 kHz: copied as it is. */
  push16k(pcm16k: Int16Array): void {
    const need = this.grow(pcm16k.length);
    this.acc.set(pcm16k, this.size);
    this.size = need;
    this.flushIfFull();
  }
  private grow(n: number): number {
    const need = this.size + n;
    if (need > this.acc.length) {
      const bigger = new Int16Array(need * 2);
      bigger.set(this.acc.subarray(0, this.size));
      this.acc = bigger;
    }
    return need;
  }
  private flushIfFull(): void {
    if (this.size < this.batch) return;
    const all = this.acc.slice(0, this.size);
    this.size = 0;
    this.out(all);
  }
}
