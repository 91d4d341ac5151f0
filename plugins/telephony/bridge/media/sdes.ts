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
 *
 * Deriving them is not cheap (werift's SrtpSession and SrtcpSession: 0.2-1.5 ms a leg on the
 * 2-core VM), and on the sending thread it sat between 20 ms deadlines: a dialer's batch of ten
 * answered calls held the sending thread for ~5 ms, and every call's next packet waited (the
 * telephony bench's SRTP + G.722 send jitter). So the session keys can be derived once elsewhere
 * (`deriveSdes`, on the call logic's thread) and handed over in `SdesKeys.session`; each half then
 * builds only what it uses, when it first uses it: the sender only the protector, the receiver
 * the unprotector and (werift's) SRTCP.
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
  /** The SRTP session keys of `local` and `remote`, derived already (deriveSdes); derived here without them. */
  session?: SdesSession;
}

/** One direction's SRTP session keys (RFC 3711 §4.3.1): encryption key, salt, authentication key. */
export interface SessionKeyOctets {
  key: Uint8Array;
  salt: Uint8Array;
  auth: Uint8Array;
}

/** Both directions' SRTP session keys: plain octets, so they reach a media thread by message. */
export interface SdesSession {
  local: SessionKeyOctets;
  remote: SessionKeyOctets;
}

const KEY_LEN = 16;
const SALT_LEN = 14;

/** Master key and salt from an `inline:` key (RFC 4568 §6.1: 30 octets for the AES_CM_128 suites). */
function split(b64: string): { key: Buffer; salt: Buffer } {
  const raw = Buffer.from(b64, 'base64');
  if (raw.length !== KEY_LEN + SALT_LEN) throw new Error('SDES key is not 30 octets');
  return { key: raw.subarray(0, KEY_LEN), salt: raw.subarray(KEY_LEN) };
}

interface MasterKeys {
  localMasterKey: Buffer;
  localMasterSalt: Buffer;
  remoteMasterKey: Buffer;
  remoteMasterSalt: Buffer;
}

function masterKeys(k: SdesKeys): MasterKeys {
  const local = split(k.local);
  const remote = split(k.remote);
  return { localMasterKey: local.key, localMasterSalt: local.salt, remoteMasterKey: remote.key, remoteMasterSalt: remote.salt };
}

function octets(ctx: SrtpKeys): SessionKeyOctets {
  return { key: Buffer.from(ctx.srtpSessionKey), salt: Buffer.from(ctx.srtpSessionSalt), auth: Buffer.from(ctx.srtpSessionAuthTag) };
}

/**
 * The SRTP session keys of both directions of `k` (werift's RFC 3711 §4.3 key derivation; the
 * suite does not enter it, see above). Copies of their own: `k` is not touched.
 */
export function deriveSdes(k: SdesKeys, master = masterKeys(k)): SdesSession {
  const srtp = new SrtpSession({ keys: master, profile: AES_CM_128_HMAC_SHA1_80 });
  return { local: octets(srtp.localContext), remote: octets(srtp.remoteContext) };
}

/** Session keys as the protectors take them (Buffers: a message hands them over as Uint8Arrays). */
function sessionKeys(o: SessionKeyOctets, profile: number): SrtpKeys {
  const buf = (u: Uint8Array) => (Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength));
  return { profile, srtpSessionKey: buf(o.key), srtpSessionSalt: buf(o.salt), srtpSessionAuthTag: buf(o.auth) };
}

/**
 * One leg's SRTP and SRTCP, both directions. Each direction's protector, and SRTCP, is built on
 * its first use: a media thread that only sends never builds the receiving side's.
 */
export class SdesSrtp {
  /** Checked here (30 octets each), so a bad key fails the constructor as before, not a later packet. */
  private readonly master: MasterKeys;
  private readonly session: SdesSession;
  private readonly profile: number;
  private outbound: SrtpProtector | null = null;
  private inbound: SrtpUnprotector | null = null;
  private rtcpSession: SrtcpSession | null = null;

  constructor(k: SdesKeys) {
    this.master = masterKeys(k);
    this.session = k.session ?? deriveSdes(k, this.master);
    this.profile = k.suite === 'AES_CM_128_HMAC_SHA1_32' ? AES_CM_128_HMAC_SHA1_32 : AES_CM_128_HMAC_SHA1_80;
  }

  /** The sending direction's protector, built now if it is not yet (a sender calls it at start). */
  sender(): SrtpProtector {
    return (this.outbound ??= new SrtpProtector(sessionKeys(this.session.local, this.profile)));
  }
  private receiver(): SrtpUnprotector {
    return (this.inbound ??= new SrtpUnprotector(sessionKeys(this.session.remote, this.profile)));
  }
  private rtcp(): SrtcpSession {
    return (this.rtcpSession ??= new SrtcpSession({ keys: this.master, profile: AES_CM_128_HMAC_SHA1_80 }));
  }

  /** One SRTP packet (a buffer of its own) from the RTP header fields and `payload`. */
  protect(payloadType: number, marker: boolean, seq: number, timestamp: number, ssrc: number, payload: Uint8Array): Buffer {
    return this.sender().protect(payloadType, marker, seq, timestamp, ssrc, payload);
  }

  /**
   * The RTP packet of an SRTP packet, or null when it does not authenticate (dropped, RFC 3711
   * §3.3). Decrypted in place: the receiver owns the datagram and keeps only views of the result.
   */
  unprotect(pkt: Buffer): Buffer | null {
    try {
      return this.receiver().unprotect(pkt, true);
    } catch {
      return null;
    }
  }

  protectRtcp(rtcp: Buffer): Buffer {
    return this.rtcp().encrypt(rtcp);
  }

  unprotectRtcp(pkt: Buffer): Buffer | null {
    try {
      return this.rtcp().decrypt(pkt);
    } catch {
      return null;
    }
  }
}
