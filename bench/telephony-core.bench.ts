/**
 * The appliance side of outbound AI calls (issue 4, core half): the real appliance in this
 * process with the telephony plugin pointed at a loopback bridge that speaks CONTROL-API.md
 * (test/support/fake-bridge.ts), so only the core's own work is measured.
 *  - POST /api.ashx/v1/calls → 200 latency (validation, whitelist, sealed key, insert + dial job,
 *    route pick, POST /calls to the bridge), sequential. Peer: the bridge hop alone (the same
 *    PlaceCall POSTed straight to the bridge); the ratio is the appliance's total over the hop.
 *  - Bridge events applied per second (answered + ended with a 3-turn transcript: transcript file,
 *    state change, five events and a mail job per call), 8 callbacks in flight.
 * Knobs (env): TELEPHONY_CORE_CALLS (300).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Appliance } from '../server/app.ts';
import { signAdminHmac } from '../server/auth.ts';
import { FakeBridge } from '../test/support/fake-bridge.ts';
import { httpFetch } from '../test/support/server.ts';
import type { BenchResult } from './lib/contract.ts';

const N = Number(process.env.TELEPHONY_CORE_CALLS ?? 300);
const TOKEN = 'bench-control-token-0123456789abcdef';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

export default async function run(): Promise<BenchResult[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-telbench-'));
  const fake = new FakeBridge(TOKEN, '');
  await fake.start();
  const a = await Appliance.create({
    dataDir,
    env: {},
    overrides: {
      http: { port: 0, host: '127.0.0.1' },
      log: { level: 'silent' },
      rateLimit: { publicPerMinute: 1e6, authenticatedPerMinute: 1e6, sensitivePerMinute: 1e6 },
      plugins: { telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN } } },
    },
  });
  const { url, port } = await a.start();
  fake.callbackUrl = `${url}/internal/bridge/events`;
  try {
    const core = a.core;
    const tenant = core.tenants.primary()!;
    const key = core.auth.createApiKey(tenant, core.users.byName(tenant, 'admin')!, { createdBy: 'bench' }).key;
    const host = `127.0.0.1:${port}`;
    const admin = async (p: string, bucket: string, json: unknown) => {
      const body = JSON.stringify(json);
      await httpFetch(url + p, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          'x-service-admin-signature': signAdminHmac(core.auth.adminSecret(), bucket, host, Buffer.byteLength(body)),
        },
      });
    };
    await admin('/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' });
    await admin('/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
    const body = (i: number) =>
      JSON.stringify({ phone: `+4930${String(1_000_000 + i)}`, displayName: `Bench ${i}`, systemPrompt: 'Say hello and hang up.', apiKey: 'AIza-bench-key' });

    // Warm-up, then alternate appliance calls and direct bridge hops so both see the same machine.
    const appMs: number[] = [];
    const hopMs: number[] = [];
    const ids: string[] = [];
    for (let i = -20; i < N; i++) {
      let t = process.hrtime.bigint();
      const r = await httpFetch(`${url}/api.ashx/v1/calls`, {
        method: 'POST',
        body: body(i + 100_000),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      });
      const out = (await r.json()) as { callId: string; ok: boolean };
      if (!out.ok) throw new Error(`call not accepted: ${JSON.stringify(out)}`);
      if (i >= 0) {
        appMs.push(Number(process.hrtime.bigint() - t) / 1e6);
        ids.push(out.callId);
      }
      const place = { ...fake.placed[fake.placed.length - 1]!, callId: `oac-${(i + 1000).toString(16).padStart(12, '0')}` };
      t = process.hrtime.bigint();
      const h = await fetch(`${fake.url}/calls`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(place),
      });
      await h.text();
      if (i >= 0) hopMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    }

    // Callbacks: answered + ended per call, 8 in flight.
    let next = 0;
    const t0 = process.hrtime.bigint();
    const worker = async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const a1 = await fake.emit({ type: 'answered', callId: id, trunkId: `${tenant.id}.main`, answeredAt: new Date().toISOString(), answerMs: 800 });
        const a2 = await fake.emit(FakeBridge.ended(id, 'finished'));
        if (a1.status !== 200 || a2.status !== 200 || a2.body.applied !== true) throw new Error(`event not applied for ${id}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const evSec = Number(process.hrtime.bigint() - t0) / 1e9;
    const p50 = pct(appMs, 50);
    const hop50 = pct(hopMs, 50);
    return [
      {
        name: 'telephony-core: POST /calls p50',
        value: +p50.toFixed(2),
        unit: 'ms',
        peer: 'bridge hop alone (POST /calls to the bridge)',
        peerValue: +hop50.toFixed(2),
        ratio: +(p50 / hop50).toFixed(2),
        note: `${N} sequential calls; ratio = appliance total / bridge hop`,
      },
      {
        name: 'telephony-core: POST /calls p99',
        value: +pct(appMs, 99).toFixed(2),
        unit: 'ms',
        peer: 'bridge hop alone',
        peerValue: +pct(hopMs, 99).toFixed(2),
        ratio: +(pct(appMs, 99) / pct(hopMs, 99)).toFixed(2),
      },
      {
        name: 'telephony-core: bridge events applied',
        value: +((ids.length * 2) / evSec).toFixed(0),
        unit: 'events/s',
        note: 'answered + ended (transcript file, 5 outbox events, mail job) per call, 8 callbacks in flight',
      },
    ];
  } finally {
    await a.stop();
    await fake.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
