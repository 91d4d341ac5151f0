/**
 * Samples at one rate, queued as the arrays they came in (no copy on push) and taken out a frame
 * at a time, across chunk edges: the playback queue of a leg that sends from its own thread (an
 * RTP sender without a shared ring, a browser leg's G.711 or Opus frames).
 */
import { encoderOf, type Codec, type FrameEncoder } from './audio.ts';

export class PcmQueue {
  private chunks: Int16Array[] = [];
  private offset = 0;
  queued = 0;

  push(pcm: Int16Array): void {
    if (pcm.length === 0) return;
    this.chunks.push(pcm);
    this.queued += pcm.length;
  }

  flush(): void {
    this.chunks = [];
    this.offset = 0;
    this.queued = 0;
  }

  /** Length of the next run to take (at most `max`, never across a chunk edge; 0 when empty). */
  private run(max: number): number {
    const head = this.chunks[0];
    return head ? Math.min(max, head.length - this.offset) : 0;
  }

  /** The head chunk's next `count` samples were taken. */
  private advance(count: number): void {
    this.offset += count;
    this.queued -= count;
    if (this.offset >= this.chunks[0]!.length) {
      this.chunks.shift();
      this.offset = 0;
    }
  }

  /** Moves up to `n` samples into `out` from its start; returns how many (the rest is left as it was). */
  takeInto(out: Int16Array, n: number): number {
    let done = 0;
    for (let c = this.run(n); c > 0; c = this.run(n - done)) {
      out.set(this.chunks[0]!.subarray(this.offset, this.offset + c), done);
      this.advance(c);
      done += c;
    }
    return done;
  }

  /** Encodes up to `n` queued samples into `out` from `at` (a law: its G.711 table); returns the octets written. */
  encodeInto(e: FrameEncoder | Codec, out: Uint8Array, at: number, n: number): number {
    const enc = encoderOf(e);
    let octets = 0;
    for (let c = this.run(n), taken = 0; c > 0; c = this.run(n - taken)) {
      octets += enc(this.chunks[0]!, this.offset, c, out, at + octets);
      this.advance(c);
      taken += c;
    }
    return octets;
  }
}
