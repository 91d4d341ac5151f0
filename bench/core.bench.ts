/**
 * Issue 2's benchmark: `GET /api.ashx/v1/auditlog?limit=50` with an `ak_` key over 100,000
 * audit rows, on the real appliance (`sovcomms serve`, i.e. Appliance.create + start) beside a
 * bare Express 5 + better-sqlite3 server doing the same query on the same database file
 * (bench/peers/bare-auditlog.ts). Both run in child processes; autocannon loads them from this
 * process over loopback, in alternating rounds so that a neighbour's burst on a shared machine
 * hits both alike. Also: idle RSS of the appliance after start and its time to ready.
 *
 * Targets (issue 2): idle RSS < 150 MB, ready < 1.5 s through the TypeScript entry; (issue 25)
 * throughput >= 0.9 of the bare server's, and the compiled server (`node dist/bin/sovcomms.js
 * serve`, what `npm start` runs; `npm run build` first, else its rows are left out and the load
 * goes to the TypeScript entry) idle RSS < 120 MB and ready < 0.7 s, each a row of its own.
 * Knobs (env): BENCH_ROWS (100000), BENCH_CONNECTIONS (10), BENCH_SECONDS (10 per server, split
 * over BENCH_ROUNDS = 4 rounds), BENCH_WARMUP_SECONDS (2), BENCH_STARTS (3), BENCH_PROFILE_DIR
 * (write V8 CPU profiles of the loaded appliance and bare server there; read it with bench/lib/profile-top.ts),
 * BENCH_BASELINE_ROOT (a checkout of another commit, e.g. `git archive main | tar -x -C DIR` with
 * node_modules linked: it serves a copy of the seeded data dir and takes the same alternating
 * rounds, so a change's before/after ratios come from one run on one machine load; like with like:
 * its compiled server when this checkout's load goes to the compiled one and the baseline has a
 * fresh dist/ of its own (`node bin/run-ts.mjs scripts/build.ts` there), else its TypeScript entry).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Appliance } from '../server/app.ts';
import { AuditRepo, type AuditRow } from '../plugins/audit/repo.ts';
import { envNumber, type BenchResult } from './lib/contract.ts';
import { freshDistEntry } from './lib/compiled.ts';
import { freePort, loadKnobs, loadRound, LoadStats, ROOT, rssMiB, sleep, spawnServer, type Spawned } from './lib/load.ts';

const ROWS = envNumber('BENCH_ROWS', 100_000);
const { CONNECTIONS, SECONDS, ROUNDS, WARMUP } = loadKnobs({ connections: 10, seconds: 10, rounds: 4, warmup: 2 });
const STARTS = envNumber('BENCH_STARTS', 3);
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR ? path.resolve(process.env.BENCH_PROFILE_DIR) : undefined;
const PATH = '/api.ashx/v1/auditlog?limit=50';
const BASELINE_ROOT = process.env.BENCH_BASELINE_ROOT ? path.resolve(process.env.BENCH_BASELINE_ROOT) : undefined;
/** Which entry of the baseline checkout served (set when it starts). */
let baselineEntry: 'ts' | 'compiled' = 'ts';

const EVENTS = [
  'login.success',
  'login.failure',
  'token.issued',
  'apikey.created',
  'user.updated',
  'call.started',
  'call.ended',
  'webhook.delivered',
  'oidc.consent',
  'wallet.presentation',
];
const UAS = [
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36',
  'curl/8.5.0',
  'sovcomms-cli/0.1',
  'okhttp/4.12.0',
];

/** Deterministic, varied rows spread over the last ~100 days (same data every run). */
function makeRow(i: number, start: number): AuditRow {
  const h = (i * 2654435761) >>> 0;
  return {
    ts: new Date(start + i * 86_400 + (h % 60_000)).toISOString(),
    event: EVENTS[h % EVENTS.length]!,
    user: `user${h % 500}@example.org`,
    ip: `10.${(h >>> 8) & 255}.${(h >>> 16) & 255}.${h & 255}`,
    ua: UAS[(h >>> 4) % UAS.length]!,
    extra: `client=app${h % 17} method=${h % 3 ? 'pwd' : 'passkey'} request=${h.toString(16)}`,
  };
}

/** A data dir with the primary tenant, its admin's ak_ key and ROWS audit rows, then closed. */
async function seed(dataDir: string): Promise<{ key: string; seedMs: number }> {
  const a = await Appliance.create({ dataDir, env: {}, overrides: { log: { level: 'silent' } } });
  try {
    const core = a.core;
    const tenant = core.tenants.primary()!;
    const admin = core.users.byName(tenant, 'admin')!;
    const key = core.auth.createApiKey(tenant, admin, { name: 'bench', createdBy: 'bench' }).key;
    const repo = new AuditRepo(core.db);
    const t0 = performance.now();
    const start = Date.now() - ROWS * 86_400 - 3_600_000;
    core.db.transaction(() => {
      for (let i = 0; i < ROWS; i++) repo.insert(tenant, makeRow(i, start));
    })();
    return { key, seedMs: performance.now() - t0 };
  } finally {
    await a.stop();
  }
}

function cleanEnv(): NodeJS.ProcessEnv {
  // The bench's own environment must not point the appliance at another data dir or key.
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SOVCOMMS_')));
}

/**
 * Waits after ready until the appliance has settled: the embedded telephony bridge, which the core
 * starts after it listens, is up (or is off). The core process then holds what it holds for good
 * (the bridge link and its health polls); sampled earlier, the idle RSS depended on whether the
 * machine was busy enough to delay the bridge past the sample (103 vs 125-132 MB on 2026-12-04).
 * Resolves with the milliseconds it waited, or -1 after 20 s without.
 */
async function settled(port: number): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < 20_000) {
    try {
      const r = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as {
        plugins?: Record<string, { health?: { detail?: { bridge?: string; state?: string } } }>;
      };
      const d = r.plugins?.telephony?.health?.detail;
      if (!d || d.bridge === 'off' || d.state === 'ready') return performance.now() - t0;
    } catch {
      // not answering this instant: try again
    }
    await sleep(100);
  }
  return -1;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const r1 = (n: number) => Math.round(n * 10) / 10;

export default async function run(): Promise<BenchResult[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-core-'));
  const running: Spawned[] = [];
  const cleanups: (() => void)[] = [];
  try {
    const { key, seedMs } = await seed(dataDir);
    console.log(`seeded ${ROWS} audit rows in ${Math.round(seedMs)} ms`);
    // Rate limits raised (one IP sends everything); log level warn: no access log line per request.
    fs.writeFileSync(
      path.join(dataDir, 'config.json'),
      JSON.stringify({
        log: { level: 'warn' },
        rateLimit: { publicPerMinute: 100_000_000, authenticatedPerMinute: 100_000_000, sensitivePerMinute: 100_000_000 },
      }),
    );

    // The baseline's copy, made while no server has the store open.
    const baseDir = `${dataDir}-baseline`;
    if (BASELINE_ROOT) {
      fs.cpSync(dataDir, baseDir, { recursive: true });
      cleanups.push(() => fs.rmSync(baseDir, { recursive: true, force: true }));
    }

    const barePort = await freePort();
    const bare = await spawnServer({
      modulePath: path.join(ROOT, 'bench', 'peers', 'bare-auditlog.ts'),
      env: { ...cleanEnv(), BENCH_DB: path.join(dataDir, 'appliance.db'), PORT: String(barePort) },
      execArgv: PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${path.join(PROFILE_DIR, 'bare')}`] : [],
      readyUrl: `http://127.0.0.1:${barePort}/readyz`,
    });
    running.push(bare);
    await sleep(1000);
    const bareRss = rssMiB(bare.child.pid!);

    // Time to ready: spawn of `sovcomms serve` to its first /readyz 200, STARTS times per entry
    // (TypeScript and compiled alternating); the last start of the compiled entry (else of the
    // TypeScript one) stays up for the load.
    const compiled = freshDistEntry();
    if (!compiled) console.log('dist/ is missing or older than the sources (npm run build): no compiled rows');
    const entries = { ts: path.join(ROOT, 'bin', 'sovcomms.mjs'), ...(compiled ? { compiled } : {}) } as Record<'ts' | 'compiled', string>;
    const loaded: 'ts' | 'compiled' = compiled ? 'compiled' : 'ts';
    const starts = {
      ts: { readies: [] as number[], cpus: [] as number[], rsses: [] as number[] },
      compiled: { readies: [] as number[], cpus: [] as number[], rsses: [] as number[] },
    };
    const settles = { ts: [] as number[], compiled: [] as number[] };
    const loadBefore = os.loadavg()[0]!;
    let app: Spawned | undefined;
    let appPort = 0;
    for (let i = 0; i < STARTS; i++) {
      for (const kind of Object.keys(entries) as ('ts' | 'compiled')[]) {
        const last = i === STARTS - 1 && kind === loaded;
        const port = await freePort();
        const s = await spawnServer({
          modulePath: entries[kind],
          args: ['serve', '--data-dir', dataDir, '--host', '127.0.0.1', '--port', String(port)],
          // BENCH_APPLIANCE_NODE_OPTIONS: V8/Node flags for the appliance only (GC experiments).
          env: { ...cleanEnv(), ...(process.env.BENCH_APPLIANCE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_APPLIANCE_NODE_OPTIONS } : {}) },
          // The server that takes the load can be profiled: BENCH_PROFILE_DIR=/tmp/prof.
          execArgv: PROFILE_DIR && last ? ['--cpu-prof', `--cpu-prof-dir=${path.join(PROFILE_DIR, 'appliance')}`] : [],
          readyUrl: `http://127.0.0.1:${port}/readyz`,
        });
        const st = starts[kind];
        st.readies.push(s.readyMs);
        if (s.readyCpuMs !== undefined) st.cpus.push(s.readyCpuMs);
        settles[kind].push(await settled(port));
        await sleep(1000);
        st.rsses.push(rssMiB(s.child.pid!));
        if (!last) await s.stop();
        else {
          app = s;
          appPort = port;
        }
      }
    }
    const { readies, cpus: readyCpus, rsses } = starts.ts;
    running.push(app!);
    console.log(`appliance ready in ${readies.map(Math.round).join(', ')} ms; idle RSS ${rsses.map(r1).join(', ')} MiB (bare: ${r1(bareRss)} MiB)`);
    if (compiled)
      console.log(`compiled: ready in ${starts.compiled.readies.map(Math.round).join(', ')} ms; idle RSS ${starts.compiled.rsses.map(r1).join(', ')} MiB`);

    // The baseline checkout (BENCH_BASELINE_ROOT) on a copy of the same data, started like the appliance.
    let base: { url: string; pid: number } | undefined;
    if (BASELINE_ROOT) {
      const port = await freePort();
      // Like with like: a compiled server beside a compiled one (the TypeScript entry costs more per request too).
      const baseCompiled = loaded === 'compiled' ? freshDistEntry(BASELINE_ROOT) : undefined;
      baselineEntry = baseCompiled ? 'compiled' : 'ts';
      if (loaded === 'compiled' && !baseCompiled)
        console.log(`${BASELINE_ROOT} has no fresh dist/: its TypeScript entry is compared with this checkout's compiled server`);
      const s = await spawnServer({
        modulePath: baseCompiled ?? path.join(BASELINE_ROOT, 'bin', 'sovcomms.mjs'),
        args: ['serve', '--data-dir', baseDir, '--host', '127.0.0.1', '--port', String(port)],
        env: cleanEnv(),
        readyUrl: `http://127.0.0.1:${port}/readyz`,
      });
      running.push(s);
      base = { url: `http://127.0.0.1:${port}${PATH}`, pid: s.child.pid! };
    }

    const headers = { authorization: `Bearer ${key}` };
    const appUrl = `http://127.0.0.1:${appPort}${PATH}`;
    const bareUrl = `http://127.0.0.1:${barePort}${PATH}`;

    // Fairness: both answer 200 with the same JSON for the same request.
    const [ja, jb, jc] = await Promise.all(
      [appUrl, bareUrl, ...(base ? [base.url] : [])].map(async (u) => {
        const r = await fetch(u, { headers });
        if (r.status !== 200) throw new Error(`${u} answered ${r.status}: ${await r.text()}`);
        return (await r.json()) as { data: unknown[]; total: number };
      }),
    );
    if (ja!.data.length !== 50 || ja!.total !== ROWS) throw new Error(`appliance returned ${ja!.data.length} rows of ${ja!.total}, expected 50 of ${ROWS}`);
    const same = isDeepStrictEqual(ja, jb) && (!base || isDeepStrictEqual(ja, jc));

    const warm = { connections: CONNECTIONS, seconds: WARMUP, headers };
    await loadRound(bareUrl, warm);
    await loadRound(appUrl, warm);
    if (base) await loadRound(base.url, warm);
    const sa = new LoadStats();
    const sb = new LoadStats();
    const sc = new LoadStats();
    const per = SECONDS / ROUNDS;
    const loadRounds = os.loadavg()[0]!;
    for (let i = 0; i < ROUNDS; i++) {
      // Alternate who goes first so neither always follows the other's garbage collection.
      const A: [string, LoadStats, number] = [appUrl, sa, app!.child.pid!];
      const B: [string, LoadStats, number] = [bareUrl, sb, bare.child.pid!];
      const order = i % 2 ? [A, B] : [B, A];
      // The baseline goes between the two, so each of the three follows each other one alike.
      if (base) order.splice(1, 0, [base.url, sc, base.pid]);
      for (const [u, s, pid] of order) await loadRound(u, { connections: CONNECTIONS, seconds: per, headers, into: s, serverPid: pid });
    }
    const rssAfter = rssMiB(app!.child.pid!);
    console.log(`appliance ${Math.round(sa.rps)} req/s, bare ${Math.round(sb.rps)} req/s${base ? `, baseline ${Math.round(sc.rps)} req/s` : ''}`);
    const failures = (s: LoadStats) => s.bad + s.errors;
    const loadNote =
      `${CONNECTIONS} connections, ${SECONDS} s per server in ${ROUNDS} alternating rounds after ${WARMUP} s warmup, ${ROWS} rows` +
      `; non-2xx/errors: appliance ${failures(sa)}, bare ${failures(sb)}` +
      (same ? '; both return identical JSON' : '; WARNING: the two JSON bodies differ');

    return [
      {
        name: 'auditlog limit=50 throughput',
        value: sa.rps,
        unit: 'req/s',
        peer: 'bare express+sqlite',
        peerValue: sb.rps,
        ratio: sa.rps / sb.rps,
        target: '>= 0.9x',
        note: `${loaded === 'compiled' ? 'the compiled server (dist/, as npm start runs it)' : 'the TypeScript entry (no dist/ built)'}; ${loadNote}`,
      },
      {
        name: 'auditlog limit=50 p99 latency',
        value: sa.percentile(99),
        unit: 'ms',
        peer: 'bare express+sqlite',
        peerValue: sb.percentile(99),
        ratio: sa.percentile(99) / sb.percentile(99),
        note: `p50 appliance ${sa.percentile(50).toFixed(2)} ms, bare ${sb.percentile(50).toFixed(2)} ms; ${sa.latencies.length} and ${sb.latencies.length} samples`,
      },
      ...(base ? baselineRows(sa, sb, sc, loaded, loadRounds) : []),
      ...(Number.isFinite(sa.cpuUsPerRequest)
        ? [
            {
              name: 'auditlog limit=50 server CPU per request',
              value: sa.cpuUsPerRequest,
              unit: 'µs',
              peer: 'bare express+sqlite',
              peerValue: sb.cpuUsPerRequest,
              ratio: sb.cpuUsPerRequest / sa.cpuUsPerRequest,
              note: 'server process user+system CPU during the measured rounds / 2xx responses (from /proc); ratio = bare/appliance, i.e. the throughput ratio the two would reach on an otherwise idle core',
            },
          ]
        : []),
      {
        name: 'idle RSS after start, TypeScript entry',
        value: median(rsses),
        unit: 'MB',
        peer: 'bare express+sqlite',
        peerValue: bareRss,
        target: '< 150 MB',
        note: `MiB (VmRSS) 1 s after the appliance settled (the embedded bridge up; ${settles.ts.map(Math.round).join(', ')} ms after ready), median of ${STARTS} starts: ${rsses.map(r1).join(', ')}${loaded === 'ts' ? `; after the load: ${r1(rssAfter)}` : ''}`,
      },
      {
        name: 'time to ready, TypeScript entry',
        value: median(readies) / 1000,
        unit: 's',
        peer: 'bare express+sqlite',
        peerValue: bare.readyMs / 1000,
        target: '< 1.5 s',
        note: `spawn of \`sovcomms serve\` to first /readyz 200 (node start, tsx loader, config, store, migrations check, plugins, listen), median of ${STARTS}: ${readies.map((r) => Math.round(r)).join(', ')} ms; 1-min load average ${loadBefore.toFixed(1)} on ${os.cpus().length} cores`,
      },
      ...(readyCpus.length
        ? [
            {
              name: 'CPU time to ready, TypeScript entry',
              value: median(readyCpus) / 1000,
              unit: 's',
              peer: 'bare express+sqlite',
              peerValue: bare.readyCpuMs === undefined ? undefined : bare.readyCpuMs / 1000,
              note: `user+system CPU of the server process (all threads, incl. the tsx loader thread) from spawn to ready, median of ${STARTS}: ${readyCpus.join(', ')} ms; unlike the wall time it hardly grows when other processes load the machine`,
            },
          ]
        : []),
      ...(compiled ? compiledRows(starts.compiled, bare, bareRss, rssAfter, loadBefore, settles.compiled) : []),
    ];
  } finally {
    await Promise.all(running.map((s) => s.stop()));
    fs.rmSync(dataDir, { recursive: true, force: true });
    for (const c of cleanups) c();
  }
}

/** BENCH_BASELINE_ROOT's rows: the other checkout beside the bare server, and this one against it, all from the same rounds. */
function baselineRows(sa: LoadStats, sb: LoadStats, sc: LoadStats, loaded: 'ts' | 'compiled', load: number): BenchResult[] {
  const which = (k: 'ts' | 'compiled') => (k === 'compiled' ? 'compiled server' : 'TypeScript entry');
  const note = `${BASELINE_ROOT} (its ${which(baselineEntry)}; this checkout's ${which(loaded)}), same rounds, 1-min load average ${load.toFixed(1)} when they began`;
  return [
    {
      name: 'auditlog limit=50 throughput, baseline checkout',
      value: sc.rps,
      unit: 'req/s',
      peer: 'bare express+sqlite',
      peerValue: sb.rps,
      ratio: sc.rps / sb.rps,
      note: `${note}; non-2xx/errors ${sc.bad + sc.errors}`,
    },
    {
      name: 'auditlog limit=50 throughput, this checkout vs baseline',
      value: sa.rps,
      unit: 'req/s',
      peer: 'baseline checkout',
      peerValue: sc.rps,
      ratio: sa.rps / sc.rps,
      note,
    },
    ...(Number.isFinite(sc.cpuUsPerRequest)
      ? [
          {
            name: 'auditlog limit=50 server CPU per request, baseline checkout',
            value: sc.cpuUsPerRequest,
            unit: 'µs',
            peer: 'bare express+sqlite',
            peerValue: sb.cpuUsPerRequest,
            ratio: sb.cpuUsPerRequest / sc.cpuUsPerRequest,
            note: `${note}; this checkout: ${Math.round(sa.cpuUsPerRequest)} µs`,
          },
        ]
      : []),
  ];
}

/** Issue 25's rows: the compiled server (`npm start`), core process only, beside the bare server. */
function compiledRows(
  st: { readies: number[]; cpus: number[]; rsses: number[] },
  bare: Spawned,
  bareRss: number,
  rssAfter: number,
  load: number,
  settles: number[],
): BenchResult[] {
  return [
    {
      name: 'idle RSS after start, compiled',
      value: median(st.rsses),
      unit: 'MB',
      peer: 'bare express+sqlite',
      peerValue: bareRss,
      target: '< 120 MB',
      note: `node dist/bin/sovcomms.js serve with the default plugins (the embedded bridge is a process of its own, not counted), the core process: MiB (VmRSS) 1 s after it settled (the bridge up; ${settles.map(Math.round).join(', ')} ms after ready), median of ${STARTS} starts: ${st.rsses.map(r1).join(', ')}; after the load: ${r1(rssAfter)}; 1-min load average ${load.toFixed(1)}`,
    },
    {
      name: 'time to ready, compiled',
      value: median(st.readies) / 1000,
      unit: 's',
      peer: 'bare express+sqlite',
      peerValue: bare.readyMs / 1000,
      target: '< 0.7 s',
      note: `spawn of \`node dist/bin/sovcomms.js serve\` to first /readyz 200, median of ${STARTS}: ${st.readies.map((r) => Math.round(r)).join(', ')} ms; 1-min load average ${load.toFixed(1)} on ${os.cpus().length} cores`,
    },
    ...(st.cpus.length
      ? [
          {
            name: 'CPU time to ready, compiled',
            value: median(st.cpus) / 1000,
            unit: 's',
            peer: 'bare express+sqlite',
            peerValue: bare.readyCpuMs === undefined ? undefined : bare.readyCpuMs / 1000,
            note: `user+system CPU of the compiled server (all threads) from spawn to ready, median of ${STARTS}: ${st.cpus.join(', ')} ms`,
          },
        ]
      : []),
  ];
}
