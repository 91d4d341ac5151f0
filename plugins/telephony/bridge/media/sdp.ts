/**
 * SDP offer/answer for one audio stream (RFC 3264 §5, §6.1; RFC 4566) with `sdp-transform`.
 * We offer the trunk's G.711 codecs plus telephone-event (RFC 4733 §7.1.1) and take the first
 * codec of the answer that we offered.
 */
import sdpTransform from 'sdp-transform';
import { STATIC_PT, type Codec } from './audio.ts';
import type { LegStart } from './leg.ts';

export const DTMF_PT = 101;

export function buildOffer(o: { host: string; port: number; codecs: Codec[]; sessionId: number }): string {
  const codecs = o.codecs.length ? o.codecs : (['PCMU', 'PCMA'] as Codec[]);
  const pts = [...codecs.map((c) => STATIC_PT[c]), DTMF_PT];
  const session: sdpTransform.SessionDescription = {
    version: 0,
    origin: { username: 'sovcomms', sessionId: o.sessionId, sessionVersion: 1, netType: 'IN', ipVer: 4, address: o.host },
    name: 'sovcomms',
    connection: { version: 4, ip: o.host },
    timing: { start: 0, stop: 0 },
    media: [
      {
        type: 'audio',
        port: o.port,
        protocol: 'RTP/AVP',
        payloads: pts.join(' '),
        rtp: [...codecs.map((c) => ({ payload: STATIC_PT[c], codec: c, rate: 8000 })), { payload: DTMF_PT, codec: 'telephone-event', rate: 8000 }],
        fmtp: [{ payload: DTMF_PT, config: '0-16' }],
        ptime: 20,
        direction: 'sendrecv',
      },
    ],
  };
  return sdpTransform.write(session);
}

export interface NegotiatedMedia {
  host: string;
  port: number;
  /** RTCP port: the answer's a=rtcp (RFC 3605), else RTP port + 1 (RFC 3550 §11). */
  rtcpPort: number;
  codec: Codec;
  payloadType: number;
  dtmfPayloadType: number | null;
}

/** How a media leg starts on negotiated media (an answer to our offer, or a caller's offer we answered). */
export function legStart(neg: NegotiatedMedia, mediaTimeoutMs: number): LegStart {
  return {
    codec: neg.codec,
    payloadType: neg.payloadType,
    dtmfPayloadType: neg.dtmfPayloadType,
    remoteHost: neg.host,
    remotePort: neg.port,
    remoteRtcpPort: neg.rtcpPort,
    mediaTimeoutMs,
  };
}

export class SdpError extends Error {
  override name = 'SdpError';
}

type AudioMedia = sdpTransform.SessionDescription['media'][number];

/** The session and its first active audio stream; `what` names the description in errors. */
function activeAudio(sdp: string, what: 'answer' | 'offer'): { parsed: sdpTransform.SessionDescription; audio: AudioMedia } {
  let parsed: sdpTransform.SessionDescription;
  try {
    parsed = sdpTransform.parse(sdp);
  } catch {
    throw new SdpError(`unparseable SDP ${what}`);
  }
  const audio = parsed.media.find((m) => m.type === 'audio' && m.port > 0);
  if (!audio) throw new SdpError(`SDP ${what} has no active audio stream`);
  return { parsed, audio };
}

/** RTCP port: a=rtcp (RFC 3605), else RTP port + 1 (RFC 3550 §11). */
function rtcpPortOf(audio: AudioMedia): number {
  return audio.rtcp?.port && audio.rtcp.port > 0 && audio.rtcp.port < 65536 ? audio.rtcp.port : audio.port + 1;
}

/** Reads the answer; throws SdpError when no offered codec survived (RFC 3264 §6: must be a subset). */
export function parseAnswer(sdp: string, offered: Codec[]): NegotiatedMedia {
  const { parsed, audio } = activeAudio(sdp, 'answer');
  const host = audio.connection?.ip ?? parsed.connection?.ip;
  if (!host) throw new SdpError('SDP answer has no connection address');
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- sdp-transform types payloads as a string but yields a number for a single payload type
  const pts = String(audio.payloads ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
  const rtpmap = new Map((audio.rtp ?? []).map((r) => [r.payload, r.codec.toUpperCase()]));
  let chosen: { codec: Codec; pt: number } | null = null;
  for (const pt of pts) {
    // Static types may come without an rtpmap (RFC 3551 §6).
    const name = rtpmap.get(pt) ?? (pt === 0 ? 'PCMU' : pt === 8 ? 'PCMA' : '');
    if ((name === 'PCMU' || name === 'PCMA') && offered.includes(name)) {
      chosen = { codec: name, pt };
      break;
    }
  }
  if (!chosen) throw new SdpError('no common audio codec in SDP answer');
  const te = (audio.rtp ?? []).find((r) => r.codec.toLowerCase() === 'telephone-event' && r.rate === 8000);
  return { host, port: audio.port, rtcpPort: rtcpPortOf(audio), codec: chosen.codec, payloadType: chosen.pt, dtmfPayloadType: te ? te.payload : null };
}

/**
 * Where a re-offer (RFC 3264 §8) puts the far end's media, and whether it will send: `recvonly`
 * and `inactive` (or the RFC 2543 hold address 0.0.0.0) mean no media from it for now.
 */
export function parseReoffer(sdp: string): { host: string | null; port: number; rtcpPort: number; sends: boolean } {
  const { parsed, audio } = activeAudio(sdp, 'offer');
  const ip = audio.connection?.ip ?? parsed.connection?.ip ?? null;
  const direction = audio.direction ?? parsed.direction ?? 'sendrecv';
  const host = ip === '0.0.0.0' ? null : ip;
  return { host, port: audio.port, rtcpPort: rtcpPortOf(audio), sends: host !== null && (direction === 'sendrecv' || direction === 'sendonly') };
}
