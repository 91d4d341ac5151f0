/**
 * RTP (RFC 3550 §5.1) packets, a small jitter buffer and RFC 4733 telephone-event decoding.
 * Pure: no sockets here.
 */

export interface RtpPacket {
  version: number;
  padding: boolean;
  marker: boolean;
  payloadType: number;
  sequence: number;
  timestamp: number;
  ssrc: number;
  payload: Buffer;
}

export function parseRtp(buf: Buffer): RtpPacket | null {
  if (buf.length < 12) return null;
  const b0 = buf[0];
  const version = b0 >> 6;
  if (version !== 2) return null;
  const padding = (b0 & 0x20) !== 0;
  const extension = (b0 & 0x10) !== 0;
  const cc = b0 & 0x0f;
  const b1 = buf[1];
  const payloadType = b1 & 0x7f;
  // RFC 5761 §4: PT 72-76 would be RTCP on a muxed port; we do not mux, so ignore them.
  if (payloadType >= 72 && payloadType <= 76) return null;
  let off = 12 + cc * 4;
  if (buf.length < off) return null;
  if (extension) {
    if (buf.length < off + 4) return null;
    off += 4 + buf.readUInt16BE(off + 2) * 4;
    if (buf.length < off) return null;
  }
  let end = buf.length;
  if (padding) {
    const pad = buf[buf.length - 1];
    if (pad === 0 || off + pad > buf.length) return null;
    end -= pad;
  }
  return {
    version,
    padding,
    marker: (b1 & 0x80) !== 0,
    payloadType,
    sequence: buf.readUInt16BE(2),
    timestamp: buf.readUInt32BE(4),
    ssrc: buf.readUInt32BE(8),
    payload: buf.subarray(off, end),
  };
}

export function buildRtp(p: { marker: boolean; payloadType: number; sequence: number; timestamp: number; ssrc: number; payload: Uint8Array }): Buffer {
  const buf = Buffer.allocUnsafe(12 + p.payload.length);
  buf[0] = 0x80;
  buf[1] = (p.marker ? 0x80 : 0) | (p.payloadType & 0x7f);
  buf.writeUInt16BE(p.sequence & 0xffff, 2);
  buf.writeUInt32BE(p.timestamp >>> 0, 4);
  buf.writeUInt32BE(p.ssrc >>> 0, 8);
  buf.set(p.payload, 12);
  return buf;
}

/** Signed distance a-b in 16-bit sequence space (RFC 3550 App. A.1). */
export function seqDiff(a: number, b: number): number {
  const d = (a - b) & 0xffff;
  return d >= 0x8000 ? d - 0x10000 : d;
}

/**
 * Fixed-delay jitter buffer: holds up to `depth` frames to reorder late packets, drops
 * duplicates and packets older than the playout point, and reports a gap as `null` (the
 * caller conceals it). Popped once per 20 ms.
 */
export class JitterBuffer {
  private readonly frames = new Map<number, Buffer>();
  private next: number | null = null;
  private primed = false;
  lost = 0;
  late = 0;
  received = 0;

  constructor(
    private readonly depth = 3,
    private readonly maxFrames = 50,
  ) {}

  push(seq: number, payload: Buffer): void {
    this.received++;
    if (this.next !== null && seqDiff(seq, this.next) < 0) {
      this.late++;
      return;
    }
    if (this.next === null) this.next = seq;
    if (this.frames.size >= this.maxFrames) {
      // Far end runs ahead of us (clock drift or burst): resynchronise on the newest packet.
      this.frames.clear();
      this.next = seq;
    }
    this.frames.set(seq, payload);
    if (this.frames.size >= this.depth) this.primed = true;
  }

  /** One frame, `null` for a gap, `undefined` when not primed or empty. */
  pop(): Buffer | null | undefined {
    if (!this.primed || this.next === null) return undefined;
    if (this.frames.size === 0) {
      this.primed = false; // talk spurt ended: rebuffer before playing again
      return undefined;
    }
    const f = this.frames.get(this.next);
    this.frames.delete(this.next);
    this.next = (this.next + 1) & 0xffff;
    if (f === undefined) {
      this.lost++;
      return null;
    }
    return f;
  }

  get size(): number {
    return this.frames.size;
  }
}

const DTMF_EVENTS = '0123456789*#ABCD';

/** RFC 4733 §2.3 telephone-event receiver: reports each digit once (at its first packet). */
export class DtmfReceiver {
  private lastTimestamp: number | null = null;

  onPacket(p: RtpPacket): string | null {
    if (p.payload.length < 4) return null;
    const event = p.payload[0];
    // §2.5.1.3: all packets of one event share the timestamp; retransmitted end packets too.
    if (p.timestamp === this.lastTimestamp) return null;
    this.lastTimestamp = p.timestamp;
    return DTMF_EVENTS[event] ?? null;
  }
}
