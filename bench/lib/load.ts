/**
 * Helpers for HTTP benchmarks: servers in child processes (so the load generator never shares
 * their event loop), readiness polling, RSS of a process, and autocannon runs whose latencies
 * are kept so that interleaved rounds can be merged into one exact percentile.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon, { type Result } from 'autocannon';
import { envNumber } from './contract.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const RUN_TS = path.join(ROOT, 'bin', 'run-ts.mjs');

/** A free loopback port (closed again: a tiny race, acceptable for a benchmark). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface Spawned {
  child: ChildProcess;
  /** Milliseconds from spawn to the first 2xx answer of `readyUrl`. */
  readyMs: number;
  /** CPU milliseconds (all threads) the child had used by then; undefined where /proc is missing. */
  readyCpuMs: number | undefined;
  stop(): Promise<void>;
}

/**
 * Forks `modulePath` (a .mjs, or a .ts through bin/run-ts.mjs) and polls `readyUrl` every 5 ms
 * from the moment of spawn; resolves at its first 2xx. The child's stdout/stderr are passed on.
 */
export async function spawnServer(opts: {
  modulePath: string;
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** Node flags for the child (e.g. --cpu-prof). */
  execArgv?: string[];
  readyUrl: string;
  timeoutMs?: number;
}): Promise<Spawned> {
  const isTs = opts.modulePath.endsWith('.ts');
  const t0 = performance.now();
  const child = fork(isTs ? RUN_TS : opts.modulePath, isTs ? [opts.modulePath, ...(opts.args ?? [])] : (opts.args ?? []), {
    cwd: ROOT,
    env: opts.env ?? process.env,
    execArgv: opts.execArgv ?? [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const stop = () => stopChild(child);
  let exited: string | undefined;
  child.once('exit', (code, sig) => {
    exited = `exited (${sig ?? `code ${code}`}) before it was ready`;
  });
  const deadline = t0 + (opts.timeoutMs ?? 30_000);
  for (;;) {
    if (exited) throw new Error(`${path.basename(opts.modulePath)} ${exited}`);
    if (performance.now() > deadline) {
      await stop();
      throw new Error(`${path.basename(opts.modulePath)} not ready at ${opts.readyUrl} within ${opts.timeoutMs ?? 30_000} ms`);
    }
    try {
      const r = await fetch(opts.readyUrl, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.ok) return { child, readyMs: performance.now() - t0, readyCpuMs: cpuMs(child.pid!), stop };
    } catch {
      // Not listening yet.
    }
    await sleep(5);
  }
}

/** SIGTERM (the appliance drains and closes its store), then SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(t);
}

/** Resident set size of a process in MiB: /proc VmRSS on Linux, `ps` elsewhere. */
export function rssMiB(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    if (kb) return Number(kb) / 1024;
  } catch {
    // Not Linux: ask ps.
  }
  return Number(execFileSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' }).trim()) / 1024;
}

/**
 * CPU time (user + system, ms) a process has used so far, from /proc/<pid>/stat on Linux
 * (undefined elsewhere). Unlike wall-clock throughput it hardly moves when neighbours load the
 * machine, so CPU per request is the steadier comparison on a shared box.
 */
export function cpuMs(pid: number): number | undefined {
  try {
    // Fields after "(comm) ": state is [0], utime [11], stime [12], in clock ticks (USER_HZ = 100 on Linux).
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return undefined;
  }
}

/** Latencies (ms) and counts of one server over one or more autocannon rounds. */
export class LoadStats {
  latencies: number[] = [];
  ok = 0;
  bad = 0;
  errors = 0;
  seconds = 0;
  /** CPU ms the server used during the rounds (NaN when it cannot be read). */
  cpuMs = 0;
  statuses: Record<string, number> = {};

  get rps(): number {
    return this.seconds ? this.ok / this.seconds : 0;
  }

  /** Server CPU microseconds per successful response. */
  get cpuUsPerRequest(): number {
    return this.ok ? (this.cpuMs * 1000) / this.ok : NaN;
  }

  percentile(p: number): number {
    if (!this.latencies.length) return NaN;
    const sorted = Float64Array.from(this.latencies).sort();
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  }
}

/**
 * One autocannon round against `url`. With `into`, every response's latency and status is kept
 * (autocannon's own histogram cannot be merged across rounds).
 */
export async function loadRound(
  url: string,
  o: { connections: number; seconds: number; headers?: Record<string, string>; method?: 'GET' | 'POST'; body?: string; into?: LoadStats; serverPid?: number },
): Promise<Result> {
  const cpu0 = o.serverPid ? cpuMs(o.serverPid) : undefined;
  const inst = autocannon({ url, method: o.method ?? 'GET', connections: o.connections, duration: o.seconds, headers: o.headers, body: o.body, timeout: 10 });
  const s = o.into;
  if (s) {
    inst.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      s.statuses[status] = (s.statuses[status] ?? 0) + 1;
      if (status >= 200 && status < 300) {
        s.ok++;
        s.latencies.push(ms);
      } else s.bad++;
    });
  }
  const r = await inst;
  if (s) {
    s.seconds += r.duration;
    s.errors += r.errors + r.timeouts;
    const cpu1 = o.serverPid ? cpuMs(o.serverPid) : undefined;
    s.cpuMs += cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : NaN;
  }
  return r;
}

/**
 * The HTTP load knobs the server benchmarks share (`BENCH_CONNECTIONS`, `BENCH_SECONDS`,
 * `BENCH_ROUNDS`, `BENCH_WARMUP_SECONDS`), with each benchmark's own defaults.
 */
export function loadKnobs(d: { connections: number; seconds: number; rounds: number; warmup: number }): {
  CONNECTIONS: number;
  SECONDS: number;
  ROUNDS: number;
  WARMUP: number;
} {
  return {
    CONNECTIONS: envNumber('BENCH_CONNECTIONS', d.connections),
    SECONDS: envNumber('BENCH_SECONDS', d.seconds),
    ROUNDS: envNumber('BENCH_ROUNDS', d.rounds),
    WARMUP: envNumber('BENCH_WARMUP_SECONDS', d.warmup),
  };
}
