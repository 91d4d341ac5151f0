/**
 * Garbage-collection pauses of the thread it runs in, as the rooms' pacer feels them: a
 * young-generation collection (scavenge) stops the thread's event loop, and any frame due
 * meanwhile leaves late. Counted from V8's GC entries (perf_hooks), cumulative since start.
 */
import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';

export interface GcStats {
  /** Young-generation collections and their pause time. */
  scavenges: number;
  scavengeMs: number;
  scavengeMaxMs: number;
  /** Scavenges that paused the thread 5 ms or more (a frame interval off by 5 ms or more). */
  scavengesOver5Ms: number;
  /** Of those, the ones the WebRTC thread started itself in a gap between frames (gaps.ts). */
  scavengesInGaps: number;
  /** Full (mark-compact) and incremental collections' pauses. */
  major: number;
  majorMs: number;
  majorMaxMs: number;
}

export function watchGc(): { stats: GcStats; stop: () => void } {
  const stats: GcStats = { scavenges: 0, scavengeMs: 0, scavengeMaxMs: 0, scavengesOver5Ms: 0, scavengesInGaps: 0, major: 0, majorMs: 0, majorMaxMs: 0 };
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      // perf_hooks puts the GC kind in `detail` (Node >= 16); the typings leave it out.
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      const ms = e.duration;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        stats.scavenges++;
        stats.scavengeMs += ms;
        if (ms > stats.scavengeMaxMs) stats.scavengeMaxMs = ms;
        if (ms >= 5) stats.scavengesOver5Ms++;
      } else {
        stats.major++;
        stats.majorMs += ms;
        if (ms > stats.majorMaxMs) stats.majorMaxMs = ms;
      }
    }
  });
  obs.observe({ entryTypes: ['gc'] });
  return { stats, stop: () => obs.disconnect() };
}
