/**
 * Telephony bridge under load (issue 4): N concurrent AI calls through the real bridge process,
 * SIPp (one UAS process, RTP echo) as the far ends and the local Gemini Live fake as the engine.
 * Measured in the bridge itself (GET /stats, per call): RTP send-interval deviation from 20 ms
 * (p99 over every packet of every call), frames sent late by more than a frame, frames lost on
 * the round trip through SIPp's echo, and the time from the far end's 200 OK to the first AI
 * audio packet sent minus the engine's own latency. Peer: the same number of streams paced with
 * a plain setInterval(20) in a separate Node process, as most Node RTP code does.
 */
import { spawn, fork } from 'node:child_process';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { startSipp } from '../test/support/sipp.ts';
import { GeminiLiveFake } from '../test/support/gemini-live-fake.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CALLS = Number(process.env.TELEPHONY_BENCH_CALLS ?? 200);
const HOLD_MS = Number(process.env.TELEPHONY_BENCH_HOLD_MS ?? 15_000);

interface Metrics {
  callId: string;
  sendJitterP99Ms: number;
  sendJitterMaxMs: number;
  intervals: number;
  lateFrames: number;
  packetsSent: number;
  packetsReceived: number;
  rxLost: number;
  firstAudioAddedMs: number | null;
}

function pct(values: number[], p: number): number {
  if (!values.length) return 0;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * p) - 1)];
}

/** The peer: N naive senders, one setInterval(20) each, in their own process. */
async function naivePeer(streams: number, ms: number): Promise<number> {
  const dir = mkdtempSync(path.join(tmpdir(), 'naive-rtp-'));
  const file = path.join(dir, 'naive.mjs');
  writeFileSync(
    file,
    `import dgram from 'node:dgram';
const sink = dgram.createSocket('udp4'); await new Promise((r) => sink.bind(0, '127.0.0.1', r));
const port = sink.address().port; sink.on('message', () => {});
const devs = []; const pkt = Buffer.alloc(172);
for (let i = 0; i < ${streams}; i++) {
  const s = dgram.createSocket('udp4'); let last = 0n;
  const t = setInterval(() => { const now = process.hrtime.bigint(); if (last) devs.push(Math.abs(Number(now - last) / 1e6 - 20)); last = now; s.send(pkt, port, '127.0.0.1'); }, 20);
  setTimeout(() => { clearInterval(t); s.close(); }, ${ms});
}
setTimeout(() => { devs.sort((a, b) => a - b); process.send(devs[Math.ceil(devs.length * 0.99) - 1] ?? 0); sink.close(); }, ${ms} + 200);
`,
  );
  try {
    return await new Promise<number>((resolve, reject) => {
      const c = fork(file, [], { stdio: 'ignore' });
      c.once('message', (m) => resolve(Number(m)));
      c.once('exit', (code) => code && reject(new Error(`naive peer exited ${code}`)));
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export default async function run(): Promise<Array<{ name: string; value: number; unit: string; peer?: string; peerValue?: number; ratio?: number; target?: string; note?: string }>> {
  const token = randomBytes(24).toString('hex');
  const ended = new Map<string, Record<string, unknown>>();
  const cb = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const ev = JSON.parse(body) as Record<string, unknown>;
      if (ev.type === 'ended') ended.set(ev.callId as string, ev);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => cb.listen(0, '127.0.0.1', r));
  const fake = new GeminiLiveFake({
    script: [{ say: 'Guten Tag, hier ist die Praxis Dr. Muster mit einer Terminerinnerung.', audioMs: 4000, chunkMs: 200 }, { wait: HOLD_MS }, { tool: 'end_call' }],
  });
  await fake.start();
  const sipp = await startSipp({ scenario: 'answer', rtpEcho: true, calls: CALLS, timeoutSec: Math.ceil(HOLD_MS / 1000) + 90, extraArgs: ['-l', String(CALLS * 2)] });
  const base = 30000 + 2 * Math.floor(Math.random() * 4000);
  // TELEPHONY_BENCH_PROF=DIR writes a V8 CPU profile of the bridge there.
  const prof = process.env.TELEPHONY_BENCH_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.TELEPHONY_BENCH_PROF}`] : [];
  const bridge = spawn(process.execPath, [...prof, '--import', 'tsx', path.join(ROOT, 'plugins/telephony/bridge/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      SOVCOMMS_BRIDGE_TOKEN: token,
      SOVCOMMS_BRIDGE_CONTROL_PORT: '0',
      SOVCOMMS_BRIDGE_CALLBACK_URL: `http://127.0.0.1:${(cb.address() as AddressInfo).port}/events`,
      SOVCOMMS_BRIDGE_SIP_PORT: '0',
      SOVCOMMS_BRIDGE_RTP_PORTS: `${base}-${base + CALLS * 2 + 100}`,
      SOVCOMMS_BRIDGE_KEEPALIVE_SEC: '0',
      SOVCOMMS_BRIDGE_MAX_CALLS: String(CALLS + 10),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const controlUrl = await new Promise<string>((resolve, reject) => {
      let out = '';
      bridge.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.includes('bridge-ready'));
        if (line) resolve((JSON.parse(line) as { controlUrl: string }).controlUrl);
      });
      bridge.once('exit', (code) => reject(new Error(`bridge exited ${code}`)));
    });
    const api = async (method: string, p: string, body?: unknown) => {
      const r = await fetch(controlUrl + p, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
      return (await r.json()) as Record<string, unknown>;
    };
    await api('PUT', '/trunks', { trunks: [{ id: 'sipp', host: '127.0.0.1', port: sipp.port, transport: 'udp', register: false, maxConcurrentCalls: CALLS * 2, codecs: ['PCMU'] }] });
    const ids: string[] = [];
    let peak = 0;
    const cpuAt = async () => {
      const st = await api('GET', '/stats');
      return { cpu: Number(st.cpuUserMicros) + Number(st.cpuSystemMicros), at: Number(st.uptimeSec) };
    };
    let cpuStart: { cpu: number; at: number } | null = null;
    let cpuEnd: { cpu: number; at: number } | null = null;
    for (let i = 0; i < CALLS; i++) {
      const callId = `oac-${randomBytes(6).toString('hex')}`;
      ids.push(callId);
      await api('POST', '/calls', {
        callId,
        tenantId: 'bench',
        phone: `+49301${String(i).padStart(6, '0')}`,
        displayName: 'Bench',
        trunkIds: ['sipp'],
        ringTimeoutSec: 30,
        maxSeconds: 600,
        engine: { url: fake.url, apiKey: 'bench', model: 'gemini-live-2.5-flash-preview', voice: 'Puck', language: 'de-DE', systemPrompt: 'bench' },
      });
      // Ramp at ~50 calls/s, like a dialer campaign starting.
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 200));
    }
    const deadline = Date.now() + HOLD_MS + 60_000;
    while (ended.size < CALLS && Date.now() < deadline) {
      const h = await api('GET', '/health');
      peak = Math.max(peak, Number(h.activeCalls));
      // CPU over a window where every call is up (steady state: media both ways, engine idle).
      if (Number(h.activeCalls) === CALLS && ended.size === 0) {
        if (!cpuStart) cpuStart = await cpuAt();
        else cpuEnd = await cpuAt();
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    const stats = (await api('GET', '/stats')).ended as Metrics[];
    const mine = stats.filter((m) => ids.includes(m.callId));
    const finished = [...ended.values()].filter((e) => e.outcome === 'finished').length;
    const jitterP99 = pct(mine.map((m) => m.sendJitterP99Ms), 0.99);
    const late = mine.reduce((a, m) => a + m.lateFrames, 0);
    const lostRoundTrip = mine.map((m) => Math.max(0, m.packetsSent - m.packetsReceived));
    const first = mine.map((m) => m.firstAudioAddedMs).filter((v): v is number => v !== null);
    const peer = await naivePeer(CALLS, 10_000);
    const cpuPerCall = cpuStart && cpuEnd && cpuEnd.at > cpuStart.at ? ((cpuEnd.cpu - cpuStart.cpu) / 1e6 / (cpuEnd.at - cpuStart.at) / CALLS) * 100 : 0;
    return [
      { name: 'concurrent AI calls carried', value: peak, unit: 'calls', target: `>= ${Math.min(200, CALLS)}`, note: `${CALLS} calls placed, ${finished} ended finished; SIPp UAS with -rtp_echo as far ends, local Live fake as engine` },
      {
        name: 'RTP send-interval jitter p99 (worst call)',
        value: Number(jitterP99.toFixed(2)),
        unit: 'ms',
        peer: `setInterval(20) x ${CALLS} streams`,
        peerValue: Number(peer.toFixed(2)),
        ratio: peer > 0 ? Number((jitterP99 / peer).toFixed(2)) : undefined,
        target: '< 5 ms',
        note: 'per call: p99 of |interval - 20 ms| over all its packets; the row is the 99th percentile over calls. Peer: one setInterval per stream, same count, own process',
      },
      {
        name: 'bridge CPU per established call',
        value: Number(cpuPerCall.toFixed(3)),
        unit: '% of a core',
        note: `user+system CPU of the bridge process while all ${CALLS} calls were up (RTP both ways, G.711, resampling, engine WebSocket); 100 / value = calls one core can carry`,
      },
      { name: 'frames sent more than one frame late', value: late, unit: 'frames', target: '<= 0 frames', note: 'sum over all calls, from the monotonic-clock pacer' },
      { name: 'RTP frames lost per call (round trip via SIPp echo)', value: Number(pct(lostRoundTrip, 0.99).toFixed(1)), unit: 'frames', note: 'p99 over calls of sent - echoed back; includes frames still in flight at BYE (up to ~2)' },
      { name: '200 OK to first AI audio packet, engine latency excluded (p50)', value: Number(pct(first, 0.5).toFixed(2)), unit: 'ms', target: '< 20 ms' },
      { name: '200 OK to first AI audio packet, engine latency excluded (p99)', value: Number(pct(first, 0.99).toFixed(2)), unit: 'ms', target: '< 20 ms' },
    ];
  } finally {
    bridge.kill('SIGTERM');
    await Promise.race([new Promise((r) => bridge.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
    if (bridge.exitCode === null) bridge.kill('SIGKILL');
    await sipp.stop();
    await fake.stop();
    cb.close();
  }
}
