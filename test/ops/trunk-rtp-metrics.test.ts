import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../server/clock.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { startSipp, type SippRun } from '../support/sipp.ts';
import { GeminiLiveFake } from '../support/gemini-live-fake.ts';
import { adm, call, callEnded, j, until } from '../plugins/telephony/helpers.ts';

/**
 * RTP jitter and loss per trunk in GET /metrics: an outbound AI call through the embedded real
 * bridge to SIPp, which answers and plays G.711 A-law from a pcap; once the call ended, the
 * bridge's receive statistics of that call (RFC 3550 A.3 loss, A.8 jitter) are on the trunk's
 * /health entry and in the `sovcomms_trunk_rtp_*` series, labelled by a hash of the trunk's
 * bridge id alone (`trunk_ref`), never the tenant nor the name a tenant gave its trunk.
 */
const V1 = '/api.ashx/v1';
let s: TestServer;
let engine: GeminiLiveFake;
let sipp: SippRun;
const clock = new ManualClock(Date.parse('2026-05-04T09:00:00Z'));

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

beforeAll(async () => {
  // OPTIONS keepalives would confuse SIPp's fixed scenario.
  process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
  engine = new GeminiLiveFake({
    apiKey: 'AIza-rtp-metrics-key',
    script: [
      { say: 'Good morning, this is the practice.', audioMs: 1500 },
      { hear: 'Hello?', ms: 1500 },
      { say: 'Goodbye.', audioMs: 400 },
      { tool: 'end_call' },
    ],
  });
  await engine.start();
  const base = 38000 + 2 * Math.floor(Math.random() * 3000);
  s = await startTestServer({
    clock,
    overrides: {
      plugins: {
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${base}-${base + 99}`, readyTimeoutMs: 20_000, healthPollMs: 200 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
          ringTimeoutSec: 10,
        },
      },
    },
  });
  await until(async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.state === 'ready', 20_000, 'bridge ready');
}, 60_000);

afterAll(async () => {
  await s?.stop();
  await sipp?.stop();
  await engine?.stop();
  delete process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC;
});

describe('RTP jitter and loss per trunk in /metrics', () => {
  it('a SIPp call over a trunk: received, lost, jitter series for that trunk with plausible values, no tenant in a label', async () => {
    sipp = await startSipp({ scenario: 'answer-play-pcap', timeoutSec: 40 });
    const trunk = 'carrier1';
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
      id: trunk,
      name: 'SIPp',
      host: '127.0.0.1',
      port: sipp.port,
      transport: 'udp',
      codecs: ['PCMA'],
    });
    await until(
      async () =>
        ((await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health?.trunks ?? []).some(
          (t: { id: string }) => t.id === `${s.primary.id}.${trunk}`,
        ),
      5000,
      'trunk at the bridge',
    );
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: trunk });

    // Before any call on it: the trunk has no media figures, so no series.
    const before = parseProm(await (await s.fetch('/metrics', { key: s.adminKey })).text());
    expect(before.filter((x) => x.name.startsWith('sovcomms_trunk_rtp_'))).toEqual([]);

    const id = (await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: 'AIza-rtp-metrics-key', email: undefined }) }))).body
      .callId as string;
    const done = await callEnded(s, id, 30_000);
    expect(done.status).toBe('ended-success');

    const text = await until(
      async () => {
        const t = await (await s.fetch('/metrics', { key: s.adminKey })).text();
        return t.includes('sovcomms_trunk_rtp_packets_received_total{') ? t : null;
      },
      5000,
      'trunk RTP series',
    );
    // The reference an operator computes from the ids (README "Operations"), nothing else.
    const ref = crypto.createHash('sha256').update(`${s.primary.id}.${trunk}`).digest('hex').slice(0, 12);
    const samples = parseProm(text).filter((x) => x.name.startsWith('sovcomms_trunk_rtp_'));
    const of = (name: string) => {
      const x = samples.filter((y) => y.name === name);
      expect(x, name).toHaveLength(1);
      expect(x[0]!.labels).toEqual({ trunk_ref: ref });
      return x[0]!.value;
    };
    const received = of('sovcomms_trunk_rtp_packets_received_total');
    const lost = of('sovcomms_trunk_rtp_packets_lost_total');
    const jitter = of('sovcomms_trunk_rtp_jitter_seconds');
    // 20 ms packets for over two seconds of a call; loopback: hardly any loss, jitter of milliseconds.
    expect(received).toBeGreaterThan(50);
    expect(lost).toBeGreaterThanOrEqual(0);
    expect(lost / (received + lost)).toBeLessThan(0.05);
    expect(jitter).toBeGreaterThan(0);
    expect(jitter).toBeLessThan(0.1);
    expect(of('sovcomms_trunk_rtp_jitter_max_seconds')).toBeGreaterThanOrEqual(jitter);
    expect(of('sovcomms_trunk_rtp_calls_measured_total')).toBe(1);
    console.log(`trunk RTP after one SIPp call: ${received} packets received, ${lost} lost, jitter ${(jitter * 1000).toFixed(2)} ms`);
    // No label carries the tenant (its id, its host name), the trunk's own id or the far end's address.
    for (const x of samples) for (const v of Object.values(x.labels)) expect([s.primary.id, s.primary.host, trunk, '127.0.0.1']).not.toContain(v);
    expect(text).not.toContain(s.primary.id);
  }, 90_000);
});
