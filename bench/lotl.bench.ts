/**
 * Issue 6's trusted-list benchmark.
 *
 * 1. Import of the whole 2026-08 snapshot (23 MB, 30 lists: parse, verify 30 XAdES signatures,
 *    store ~3,900 services): wall time and peak RSS of a fresh process doing only that
 *    (`bench/lotl.bench.ts --child-import DIR`, through the TypeScript loader), median of RUNS
 *    runs. Targets (issue 6): < 5 s and < 300 MB. Peer: the JDK-based reference verification
 *    measured on this machine before (3 s, 176 MB): a recorded number, not run here (no JDK
 *    verifier is fetched).
 * 1b. Issue 25's row: the same import as an operator runs it, compiled (`node dist/bin/sovcomms.js
 *    lotl import DIR`, no loader; `npm run build` first, else built for the run by
 *    bench/lib/compiled.ts): peak RSS of that process (getrusage ru_maxrss at its exit, which
 *    counts every thread; the command starts no child process), alternating with 1 in the same
 *    run. Target < 200 MB.
 * 2. Anchors served per second by `GET /lotl.ashx?anchor=<sha256>` on the real appliance (in a
 *    child process, the snapshot imported), rotating over every anchor in service; beside it,
 *    in the same run against the same process, `GET /healthz` as the ceiling of the HTTP stack.
 * Knobs (env): BENCH_LOTL_RUNS (3), BENCH_LOTL_SECONDS (5), BENCH_LOTL_CONNECTIONS (10).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { envNumber, type BenchResult } from './lib/contract.ts';

const HERE = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(HERE), '..');
const RUN_TS = path.join(ROOT, 'bin', 'run-ts.mjs');
const SNAPSHOT = path.resolve(ROOT, '..', 'shared', 'fixtures', 'trusted-lists', '2026-08');
const JDK_MS = 3000;
const JDK_MB = 176;

/** Child: import the snapshot into DIR with nothing else loaded, report time and peak RSS. */
async function childImport(dir: string): Promise<void> {
  const { openStore } = await import('../server/store/db.ts');
  const { migrate, sqlMigrations } = await import('../server/store/migrate.ts');
  const { LotlRepo } = await import('../plugins/lotl/repo.ts');
  const { LotlService } = await import('../plugins/lotl/service.ts');
  const { lotlConfig } = await import('../plugins/lotl/schemas.ts');
  const { systemClock } = await import('../server/clock.ts');
  const pino = (await import('pino')).default;
  const db = openStore(dir);
  migrate(db, 'lotl', sqlMigrations(new URL('../plugins/lotl/index.ts', import.meta.url).href));
  const svc = new LotlService(new LotlRepo(db), lotlConfig.parse({}), systemClock, pino({ level: 'silent' }));
  const baseline = process.memoryUsage().rss;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const files = fs
    .readdirSync(SNAPSHOT)
    .filter((f) => f.endsWith('.xml'))
    .map((f) => ({ name: f, source: `import:${f}`, bytes: fs.readFileSync(path.join(SNAPSHOT, f)) }));
  const report = await svc.import(files);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  db.close();
  const verified = report.lists.filter((l) => l.signature === 'valid' || l.signature === 'untrusted_signer').length;
  process.stdout.write(
    JSON.stringify({
      ms,
      cpuMs: (cpu.user + cpu.system) / 1000,
      peakMb: process.resourceUsage().maxRSS / 1024,
      baselineMb: baseline / 1048576,
      verified,
      anchors: report.anchor_count,
    }) + '\n',
  );
}

/** Child: the real appliance over DIR on an ephemeral port; prints the port. */
async function childServe(dir: string): Promise<void> {
  const { Appliance } = await import('../server/app.ts');
  const a = await Appliance.create({
    dataDir: dir,
    env: {},
    overrides: {
      http: { port: 0, host: '127.0.0.1', drainMs: 500 },
      log: { level: 'silent' },
      rateLimit: { publicPerMinute: 10_000_000, authenticatedPerMinute: 10_000_000, sensitivePerMinute: 10_000_000 },
      plugins: { lotl: { autoRefresh: false, acceptExpired: false } },
    },
  });
  const { port } = await a.start();
  process.stdout.write(JSON.stringify({ port }) + '\n');
  process.stdin.resume();
  process.stdin.on('end', () => void a.stop().then(() => process.exit(0)));
}

function runChild(args: string[], keep = false): Promise<{ line: Record<string, number>; kill: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [RUN_TS, HERE, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise<void>((r) => c.on('exit', () => r()));
    let buf = '';
    c.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        const line = JSON.parse(buf.slice(0, nl)) as Record<string, number>;
        resolve({
          line,
          kill: () => {
            c.stdin.end();
            return exited;
          },
        });
        if (!keep) c.stdin.end();
      }
    });
    c.on('exit', (code) => {
      if (code) reject(new Error(`child ${args[0]} exited with ${code}`));
    });
  });
}

async function rps(url: string, paths: string[], seconds: number, connections: number): Promise<{ rps: number; non2xx: number }> {
  let i = 0;
  // `requests` with setupRequest (autocannon's rotating-request API) is missing from our local
  // type declarations; passing it through a variable keeps the declared type honest elsewhere.
  const opts = {
    url,
    connections,
    duration: seconds,
    timeout: 10,
    requests: [{ method: 'GET', setupRequest: (req: Record<string, unknown>) => ({ ...req, path: paths[i++ % paths.length] }) }],
  };
  const r = await autocannon(opts);
  return { rps: r.requests.total / r.duration, non2xx: r.non2xx };
}

/**
 * Node flag for a measured child: at exit, its peak RSS (ru_maxrss, all threads; KiB on Linux) as
 * one JSON line on fd 3. A data: URL so nothing is added to the measured program's own files.
 */
const PEAK_PRELOAD =
  'data:text/javascript,import{writeSync}from"node:fs";process.on("exit",()=>writeSync(3,JSON.stringify({maxRssKb:process.resourceUsage().maxRSS})+"\\n"))';

/** `sovcomms lotl import SNAPSHOT` on a fresh data dir with the compiled entry: wall ms, peak MB, its last line. */
function cliImport(entry: string, dataDir: string): Promise<{ ms: number; peakMb: number; last: string }> {
  return new Promise((resolve, reject) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SOVCOMMS_')));
    const t0 = performance.now();
    const c = spawn(process.execPath, ['--import', PEAK_PRELOAD, entry, 'lotl', 'import', SNAPSHOT, '--data-dir', dataDir], {
      env: { ...env, SOVCOMMS_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'ignore', 'pipe'],
    });
    let out = '';
    let peak = '';
    c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    (c.stdio[3] as NodeJS.ReadableStream).on('data', (d: Buffer) => (peak += d.toString()));
    c.on('error', reject);
    c.on('close', (code) => {
      const ms = performance.now() - t0;
      const last = out.trim().split('\n').at(-1) ?? '';
      if (!peak.trim()) return reject(new Error(`sovcomms lotl import exited (${code}) without a peak RSS: ${last}`));
      // Exit code 1: some list was refused (HR in this snapshot is signed by a retired signer).
      if (code !== 0 && code !== 1) return reject(new Error(`sovcomms lotl import exited with ${code}: ${last}`));
      resolve({ ms, peakMb: (JSON.parse(peak) as { maxRssKb: number }).maxRssKb / 1024, last });
    });
  });
}

export default async function run(): Promise<BenchResult[]> {
  const RUNS = envNumber('BENCH_LOTL_RUNS', 3);
  const SECONDS = envNumber('BENCH_LOTL_SECONDS', 5);
  const CONNECTIONS = envNumber('BENCH_LOTL_CONNECTIONS', 10);
  const dirs: string[] = [];
  const imports: Record<string, number>[] = [];
  const cli: { ms: number; peakMb: number; last: string }[] = [];
  // Imported here, not at the top: it loads the TypeScript compiler (~100 MB), which the
  // --child-import process, this same file, must not carry into its measurement.
  const compiled = await (await import('./lib/compiled.ts')).compiledEntry();
  const loadBefore = os.loadavg()[0]!;
  try {
    for (let k = 0; k < RUNS; k++) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lotl-bench-'));
      dirs.push(dir);
      const cdir = fs.mkdtempSync(path.join(os.tmpdir(), 'lotl-bench-cli-'));
      dirs.push(cdir);
      // Alternating, the other order every other run: a neighbour's burst hits both alike.
      const steps = [async () => imports.push((await runChild(['--child-import', dir])).line), async () => cli.push(await cliImport(compiled.entry, cdir))];
      for (const step of k % 2 ? steps.reverse() : steps) await step();
    }
    const cliPeaks = cli.map((r) => r.peakMb);
    const cliPeak = Math.max(...cliPeaks);
    const cliMs = cli.map((r) => r.ms).sort((a, b) => a - b)[Math.floor(cli.length / 2)]!;
    const ms = imports.map((r) => r.ms!).sort((a, b) => a - b)[Math.floor(imports.length / 2)]!;
    const peak = Math.max(...imports.map((r) => r.peakMb!));
    const last = imports.at(-1)!;
    const out: BenchResult[] = [
      {
        name: 'import 2026-08 snapshot (30 lists, 23 MB): wall time',
        value: Math.round(ms),
        unit: 'ms',
        peer: 'JDK reference verifier (recorded, not run)',
        peerValue: JDK_MS,
        ratio: +(ms / JDK_MS).toFixed(2),
        target: '< 5000 ms',
        note: `median of ${RUNS} fresh processes; ${last.verified} signatures checked, ${last.anchors} anchors in service`,
      },
      {
        name: 'import 2026-08 snapshot: CPU time',
        value: Math.round(imports.map((r) => r.cpuMs!).sort((a, b) => a - b)[Math.floor(imports.length / 2)]!),
        unit: 'ms',
        note: 'user + system of the importing process: steadier than wall time on a shared machine',
      },
      {
        name: 'import 2026-08 snapshot: peak RSS',
        value: Math.round(peak),
        unit: 'MB',
        peer: 'JDK reference verifier (recorded, not run)',
        peerValue: JDK_MB,
        ratio: +(peak / JDK_MB).toFixed(2),
        target: '< 300 MB',
        note: `whole process incl. Node + tsx (~${Math.round(last.baselineMb!)} MB before the import)`,
      },
      {
        name: 'LOTL + national lists import peak RSS, compiled sovcomms lotl import',
        value: Math.round(cliPeak),
        unit: 'MB',
        peer: 'JDK reference verifier (recorded, not run)',
        peerValue: JDK_MB,
        ratio: +(cliPeak / JDK_MB).toFixed(2),
        target: '< 200 MB',
        note: `the highest of ${RUNS} runs of \`node dist/bin/sovcomms.js lotl import 2026-08/ --data-dir FRESH\` (${cliPeaks.map(Math.round).join(', ')} MB; ru_maxrss of the process, every thread; MB = MiB), alternating with the rows above; wall ${Math.round(cliMs)} ms (median); compiled entry: ${compiled.how}; it said: ${cli.at(-1)!.last}; 1-min load average ${loadBefore.toFixed(1)} on ${os.cpus().length} cores`,
      },
    ];
    // Serve from the first import's data dir.
    const server = await runChild(['--child-serve', dirs[0]!], true);
    try {
      const base = `http://127.0.0.1:${server.line.port}`;
      const anchors = (await (await fetch(`${base}/lotl.ashx?anchors`)).json()) as { sha256: string }[];
      const paths = [...new Set(anchors.map((a) => a.sha256))].map((s) => `/lotl.ashx?anchor=${s}`);
      await rps(base, paths, 1, CONNECTIONS); // warm-up
      const a = await rps(base, paths, SECONDS, CONNECTIONS);
      const h = await rps(base, ['/healthz'], SECONDS, CONNECTIONS);
      out.push({
        name: 'GET /lotl.ashx?anchor=<sha256> (PEM)',
        value: Math.round(a.rps),
        unit: 'req/s',
        peer: 'GET /healthz on the same process',
        peerValue: Math.round(h.rps),
        ratio: +(a.rps / h.rps).toFixed(2),
        note: `${paths.length} distinct anchors rotated, ${CONNECTIONS} connections, ${SECONDS} s; non-2xx ${a.non2xx}`,
      });
    } finally {
      await server.kill();
    }
    return out;
  } finally {
    compiled.done();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}

const mode = process.argv[2];
if (mode === '--child-import') await childImport(process.argv[3]!);
else if (mode === '--child-serve') await childServe(process.argv[3]!);
