/**
 * A browser room's visitor as the caller of a person's endpoint (inbound/endpoints.ts): the media
 * leg an answered endpoint connects to, over the room's WebRTC leg. Endpoints speak the SIP legs'
 * language: a browser tab plays into `play()` and is fed through its `hear()`; an RTP endpoint (a
 * desk phone, a PSTN leg) bridges both ways with `bridgeTo()`, i.e. the visitor's audio goes into
 * its `play()` and its far end's audio into ours. The room stays the owner of its leg: this
 * never starts or stops it.
 */
import { backTo8k } from '../media/audio.ts';
import { Decimator16to8 } from '../media/resample.ts';
import { EMPTY_METRICS, type LegMetrics, type MediaLeg } from '../media/leg.ts';
import type { RoomLeg } from './leg.ts';
import type { AnsweredEndpoint } from '../inbound/endpoints.ts';

export class RoomAsCaller implements MediaLeg {
  readonly port = 0;
  readonly firstAudioSentAt = null;
  /** Where the visitor's audio goes for an endpoint that bridged to us. */
  private bridged: MediaLeg | null = null;
  /** An Opus visitor's 16 kHz is wideband: low-passed before it goes to an 8 kHz leg. */
  private readonly narrow = new Decimator16to8();

  constructor(
    private readonly leg: RoomLeg,
    private readonly person: AnsweredEndpoint,
  ) {}

  /** The visitor's audio (16 kHz batches from the room's leg) towards the person. */
  visitorAudio(pcm16k: Int16Array): void {
    if (this.person.hear) this.person.hear(pcm16k);
    else this.bridged?.play(this.leg.codec === 'opus' ? this.narrow.process(pcm16k) : backTo8k(pcm16k));
  }

  start(): void {
    // The room's leg is up already (the visitor is connected).
  }
  play(pcm8k: Int16Array): void {
    this.leg.play(pcm8k);
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
