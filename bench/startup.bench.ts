/**
 * Cold start of the compiled appliance (`node dist/bin/sovcomms.js serve`, `npm run build`)
 * against today's entry (`node bin/sovcomms.mjs serve`: TypeScript through tsx's loader), in the
 * same run, alternating, on the same data dir: time from spawn to the first /readyz 200, CPU used
 * by then, and idle RSS one second after ready. Each is the median of BENCH_STARTS (5) starts.
 *
 * Target (issue 13): compiled start at most 0.7x the time of the TypeScript entry.
 * The telephony bridge is off and trusted lists are not fetched: the server's own start is
 * measured, not a child process's or the network's. So its idle RSS is not issue 25's row: with
 * the default embedded bridge the core also holds the bridge link (its control calls and health
 * polls: fetch, i.e. undici, ~12 MB), started after ready; bench/core.bench.ts measures that row,
 * 1 s after the bridge is up.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compiledEntry } from './lib/compiled.ts';
import { envNumber, type BenchResult } from './lib/contract.ts';
import { freePort, ROOT, rssMiB, sleep, spawnServer } from './lib/load.ts';

const STARTS = envNumber('BENCH_STARTS', 5);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const r1 = (n: number) => Math.round(n * 10) / 10;

interface Sample {
  readyMs: number;
  cpuMs: number | undefined;
  rss: number;
}

function env(dataDir: string): NodeJS.ProcessEnv {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SOVCOMMS_')));
  return {
    ...e,
    SOVCOMMS_DATA_DIR: dataDir,
    SOVCOMMS_LOG_LEVEL: 'warn',
    SOVCOMMS_CONFIG_JSON: JSON.stringify({ plugins: { telephony: { bridge: { mode: 'off' } }, lotl: { autoRefresh: false } } }),
  };
}

async function start(entry: string, dataDir: string): Promise<Sample> {
  const port = await freePort();
  const s = await spawnServer({
    modulePath: entry,
    args: ['serve', '--host', '127.0.0.1', '--port', String(port)],
    env: env(dataDir),
    readyUrl: `http://127.0.0.1:${port}/readyz`,
    timeoutMs: 60_000,
  });
  try {
    await sleep(1000);
    return { readyMs: s.readyMs, cpuMs: s.readyCpuMs, rss: rssMiB(s.child.pid!) };
  } finally {
    await s.stop();
  }
}

export default async function run(): Promise<BenchResult[]> {
  const c = await compiledEntry();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-startup-'));
  try {
    const entries = { dist: c.entry, ts: path.join(ROOT, 'bin', 'sovcomms.mjs') };
    // First start creates the store, the tenant and the keys: not a cold start of either, so untimed.
    await start(entries.ts, dataDir);
    const samples: Record<'dist' | 'ts', Sample[]> = { dist: [], ts: [] };
    for (let i = 0; i < STARTS; i++) {
      // Alternating, and the other order every other round: a neighbour's burst hits both alike.
      const order: ('dist' | 'ts')[] = i % 2 ? ['ts', 'dist'] : ['dist', 'ts'];
      for (const k of order) samples[k].push(await start(entries[k], dataDir));
    }
    const m = (k: 'dist' | 'ts', f: (s: Sample) => number | undefined) => {
      const xs = samples[k].map(f).filter((x): x is number => x !== undefined);
      return xs.length ? median(xs) : NaN;
    };
    const list = (k: 'dist' | 'ts', f: (s: Sample) => number | undefined) => samples[k].map((s) => Math.round(f(s) ?? NaN)).join(', ');
    const ready = { dist: m('dist', (s) => s.readyMs), ts: m('ts', (s) => s.readyMs) };
    const cpu = { dist: m('dist', (s) => s.cpuMs), ts: m('ts', (s) => s.cpuMs) };
    const rss = { dist: m('dist', (s) => s.rss), ts: m('ts', (s) => s.rss) };
    console.log(`ready: dist ${list('dist', (s) => s.readyMs)} ms; ts ${list('ts', (s) => s.readyMs)} ms (ratio ${(ready.dist / ready.ts).toFixed(2)}x)`);
    const results: BenchResult[] = [
      {
        name: 'time to ready, dist/ vs TypeScript entry',
        value: Math.round(ready.dist),
        unit: 'ms',
        peer: 'node bin/sovcomms.mjs serve (tsx)',
        peerValue: Math.round(ready.ts),
        ratio: r1((ready.dist / ready.ts) * 100) / 100,
        target: '<= 0.7x',
        note: `spawn of \`node dist/bin/sovcomms.js serve\` to first /readyz 200, median of ${STARTS} (${list('dist', (s) => s.readyMs)} ms) vs the TypeScript entry (${list('ts', (s) => s.readyMs)} ms), alternating on one data dir; compiled entry: ${c.how}; 1-min load ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`,
      },
      {
        name: 'idle RSS after start, dist/ vs TypeScript entry',
        value: r1(rss.dist),
        unit: 'MiB',
        peer: 'TypeScript entry',
        peerValue: r1(rss.ts),
        ratio: r1((rss.dist / rss.ts) * 100) / 100,
        note: `VmRSS 1 s after ready, median of ${STARTS}: dist ${samples.dist.map((s) => r1(s.rss)).join(', ')}; ts ${samples.ts.map((s) => r1(s.rss)).join(', ')}`,
      },
    ];
    if (Number.isFinite(cpu.dist) && Number.isFinite(cpu.ts))
      results.push({
        name: 'CPU time to ready, dist/ vs TypeScript entry',
        value: Math.round(cpu.dist),
        unit: 'ms',
        peer: 'TypeScript entry',
        peerValue: Math.round(cpu.ts),
        ratio: r1((cpu.dist / cpu.ts) * 100) / 100,
        note: `user+system CPU of the server process (all threads) from spawn to ready, median of ${STARTS}: dist ${list('dist', (s) => s.cpuMs)}; ts ${list('ts', (s) => s.cpuMs)} ms (steadier than wall time on a shared machine)`,
      });
    return results;
  } finally {
    c.done();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
