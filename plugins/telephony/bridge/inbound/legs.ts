/**
 * One outgoing RTP leg that only carries a person's audio (no AI): a desk phone rung by an
 * office-tab route or a transfer, or a PSTN number an AI transfers to. It opens its media, sends
 * the INVITE with our offer and, once answered, starts the media so the caller's leg can be
 * bridged to it (MediaLeg.bridgeTo on both).
 */
import type { SipUserAgent } from '../sip/ua.ts';
import type { OutgoingInvite } from '../sip/uac.ts';
import { buildOffer, parseAnswer, SdpError, legStart, srtpOffer } from '../media/sdp.ts';
import type { MediaHost, MediaLeg } from '../media/leg.ts';
import type { SipCodec } from '../media/audio.ts';
import type { LocatedTrunk, SipTarget } from '../schemas.ts';
import type { Target } from './control.ts';
import type { AnsweredEndpoint } from './endpoints.ts';

export interface DialedLeg {
  leg: OutgoingInvite;
  media: MediaLeg;
}

export interface DialDeps {
  ua: SipUserAgent;
  media: MediaHost;
  sipHost: string;
  mediaTimeoutMs: number;
}

export interface Dialing {
  readonly result: Promise<DialedLeg | string>;
  /** Stops the ringing (CANCEL, §9.1); an answer that still comes is hung up. */
  cancel(): void;
  /** Ends the leg whatever its state: cancelled while it rings, BYE and its media stopped once answered. */
  end(): void;
}

/** Calls `number` at `target`; `result` is the answered leg or why not. */
export function dialLeg(d: DialDeps, target: SipTarget, number: string, displayName: string, onHangup: () => void): Dialing {
  let cancelled = false;
  let leg: OutgoingInvite | null = null;
  let media: MediaLeg | null = null;
  let answered: DialedLeg | null = null;
  const result = (async (): Promise<DialedLeg | string> => {
    try {
      media = await d.media.open();
    } catch (err) {
      return (err as Error).message;
    }
    if (cancelled) {
      void media.stop();
      return 'cancelled';
    }
    const m = media;
    const codecs: SipCodec[] = target.codecs?.length ? target.codecs : ['PCMU', 'PCMA'];
    const srtp = srtpOffer(target.srtp);
    const offer = buildOffer({ host: d.sipHost, port: m.port, codecs, sessionId: Date.now(), srtp: { savp: srtp.policy === 'required', crypto: srtp.crypto } });
    const l = d.ua.invite(target, number, displayName, offer);
    leg = l;
    return new Promise<DialedLeg | string>((resolve) => {
      l.on('failed', (st, reason) => {
        void m.stop();
        resolve(st === 487 ? 'no answer' : `SIP ${st} ${reason}`);
      });
      l.dialog.on('bye', () => onHangup());
      l.on('answered', (res) => {
        if (cancelled) {
          void l.bye();
          void m.stop();
          return resolve('cancelled');
        }
        let neg;
        try {
          neg = parseAnswer(res.body.toString('utf8'), codecs, srtp);
        } catch (err) {
          void l.bye();
          void m.stop();
          return resolve(err instanceof SdpError ? err.message : 'bad SDP answer');
        }
        m.start(legStart(neg, d.mediaTimeoutMs), { onAudio16k: () => undefined, onDtmf: () => undefined, onMediaTimeout: () => onHangup() });
        answered = { leg: l, media: m };
        resolve(answered);
      });
    });
  })();
  const cancel = () => {
    cancelled = true;
    leg?.cancel();
  };
  return { result, cancel, end: () => (answered ? hangupLeg(answered) : cancel()) };
}

/** Ends an answered leg: BYE and the media's socket. */
export function hangupLeg(l: DialedLeg): void {
  void l.leg.bye();
  void l.media.stop();
}

/** The trunk slots (`maxConcurrentCalls`) a call's PSTN legs hold, given back when it ends. */
export class TrunkSlots {
  private readonly held: string[] = [];
  constructor(private readonly load: Map<string, number>) {}
  take(id: string): void {
    this.held.push(id);
    this.load.set(id, (this.load.get(id) ?? 0) + 1);
  }
  release(id: string): void {
    const i = this.held.indexOf(id);
    if (i < 0) return;
    this.held.splice(i, 1);
    this.load.set(id, Math.max(0, (this.load.get(id) ?? 1) - 1));
  }
  releaseAll(): void {
    for (const id of [...this.held]) this.release(id);
  }
}

export interface PstnDeps extends DialDeps {
  trunks: Map<string, LocatedTrunk>;
  trunkLoad: Map<string, number>;
}

/**
 * A PSTN number on the trunks the core picked (outbound routes), in order until one answers: the
 * answered leg as an endpoint to connect the caller to (bridged both ways), or why none did.
 * `abort` (the caller went away) cancels the dialling.
 */
export async function dialPstn(
  d: PstnDeps,
  t: Extract<Target, { kind: 'pstn' }>,
  displayName: string,
  abort: AbortSignal,
  slots: TrunkSlots,
): Promise<AnsweredEndpoint | string> {
  const reasons: string[] = [];
  for (const id of t.trunkIds) {
    const trunk = d.trunks.get(id);
    if (!trunk) {
      reasons.push(`unknown trunk ${id}`);
      continue;
    }
    if ((d.trunkLoad.get(id) ?? 0) >= trunk.maxConcurrentCalls) {
      reasons.push(`trunk ${id} at max concurrent calls`);
      continue;
    }
    slots.take(id);
    const ended: (() => void)[] = [];
    const dialing = dialLeg(d, trunk, t.phone, displayName, () => {
      for (const cb of ended.splice(0)) cb();
    });
    const timer = setTimeout(() => dialing.cancel(), t.ringTimeoutSec * 1000);
    const onAbort = () => dialing.cancel();
    abort.addEventListener('abort', onAbort, { once: true });
    const r = await dialing.result;
    clearTimeout(timer);
    abort.removeEventListener('abort', onAbort);
    if (typeof r === 'string') {
      slots.release(id);
      reasons.push(`${id}: ${r}`);
      if (abort.aborted) break;
      continue;
    }
    return {
      kind: 'pstn',
      id: t.phone,
      connect: (caller) => {
        caller.bridgeTo(r.media);
        r.media.bridgeTo(caller);
      },
      hangup: () => hangupLeg(r),
      onEnded: (cb) => {
        ended.push(() => {
          void r.media.stop();
          cb();
        });
      },
    };
  }
  return reasons.join('; ') || 'no trunk';
}
