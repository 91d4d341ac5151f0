/**
 * How long a script waits on the CLI: `sovcomms tenant list` and `sovcomms webhook list`, compiled
 * (`node dist/bin/sovcomms.js`, built here into a folder of its own) and through the TypeScript
 * entry (`node bin/sovcomms.mjs`), beside `node -e 0` (the runtime's own start) and the `sqlite3`
 * CLI reading the same rows from the same database: spawn to exit, alternating, median of
 * BENCH_CLI_RUNS (7).
 *
 * Target (issue 25): both commands under 300 ms compiled. A command sets up the core and its own
 * plugin (with that plugin's dependencies), not all twelve.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compiledEntry } from './lib/compiled.ts';
import { envNumber, type BenchResult } from './lib/contract.ts';
import { ROOT } from './lib/load.ts';

const RUNS = envNumber('BENCH_CLI_RUNS', 7);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

function env(dataDir: string): NodeJS.ProcessEnv {
  const e = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SOVCOMMS_')));
  return { ...e, SOVCOMMS_DATA_DIR: dataDir, SOVCOMMS_LOG_LEVEL: 'warn' };
}

/** Wall time of one run, spawn to exit, in ms; a failing run throws with its stderr. */
function timed(cmd: string, args: string[], dataDir: string): number {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { cwd: ROOT, env: env(dataDir), stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr.toString().slice(0, 500)}`);
  return ms;
}

export default async function run(): Promise<BenchResult[]> {
  const c = await compiledEntry();
  try {
    return measure(c.entry, c.how);
  } finally {
    c.done();
  }
}

/** The rows, for a compiled entry already built (`dist/bin/sovcomms.js` of `npm run build`). */
export function measure(dist: string, how = 'dist/ of npm run build'): BenchResult[] {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-cli-'));
  try {
    const ts = path.join(ROOT, 'bin', 'sovcomms.mjs');
    const db = path.join(dataDir, 'appliance.db');
    // The first command initialises the data dir (tenant, admin, keys): untimed. `migrate` also
    // creates every plugin's tables, so the sqlite3 peer reads a webhooks table that exists.
    timed(process.execPath, [dist, 'migrate'], dataDir);
    const cases: Record<string, [string, string[]]> = {
      'node -e 0': [process.execPath, ['-e', '0']],
      'sqlite3 tenants': ['sqlite3', [db, 'SELECT t.id, h.host, t.name FROM tenants t JOIN tenant_hosts h ON h.tenant_id = t.id']],
      'sqlite3 webhooks': ['sqlite3', [db, 'SELECT * FROM webhook_subscriptions']],
      'tenant list, compiled': [process.execPath, [dist, 'tenant', 'list']],
      'webhook list, compiled': [process.execPath, [dist, 'webhook', 'list']],
      'tenant list, TypeScript entry': [process.execPath, [ts, 'tenant', 'list']],
      'webhook list, TypeScript entry': [process.execPath, [ts, 'webhook', 'list']],
    };
    const samples: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
    for (let i = 0; i < RUNS; i++) {
      // Every case once a round, the order reversed every other round: a neighbour's burst hits all alike.
      const keys = i % 2 ? Object.keys(cases).reverse() : Object.keys(cases);
      for (const k of keys) samples[k]!.push(timed(cases[k]![0], cases[k]![1], dataDir));
    }
    const m = (k: string) => Math.round(median(samples[k]!));
    const list = (k: string) => samples[k]!.map((x) => Math.round(x)).join(', ');
    const load = `1-min load ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`;
    const row = (cmd: 'tenant' | 'webhook', entry: 'compiled' | 'TypeScript entry', peer: string, target?: string): BenchResult => {
      const k = `${cmd} list, ${entry}`;
      return {
        name: `sovcomms ${k}`,
        value: m(k),
        unit: 'ms',
        peer,
        peerValue: m(peer),
        ratio: Math.round((m(k) / m(peer)) * 10) / 10,
        ...(target ? { target } : {}),
        note: `spawn to exit, median of ${RUNS}: ${list(k)} ms; ${peer} ${list(peer)} ms; alternating on one data dir; compiled entry: ${how}; ${load}`,
      };
    };
    return [
      row('tenant', 'compiled', 'node -e 0', '< 300 ms'),
      row('webhook', 'compiled', 'sqlite3 webhooks', '< 300 ms'),
      row('tenant', 'TypeScript entry', 'sqlite3 tenants'),
      row('webhook', 'TypeScript entry', 'node -e 0'),
    ];
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
