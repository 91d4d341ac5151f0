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
 * (RFC 3711 §4.1.1; computed 16 packets ahead in one call) and HMAC-SHA1 (RFC 2104) with the key's
 * pad blocks hashed once (§4.2, 80-bit tag; media/hmac-sha1.ts). Incoming tags are compared in
 * constant time.
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
import { HmacSha1 } from '../media/hmac-sha1.ts';

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

/** Packets whose keystream one AES call computes ahead, and at most this many octets of it. */
const AHEAD = 16;
const AHEAD_BYTES = 4096;

/**
 * AES_CM_128_HMAC_SHA1_80 (or _32) with one session's keys: keystream and tag, no OpenSSL object
 * per packet.
 *
 * The keystream of a packet depends only on the SSRC and the packet index (RFC 3711 §4.1.1:
 * ROC·2^16 + SEQ), not on its contents, and a sender's index goes up by one a packet. So one AES
 * call computes it for the next 16 packets of the SSRC (a "run"), and the packets after take
 * theirs from the run: one native call per 16 packets instead of one per packet (1.9 µs for the
 * 16 against 1.7 µs for one, measured on the 2-core VM; the call, not the AES, was the cost). A
 * packet outside the run starts a new one at its index, except a late one (an index before the
 * run's of the same SSRC), which gets its own keystream and leaves the run alone. The receiving
 * side computes keystream only for packets that authenticated, so a forged packet cannot make
 * it compute anything. Keystream held ahead is as secret as the key it comes from, and is kept as
 * the key is (in this object only).
 *
 * The tag is media/hmac-sha1.ts: the key's pad blocks hashed once, four SHA-1 compressions for a
 * 20 ms G.711 or G.722 packet, no allocation.
 */
class AesCmSession {
  private readonly ecb: crypto.Cipher;
  private readonly hmac: HmacSha1;
  private readonly salt: Buffer;
  private counters = Buffer.alloc(0);
  /** The run's keystream: `runCount` packets of `runBlocks` AES blocks each, from index `runFirst` of `runSsrc`. */
  private ks: Buffer = Buffer.alloc(0);
  private runSsrc = 0;
  private runFirst = 0;
  private runCount = 0;
  private runBlocks = 0;
  /** What `counters` is laid out for (layout()). */
  private layoutSsrc = -1;
  private layoutCount = 0;
  private layoutBlocks = 0;

  constructor(k: SrtpKeys) {
    this.salt = Buffer.from(k.srtpSessionSalt.subarray(0, 14));
    this.ecb = crypto.createCipheriv('aes-128-ecb', k.srtpSessionKey, null);
    this.ecb.setAutoPadding(false);
    this.hmac = new HmacSha1(k.srtpSessionAuthTag);
  }

  /**
   * The keystream of `count` packets from index `first` (ROC·2^16 + SEQ; a run may cross a
   * sequence wrap, where the ROC goes up) of `ssrc`, `blocks` AES blocks each. RFC 3711 §4.1.1:
   * block i of a packet = AES(key, (salt·2^16) XOR (SSRC·2^64) XOR (index·2^16) + i).
   */
  private keystream(ssrc: number, first: number, count: number, blocks: number): Buffer {
    const len = count * blocks * 16;
    const c = this.layout(ssrc, count, blocks);
    const s8 = this.salt.readUInt32BE(8);
    const s12 = this.salt.readUInt16BE(12);
    // Only the index part (octets 8 to 13 of each block) changes from run to run.
    let o = 8;
    for (let j = 0; j < count; j++) {
      const index = first + j;
      const roc = (s8 ^ Math.floor(index / 65536)) >>> 0;
      const seq = s12 ^ (index & 0xffff);
      const r0 = roc >>> 24;
      const r1 = (roc >>> 16) & 0xff;
      const r2 = (roc >>> 8) & 0xff;
      const r3 = roc & 0xff;
      const q0 = seq >>> 8;
      const q1 = seq & 0xff;
      for (let i = 0; i < blocks; i++, o += 16) {
        c[o] = r0;
        c[o + 1] = r1;
        c[o + 2] = r2;
        c[o + 3] = r3;
        c[o + 4] = q0;
        c[o + 5] = q1;
      }
    }
    return this.ecb.update(c.subarray(0, len));
  }

  /** Counter blocks for runs of `count` packets of `blocks` blocks of `ssrc`, all but the index written. */
  private layout(ssrc: number, count: number, blocks: number): Buffer {
    if (this.counters.length >= count * blocks * 16 && ssrc === this.layoutSsrc && count === this.layoutCount && blocks === this.layoutBlocks)
      return this.counters;
    const c = (this.counters = Buffer.alloc(Math.max(this.counters.length, count * blocks * 16)));
    const s0 = this.salt.readUInt32BE(0);
    const s4 = (this.salt.readUInt32BE(4) ^ ssrc) >>> 0;
    for (let o = 0, i = 0; o < count * blocks * 16; o += 16, i = (i + 1) % blocks) {
      c.writeUInt32BE(s0, o);
      c.writeUInt32BE(s4, o + 4);
      c.writeUInt16BE(i, o + 14);
    }
    this.layoutSsrc = ssrc;
    this.layoutCount = count;
    this.layoutBlocks = blocks;
    return c;
  }

  /** XORs the keystream of packet (ssrc, roc, seq) onto `src[from, to)` into `dst` at `from`. */
  crypt(src: Uint8Array, dst: Uint8Array, from: number, to: number, ssrc: number, roc: number, seq: number): void {
    const n = to - from;
    if (n <= 0) return;
    const blocks = Math.ceil(n / 16);
    const index = roc * 65536 + seq;
    const k = index - this.runFirst;
    let ks: Buffer;
    let at = 0;
    if (ssrc === this.runSsrc && k >= 0 && k < this.runCount && blocks <= this.runBlocks) {
      ks = this.ks;
      at = k * this.runBlocks * 16;
    } else if (ssrc === this.runSsrc && k < 0 && this.runCount > 0) {
      ks = this.keystream(ssrc, index, 1, blocks); // late: the run stays for the packets after it
    } else {
      // A run of the larger packet size seen on this SSRC, so a size that varies (Opus) does not restart it.
      const b = ssrc === this.runSsrc ? Math.max(blocks, this.runBlocks) : blocks;
      const count = Math.max(1, Math.min(AHEAD, Math.floor(AHEAD_BYTES / (16 * b))));
      ks = this.ks = this.keystream(ssrc, index, count, b);
      this.runSsrc = ssrc;
      this.runFirst = index;
      this.runCount = count;
      this.runBlocks = b;
    }
    for (let i = 0; i < n; i++) dst[from + i] = src[from + i]! ^ ks[at + i]!;
  }

  /** HMAC-SHA1(auth key, pkt[0, len) ‖ ROC), its first `bytes` (80 bits, or 32) written to `out` at `at`. */
  tag(pkt: Uint8Array, len: number, roc: number, out: Uint8Array, at: number, bytes = CM_TAG): void {
    this.hmac.macInto(pkt, len, roc, out, at, bytes);
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
   * A packet buffer of its own for `n` payload octets (AES-CM profiles): the caller writes the
   * payload at offset 12 and passes it to seal(), so a frame is encoded straight into the packet
   * that leaves (no scratch frame, no copy).
   */
  packet(n: number): Buffer {
    if (!this.cm) throw new Error('packet() and seal() are for the AES-CM profiles');
    if (HEADER + n + this.tagLength > MAX_PACKET) throw new Error('RTP packet larger than this protector takes');
    return Buffer.allocUnsafe(HEADER + n + this.tagLength);
  }

  /**
   * Protects in place a packet() whose `n` payload octets are written: the RTP header (V=2, no
   * padding, extension or CSRC) in front, the payload encrypted, the tag after it. Returns `pkt`.
   */
  seal(pkt: Buffer, n: number, payloadType: number, marker: boolean, seq: number, timestamp: number, ssrc: number): Buffer {
    const cm = this.cm;
    if (!cm || pkt.length !== HEADER + n + this.tagLength) throw new Error('seal() takes a packet() of the AES-CM profiles');
    writeHeader(pkt, payloadType, marker, seq, timestamp, ssrc);
    const roc = this.rocFor(seq & 0xffff);
    cm.crypt(pkt, pkt, HEADER, HEADER + n, ssrc >>> 0, roc, seq & 0xffff);
    cm.tag(pkt, HEADER + n, roc, pkt, HEADER + n, this.tagLength);
    return pkt;
  }

  /**
   * One SRTP packet: the RTP header (V=2, no padding, extension or CSRC) and `payload`, protected.
   * Returns a buffer of its own (a send may still hold it when the next packet is written).
   */
  protect(payloadType: number, marker: boolean, seq: number, timestamp: number, ssrc: number, payload: Uint8Array): Buffer {
    const n = payload.length;
    if (this.cm) {
      const pkt = this.packet(n);
      pkt.set(payload, HEADER);
      return this.seal(pkt, n, payloadType, marker, seq, timestamp, ssrc);
    }
    if (HEADER + n + this.tagLength > MAX_PACKET) throw new Error('RTP packet larger than this protector takes');
    const pkt = Buffer.allocUnsafe(HEADER + n + this.tagLength);
    writeHeader(pkt, payloadType, marker, seq, timestamp, ssrc);
    const roc = this.rocFor(seq & 0xffff);
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

/** RFC 3550 §5.1 fixed header at the start of `pkt`: V=2, no padding, extension or CSRC. */
function writeHeader(pkt: Buffer, payloadType: number, marker: boolean, seq: number, timestamp: number, ssrc: number): void {
  pkt[0] = 0x80;
  pkt[1] = (marker ? 0x80 : 0) | (payloadType & 0x7f);
  pkt.writeUInt16BE(seq & 0xffff, 2);
  pkt.writeUInt32BE(timestamp >>> 0, 4);
  pkt.writeUInt32BE(ssrc >>> 0, 8);
}

/** The tag an incoming packet must carry, computed for the check: scratch shared by the thread's unprotectors (the check is synchronous). */
const EXPECTED = new Uint8Array(CM_TAG);

interface RocState {
  roc: number;
  lastSeq: number;
  seen: boolean;
}

/** Authenticates and decrypts SRTP packets (AES_CM_128_HMAC_SHA1_80, or _32) of any SSRC of one session. */
export class SrtpUnprotector {
  private readonly cm: AesCmSession;
  private readonly states = new Map<number, RocState>();
  /** The SSRC of the last packet that authenticated (-1: none yet) and its entry of `states`. */
  private lastSsrc = -1;
  private last: RocState | undefined = undefined;
  private readonly tagLength: number;

  constructor(keys: SrtpKeys) {
    if (keys.profile !== AES_CM_128_HMAC_SHA1_80 && keys.profile !== AES_CM_128_HMAC_SHA1_32)
      throw new Error(`SRTP profile ${keys.profile} is not supported here`);
    this.cm = new AesCmSession(keys);
    this.tagLength = keys.profile === AES_CM_128_HMAC_SHA1_32 ? CM32_TAG : CM_TAG;
  }

  /**
   * The RTP packet (header and payload, the tag removed) of an SRTP packet; throws werift's
   * SrtpAuthenticationError for anything that does not authenticate (werift drops those).
   * `inPlace`: decrypted into `srtp`'s own memory and returned as a view of it, for a caller that
   * owns the datagram and does not read it again (the SIP legs' receiver); werift may, so the
   * rooms get a copy.
   */
  unprotect(srtp: Buffer, inPlace = false): Buffer {
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
    // A SIP leg's far end has one SSRC: its state without a Map lookup.
    const st = ssrc === this.lastSsrc ? this.last : this.states.get(ssrc);
    const roc = st ? nextRoc(st, seq) : 0;
    const expected = EXPECTED;
    this.cm.tag(srtp, len, roc, expected, 0, this.tagLength);
    // Constant time: every octet is compared whatever the first difference (no view allocated).
    let diff = 0;
    for (let i = 0; i < this.tagLength; i++) diff |= expected[i]! ^ srtp[len + i]!;
    if (diff !== 0) throw new SrtpAuthenticationError('Failed to authenticate SRTP packet');
    if (st) {
      st.roc = roc;
      st.lastSeq = seq;
      this.last = st;
    } else {
      this.last = { roc: 0, lastSeq: seq, seen: true };
      this.states.set(ssrc, this.last);
    }
    this.lastSsrc = ssrc;
    if (inPlace) {
      this.cm.crypt(srtp, srtp, offset, len, ssrc, roc, seq);
      return srtp.subarray(0, len);
    }
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
