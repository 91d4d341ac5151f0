/**
 * The rooms' SRTP (RFC 3711) for RTP both ways, done here instead of in werift, so that no
 * packet creates an OpenSSL cipher or HMAC object.
 *
 * Why: on Node 20 and 22 (OpenSSL 3.0) every `createCipheriv`/`createDecipheriv`/`createHmac`
 * fetches its algorithm from OpenSSL's provider store under a lock shared by every thread of the
 * process. werift creates one or two such objects per packet each way, and the bridge's two
 * WebRTC threads (plus its main thread) do so 2,500 times a second each with 50 rooms: measured on
 * the 2-core VM (load 10), creating an AES-GCM cipher while one other thread does the same takes
 * 3 µs at the median but 6 ms at the 99.9th percentile (220 ms at worst with three others),
 * whereas encrypting with a cipher object made once, or a one-shot `crypto.hash`, stays at
 * 45 µs. A room's 20 ms frame waits behind that lock (and behind the priority inversion when a
 * normal-priority thread holds it). The objects are also garbage with weak handles that every
 * young-generation collection of the thread must process.
 *
 * So the rooms negotiate AES_CM_128_HMAC_SHA1_80 (the profile every WebRTC endpoint must
 * implement, RFC 8827 §6.5) instead of werift's preferred AEAD_AES_128_GCM, and both directions
 * use one AES-128-ECB cipher object per direction, made once, for the counter-mode keystream
 * (RFC 3711 §4.1.1) and HMAC-SHA1 (RFC 2104) as two one-shot SHA-1 hashes over buffers that carry
 * the padded key (§4.2, 80-bit tag). Incoming tags are compared in constant time.
 *
 * Outgoing: one buffer per packet, the RTP header (RFC 3550 §5.1, no extension, no CSRC) written
 * in place, the payload encrypted into it and the tag appended, handed to werift's ICE connection
 * (which keeps RFC 7675 consent and its statistics). werift's own send path would also clone the
 * packet, rebuild a header-extension list, take a bigint NTP time through a decimal string and
 * sort its bandwidth estimator's table for every packet. A GCM session (a peer that insists on
 * it) is sent the same way with one cipher object per packet, and received by werift as before.
 *
 * Incoming: werift's SRTP session's `decrypt` is replaced for the connection (its DTLS transport
 * calls it for every SRTP packet and parses the result as before); the rollover counter is kept
 * per SSRC exactly as werift keeps it, and committed only for a packet that authenticates.
 *
 * The keys are the session keys werift derived (its SRTP contexts), read once. Bit-exact with
 * werift's own protection and accepted by it (test/plugins/telephony/bridge-srtp.test.ts).
 *
 * The sender report werift sends every 0.5 to 1.5 s (RTCP SR, RFC 3550 §6.4.1) takes its packet
 * and octet counts and its NTP/RTP timestamp pair from the RTCRtpSender's fields; they are kept up
 * to date here (the pair every 16th packet, both from the same packet) and werift's report loop
 * is started as its own send path would start it.
 */
import crypto from 'node:crypto';
import { SrtpAuthenticationError, type RTCRtpSender } from 'werift';

/** werift's SRTP profile numbers (RFC 5764 §4.1.2 and RFC 7714 §14.2). */
export const AES_CM_128_HMAC_SHA1_80 = 0x0001;
/** Its 32-bit-tag sibling (RFC 3711 §5.2, RFC 4568 §6.2.2): the SIP legs' SDES (media/sdes.ts), never a room. */
export const AES_CM_128_HMAC_SHA1_32 = 0x0002;
const CM32_TAG = 4;
const AEAD_AES_128_GCM = 0x0007;
const HEADER = 12;
const CM_TAG = 10;
/** Largest RTP packet either direction handles here (UDP on an Ethernet MTU). */
const MAX_PACKET = 1500;
/** 1900-01-01 to 1970-01-01 in seconds (the NTP era of RFC 5905). */
const NTP_EPOCH_OFFSET = 2_208_988_800;
/** werift's out-of-order window around a sequence wrap (its SrtpContext). */
const MAX_ROC_DISORDER = 100;

/** The parts of werift's SRTP context read here (not in its typings; checked where bound). */
export interface SrtpKeys {
  profile: number;
  srtpSessionKey: Buffer;
  srtpSessionSalt: Buffer;
  srtpSessionAuthTag: Buffer;
}

/** AES_CM_128_HMAC_SHA1_80 with one session's keys: keystream and tag, no object per packet. */
class AesCmSession {
  private readonly ecb: crypto.Cipher;
  private readonly counters = Buffer.alloc(Math.ceil(MAX_PACKET / 16) * 16);
  /** ipad key ‖ message (header ‖ ciphertext ‖ ROC); opad key ‖ inner digest. */
  private readonly inner = Buffer.alloc(64 + MAX_PACKET + 4);
  private readonly outer = Buffer.alloc(64 + 20);
  private readonly salt: Buffer;

  constructor(k: SrtpKeys) {
    this.salt = Buffer.from(k.srtpSessionSalt.subarray(0, 14));
    for (let o = 0; o < this.counters.length; o += 16) {
      this.salt.copy(this.counters, o, 0, 14);
      this.counters.writeUInt16BE(o / 16, o + 14);
    }
    this.ecb = crypto.createCipheriv('aes-128-ecb', k.srtpSessionKey, null);
    this.ecb.setAutoPadding(false);
    // RFC 2104 with a 20-byte key (shorter than SHA-1's 64-byte block: zero-padded, not hashed).
    for (let i = 0; i < 64; i++) {
      const b = k.srtpSessionAuthTag[i] ?? 0;
      this.inner[i] = b ^ 0x36;
      this.outer[i] = b ^ 0x5c;
    }
  }

  /** XORs the keystream of packet (ssrc, roc, seq) onto `src[from, to)` into `dst` at `from`. */
  crypt(src: Uint8Array, dst: Uint8Array, from: number, to: number, ssrc: number, roc: number, seq: number): void {
    const n = to - from;
    if (n <= 0) return;
    const blocks = Math.ceil(n / 16);
    const c = this.counters;
    const s4 = (this.salt.readUInt32BE(4) ^ ssrc) >>> 0;
    const s8 = (this.salt.readUInt32BE(8) ^ roc) >>> 0;
    const s12 = this.salt.readUInt16BE(12) ^ seq;
    // RFC 3711 §4.1.1: block i = (salt XOR SSRC·2^64 XOR index·2^16) + i.
    for (let o = 0; o < blocks * 16; o += 16) {
      c.writeUInt32BE(s4, o + 4);
      c.writeUInt32BE(s8, o + 8);
      c.writeUInt16BE(s12, o + 12);
    }
    const ks = this.ecb.update(c.subarray(0, blocks * 16));
    for (let i = 0; i < n; i++) dst[from + i] = src[from + i] ^ ks[i];
  }

  /** HMAC-SHA1(auth key, pkt[0, len) ‖ ROC), its first `bytes` (80 bits, or 32) written to `out` at `at`. */
  tag(pkt: Uint8Array, len: number, roc: number, out: Uint8Array, at: number, bytes = CM_TAG): void {
    this.inner.set(pkt.subarray(0, len), 64);
    this.inner.writeUInt32BE(roc, 64 + len);
    const h = crypto.hash('sha1', this.inner.subarray(0, 64 + len + 4), 'buffer');
    h.copy(this.outer, 64);
    const t = crypto.hash('sha1', this.outer, 'buffer');
    out.set(t.subarray(0, bytes), at);
  }
}

/** Protects RTP packets of one SSRC with one SRTP context's session keys. */
export class SrtpProtector {
  private roc = 0;
  private lastSeq = -1;
  private readonly cm: AesCmSession | null;
  private readonly gcmSalt: Buffer | null;
  private readonly iv = Buffer.alloc(12);
  readonly tagLength: number;

  constructor(private readonly keys: SrtpKeys) {
    if (keys.profile === AES_CM_128_HMAC_SHA1_80 || keys.profile === AES_CM_128_HMAC_SHA1_32) {
      this.tagLength = keys.profile === AES_CM_128_HMAC_SHA1_32 ? CM32_TAG : CM_TAG;
      this.cm = new AesCmSession(keys);
      this.gcmSalt = null;
    } else if (keys.profile === AEAD_AES_128_GCM) {
      this.tagLength = 16;
      this.cm = null;
      this.gcmSalt = Buffer.from(keys.srtpSessionSalt.subarray(0, 12));
    } else {
      throw new Error(`SRTP profile ${keys.profile} is not supported here`);
    }
  }

  /** The rollover counter for `seq` (RFC 3711 §3.3.1; a sender's sequence only wraps forwards). */
  private rocFor(seq: number): number {
    if (this.lastSeq >= 0 && seq < this.lastSeq && this.lastSeq - seq > 0x8000) this.roc = (this.roc + 1) >>> 0;
    this.lastSeq = seq;
    return this.roc;
  }

  /**
   * One SRTP packet: the RTP header (V=2, no padding, extension or CSRC) and `payload`, protected.
   * Returns a buffer of its own (a send may still hold it when the next packet is written).
   */
  protect(payloadType: number, marker: boolean, seq: number, timestamp: number, ssrc: number, payload: Uint8Array): Buffer {
    const n = payload.length;
    if (HEADER + n + this.tagLength > MAX_PACKET) throw new Error('RTP packet larger than this protector takes');
    const pkt = Buffer.allocUnsafe(HEADER + n + this.tagLength);
    pkt[0] = 0x80;
    pkt[1] = (marker ? 0x80 : 0) | (payloadType & 0x7f);
    pkt.writeUInt16BE(seq & 0xffff, 2);
    pkt.writeUInt32BE(timestamp >>> 0, 4);
    pkt.writeUInt32BE(ssrc >>> 0, 8);
    const roc = this.rocFor(seq & 0xffff);
    if (this.cm) {
      pkt.set(payload, HEADER);
      this.cm.crypt(pkt, pkt, HEADER, HEADER + n, ssrc >>> 0, roc, seq & 0xffff);
      this.cm.tag(pkt, HEADER + n, roc, pkt, HEADER + n, this.tagLength);
      return pkt;
    }
    // RFC 7714 §8.1: IV = (00 00 ‖ SSRC ‖ ROC ‖ SEQ) XOR salt; AAD = the header.
    const iv = this.iv;
    iv.writeUInt16BE(0, 0);
    iv.writeUInt32BE(ssrc >>> 0, 2);
    iv.writeUInt32BE(roc, 6);
    iv.writeUInt16BE(seq & 0xffff, 10);
    for (let i = 0; i < 12; i++) iv[i] ^= this.gcmSalt![i];
    const c = crypto.createCipheriv('aes-128-gcm', this.keys.srtpSessionKey, iv);
    c.setAAD(pkt.subarray(0, HEADER));
    c.update(payload).copy(pkt, HEADER);
    c.final();
    c.getAuthTag().copy(pkt, HEADER + n);
    return pkt;
  }
}

interface RocState {
  roc: number;
  lastSeq: number;
  seen: boolean;
}

/** Authenticates and decrypts SRTP packets (AES_CM_128_HMAC_SHA1_80, or _32) of any SSRC of one session. */
export class SrtpUnprotector {
  private readonly cm: AesCmSession;
  private readonly states = new Map<number, RocState>();
  private readonly tagLength: number;
  private readonly expected: Buffer;

  constructor(keys: SrtpKeys) {
    if (keys.profile !== AES_CM_128_HMAC_SHA1_80 && keys.profile !== AES_CM_128_HMAC_SHA1_32)
      throw new Error(`SRTP profile ${keys.profile} is not supported here`);
    this.cm = new AesCmSession(keys);
    this.tagLength = keys.profile === AES_CM_128_HMAC_SHA1_32 ? CM32_TAG : CM_TAG;
    this.expected = Buffer.alloc(this.tagLength);
  }

  /**
   * The RTP packet (header and payload, the tag removed) of an SRTP packet; throws werift's
   * SrtpAuthenticationError for anything that does not authenticate (werift drops those).
   */
  unprotect(srtp: Buffer): Buffer {
    const len = srtp.length - this.tagLength;
    if (len < HEADER || srtp[0] >> 6 !== 2) throw new SrtpAuthenticationError('Failed to authenticate SRTP packet');
    let offset = HEADER + 4 * (srtp[0] & 0x0f);
    if (srtp[0] & 0x10) {
      if (offset + 4 > len) throw new SrtpAuthenticationError('Failed to authenticate SRTP packet');
      offset += 4 + 4 * srtp.readUInt16BE(offset + 2);
    }
    if (offset > len || len + 4 > MAX_PACKET) throw new SrtpAuthenticationError('Failed to authenticate SRTP packet');
    const seq = srtp.readUInt16BE(2);
    const ssrc = srtp.readUInt32BE(8);
    const st = this.states.get(ssrc);
    const roc = st ? nextRoc(st, seq) : 0;
    this.cm.tag(srtp, len, roc, this.expected, 0, this.tagLength);
    if (!crypto.timingSafeEqual(this.expected, srtp.subarray(len))) throw new SrtpAuthenticationError('Failed to authenticate SRTP packet');
    if (st) {
      st.roc = roc;
      st.lastSeq = seq;
    } else this.states.set(ssrc, { roc: 0, lastSeq: seq, seen: true });
    const out = Buffer.allocUnsafe(len);
    srtp.copy(out, 0, 0, offset);
    this.cm.crypt(srtp, out, offset, len, ssrc, roc, seq);
    return out;
  }
}

/** werift's rollover estimate (its SrtpContext.updateRolloverCount), without committing it. */
function nextRoc(s: RocState, seq: number): number {
  if (!s.seen) return s.roc;
  if (seq === 0) return s.lastSeq > MAX_ROC_DISORDER ? (s.roc + 1) >>> 0 : s.roc;
  if (s.lastSeq < MAX_ROC_DISORDER && seq > 0xffff - MAX_ROC_DISORDER) return s.roc > 0 ? s.roc - 1 : 0;
  if (seq < MAX_ROC_DISORDER && s.lastSeq > 0xffff - MAX_ROC_DISORDER) return (s.roc + 1) >>> 0;
  return s.roc;
}

/** The parts of werift's RTCDtlsTransport and RTCRtpSender used here. */
interface DtlsInternals {
  state: string;
  srtpProfiles?: number[];
  srtp?: { localContext?: SrtpKeys; remoteContext?: SrtpKeys; decrypt: (b: Buffer) => Buffer };
  iceTransport?: { connection?: { send: (b: Buffer) => Promise<void> } };
}
interface SenderInternals {
  ssrc: number;
  dtlsTransport?: DtlsInternals;
  headerExtensions?: unknown[];
  packetCount: number;
  octetCount: number;
  ntpTimestamp: bigint;
  rtpTimestamp: number;
  runRtcp?: () => Promise<void>;
}

function isKeys(k: SrtpKeys | undefined): k is SrtpKeys {
  return !!k && Buffer.isBuffer(k.srtpSessionKey) && Buffer.isBuffer(k.srtpSessionSalt) && Buffer.isBuffer(k.srtpSessionAuthTag);
}

/**
 * Before DTLS starts (after the offer was applied): the connection offers only
 * AES_CM_128_HMAC_SHA1_80. The bridge answers a browser's `actpass` as the DTLS client, so the
 * visitor's side (the server) picks from this list. Returns false when werift's transport is not
 * where expected (werift then negotiates as it would).
 */
export function offerAesCmOnly(sender: RTCRtpSender): boolean {
  const dtls = (sender as unknown as SenderInternals).dtlsTransport;
  if (!dtls || !Array.isArray(dtls.srtpProfiles)) return false;
  dtls.srtpProfiles = [AES_CM_128_HMAC_SHA1_80];
  return true;
}

/**
 * A room's RTP through its RTCRtpSender's DTLS-SRTP transport, once that is connected; also takes
 * over the transport's SRTP decryption when the profile is AES-CM. `bind` returns null while DTLS
 * is not connected, or when the sender is not one this path can stand in for (header extensions
 * negotiated, another profile, werift internals not where expected): the caller then uses
 * werift's own `sendRtp` (and werift decrypts).
 */
export class SrtpOut {
  private sent = 0;

  private constructor(
    private readonly sender: SenderInternals,
    private readonly protector: SrtpProtector,
    private readonly send: (b: Buffer) => Promise<void>,
  ) {
    // werift starts its sender-report loop on the first packet it sends; none go through it now.
    void sender.runRtcp?.call(sender).catch(() => undefined);
  }

  static bind(sender: RTCRtpSender): SrtpOut | null {
    const s = sender as unknown as SenderInternals;
    const dtls = s.dtlsTransport;
    if (!dtls || dtls.state !== 'connected' || !dtls.srtp) return null;
    const local = dtls.srtp.localContext;
    const conn = dtls.iceTransport?.connection;
    if (!isKeys(local) || !conn || typeof conn.send !== 'function' || typeof s.ssrc !== 'number') return null;
    if (s.headerExtensions && s.headerExtensions.length > 0) return null;
    if (local.profile !== AEAD_AES_128_GCM && local.profile !== AES_CM_128_HMAC_SHA1_80) return null;
    const remote = dtls.srtp.remoteContext;
    if (local.profile === AES_CM_128_HMAC_SHA1_80 && isKeys(remote) && remote.profile === AES_CM_128_HMAC_SHA1_80) {
      const rx = new SrtpUnprotector(remote);
      dtls.srtp.decrypt = (b) => rx.unprotect(b);
    }
    return new SrtpOut(s, new SrtpProtector(local), (b) => conn.send(b));
  }

  /** Sends one RTP packet of `payload` (werift's sender SSRC; our sequence and timestamp). */
  sendRtp(payloadType: number, marker: boolean, seq: number, timestamp: number, payload: Uint8Array): void {
    const s = this.sender;
    const pkt = this.protector.protect(payloadType, marker, seq, timestamp, s.ssrc, payload);
    this.send(pkt).catch(() => undefined);
    s.packetCount = (s.packetCount + 1) >>> 0;
    s.octetCount += payload.length;
    if ((this.sent++ & 15) === 0) {
      // The sender report's NTP and RTP timestamps of one and the same packet (RFC 3550 §6.4.1).
      const ms = performance.timeOrigin + performance.now();
      const sec = Math.floor(ms / 1000);
      s.ntpTimestamp = (BigInt(sec + NTP_EPOCH_OFFSET) << 32n) | BigInt(Math.floor(((ms - sec * 1000) / 1000) * 2 ** 32));
      s.rtpTimestamp = timestamp >>> 0;
    }
  }
}
