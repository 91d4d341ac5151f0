/**
 * RTP reception per trunk (RFC 3550 §6.4.1 and A.8: the interarrival jitter estimate and the
 * sequence-gap count of each call's far-end stream, as media/rtcp.ts ReceptionStats measures
 * them), added up over the calls that ended on each trunk. Reported as `media` on the trunk's
 * entry of `GET /health` (CONTROL-API.md), which the core turns into `GET /metrics` series.
 */
import type { TrunkMedia } from '../control.ts';

/** What the bridge keeps of one ended call's receive side (media/leg.ts LegMetrics). */
export interface CallReception {
  packetsReceived: number;
  rxLost: number;
  /** RFC 3550 A.8 interarrival jitter of the far end's stream at the call's end (ms). */
  rxJitterMs: number;
}

/** Running totals per bridge trunk id, since the bridge started (counters reset with it, as Prometheus expects). */
export class TrunkMediaTotals {
  private readonly byTrunk = new Map<string, TrunkMedia>();

  /** One ended call on `trunkId` (no trunk, or a call that never had media: nothing to add). */
  record(trunkId: string | null | undefined, m: CallReception | null | undefined): void {
    if (!trunkId || !m || m.packetsReceived + m.rxLost === 0) return;
    const t = this.byTrunk.get(trunkId) ?? { calls: 0, packetsReceived: 0, packetsLost: 0, jitterMs: 0, jitterMaxMs: 0 };
    t.calls++;
    t.packetsReceived += m.packetsReceived;
    t.packetsLost += m.rxLost;
    t.jitterMs = m.rxJitterMs;
    t.jitterMaxMs = Math.max(t.jitterMaxMs, m.rxJitterMs);
    this.byTrunk.set(trunkId, t);
  }

  get(trunkId: string): TrunkMedia | undefined {
    const t = this.byTrunk.get(trunkId);
    return t ? { ...t } : undefined;
  }

  /** Drops the totals of trunks no longer configured (a removed trunk's series end with it). */
  keepOnly(ids: Iterable<string>): void {
    const keep = new Set(ids);
    for (const id of this.byTrunk.keys()) if (!keep.has(id)) this.byTrunk.delete(id);
  }
}
