/**
 * RTCP (RFC 3550 §6) for a call's RTP session: sender and receiver reports with the reception
 * statistics of Appendix A (extended sequence numbers, cumulative and fractional loss, interarrival
 * jitter), SDES CNAME, BYE, and the round-trip time from the far end's reports (§6.4.1). Sent
 * from the RTP port + 1 (§11); the far end's reports tell the operator what it heard.
 */
import type dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';

const PT_SR = 200;
const PT_RR = 201;
const PT_SDES = 202;
const PT_BYE = 203;
/** Seconds between 1900-01-01 (NTP era 0) and 1970-01-01. */
const NTP_UNIX_OFFSET = 2_208_988_800;
/** §6.2: with two participants the minimum interval is 5 s. */
export const RTCP_INTERVAL_MS = 5000;

/** The process-wide monotonic clock in ms (shared by every thread, unlike performance.now()). */
export function monoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * What the sending side has sent, for the sender report. Lives in a SharedArrayBuffer so the
 * RTP sender (media tx thread) and RTCP (rx thread) can be on different threads; a sequence
 * counter (seqlock) keeps a report from mixing two updates.
 */
export class SenderInfo {
  private readonly i: Int32Array;
  private readonly f: Float64Array;
  constructor(readonly sab: SharedArrayBuffer = new SharedArrayBuffer(32)) {
    this.i = new Int32Array(sab, 0, 5); // version, ssrc, packets, octets, rtp timestamp
    this.f = new Float64Array(sab, 24, 1); // monoMs of that packet
  }
  update(ssrc: number, packets: number, octets: number, rtpTs: number, atMs: number): void {
    const v = this.i[0]!;
    Atomics.store(this.i, 0, v + 1);
    this.i[1] = ssrc | 0;
    this.i[2] = packets | 0;
    this.i[3] = octets | 0;
    this.i[4] = rtpTs | 0;
    this.f[0] = atMs;
    Atomics.store(this.i, 0, v + 2);
  }
  read(): { ssrc: number; packets: number; octets: number; rtpTs: number; atMs: number } | null {
    for (let tries = 0; tries < 8; tries++) {
      const v = Atomics.load(this.i, 0);
      if (v === 0) return null; // nothing sent yet
      if (v & 1) continue;
      const out = { ssrc: this.i[1]! >>> 0, packets: this.i[2]! >>> 0, octets: this.i[3]! >>> 0, rtpTs: this.i[4]! >>> 0, atMs: this.f[0]! };
      if (Atomics.load(this.i, 0) === v) return out;
    }
    return null;
  }
}

/** Reception statistics of one source (RFC 3550 Appendix A.1, A.3, A.8). */
export class ReceptionStats {
  ssrc: number | null = null;
  private baseSeq = 0;
  private maxSeq = 0;
  private cycles = 0;
  received = 0;
  private expectedPrior = 0;
  private receivedPrior = 0;
  private transit: number | null = null;
  /** Interarrival jitter in timestamp units (×16 kept as in A.8 would also do; a float is clearer). */
  jitter = 0;
  /** Middle 32 bits of the NTP time of the last SR from this source, and when it arrived. */
  lsr = 0;
  lsrAtMs = 0;

  constructor(private readonly clockRate = 8000) {}

  onRtp(ssrc: number, seq: number, rtpTs: number, arrivalMs: number): void {
    if (this.ssrc !== ssrc) {
      this.ssrc = ssrc;
      this.baseSeq = seq;
      this.maxSeq = seq;
      this.cycles = 0;
      this.received = 0;
      this.expectedPrior = 0;
      this.receivedPrior = 0;
      this.transit = null;
      this.jitter = 0;
    } else {
      const delta = (seq - this.maxSeq) & 0xffff;
      if (delta < 0x8000) {
        if (seq < this.maxSeq) this.cycles += 0x10000; // wrapped
        this.maxSeq = seq;
      } // else: late or duplicate, counted as received (A.1 does the same)
    }
    this.received++;
    // A.8: J += (|D| - J) / 16 over the difference of relative transit times.
    const transit = (arrivalMs * this.clockRate) / 1000 - rtpTs;
    if (this.transit !== null) {
      let d = transit - this.transit;
      // RTP timestamps wrap at 2^32: keep the difference in range.
      if (d > 2 ** 31) d -= 2 ** 32;
      else if (d < -(2 ** 31)) d += 2 ** 32;
      this.jitter += (Math.abs(d) - this.jitter) / 16;
    }
    this.transit = transit;
  }

  get extendedMax(): number {
    return this.cycles + this.maxSeq;
  }
  get expected(): number {
    return this.ssrc === null ? 0 : this.extendedMax - this.baseSeq + 1;
  }
  /** Cumulative lost (A.3), may be negative with duplicates. */
  get lost(): number {
    return this.expected - this.received;
  }

  /** One report block (§6.4.1), advancing the interval counters. */
  block(nowMs: number): ReportBlock | null {
    if (this.ssrc === null) return null;
    const expected = this.expected;
    const expectedInterval = expected - this.expectedPrior;
    const receivedInterval = this.received - this.receivedPrior;
    this.expectedPrior = expected;
    this.receivedPrior = this.received;
    const lostInterval = expectedInterval - receivedInterval;
    const fraction = expectedInterval <= 0 || lostInterval <= 0 ? 0 : Math.min(255, Math.floor((lostInterval << 8) / expectedInterval));
    const dlsr = this.lsr ? Math.round(((nowMs - this.lsrAtMs) / 1000) * 65536) : 0;
    return {
      ssrc: this.ssrc,
      fractionLost: fraction,
      cumulativeLost: Math.max(-0x800000, Math.min(0x7fffff, this.lost)),
      extendedMax: this.extendedMax >>> 0,
      jitter: Math.round(this.jitter) >>> 0,
      lsr: this.lsr >>> 0,
      dlsr: dlsr >>> 0,
    };
  }
}

export interface ReportBlock {
  ssrc: number;
  /** Fraction lost since the previous report, in 1/256. */
  fractionLost: number;
  cumulativeLost: number;
  extendedMax: number;
  /** Interarrival jitter, timestamp units. */
  jitter: number;
  lsr: number;
  dlsr: number;
}

export interface SenderSection {
  ntpSec: number;
  ntpFrac: number;
  rtpTs: number;
  packets: number;
  octets: number;
}

export type RtcpPacket =
  | { type: 'sr'; ssrc: number; sender: SenderSection; blocks: ReportBlock[] }
  | { type: 'rr'; ssrc: number; blocks: ReportBlock[] }
  | { type: 'sdes'; chunks: { ssrc: number; cname?: string }[] }
  | { type: 'bye'; ssrcs: number[] }
  | { type: 'other'; pt: number };

/** NTP timestamp (§4) of a wall-clock time in ms. */
export function ntpOf(unixMs: number): { sec: number; frac: number } {
  const sec = Math.floor(unixMs / 1000);
  return { sec: (sec + NTP_UNIX_OFFSET) >>> 0, frac: Math.floor(((unixMs - sec * 1000) / 1000) * 2 ** 32) >>> 0 };
}

function header(buf: Buffer, at: number, count: number, pt: number, words: number): void {
  buf[at] = 0x80 | (count & 0x1f);
  buf[at + 1] = pt;
  buf.writeUInt16BE(words - 1, at + 2); // length in 32-bit words minus one (§6.4.1)
}

function writeBlock(buf: Buffer, at: number, b: ReportBlock): void {
  buf.writeUInt32BE(b.ssrc >>> 0, at);
  buf[at + 4] = b.fractionLost & 0xff;
  buf.writeIntBE(b.cumulativeLost, at + 5, 3);
  buf.writeUInt32BE(b.extendedMax >>> 0, at + 8);
  buf.writeUInt32BE(b.jitter >>> 0, at + 12);
  buf.writeUInt32BE(b.lsr >>> 0, at + 16);
  buf.writeUInt32BE(b.dlsr >>> 0, at + 20);
}

/** SR (with sender info) or RR (without), with at most one report block: a two-party call. */
export function buildReport(ssrc: number, sender: SenderSection | null, block: ReportBlock | null): Buffer {
  const blocks = block ? 1 : 0;
  const words = (sender ? 7 : 2) + blocks * 6;
  const buf = Buffer.alloc(words * 4);
  header(buf, 0, blocks, sender ? PT_SR : PT_RR, words);
  buf.writeUInt32BE(ssrc >>> 0, 4);
  let at = 8;
  if (sender) {
    buf.writeUInt32BE(sender.ntpSec >>> 0, 8);
    buf.writeUInt32BE(sender.ntpFrac >>> 0, 12);
    buf.writeUInt32BE(sender.rtpTs >>> 0, 16);
    buf.writeUInt32BE(sender.packets >>> 0, 20);
    buf.writeUInt32BE(sender.octets >>> 0, 24);
    at = 28;
  }
  if (block) writeBlock(buf, at, block);
  return buf;
}

/** SDES with one chunk carrying the CNAME (§6.5.1), padded to a 32-bit boundary. */
export function buildSdes(ssrc: number, cname: string): Buffer {
  const name = Buffer.from(cname, 'utf8').subarray(0, 255);
  const chunkLen = 4 + 2 + name.length + 1; // ssrc, CNAME item, terminating null item
  const padded = Math.ceil(chunkLen / 4) * 4;
  const buf = Buffer.alloc(4 + padded);
  header(buf, 0, 1, PT_SDES, buf.length / 4);
  buf.writeUInt32BE(ssrc >>> 0, 4);
  buf[8] = 1; // CNAME
  buf[9] = name.length;
  name.copy(buf, 10);
  return buf;
}

export function buildBye(ssrc: number): Buffer {
  const buf = Buffer.alloc(8);
  header(buf, 0, 1, PT_BYE, 2);
  buf.writeUInt32BE(ssrc >>> 0, 4);
  return buf;
}

/** Parses a compound RTCP packet; null when it is not valid RTCP (§6.1 / A.2 checks). */
export function parseRtcp(buf: Buffer): RtcpPacket[] | null {
  if (buf.length < 4) return null;
  // A.2: the first packet is SR or RR, version 2, no padding on it.
  if (buf[0]! >> 6 !== 2 || (buf[0]! & 0x20) !== 0 || (buf[1] !== PT_SR && buf[1] !== PT_RR)) return null;
  const out: RtcpPacket[] = [];
  let at = 0;
  while (at < buf.length) {
    if (at + 4 > buf.length || buf[at]! >> 6 !== 2) return null;
    const count = buf[at]! & 0x1f;
    const pt = buf[at + 1]!;
    const len = (buf.readUInt16BE(at + 2) + 1) * 4;
    if (at + len > buf.length) return null;
    const end = at + len;
    const readBlocks = (from: number): ReportBlock[] | null => {
      const blocks: ReportBlock[] = [];
      for (let i = 0; i < count; i++) {
        const b = from + i * 24;
        if (b + 24 > end) return null;
        blocks.push({
          ssrc: buf.readUInt32BE(b),
          fractionLost: buf[b + 4]!,
          cumulativeLost: buf.readIntBE(b + 5, 3),
          extendedMax: buf.readUInt32BE(b + 8),
          jitter: buf.readUInt32BE(b + 12),
          lsr: buf.readUInt32BE(b + 16),
          dlsr: buf.readUInt32BE(b + 20),
        });
      }
      return blocks;
    };
    if (pt === PT_SR) {
      if (len < 28) return null;
      const blocks = readBlocks(at + 28);
      if (!blocks) return null;
      out.push({
        type: 'sr',
        ssrc: buf.readUInt32BE(at + 4),
        blocks,
        sender: {
          ntpSec: buf.readUInt32BE(at + 8),
          ntpFrac: buf.readUInt32BE(at + 12),
          rtpTs: buf.readUInt32BE(at + 16),
          packets: buf.readUInt32BE(at + 20),
          octets: buf.readUInt32BE(at + 24),
        },
      });
    } else if (pt === PT_RR) {
      if (len < 8) return null;
      const blocks = readBlocks(at + 8);
      if (!blocks) return null;
      out.push({ type: 'rr', ssrc: buf.readUInt32BE(at + 4), blocks });
    } else if (pt === PT_SDES) {
      const chunks: { ssrc: number; cname?: string }[] = [];
      let c = at + 4;
      for (let i = 0; i < count && c + 4 <= end; i++) {
        const chunk: { ssrc: number; cname?: string } = { ssrc: buf.readUInt32BE(c) };
        let p = c + 4;
        while (p < end && buf[p] !== 0) {
          const t = buf[p]!;
          const l = buf[p + 1] ?? 0;
          if (p + 2 + l > end) return null;
          if (t === 1) chunk.cname = buf.toString('utf8', p + 2, p + 2 + l);
          p += 2 + l;
        }
        chunks.push(chunk);
        c = (Math.floor(p / 4) + 1) * 4; // past the null item, to the next 32-bit boundary
      }
      out.push({ type: 'sdes', chunks });
    } else if (pt === PT_BYE) {
      const ssrcs: number[] = [];
      for (let i = 0; i < count && at + 4 + i * 4 + 4 <= end; i++) ssrcs.push(buf.readUInt32BE(at + 4 + i * 4));
      out.push({ type: 'bye', ssrcs });
    } else {
      out.push({ type: 'other', pt });
    }
    at = end;
  }
  return out;
}

export interface RtcpMetrics {
  rtcpSent: number;
  rtcpReceived: number;
  /** Last round-trip time from the far end's report blocks about us (ms), null when none. */
  rttMs: number | null;
  /** What the far end reported about our stream: worst fraction lost (0..1) and last jitter (ms). */
  remoteFractionLostMax: number | null;
  remoteJitterMs: number | null;
  /** Interarrival jitter of the far end's stream as we measured it (ms). */
  rxJitterMs: number;
}

export interface RtcpOptions {
  socket: dgram.Socket;
  remoteHost: string;
  remotePort: number;
  /** What our RTP sender has sent (possibly from another thread). */
  sender: SenderInfo;
  reception: ReceptionStats;
  intervalMs?: number;
  clockRate?: number;
  /** A valid RTCP packet came from the far end (liveness). */
  onValid?: () => void;
  /** SRTCP (RFC 3711 §3.4) on an SRTP leg: each compound packet protected out, checked and decrypted in. */
  srtcp?: { protect: (rtcp: Buffer) => Buffer; unprotect: (srtcp: Buffer) => Buffer | null };
}

/** The RTCP side of one call: periodic SR/RR + SDES, BYE at the end, the far end's reports read. */
export class RtcpSession {
  private timer: NodeJS.Timeout | null = null;
  private readonly cname = `${randomBytes(6).toString('hex')}@sovcomms`;
  private sent = 0;
  private received = 0;
  private rttMs: number | null = null;
  private remoteFractionLostMax: number | null = null;
  private remoteJitterMs: number | null = null;
  private stopped = false;

  constructor(private readonly o: RtcpOptions) {
    o.socket.on('message', (buf, rinfo) => {
      if (rinfo.address !== o.remoteHost) return;
      const plain = o.srtcp ? o.srtcp.unprotect(buf) : buf;
      if (plain) this.onPacket(plain);
    });
  }

  /** §6.3: the first report after half an interval, then every interval randomised by 0.5-1.5. */
  start(): void {
    const interval = this.o.intervalMs ?? RTCP_INTERVAL_MS;
    const next = (base: number) => {
      this.timer = setTimeout(
        () => {
          this.send(false);
          next(interval);
        },
        base * (0.5 + Math.random()),
      );
      this.timer.unref?.();
    };
    next(interval / 2);
  }

  private compound(bye: boolean): Buffer | null {
    const info = this.o.sender.read();
    if (!info) return null; // no SSRC of ours yet: nothing sent, nothing to say
    const now = monoMs();
    const block = this.o.reception.block(now);
    const ntp = ntpOf(Date.now());
    // The RTP timestamp of this same instant, extrapolated from the last packet sent (§6.4.1).
    const rate = this.o.clockRate ?? 8000;
    const sender: SenderSection = {
      ntpSec: ntp.sec,
      ntpFrac: ntp.frac,
      rtpTs: (info.rtpTs + Math.round(((now - info.atMs) * rate) / 1000)) >>> 0,
      packets: info.packets,
      octets: info.octets,
    };
    const parts = [buildReport(info.ssrc, sender, block), buildSdes(info.ssrc, this.cname)];
    if (bye) parts.push(buildBye(info.ssrc));
    return Buffer.concat(parts);
  }

  private send(bye: boolean): void {
    const plain = this.compound(bye);
    if (!plain) return;
    try {
      const pkt = this.o.srtcp ? this.o.srtcp.protect(plain) : plain;
      this.o.socket.send(pkt, this.o.remotePort, this.o.remoteHost);
      this.sent++;
    } catch {
      // socket closed meanwhile
    }
  }

  private onPacket(buf: Buffer): void {
    const packets = parseRtcp(buf);
    if (!packets) return;
    this.received++;
    this.o.onValid?.();
    const ours = this.o.sender.read()?.ssrc;
    const nowMs = monoMs();
    for (const p of packets) {
      if (p.type === 'sr') {
        // Remembered for our next report's LSR/DLSR (§6.4.1).
        this.o.reception.lsr = ((p.sender.ntpSec & 0xffff) * 65536 + (p.sender.ntpFrac >>> 16)) >>> 0;
        this.o.reception.lsrAtMs = nowMs;
      }
      if (p.type !== 'sr' && p.type !== 'rr') continue;
      for (const b of p.blocks) {
        if (ours === undefined || b.ssrc !== ours) continue;
        const frac = b.fractionLost / 256;
        this.remoteFractionLostMax = Math.max(this.remoteFractionLostMax ?? 0, frac);
        this.remoteJitterMs = (b.jitter / (this.o.clockRate ?? 8000)) * 1000;
        if (b.lsr !== 0) {
          // RTT = A - LSR - DLSR in 1/65536 s, A = middle 32 bits of now (§6.4.1, Figure 2).
          const ntp = ntpOf(Date.now());
          const a = ((ntp.sec & 0xffff) * 65536 + (ntp.frac >>> 16)) >>> 0;
          const rtt = (a - b.lsr - b.dlsr) >>> 0;
          if (rtt < 0x80000000) this.rttMs = (rtt / 65536) * 1000;
        }
      }
    }
  }

  metrics(): RtcpMetrics {
    return {
      rtcpSent: this.sent,
      rtcpReceived: this.received,
      rttMs: this.rttMs,
      remoteFractionLostMax: this.remoteFractionLostMax,
      remoteJitterMs: this.remoteJitterMs,
      rxJitterMs: (this.o.reception.jitter / (this.o.clockRate ?? 8000)) * 1000,
    };
  }

  retarget(host: string, port: number): void {
    this.o.remoteHost = host;
    this.o.remotePort = port;
  }

  /** Sends a last report with BYE (§6.6) and stops; the caller closes the socket. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.send(true);
  }
}
