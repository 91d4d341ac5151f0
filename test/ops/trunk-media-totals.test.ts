import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TrunkMediaTotals } from '../../plugins/telephony/bridge/trunk-media.ts';
import { trunkMediaFamilies, trunkRef } from '../../plugins/telephony/metrics-trunk-media.ts';
import { HealthAnswerSchema } from '../../plugins/telephony/control.ts';

/**
 * The two pure halves of the per-trunk RTP series: the bridge's totals over ended calls (outbound
 * and inbound alike) and the core's families from a /health answer.
 */
describe('per-trunk RTP totals (bridge) and their metric families (core)', () => {
  it('adds calls up per trunk; the last call sets the jitter, the worst stays; calls without media and without a trunk count nowhere', () => {
    const t = new TrunkMediaTotals();
    t.record('ten1.a', { packetsReceived: 100, rxLost: 2, rxJitterMs: 4 });
    t.record('ten1.a', { packetsReceived: 50, rxLost: 0, rxJitterMs: 1.5 });
    t.record('ten1.a', { packetsReceived: 0, rxLost: 0, rxJitterMs: 0 }); // never answered: no media
    t.record(null, { packetsReceived: 10, rxLost: 0, rxJitterMs: 1 });
    t.record('ten2.a', null);
    expect(t.get('ten1.a')).toEqual({ calls: 2, packetsReceived: 150, packetsLost: 2, jitterMs: 1.5, jitterMaxMs: 4 });
    expect(t.get('ten2.a')).toBeUndefined();
    t.record('ten2.a', { packetsReceived: 5, rxLost: 1, rxJitterMs: 9 });
    t.keepOnly(['ten2.a']);
    expect(t.get('ten1.a')).toBeUndefined();
    expect(t.get('ten2.a')?.calls).toBe(1);
  });

  it('families: one sample per trunk with figures, labelled by the hash of the bridge id only; two tenants’ trunk "a" stay apart', () => {
    const health = HealthAnswerSchema.parse({
      status: 'ok',
      trunks: [
        { id: 'ten1.a', registered: null, lastError: null, media: { calls: 2, packetsReceived: 150, packetsLost: 2, jitterMs: 1.5, jitterMaxMs: 4 } },
        { id: 'ten2.a', registered: true, lastError: null, media: { calls: 1, packetsReceived: 5, packetsLost: 1, jitterMs: 9, jitterMaxMs: 9 } },
        { id: 'ten2.b', registered: true, lastError: null },
      ],
    });
    const f = trunkMediaFamilies(health);
    const byName = Object.fromEntries(f.map((x) => [x.name, x]));
    expect(Object.keys(byName).sort()).toEqual([
      'trunk_rtp_calls_measured_total',
      'trunk_rtp_jitter_max_seconds',
      'trunk_rtp_jitter_seconds',
      'trunk_rtp_packets_lost_total',
      'trunk_rtp_packets_received_total',
    ]);
    const ref1 = crypto.createHash('sha256').update('ten1.a').digest('hex').slice(0, 12);
    expect(trunkRef('ten1.a')).toBe(ref1);
    expect(trunkRef('ten2.a')).not.toBe(ref1);
    expect(byName.trunk_rtp_packets_lost_total!.samples).toEqual([
      { labels: { trunk_ref: ref1 }, value: 2 },
      { labels: { trunk_ref: trunkRef('ten2.a') }, value: 1 },
    ]);
    expect(byName.trunk_rtp_jitter_seconds!.samples.map((s) => s.value)).toEqual([0.0015, 0.009]);
    for (const x of f) expect(x.labelNames).toEqual(['trunk_ref']);
    expect(trunkMediaFamilies(null).every((x) => x.samples.length === 0)).toBe(true);
  });

  it('an older bridge without media on its trunks still parses (the field is optional)', () => {
    const h = HealthAnswerSchema.parse({ status: 'ok', trunks: [{ id: 'ten1.a', registered: null, lastError: null }] });
    expect(trunkMediaFamilies(h).every((x) => x.samples.length === 0)).toBe(true);
  });
});
