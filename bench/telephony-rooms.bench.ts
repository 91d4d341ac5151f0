/**
 * Browser-voice rooms under load (issues 17 and 28): N concurrent WebRTC legs terminated in the
 * real bridge process (werift, DTLS-SRTP), each bridged to an AI session of the local Gemini Live
 * fake, with the load client (bench/peers/webrtc-visitors.ts: werift visitors sending a tone) in
 * its own process on loopback. Two rounds of rooms on the same bridge: visitors offering Opus (as
 * browsers do: libopus in WebAssembly both ways, 16 kHz to the engine, 24 kHz from it) and
 * visitors offering PCMU only. Measured in the bridge (GET /stats, per room) with the outbound
 * legs' measure: send-interval deviation from 20 ms, frames sent late, slots skipped; at the
 * visitors: sequence gaps in what the bridge sent. Peers, in the same run on the same bridge
 * process: the G.711 rooms for the Opus ones, and the same number of outbound SIP calls (SIPp UAS
 * with RTP echo) for the G.711 rooms, the same measure.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BRIDGE_NODE_FLAGS } from '../plugins/telephony/bridge/node-flags.ts';
import { startSipp } from '../test/support/sipp.ts';
import { GeminiLiveFake } from '../test/support/gemini-live-fake.ts';
import type { GcStats } from '../plugins/telephony/bridge/webrtc/gc-stats.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const ROOMS = Number(process.env.ROOMS_BENCH_ROOMS ?? 50);
const HOLD_MS = Number(process.env.ROOMS_BENCH_HOLD_MS ?? 10_000);

interface LegFigures {
  callId: string;
  sendJitterP99Ms: number;
  lateFrames: number;
  skippedSlots: number;
  packetsSent: number;
  packetsReceived: number;
  rxLost: number;
  srtp?: string;
}

function cpuTicks(): { steal: number; total: number } | null {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    return { steal: f[7] ?? 0, total: f.reduce((a, b) => a + b, 0) };
  } catch {
    return null;
  }
}

function pct(values: number[], p: number): number {
  if (!values.length) return 0;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * p) - 1)];
}

function message<T>(c: ChildProcess, type: string, ms = 120_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ${type} from the load client`)), ms);
    const on = (m: { type: string; message?: string }) => {
      if (m.type === 'error') {
        clearTimeout(t);
        c.off('message', on);
        reject(new Error(`load client: ${m.message}`));
      } else if (m.type === type) {
        clearTimeout(t);
        c.off('message', on);
        resolve(m as T);
      }
    };
    c.on('message', on);
  });
}

export default async function run(): Promise<
  { name: string; value: number; unit: string; peer?: string; peerValue?: number; ratio?: number; target?: string; note?: string }[]
> {
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
    // The AI greets for 4 s, then listens for the rest of the hold (the visitors' tone keeps coming).
    script: [{ say: 'Willkommen am Empfang, wie kann ich helfen?', audioMs: 4000, chunkMs: 200 }, { wait: 600_000 }],
  });
  await fake.start();
  const sipp = await startSipp({
    scenario: 'answer',
    rtpEcho: true,
    calls: ROOMS,
    timeoutSec: Math.ceil(HOLD_MS / 1000) + 150,
    extraArgs: ['-l', String(ROOMS * 2)],
  });
  const base = 30000 + 2 * Math.floor(Math.random() * 4000);
  // ROOMS_BENCH_PROF=DIR writes a V8 CPU profile of the bridge there.
  const prof = process.env.ROOMS_BENCH_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.ROOMS_BENCH_PROF}`] : [];
  const bridge = spawn(process.execPath, [...prof, ...BRIDGE_NODE_FLAGS, '--import', 'tsx', path.join(ROOT, 'plugins/telephony/bridge/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      SOVCOMMS_BRIDGE_TOKEN: token,
      SOVCOMMS_BRIDGE_CONTROL_PORT: '0',
      SOVCOMMS_BRIDGE_CALLBACK_URL: `http://127.0.0.1:${(cb.address() as AddressInfo).port}/events`,
      SOVCOMMS_BRIDGE_SIP_PORT: '0',
      SOVCOMMS_BRIDGE_RTP_PORTS: `${base}-${base + ROOMS * 2 + 100}`,
      SOVCOMMS_BRIDGE_KEEPALIVE_SEC: '0',
      SOVCOMMS_BRIDGE_MAX_CALLS: String(ROOMS * 2 + 10),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Assigned in roomsRound (a closure): typed here so the finally block may kill it.
  let client = null as ChildProcess | null;
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
      const r = await fetch(controlUrl + p, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body ? JSON.stringify(body) : undefined,
      });
      return (await r.json()) as Record<string, unknown>;
    };
    const cpuAt = async () => {
      const st = await api('GET', '/stats');
      return { cpu: Number(st.cpuUserMicros) + Number(st.cpuSystemMicros), at: Number(st.uptimeSec) };
    };
    /** Holds what is up for HOLD_MS: bridge CPU % of a core and the host's steal time meanwhile. */
    const hold = async () => {
      const c0 = await cpuAt();
      const t0 = cpuTicks();
      await new Promise((r) => setTimeout(r, HOLD_MS));
      const t1 = cpuTicks();
      const c1 = await cpuAt();
      return {
        cpuPct: c1.at > c0.at ? ((c1.cpu - c0.cpu) / 1e6 / (c1.at - c0.at)) * 100 : 0,
        stealPct: t0 && t1 && t1.total > t0.total ? (100 * (t1.steal - t0.steal)) / (t1.total - t0.total) : null,
      };
    };
    const endAll = async (ids: string[], reason: string) => {
      await Promise.all(ids.map((id) => api('POST', `/calls/${id}/hangup`, { reason }).catch(() => undefined)));
      const deadline = Date.now() + 60_000;
      while (ids.some((id) => !ended.has(id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    };

    // ---- browser rooms, Opus then G.711 -------------------------------------------------------
    const roomsRound = async (codec: 'opus' | 'PCMU') => {
      const c = fork(path.join(ROOT, 'bench/peers/webrtc-visitors.ts'), [], {
        cwd: ROOT,
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      client = c;
      await message(c, 'ready', 30_000);
      c.send({ type: 'open', controlUrl, token, engineUrl: fake.url, rooms: ROOMS, codec });
      const up = await message<{
        connected: number;
        ms: number;
        callIds: string[];
        states: Record<string, number>;
        clientPriority: string;
        joinMsMax: number;
        joinMsMedian: number;
      }>(c, 'up');
      const peakRooms = Number((await api('GET', '/health')).activeCalls);
      const gc0 = (await api('GET', '/stats')).webrtcGc as GcStats[];
      const roomHold = await hold();
      const gc1 = (await api('GET', '/stats')).webrtcGc as GcStats[];
      c.send({ type: 'report' });
      const report = await message<{ visitors: { callId: string; received: number; lost: number; sent: number }[] }>(c, 'report');
      await endAll(up.callIds, 'left');
      const st1 = await api('GET', '/stats');
      const rooms = (st1.roomsEnded as (LegFigures & { codec?: string })[]).filter((m) => up.callIds.includes(m.callId));
      c.send({ type: 'close' });
      await new Promise((r) => c.once('exit', r));
      const outcomes = new Map<string, number>();
      for (const id of up.callIds) outcomes.set(String(ended.get(id)?.outcome), (outcomes.get(String(ended.get(id)?.outcome)) ?? 0) + 1);
      return { up, peakRooms, gc0, gc1, roomHold, report, st1, rooms, outcomes };
    };
    // G.711 first, as this bench always began: its round also pays the WebRTC threads' start.
    const { up, peakRooms, gc0, gc1, roomHold, report, st1, rooms, outcomes } = await roomsRound('PCMU');
    const opus = await roomsRound('opus');

    // ---- the peer: as many outbound SIP calls on the same bridge -------------------------------
    await api('PUT', '/trunks', {
      trunks: [{ id: 'sipp', host: '127.0.0.1', port: sipp.port, transport: 'udp', register: false, maxConcurrentCalls: ROOMS * 2, codecs: ['PCMU'] }],
    });
    const sipIds: string[] = [];
    for (let i = 0; i < ROOMS; i += 10) {
      await Promise.all(
        Array.from({ length: Math.min(10, ROOMS - i) }, (_v, k) => {
          const callId = `oac-${randomBytes(6).toString('hex')}`;
          sipIds.push(callId);
          return api('POST', '/calls', {
            callId,
            tenantId: 'bench',
            phone: `+49301${String(i + k).padStart(6, '0')}`,
            displayName: 'Bench',
            trunkIds: ['sipp'],
            ringTimeoutSec: 60,
            maxSeconds: 600,
            engine: { url: fake.url, apiKey: 'bench', model: 'gemini-live-2.5-flash-preview', voice: 'Puck', language: 'de-DE', systemPrompt: 'bench' },
          });
        }),
      );
      await new Promise((r) => setTimeout(r, 200));
    }
    const upDeadline = Date.now() + 60_000;
    while (
      ((await api('GET', '/calls')).calls as { state: string }[]).filter((c) => c.state === 'answered').length < ROOMS &&
      Date.now() < upDeadline &&
      !sipIds.some((id) => ended.has(id))
    ) {
      await new Promise((r) => setTimeout(r, 250));
    }
    const sipHold = await hold();
    await endAll(sipIds, 'finished');
    const st2 = await api('GET', '/stats');
    const sip = (st2.ended as LegFigures[]).filter((m) => sipIds.includes(m.callId));

    const roomJitter = pct(
      rooms.map((m) => m.sendJitterP99Ms),
      0.99,
    );
    const opusJitter = pct(
      opus.rooms.map((m) => m.sendJitterP99Ms),
      0.99,
    );
    const opusCpu = opus.roomHold.cpuPct / Math.max(1, opus.up.connected);
    const g711Cpu = roomHold.cpuPct / Math.max(1, up.connected);
    const sipJitter = pct(
      sip.map((m) => m.sendJitterP99Ms),
      0.99,
    );
    // The WebRTC threads' young-generation collections during the rooms' hold (what frames wait behind).
    const gcNote = gc1
      .map((g, i) => {
        const b = gc0[i] ?? { scavenges: 0, scavengeMs: 0, scavengesOver5Ms: 0, scavengesInGaps: 0 };
        const n = g.scavenges - b.scavenges;
        return `${n} (${g.scavengesInGaps - b.scavengesInGaps} started between frames, mean ${n ? ((g.scavengeMs - b.scavengeMs) / n).toFixed(1) : 0} ms, ${g.scavengesOver5Ms - b.scavengesOver5Ms} of 5 ms or more, longest so far ${g.scavengeMaxMs.toFixed(1)} ms)`;
      })
      .join(' and ');
    const steal = (h: { stealPct: number | null }) => (h.stealPct === null ? 'n/a' : `${h.stealPct.toFixed(1)} %`);
    return [
      {
        name: 'concurrent browser-voice rooms carried, Opus',
        value: Math.min(opus.up.connected, opus.peakRooms),
        unit: 'rooms',
        target: `>= ${ROOMS}`,
        note: `${ROOMS} werift visitors offering Opus only; codecs the bridge agreed: ${[...new Set(opus.rooms.map((m) => m.codec))].join(', ')}; join median ${opus.up.joinMsMedian} ms, max ${opus.up.joinMsMax} ms; outcomes ${[...opus.outcomes].map(([k, v]) => `${k} ${v}`).join(', ')}`,
      },
      {
        name: 'room RTP send-interval jitter p99 (worst room), Opus',
        value: Number(opusJitter.toFixed(2)),
        unit: 'ms',
        peer: `${ROOMS} G.711 rooms, same bridge, same run`,
        peerValue: Number(roomJitter.toFixed(2)),
        ratio: roomJitter > 0 ? Number((opusJitter / roomJitter).toFixed(2)) : undefined,
        target: '< 5 ms',
        note: `the same measure as the G.711 row below; frames sent more than one frame late ${opus.rooms.reduce((a, m) => a + m.lateFrames, 0)}, slots skipped (worst room) ${Math.max(0, ...opus.rooms.map((m) => m.skippedSlots))}, frames lost towards the visitors (worst) ${Math.max(0, ...opus.report.visitors.map((v) => v.lost))}, from them (worst) ${Math.max(0, ...opus.rooms.map((m) => m.rxLost))}; steal time during the hold ${steal(opus.roomHold)}`,
      },
      {
        name: 'bridge CPU per room, Opus',
        value: Number(opusCpu.toFixed(3)),
        unit: '% of a core',
        peer: 'per G.711 room, same bridge, same run',
        peerValue: Number(g711Cpu.toFixed(3)),
        ratio: g711Cpu > 0 ? Number((opusCpu / g711Cpu).toFixed(2)) : undefined,
        note: 'user+system CPU of the bridge process during each hold: an Opus room encodes 50 frames/s at 24 kHz and decodes 50 at 16 kHz in WebAssembly where a G.711 room looks up tables',
      },
      {
        name: 'concurrent browser-voice rooms carried',
        value: Math.min(up.connected, peakRooms),
        unit: 'rooms',
        target: `>= ${ROOMS}`,
        note: `${ROOMS} werift visitors joined through POST /rooms (ramp ~20/s, load client at ${up.clientPriority}; ice/connection states when the hold began: ${JSON.stringify(up.states)} after ${up.ms} ms; join (offer → answer) median ${up.joinMsMedian} ms, max ${up.joinMsMax} ms), held together ${HOLD_MS / 1000} s, then left; outcomes ${[...outcomes].map(([k, v]) => `${k} ${v}`).join(', ')}`,
      },
      {
        name: 'room RTP send-interval jitter p99 (worst room)',
        value: Number(roomJitter.toFixed(2)),
        unit: 'ms',
        peer: `${ROOMS} outbound SIP calls, same bridge, same run`,
        peerValue: Number(sipJitter.toFixed(2)),
        ratio: sipJitter > 0 ? Number((roomJitter / sipJitter).toFixed(2)) : undefined,
        target: '< 5 ms',
        note: `per room: p99 of |interval - 20 ms| over its packets (the outbound legs' measure, taken where each packet is handed to the SRTP layer: the bridge's own on ${rooms.filter((m) => m.srtp === 'own').length} of the ${rooms.filter((m) => m.packetsSent > 0).length} rooms that sent, werift's on the others); the row is the 99th percentile over rooms; bridge GC ${String(st1.gc)} (bridge/node-flags.ts); WebRTC threads ${String(st1.webrtcThread)}, their scavenges during the hold ${gcNote || 'n/a'}; steal time during the rooms' hold ${steal(roomHold)}, during the SIP hold ${steal(sipHold)}`,
      },
      {
        name: 'room frames sent more than one frame late',
        value: rooms.reduce((a, m) => a + m.lateFrames, 0),
        unit: 'frames',
        target: '<= 0 frames',
        note: 'sum over all rooms, from the monotonic-clock pacer',
      },
      {
        name: 'room 20 ms slots skipped after stalls (worst room)',
        value: Math.max(0, ...rooms.map((m) => m.skippedSlots)),
        unit: 'slots',
        target: '<= 0 slots',
      },
      {
        name: 'room frames lost towards the visitor (sequence gaps, worst room)',
        value: Math.max(0, ...report.visitors.map((v) => v.lost)),
        unit: 'frames',
        target: '<= 0 frames',
        note: `counted by each werift visitor in the SRTP it decrypted (${report.visitors.reduce((a, v) => a + v.received, 0)} packets received in all)`,
      },
      {
        name: 'room frames lost from the visitor (sequence gaps at the bridge, worst room)',
        value: Math.max(0, ...rooms.map((m) => m.rxLost)),
        unit: 'frames',
        target: '<= 0 frames',
      },
      {
        name: 'bridge CPU per room',
        value: Number((roomHold.cpuPct / Math.max(1, up.connected)).toFixed(3)),
        unit: '% of a core',
        peer: 'per outbound SIP call',
        peerValue: Number((sipHold.cpuPct / Math.max(1, sip.length)).toFixed(3)),
        ratio: sipHold.cpuPct > 0 ? Number((roomHold.cpuPct / Math.max(1, up.connected) / (sipHold.cpuPct / Math.max(1, sip.length))).toFixed(2)) : undefined,
        note: 'user+system CPU of the bridge process during each hold (DTLS-SRTP, ICE consent, G.711, resampling, engine WebSocket)',
      },
    ];
  } finally {
    client?.kill('SIGTERM');
    bridge.kill('SIGTERM');
    await Promise.race([new Promise((r) => bridge.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
    if (bridge.exitCode === null) bridge.kill('SIGKILL');
    await sipp.stop();
    await fake.stop();
    cb.close();
  }
}
