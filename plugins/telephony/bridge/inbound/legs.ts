/**
 * One outgoing RTP leg that only carries a person's audio (no AI): a desk phone rung by an
 * office-tab route or a transfer, or a PSTN number an AI transfers to. It opens its media, sends
 * the INVITE with our offer and, once answered, starts the media so the caller's leg can be
 * bridged to it (MediaLeg.bridgeTo on both).
 */
import type { OutboundCall, SipUserAgent, TrunkTarget } from '../sip/ua.ts';
import { buildOffer, parseAnswer, SdpError } from '../media/sdp.ts';
import type { MediaHost, MediaLeg } from '../media/leg.ts';
import type { Codec } from '../media/audio.ts';

export interface DialedLeg {
  leg: OutboundCall;
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
  cancel(): void;
}

/** Calls `number` at `target`; `result` is the answered leg or why not. */
export function dialLeg(d: DialDeps, target: TrunkTarget & { codecs?: Codec[] }, number: string, displayName: string, onHangup: () => void): Dialing {
  let cancelled = false;
  let leg: OutboundCall | null = null;
  let media: MediaLeg | null = null;
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
    const codecs: Codec[] = target.codecs?.length ? target.codecs : ['PCMU', 'PCMA'];
    const offer = buildOffer({ host: d.sipHost, port: m.port, codecs, sessionId: Date.now() });
    const l = d.ua.invite(target, number, displayName, offer);
    leg = l;
    return new Promise<DialedLeg | string>((resolve) => {
      l.on('failed', (st, reason) => {
        void m.stop();
        resolve(st === 487 ? 'no answer' : `SIP ${st} ${reason}`);
      });
      l.on('bye', () => onHangup());
      l.on('answered', (res) => {
        if (cancelled) {
          void l.bye();
          void m.stop();
          return resolve('cancelled');
        }
        let neg;
        try {
          neg = parseAnswer(res.body.toString('utf8'), codecs);
        } catch (err) {
          void l.bye();
          void m.stop();
          return resolve(err instanceof SdpError ? err.message : 'bad SDP answer');
        }
        m.start(
          {
            codec: neg.codec,
            payloadType: neg.payloadType,
            dtmfPayloadType: neg.dtmfPayloadType,
            remoteHost: neg.host,
            remotePort: neg.port,
            remoteRtcpPort: neg.rtcpPort,
            mediaTimeoutMs: d.mediaTimeoutMs,
          },
          { onAudio16k: () => undefined, onDtmf: () => undefined, onMediaTimeout: () => onHangup() },
        );
        resolve({ leg: l, media: m });
      });
    });
  })();
  return {
    result,
    cancel: () => {
      cancelled = true;
      leg?.cancel();
    },
  };
}

/** Ends an answered leg: BYE and the media's socket. */
export function hangupLeg(l: DialedLeg): void {
  void l.leg.bye();
  void l.media.stop();
}
