/**
 * RTP reception quality per trunk in `GET /metrics`: the bridge adds up each ended call's receive
 * statistics under its trunk (bridge/trunk-media.ts) and reports them as `media` on the trunk's
 * entry of its `GET /health` (CONTROL-API.md); this module keeps the last answer and turns it into
 * the `sovcomms_trunk_rtp_*` families.
 * A trunk is labelled by a short hash of the bridge's `<tenant>.<trunk>` id ({@link trunkRef}):
 * no label names a tenant or carries a name a tenant chose, yet two tenants' trunks of the same
 * id stay apart.
 */
import crypto from 'node:crypto';
import type { MetricFamily } from '../../server/sdk.ts';
import type { HealthAnswer, TrunkMedia } from './control.ts';

/**
 * The label of a bridge trunk id `<tenant>.<trunk>`: the first 12 hex digits of its SHA-256.
 * Trunk ids are chosen by each tenant (a carrier's or a customer's name), so neither they nor the
 * tenant go into a label; the operator finds a trunk's reference with
 * `printf %s "<tenant id>.<trunk id>" | sha256sum | cut -c1-12` (README "Operations").
 */
export function trunkRef(bridgeTrunkId: string): string {
  return crypto.createHash('sha256').update(bridgeTrunkId).digest('hex').slice(0, 12);
}

const LABELS = ['trunk_ref'] as const;

/** The `GET /metrics` families of the trunks in the last /health answer (none before the first). */
export function trunkMediaFamilies(health: HealthAnswer | null): MetricFamily[] {
  const trunks = (health?.trunks ?? []).flatMap((t) => (t.media ? [{ labels: { trunk_ref: trunkRef(t.id) }, m: t.media }] : []));
  const family = (name: string, help: string, type: MetricFamily['type'], value: (m: TrunkMedia) => number): MetricFamily => ({
    name,
    help,
    type,
    labelNames: LABELS,
    samples: trunks.map((t) => ({ labels: t.labels, value: value(t.m) })),
  });
  return [
    family(
      'trunk_rtp_packets_received_total',
      'RTP packets received from the far end on a trunk (ended calls, since the bridge started)',
      'counter',
      (m) => m.packetsReceived,
    ),
    family(
      'trunk_rtp_packets_lost_total',
      'RTP packets lost from the far end on a trunk (sequence gaps, RFC 3550 A.3; ended calls)',
      'counter',
      (m) => m.packetsLost,
    ),
    family('trunk_rtp_calls_measured_total', 'Ended calls on a trunk whose received RTP is counted in the trunk_rtp series', 'counter', (m) => m.calls),
    family(
      'trunk_rtp_jitter_seconds',
      "Interarrival jitter of the far end's RTP (RFC 3550 A.8) at the end of the trunk's last call",
      'gauge',
      (m) => m.jitterMs / 1000,
    ),
    family(
      'trunk_rtp_jitter_max_seconds',
      'Highest end-of-call interarrival jitter on the trunk since the bridge started',
      'gauge',
      (m) => m.jitterMaxMs / 1000,
    ),
  ];
}

/**
 * Keeps the bridge's last `GET /health` for the metrics hook, which is synchronous: a poll every
 * `pollMs` while the bridge is ready (loopback, a few hundred bytes per trunk).
 */
export class TrunkMediaWatch {
  private last: HealthAnswer | null = null;
  private timer: NodeJS.Timeout | null = null;
  private busy = false;

  constructor(private readonly bridge: { readonly state: string; health(): Promise<HealthAnswer> }) {}

  start(pollMs: number): void {
    this.timer = setInterval(() => void this.poll(), pollMs);
    this.timer.unref();
  }

  async poll(): Promise<void> {
    if (this.busy) return;
    if (this.bridge.state !== 'ready') {
      this.last = null;
      return;
    }
    this.busy = true;
    try {
      this.last = await this.bridge.health();
    } catch {
      // No answer this time: keep the last figures (counters must not drop to nothing and back).
    } finally {
      this.busy = false;
    }
  }

  families(): MetricFamily[] {
    return trunkMediaFamilies(this.last);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
