/**
 * SDP offer/answer for one audio stream (RFC 3264 §5, §6.1; RFC 4566) with `sdp-transform`.
 * We offer the trunk's (or phone's) codecs, G.722 first when it is among them, plus
 * telephone-event (RFC 4733 §7.1.1), and take G.722 from an answer or offer that has it, else
 * its first G.711 codec we allow.
 *
 * SRTP keyed by SDES (RFC 4568) follows the trunk's or phone's `srtp` policy:
 * - `required`: we offer `RTP/SAVP` with one `a=crypto` line per suite (a fresh key each) and
 *   refuse an answer or offer without a usable one (an offer with 488, an answer by hanging up);
 * - `optional` (best effort, the practice of RFC 4568's era that phones call "SRTP optional",
 *   rather than RFC 5939 capability negotiation, which few phones implement): we offer `RTP/AVP`
 *   with the same crypto lines, and use SRTP when the answer carries a crypto line, plain RTP when
 *   it does not; an offer gets SRTP when it carries a usable crypto line (`RTP/SAVP` or `RTP/AVP`);
 * - `off`: plain `RTP/AVP` as before; an `RTP/SAVP` offer (which plain RTP cannot answer,
 *   RFC 3264 §6) is refused with 488.
 * Usable: a suite of SDES_SUITES with one 30-octet inline key, no MKI and no session parameters
 * (neither is implemented). The crypto attributes carry keys: SDP bodies are never logged.
 */
import { randomBytes } from 'node:crypto';
import sdpTransform from 'sdp-transform';
import { SIP_STATIC_PT, type SipCodec } from './audio.ts';
import type { LegStart } from './leg.ts';
import { SDES_SUITES, type SdesKeys, type SdesSuite } from './sdes.ts';

export const DTMF_PT = 101;

export type SrtpPolicy = 'required' | 'optional' | 'off';

/** One of our `a=crypto` lines: its tag, suite and our key (RFC 4568 §9.1). */
export interface CryptoLine {
  tag: number;
  suite: SdesSuite;
  key: string;
}

/** A fresh key per suite for an offer (30 octets of master key ‖ salt each, RFC 4568 §6.1). */
export function cryptoOffer(): CryptoLine[] {
  return SDES_SUITES.map((suite, i) => ({ tag: i + 1, suite, key: randomBytes(30).toString('base64') }));
}

/** What our SDP carries for SRTP: the transport protocol and the crypto lines (none for plain RTP). */
export interface SrtpOffer {
  policy: SrtpPolicy;
  crypto: CryptoLine[];
}

/** Our SRTP offer under a policy (`off`: none). */
export function srtpOffer(policy: SrtpPolicy | undefined): SrtpOffer {
  return { policy: policy ?? 'off', crypto: policy === 'required' || policy === 'optional' ? cryptoOffer() : [] };
}

/** Our codecs in offer order: G.722 (wideband) first when allowed, then the G.711 laws as listed. */
function offerOrder(codecs: SipCodec[]): SipCodec[] {
  const list = codecs.length ? codecs : (['PCMU', 'PCMA'] as SipCodec[]);
  return [...list.filter((c) => c === 'G722'), ...list.filter((c) => c !== 'G722')];
}

export function buildOffer(o: { host: string; port: number; codecs: SipCodec[]; sessionId: number; srtp?: { savp: boolean; crypto: CryptoLine[] } }): string {
  const codecs = offerOrder(o.codecs);
  const pts = [...codecs.map((c) => SIP_STATIC_PT[c]), DTMF_PT];
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
        protocol: o.srtp?.savp ? 'RTP/SAVP' : 'RTP/AVP',
        payloads: pts.join(' '),
        // G.722's RTP clock is 8000 although it samples at 16 kHz (RFC 3551 §4.5.2).
        rtp: [...codecs.map((c) => ({ payload: SIP_STATIC_PT[c], codec: c, rate: 8000 })), { payload: DTMF_PT, codec: 'telephone-event', rate: 8000 }],
        fmtp: [{ payload: DTMF_PT, config: '0-16' }],
        ptime: 20,
        direction: 'sendrecv',
        ...(o.srtp?.crypto.length ? { crypto: o.srtp.crypto.map((c) => ({ id: c.tag, suite: c.suite, config: `inline:${c.key}` })) } : {}),
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
  codec: SipCodec;
  payloadType: number;
  dtmfPayloadType: number | null;
  /** The leg's SRTP keys, null for plain RTP. */
  srtp: SdesKeys | null;
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
    ...(neg.srtp ? { srtp: neg.srtp } : {}),
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

/** Static payload types that may come without an rtpmap (RFC 3551 §6). */
const STATIC_NAMES: Record<number, SipCodec> = { 0: 'PCMU', 8: 'PCMA', 9: 'G722' };

/**
 * The codec we take from the far end's list: G.722 when it has it and we allow it, else its first
 * G.711 law we allow (the far end's order, RFC 3264 §6.1).
 */
function pickCodec(audio: AudioMedia, allowed: SipCodec[]): { codec: SipCodec; pt: number } | null {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- sdp-transform types payloads as a string but yields a number for a single payload type
  const pts = String(audio.payloads ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
  const rtpmap = new Map((audio.rtp ?? []).map((r) => [r.payload, { name: r.codec.toUpperCase(), rate: r.rate }]));
  const named = pts.map((pt) => {
    const m = rtpmap.get(pt);
    // G.722 is G722/8000 in SDP whatever its sampling rate (RFC 3551 §4.5.2).
    const name = m ? (m.name === 'G722' && m.rate !== 8000 ? '' : m.name) : (STATIC_NAMES[pt] ?? '');
    return { pt, name };
  });
  const ok = (n: string): n is SipCodec => (n === 'PCMU' || n === 'PCMA' || n === 'G722') && allowed.includes(n);
  const wide = named.find((x) => x.name === 'G722' && ok(x.name));
  if (wide) return { codec: 'G722', pt: wide.pt };
  const narrow = named.find((x) => ok(x.name));
  return narrow ? { codec: narrow.name as SipCodec, pt: narrow.pt } : null;
}

/** A crypto attribute we can use: a known suite, one inline key of 30 octets, no MKI, no session parameters. */
function usableCrypto(c: { id: number; suite: string; config: string }): { tag: number; suite: SdesSuite; key: string } | null {
  if (!(SDES_SUITES as readonly string[]).includes(c.suite)) return null;
  const params = c.config.trim();
  if (/\s/.test(params) || params.includes(';')) return null; // session parameters, or several keys
  const m = /^inline:([A-Za-z0-9+/=]+)(\|[^|]+)?(\|[^|]+)?$/.exec(params);
  if (!m) return null;
  // A lifetime (2^n or decimal) is fine; an MKI (`|n:len`) would need MKIs in every packet.
  if ([m[2], m[3]].some((p) => p !== undefined && p.includes(':'))) return null;
  if (Buffer.from(m[1]!, 'base64').length !== 30) return null;
  return { tag: c.id, suite: c.suite as SdesSuite, key: m[1]! };
}

function connectionOf(parsed: sdpTransform.SessionDescription, audio: AudioMedia, what: 'answer' | 'offer'): string {
  const host = audio.connection?.ip ?? parsed.connection?.ip;
  if (!host) throw new SdpError(`SDP ${what} has no connection address`);
  return host;
}

function dtmfOf(audio: AudioMedia): number | null {
  const te = (audio.rtp ?? []).find((r) => r.codec.toLowerCase() === 'telephone-event' && r.rate === 8000);
  return te ? te.payload : null;
}

/**
 * Reads the answer to our offer; throws SdpError when no offered codec survived (RFC 3264 §6: must
 * be a subset) or, with SRTP required, when it accepted none of our crypto lines.
 */
export function parseAnswer(sdp: string, offered: SipCodec[], srtp?: SrtpOffer): NegotiatedMedia {
  const { parsed, audio } = activeAudio(sdp, 'answer');
  const host = connectionOf(parsed, audio, 'answer');
  const chosen = pickCodec(audio, offered.length ? offered : ['PCMU', 'PCMA']);
  if (!chosen) throw new SdpError('no common audio codec in SDP answer');
  let keys: SdesKeys | null = null;
  if (srtp && srtp.crypto.length) {
    // RFC 4568 §7.1.3: the answer's crypto line names the offered one it accepts by its tag.
    for (const c of audio.crypto ?? []) {
      const u = usableCrypto(c);
      const ours = u && srtp.crypto.find((o) => o.tag === u.tag && o.suite === u.suite);
      if (u && ours) {
        keys = { suite: u.suite, local: ours.key, remote: u.key };
        break;
      }
    }
    if (!keys && srtp.policy === 'required') throw new SdpError('SRTP required: the SDP answer accepted none of our crypto attributes');
  }
  return { host, port: audio.port, rtcpPort: rtcpPortOf(audio), codec: chosen.codec, payloadType: chosen.pt, dtmfPayloadType: dtmfOf(audio), srtp: keys };
}

/** An offer we answer: the media, and the crypto line of our answer (null for plain RTP). */
export interface ReadOffer {
  media: NegotiatedMedia;
  /** Our answer's SDP parameters: `RTP/SAVP` when the offer's was, and our crypto line. */
  answer: { savp: boolean; crypto: CryptoLine[] };
}

/**
 * Reads a far end's offer (an inbound INVITE) under our SRTP policy; throws SdpError, to be
 * answered 488 (RFC 3261 §13.3.1.3), when no codec is common or the SRTP policy cannot be met.
 */
export function parseOffer(sdp: string, allowed: SipCodec[], policy: SrtpPolicy = 'off'): ReadOffer {
  const { parsed, audio } = activeAudio(sdp, 'offer');
  const host = connectionOf(parsed, audio, 'offer');
  const chosen = pickCodec(audio, allowed.length ? allowed : ['PCMU', 'PCMA']);
  if (!chosen) throw new SdpError('no common audio codec in SDP offer');
  const savp = /^RTP\/SAVP$/i.test(audio.protocol);
  if (!savp && !/^RTP\/AVP$/i.test(audio.protocol)) throw new SdpError(`SDP offer's transport ${audio.protocol} is not RTP/AVP or RTP/SAVP`);
  let keys: SdesKeys | null = null;
  let line: CryptoLine | null = null;
  if (policy !== 'off') {
    // RFC 4568 §7.1.2: the first acceptable crypto line, answered with its tag and a key of ours.
    for (const c of audio.crypto ?? []) {
      const u = usableCrypto(c);
      if (!u) continue;
      line = { tag: u.tag, suite: u.suite, key: randomBytes(30).toString('base64') };
      keys = { suite: u.suite, local: line.key, remote: u.key };
      break;
    }
  }
  if (savp && !keys)
    throw new SdpError(policy === 'off' ? 'SRTP offered (RTP/SAVP) but off for this trunk or phone' : 'SRTP offered without a usable crypto attribute');
  if (!keys && policy === 'required') throw new SdpError('SRTP required: the SDP offer has no usable crypto attribute');
  return {
    media: { host, port: audio.port, rtcpPort: rtcpPortOf(audio), codec: chosen.codec, payloadType: chosen.pt, dtmfPayloadType: dtmfOf(audio), srtp: keys },
    answer: { savp, crypto: line ? [line] : [] },
  };
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
