/**
 * The WebRTC thread's gaps: what may wait until the rooms' frames of this 20 ms have left.
 *
 * Every room of a thread sends on the thread's one 20 ms grid (leg.ts `nextGridPoint`), so the
 * pacer sends them in one burst (about 1 ms for 25 rooms) and the next frames are due ~19 ms
 * later. Two things that stop the thread for milliseconds are moved into that gap, where they
 * delay no frame:
 *
 * - **Young-generation collections.** V8 scavenges when the new space is full, which is as likely
 *   as not while frames are due; a scavenge while rooms join copies their new connections and
 *   stops the thread for 3-14 ms. After a burst, when the new space is at least a quarter full,
 *   the thread collects at once (`gc`, exposed by --expose-gc in bridge/node-flags.ts), so the
 *   new space rarely fills between bursts (at half full, a quarter of the collections were still
 *   V8's own, and one run in four went over 5 ms). Without `gc`, V8 decides alone.
 * - **A join's offer.** werift's answer (its peer connection, the remote description, the ICE
 *   gathering) starts in a gap. An offer that finds no gap within 40 ms (the rooms just stopped
 *   sending) runs anyway. What a join costs later (its DTLS handshake, as the visitor's packets
 *   arrive) still falls where it falls: that is most of what is left of the jitter.
 *
 * Measured on the 2-core VM (rooms benchmark, 50 rooms joining at 20/s, 2026-11-27): worst-room
 * send-jitter p99 3.5-4.1 ms in six runs, no frame late, against 4.1-12.8 ms and up to 15 late
 * frames with a grid per room and the collections and offers wherever they fell.
 */
import v8 from 'node:v8';

/**
 * Only a gap at least this long takes a collection (a scavenge here takes up to ~14 ms) or starts
 * an offer (its first synchronous part can take ~10 ms).
 */
const MIN_GAP_NS = 12_000_000n;
/** An offer waits for a gap at most this long. */
const OFFER_WAIT_MS = 40;

export interface GapDeps {
  /** Nanoseconds until the next frame is due; null while nothing sends. */
  dueIn(): bigint | null;
  /** Whether the new space is at least a quarter full. */
  youngQuarterFull(): boolean;
  /** A synchronous young-generation collection; null when V8 does not expose one. */
  collect: (() => void) | null;
  now?: () => number;
}

type ExposedGc = (o: { type: 'minor'; execution: 'sync' }) => void;

/** The thread's own V8 and pacer. */
export function threadGapDeps(dueIn: () => bigint | null): GapDeps {
  const gc = (globalThis as { gc?: ExposedGc }).gc;
  return {
    dueIn,
    youngQuarterFull: () => {
      const ns = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
      return !!ns && ns.space_used_size * 4 >= ns.space_used_size + ns.space_available_size;
    },
    collect: typeof gc === 'function' ? () => gc({ type: 'minor', execution: 'sync' }) : null,
  };
}

export class Gaps {
  private readonly waiting: { fn: () => void; since: number }[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** Collections done in a gap (for /stats). */
  collections = 0;
  private readonly now: () => number;

  constructor(private readonly d: GapDeps) {
    this.now = d.now ?? Date.now;
  }

  /** Offers waiting for a gap. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Runs `fn` now when no frame is due (nothing sends), else in the next gap. */
  run(fn: () => void): void {
    if (this.d.dueIn() === null && this.waiting.length === 0) {
      fn();
      return;
    }
    this.waiting.push({ fn, since: this.now() });
    this.timer ??= setTimeout(() => this.overdue(), OFFER_WAIT_MS);
  }

  /** After a burst of the pacer: a collection, then one waiting offer, if the gap allows. */
  afterRun(): void {
    const usable = (gap: bigint | null) => gap === null || gap >= MIN_GAP_NS;
    if (!usable(this.d.dueIn())) return;
    if (this.d.collect && this.d.youngQuarterFull()) {
      this.d.collect();
      this.collections++;
    }
    if (this.waiting.length && usable(this.d.dueIn())) this.waiting.shift()!.fn();
  }

  /** Offers that found no gap in OFFER_WAIT_MS run now (the rooms stopped sending, or never pause). */
  private overdue(): void {
    this.timer = null;
    const limit = this.now() - OFFER_WAIT_MS;
    while (this.waiting.length && this.waiting[0]!.since <= limit) this.waiting.shift()!.fn();
    if (this.waiting.length) this.timer = setTimeout(() => this.overdue(), Math.max(1, this.waiting[0]!.since + OFFER_WAIT_MS - this.now()));
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.waiting.length = 0;
  }
}
