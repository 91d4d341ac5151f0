import { afterEach, describe, expect, it, vi } from 'vitest';
import { Gaps, threadGapDeps, type GapDeps } from '../../../plugins/telephony/bridge/webrtc/gaps.ts';
import { nextGridPoint } from '../../../plugins/telephony/bridge/webrtc/leg.ts';

const MS = 1_000_000n;

/** A pacer whose next frame is `due` ns away, a new space that is `full` or not. */
function deps(o: { due: bigint | null; full?: boolean; gc?: boolean }): GapDeps & { state: typeof o; collected: number } {
  const d = {
    state: o,
    collected: 0,
    dueIn: () => d.state.due,
    youngQuarterFull: () => d.state.full ?? false,
    collect: null as (() => void) | null,
  };
  if (o.gc !== false)
    d.collect = () => {
      d.collected++;
      d.state.due = d.state.due === null ? null : d.state.due - 5n * MS; // a collection takes 5 ms
    };
  return d;
}

describe('WebRTC thread gaps (gaps.ts)', () => {
  afterEach(() => vi.useRealTimers());

  it('runs an offer at once while nothing sends', () => {
    const g = new Gaps(deps({ due: null }));
    const ran: number[] = [];
    g.run(() => ran.push(1));
    expect(ran).toEqual([1]);
  });

  it('holds an offer while frames are due, and starts it in the next gap of 12 ms or more', () => {
    const d = deps({ due: 2n * MS });
    const g = new Gaps(d);
    const ran: number[] = [];
    g.run(() => ran.push(1));
    g.run(() => ran.push(2));
    expect(ran).toEqual([]);
    g.afterRun(); // a run that left the next frame 2 ms away: no gap
    expect(ran).toEqual([]);
    d.state.due = 19n * MS;
    g.afterRun(); // one offer per gap
    expect(ran).toEqual([1]);
    g.afterRun();
    expect(ran).toEqual([1, 2]);
    expect(g.waitingCount).toBe(0);
    g.stop();
  });

  it('collects the young generation in a gap of 12 ms or more when the new space is a quarter full, then starts an offer if 12 ms remain', () => {
    const d = deps({ due: 19n * MS, full: true });
    const g = new Gaps(d);
    const ran: number[] = [];
    g.afterRun();
    expect(d.collected).toBe(1);
    expect(g.collections).toBe(1);
    d.state.due = 11n * MS; // too short to collect in
    g.afterRun();
    expect(d.collected).toBe(1);
    d.state.due = 18n * MS; // collecting (5 ms) leaves 13 ms: the offer starts
    g.run(() => ran.push(1));
    g.afterRun();
    expect(d.collected).toBe(2);
    expect(ran).toEqual([1]);
    d.state.due = 15n * MS; // collecting leaves 10 ms: the offer waits
    g.run(() => ran.push(2));
    g.afterRun();
    expect(d.collected).toBe(3);
    expect(ran).toEqual([1]);
    g.stop();
  });

  it('never collects when the new space is not a quarter full, nor without an exposed gc', () => {
    const a = deps({ due: 19n * MS, full: false });
    new Gaps(a).afterRun();
    expect(a.collected).toBe(0);
    const b = deps({ due: 19n * MS, full: true, gc: false });
    const g = new Gaps(b);
    g.afterRun();
    expect(g.collections).toBe(0);
  });

  it('an offer that finds no gap in 40 ms runs anyway (the rooms stopped sending, or never pause)', async () => {
    vi.useFakeTimers();
    const d = deps({ due: 1n * MS });
    const g = new Gaps({ ...d, now: () => Date.now() });
    const ran: number[] = [];
    g.run(() => ran.push(1));
    await vi.advanceTimersByTimeAsync(39);
    expect(ran).toEqual([]);
    await vi.advanceTimersByTimeAsync(2);
    expect(ran).toEqual([1]);
  });

  it("reads this thread's V8: the new space's fill, and gc only when exposed", () => {
    const d = threadGapDeps(() => null);
    expect(typeof d.youngQuarterFull()).toBe('boolean');
    expect(d.collect === null).toBe(typeof (globalThis as { gc?: unknown }).gc !== 'function');
  });
});

describe("a thread's 20 ms grid", () => {
  it('puts every room on the first room’s grid: the next point at or after now', () => {
    // The grid is the thread's (set by its first room: here this call, or an earlier test's
    // room when test files share a process): `base` is its next point from now.
    const now = process.hrtime.bigint();
    const base = nextGridPoint(now);
    expect(base >= now && base - now < 20n * MS).toBe(true);
    expect(nextGridPoint(base)).toBe(base);
    expect(nextGridPoint(base + 1n)).toBe(base + 20n * MS);
    expect(nextGridPoint(base + 20n * MS)).toBe(base + 20n * MS);
    expect(nextGridPoint(base + 47n * MS)).toBe(base + 60n * MS);
    expect(nextGridPoint(base - 25n * MS)).toBe(base - 20n * MS);
  });
});
