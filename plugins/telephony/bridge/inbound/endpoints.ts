/**
 * User endpoints: the seam through which a call reaches an office user. An inbound route to a
 * user, the AI's transfer to a user (vnum-to-officetab, outbound-to-user) all call
 * `UserEndpoints.ring()`, which rings every endpoint every provider knows for that user at once;
 * the first to answer wins and the others are cancelled. Desk phones (deskphones.ts, the
 * registrar's bindings) are one provider; the browser office tab plugs in as another with
 * `endpoints.add(provider)` and nothing else changes.
 */
import type { MediaLeg } from '../media/leg.ts';

export interface RingRequest {
  tenantId: string;
  user: string;
  /** The appliance's call id (`vnum…` or `oac-…`), for the endpoint's display and logs. */
  callId: string;
  /** Who is calling (E.164 or '' when anonymous) and their display name. */
  callerNumber: string;
  callerName: string;
  ringTimeoutSec: number;
}

/** An endpoint that picked up: it carries the user's audio. */
export interface AnsweredEndpoint {
  readonly kind: string;
  readonly id: string;
  /**
   * Connects the caller's media leg both ways. The caller's leg is a started MediaLeg (8 kHz
   * G.711 towards the caller): an RTP endpoint bridges its own leg to it (`bridgeTo` on both); a
   * browser endpoint feeds `caller.play()` and takes the caller's audio through its own leg.
   */
  connect(caller: MediaLeg): void;
  /**
   * The caller's audio (16 kHz PCM, 80 ms batches) for an endpoint that does not bridge an RTP leg
   * of its own (the browser tab); it speaks to the caller with `caller.play()` (8 kHz).
   */
  hear?(pcm16k: Int16Array): void;
  /** Our side ends the call (BYE, closing the tab's session). */
  hangup(): void;
  /** `cb` runs once when the user's side hangs up or its media dies. */
  onEnded(cb: () => void): void;
}

/** One endpoint ringing. */
export interface RingingEndpoint {
  readonly kind: string;
  readonly id: string;
  /** The answered endpoint, or why it did not answer (declined, busy, no answer, unreachable). */
  readonly result: Promise<AnsweredEndpoint | string>;
  /** Stop ringing (another endpoint answered, or the caller gave up). */
  cancel(): void;
}

export interface EndpointProvider {
  readonly kind: string;
  /** Starts ringing every endpoint of the user this provider can reach now; [] when none. */
  ring(req: RingRequest): RingingEndpoint[];
}

export class UserEndpoints {
  private readonly providers: EndpointProvider[] = [];

  add(p: EndpointProvider): void {
    this.providers.push(p);
  }

  /**
   * Rings all of the user's endpoints together. Resolves with the first to answer (the rest are
   * cancelled, and hung up should one answer in the same instant), or with why none did. `abort`
   * (the caller hung up) cancels them all.
   */
  ring(req: RingRequest, abort?: AbortSignal): Promise<AnsweredEndpoint | string> {
    const ringing = this.providers.flatMap((p) => p.ring(req));
    if (!ringing.length) return Promise.resolve(`no endpoint of ${req.user} is reachable`);
    return new Promise((resolve) => {
      let done = false;
      let left = ringing.length;
      const reasons: string[] = [];
      const finish = (v: AnsweredEndpoint | string) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        for (const r of ringing) r.cancel();
        resolve(v);
      };
      const timer = setTimeout(() => finish(`${req.user} did not answer`), req.ringTimeoutSec * 1000);
      abort?.addEventListener('abort', () => finish('the caller hung up'), { once: true });
      for (const r of ringing) {
        void r.result.then((v) => {
          if (typeof v !== 'string') {
            if (done) v.hangup();
            else finish(v);
            return;
          }
          reasons.push(`${r.kind} ${r.id}: ${v}`);
          if (--left === 0) finish(reasons.join('; '));
        });
      }
    });
  }
}
