/**
 * SRTP for the SIP legs, keyed by SDES (RFC 4568): the master key and salt of each direction come
 * from the `a=crypto` attributes of the offer and answer (media/sdp.ts), not from a DTLS handshake.
 *
 * The packet protection is the rooms' own (webrtc/srtp.ts: one AES-128-ECB object per direction
 * for the counter-mode keystream, HMAC-SHA1 as two one-shot hashes, tags compared in constant
 * time), and the session keys are derived by werift's SRTP context (RFC 3711 §4.3 key derivation,
 * as werift derives them for the rooms from DTLS-SRTP's master keys): a `SrtpSession` started with
 * the two SDES master keys. werift's context only knows the 80-bit profile; the key derivation is
 * the same for AES_CM_128_HMAC_SHA1_32 (RFC 3711 §8.2: only the tag length differs), so its session
 * keys are taken and the tag length set here. RTCP is protected by werift's `SrtcpSession`, whose
 * SRTCP tag is 80 bits for both suites, as RFC 4568 §6.2.2 requires (a few packets a call: the
 * per-packet OpenSSL objects that made the rooms avoid werift's SRTP do not matter there).
 *
 * The keys are secrets: they travel from the SDP code to the media threads inside `LegStart` and
 * are never logged, nor are the SDP bodies that carry them.
 */
import { SrtcpSession, SrtpSession } from 'werift';
import { AES_CM_128_HMAC_SHA1_32, AES_CM_128_HMAC_SHA1_80, SrtpProtector, SrtpUnprotector, type SrtpKeys } from '../webrtc/srtp.ts';

/** The SDES crypto-suites the bridge offers and accepts, in our order of preference (RFC 4568 §6.2). */
export const SDES_SUITES = ['AES_CM_128_HMAC_SHA1_80', 'AES_CM_128_HMAC_SHA1_32'] as const;
export type SdesSuite = (typeof SDES_SUITES)[number];

/** One leg's negotiated SRTP: the suite and each direction's master key ‖ salt (30 octets, base64). */
export interface SdesKeys {
  suite: SdesSuite;
  /** What we send with (our `inline:` key). */
  local: string;
  /** What the far end sends with (its `inline:` key). */
  remote: string;
}

const KEY_LEN = 16;
const SALT_LEN = 14;

/** Master key and salt from an `inline:` key (RFC 4568 §6.1: 30 octets for the AES_CM_128 suites). */
function split(b64: string): { key: Buffer; salt: Buffer } {
  const raw = Buffer.from(b64, 'base64');
  if (raw.length !== KEY_LEN + SALT_LEN) throw new Error('SDES key is not 30 octets');
  return { key: raw.subarray(0, KEY_LEN), salt: raw.subarray(KEY_LEN) };
}

function sessionKeys(ctx: SrtpKeys, profile: number): SrtpKeys {
  return { profile, srtpSessionKey: ctx.srtpSessionKey, srtpSessionSalt: ctx.srtpSessionSalt, srtpSessionAuthTag: ctx.srtpSessionAuthTag };
}

/** One leg's SRTP and SRTCP, both directions. */
export class SdesSrtp {
  private readonly out: SrtpProtector;
  private readonly in: SrtpUnprotector;
  private readonly rtcp: SrtcpSession;

  constructor(k: SdesKeys) {
    const local = split(k.local);
    const remote = split(k.remote);
    const keys = { localMasterKey: local.key, localMasterSalt: local.salt, remoteMasterKey: remote.key, remoteMasterSalt: remote.salt };
    const srtp = new SrtpSession({ keys, profile: AES_CM_128_HMAC_SHA1_80 });
    const profile = k.suite === 'AES_CM_128_HMAC_SHA1_32' ? AES_CM_128_HMAC_SHA1_32 : AES_CM_128_HMAC_SHA1_80;
    this.out = new SrtpProtector(sessionKeys(srtp.localContext, profile));
    this.in = new SrtpUnprotector(sessionKeys(srtp.remoteContext, profile));
    this.rtcp = new SrtcpSession({ keys, profile: AES_CM_128_HMAC_SHA1_80 });
  }

  /** One SRTP packet (a buffer of its own) from the RTP header fields and `payload`. */
  protect(payloadType: number, marker: boolean, seq: number, timestamp: number, ssrc: number, payload: Uint8Array): Buffer {
    return this.out.protect(payloadType, marker, seq, timestamp, ssrc, payload);
  }

  /**
   * The RTP packet of an SRTP packet, or null when it does not authenticate (dropped, RFC 3711
   * §3.3). Decrypted in place: the receiver owns the datagram and keeps only views of the result.
   */
  unprotect(pkt: Buffer): Buffer | null {
    try {
      return this.in.unprotect(pkt, true);
    } catch {
      return null;
    }
  }

  protectRtcp(rtcp: Buffer): Buffer {
    return this.rtcp.encrypt(rtcp);
  }

  unprotectRtcp(pkt: Buffer): Buffer | null {
    try {
      return this.rtcp.decrypt(pkt);
    } catch {
      return null;
    }
  }
}
