/**
 * A browser room's visitor as the caller of a person's endpoint (inbound/endpoints.ts): the media
 * leg an answered endpoint connects to, over the room's WebRTC leg. Endpoints speak the SIP legs'
 * language: a browser tab plays into `play()` and is fed through its `hear()`; an RTP endpoint (a
 * desk phone, a PSTN leg) bridges both ways with `bridgeTo()`, i.e. the visitor's audio goes into
 * its `play()` and its far end's audio into ours. The room stays the owner of its leg: this
 * never starts or stops it.
 */
import { EMPTY_METRICS, type LegMetrics, type MediaLeg, type PlayRate } from '../media/leg.ts';
import type { RoomLeg } from './leg.ts';
import type { AnsweredEndpoint } from '../inbound/endpoints.ts';

export class RoomAsCaller implements MediaLeg {
  readonly port = 0;
  readonly firstAudioSentAt = null;
  /** Where the visitor's audio goes for an endpoint that bridged to us. */
  private bridged: MediaLeg | null = null;

  constructor(
    private readonly leg: RoomLeg,
    private readonly person: AnsweredEndpoint,
  ) {}

  /** The visitor's audio (16 kHz batches from the room's leg) towards the person. */
  visitorAudio(pcm16k: Int16Array): void {
    if (this.person.hear) this.person.hear(pcm16k);
    else this.bridged?.play(pcm16k, 16000); // the RTP leg brings it to its rate (G.711: low-passed to 8 kHz)
  }

  start(): void {
    // The room's leg is up already (the visitor is connected).
  }
  play(pcm: Int16Array, rate: PlayRate = 8000): void {
    this.leg.play(pcm, rate);
  }
  flush(): void {
    this.leg.flush();
  }
  retarget(): void {
    // A WebRTC leg has no SDP re-INVITE to follow.
  }
  bridgeTo(other: MediaLeg): void {
    this.bridged = other;
  }
  get queuedMs(): number {
    return this.leg.queuedMs;
  }
  stop(): Promise<LegMetrics> {
    // The room stops its own leg when it ends.
    return Promise.resolve(EMPTY_METRICS);
  }
}
