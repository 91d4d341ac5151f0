/**
 * A call's playback queue as a single-producer single-consumer ring of samples at the leg's rate
 * (8 kHz G.711, 16 kHz G.722) in a
 * SharedArrayBuffer: the call logic (main thread) writes the AI's audio, the sending media thread
 * reads one frame per 20 ms straight into the RTP packet. No message and no allocation per chunk
 * on the media thread, and the call logic reads the queue level directly.
 *
 * Layout: an Int32 header [written, read, flushedAt] of running sample counts (they wrap at 2^32,
 * about six days of audio; differences are taken modulo 2^32), then `capacity` Int16 samples.
 * Only the writer stores `written` and `flushedAt`, only the reader stores `read`.
 */
import { encoderOf, type Codec, type FrameEncoder } from './audio.ts';

const WRITTEN = 0;
const READ = 1;
const FLUSHED_AT = 2;
const HEADER_BYTES = 16;

/** Default capacity: 2^15 samples, 4.1 s at 8 kHz (64 KiB a call); the writer holds any excess. */
export const RING_SAMPLES = 1 << 15;

/** A ring of about 4 s at `rate` (2^15 samples at 8 kHz, 2^16 at 16 kHz). */
export function ringFor(rate: 8000 | 16000): SharedArrayBuffer {
  return createRing(rate === 16000 ? 2 * RING_SAMPLES : RING_SAMPLES);
}

export function createRing(capacity = RING_SAMPLES): SharedArrayBuffer {
  if (capacity & (capacity - 1)) throw new Error('ring capacity must be a power of two');
  return new SharedArrayBuffer(HEADER_BYTES + capacity * 2);
}

abstract class RingSide {
  protected readonly head: Int32Array;
  protected readonly data: Int16Array;
  protected readonly mask: number;
  constructor(sab: SharedArrayBuffer) {
    this.head = new Int32Array(sab, 0, 3);
    this.data = new Int16Array(sab, HEADER_BYTES);
    this.mask = this.data.length - 1;
  }
  /** Samples written and not yet read (or flushed). */
  protected inRing(): number {
    return (Atomics.load(this.head, WRITTEN) - Atomics.load(this.head, READ)) >>> 0;
  }
}

/** The call logic's side. */
export class RingWriter extends RingSide {
  /** Audio beyond the ring's capacity, moved in by pump() as the reader frees space. */
  private overflow: Int16Array[] = [];
  private overflowOffset = 0;
  private overflowSamples = 0;

  /** Queues `pcm` (copied); returns true when part of it waits outside the ring (call pump()). */
  write(pcm: Int16Array): boolean {
    if (this.overflowSamples === 0) {
      const n = this.copyIn(pcm, 0);
      if (n === pcm.length) return false;
      this.overflow.push(pcm);
      this.overflowOffset = n;
      this.overflowSamples = pcm.length - n;
      return true;
    }
    this.overflow.push(pcm);
    this.overflowSamples += pcm.length;
    return true;
  }

  /**
   * Copies what fits and drops the rest (no hold-back): for relaying live audio between two
   * calls, where audio 4 s late is worse than none. `pcm` may be reused by the caller afterwards.
   */
  writeOrDrop(pcm: Int16Array): number {
    return this.copyIn(pcm, 0);
  }

  /** Moves held audio into the ring; returns true while some is still held. */
  pump(): boolean {
    while (this.overflow.length) {
      const head = this.overflow[0];
      const n = this.copyIn(head, this.overflowOffset);
      this.overflowOffset += n;
      this.overflowSamples -= n;
      if (this.overflowOffset < head.length) return true;
      this.overflow.shift();
      this.overflowOffset = 0;
    }
    return false;
  }

  private copyIn(pcm: Int16Array, from: number): number {
    const free = this.data.length - this.inRing();
    const n = Math.min(free, pcm.length - from);
    if (n <= 0) return 0;
    const w = Atomics.load(this.head, WRITTEN) >>> 0;
    const at = w & this.mask;
    const first = Math.min(n, this.data.length - at);
    this.data.set(pcm.subarray(from, from + first), at);
    if (n > first) this.data.set(pcm.subarray(from + first, from + n), 0);
    Atomics.store(this.head, WRITTEN, (w + n) | 0); // publishes the samples (seq-cst store)
    return n;
  }

  /** Barge-in: everything written so far is dropped (the reader skips to this point). */
  flush(): void {
    this.overflow = [];
    this.overflowOffset = 0;
    this.overflowSamples = 0;
    Atomics.store(this.head, FLUSHED_AT, Atomics.load(this.head, WRITTEN));
  }

  /** Samples queued: in the ring (as the reader last reported) plus held back. */
  get queued(): number {
    const flushed = (Atomics.load(this.head, FLUSHED_AT) - Atomics.load(this.head, READ)) | 0;
    return (flushed > 0 ? this.inRing() - flushed : this.inRing()) + this.overflowSamples;
  }
}

/** The sending media thread's side. */
export class RingReader extends RingSide {
  /**
   * Applies a pending flush: the read point jumps to where the writer flushed. Compared on every
   * read, not remembered: a flush may come before this reader exists (audio queued and flushed
   * before the media thread took the call up). Distances are taken modulo 2^32 and stay far
   * below 2^31 (the bridge caps a call at 24 h, 6.9e8 samples).
   */
  private catchUp(): void {
    const f = Atomics.load(this.head, FLUSHED_AT);
    if (((f - Atomics.load(this.head, READ)) | 0) > 0) Atomics.store(this.head, READ, f);
  }

  get queued(): number {
    this.catchUp();
    return this.inRing();
  }

  /**
   * Encodes up to `n` queued samples into `out` at `at` and returns the octets written (0 when the
   * ring is empty).
   */
  encodeInto(e: FrameEncoder | Codec, out: Uint8Array, at: number, n: number): number {
    const enc = encoderOf(e);
    this.catchUp();
    const take = Math.min(n, this.inRing());
    if (take === 0) return 0;
    const r = Atomics.load(this.head, READ) >>> 0;
    const from = r & this.mask;
    const first = Math.min(take, this.data.length - from);
    let octets = enc(this.data, from, first, out, at);
    if (take > first) octets += enc(this.data, 0, take - first, out, at + octets);
    Atomics.store(this.head, READ, (r + take) | 0); // frees the space for the writer
    return octets;
  }
}
