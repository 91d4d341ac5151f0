/**
 * Issue 18's benchmark: throughput of a v1 list endpoint (`GET /api.ashx/v1/auditlog?limit=50`
 * with an `ak_` key over 10,000 rows) while 500 slow clients hold connections open, as a ratio of
 * the same endpoint with no slow clients, in the same run on the same appliance. Target: >= 0.8x.
 *
 * The slow clients (all on loopback, from 127.0.1.x source addresses so the per-IP connection cap
 * of 256 does not simply turn them away): half send a request's headers one byte every second and
 * never finish them (slow headers), half send complete headers of a public POST with a 64 KiB
 * Content-Length and then one body byte a second (slow body). A client the server closes is
 * replaced at once, so 500 stay open throughout. Rounds alternate quiet and loaded so a
 * neighbour's burst on a shared machine hits both alike. The appliance and the slow crowd
 * (bench/peers/slow-crowd.ts) run in child processes; the measured load comes from this one. Knobs: BENCH_SLOW_CLIENTS (500),
 * BENCH_SECONDS (12 per condition, over BENCH_ROUNDS = 4), BENCH_CONNECTIONS (10).
 */
import fs from 'node:fs';
import { fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { envNumber, type BenchResult } from './lib/contract.ts';
import { seedAuditlog } from './lib/seed.ts';
import { freePort, loadKnobs, loadRound, LoadStats, ROOT, RUN_TS, rssMiB, sleep, spawnServer, type Spawned } from './lib/load.ts';
import type { CrowdReply } from './peers/slow-crowd.ts';

const SLOW = envNumber('BENCH_SLOW_CLIENTS', 500);
const ROWS = 10_000;
const { CONNECTIONS, SECONDS, ROUNDS, WARMUP } = loadKnobs({ connections: 10, seconds: 12, rounds: 4, warmup: 2 });
const PATH = '/api.ashx/v1/auditlog?limit=50';

/** The crowd runs in a child process of its own, so it does not share the load generator's event loop. */
class CrowdProcess {
  #child: ChildProcess | undefined;
  #pending: ((m: CrowdReply) => void)[] = [];

  constructor(
    private readonly port: number,
    private readonly size: number,
  ) {}

  private ask(cmd: 'start' | 'count' | 'stop'): Promise<CrowdReply> {
    this.#child ??= fork(RUN_TS, [path.join(ROOT, 'bench', 'peers', 'slow-crowd.ts'), String(this.port), String(this.size)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }).on('message', (m: CrowdReply) => this.#pending.shift()?.(m));
    return new Promise((resolve) => {
      this.#pending.push(resolve);
      this.#child!.send(cmd);
    });
  }

  start = () => this.ask('start');
  count = () => this.ask('count');
  stop = () => this.ask('stop');

  async close(): Promise<void> {
    if (!this.#child) return;
    await this.stop();
    this.#child.kill();
    this.#child = undefined;
  }
}

export default async function run(): Promise<BenchResult[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-slow-'));
  let app: Spawned | undefined;
  let crowd: CrowdProcess | undefined;
  try {
    const { key } = await seedAuditlog(dataDir, ROWS);
    // One IP sends all the measured load: its request budget is raised; connection limits stay default.
    fs.writeFileSync(
      path.join(dataDir, 'config.json'),
      JSON.stringify({ log: { level: 'warn' }, rateLimit: { publicPerMinute: 100_000_000, authenticatedPerMinute: 100_000_000 } }),
    );
    const port = await freePort();
    app = await spawnServer({
      modulePath: path.join(ROOT, 'bin', 'sovcomms.mjs'),
      args: ['serve', '--data-dir', dataDir, '--host', '127.0.0.1', '--port', String(port)],
      env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SOVCOMMS_'))),
      readyUrl: `http://127.0.0.1:${port}/readyz`,
    });
    const pid = app.child.pid!;
    const url = `http://127.0.0.1:${port}${PATH}`;
    const headers = { authorization: `Bearer ${key}` };
    const probe = await fetch(url, { headers });
    if (probe.status !== 200) throw new Error(`${url} answered ${probe.status}`);
    await loadRound(url, { connections: CONNECTIONS, seconds: WARMUP, headers });
    const rssQuiet = rssMiB(pid);

    const quiet = new LoadStats();
    const loaded = new LoadStats();
    crowd = new CrowdProcess(port, SLOW);
    let closedByServer = 0;
    const openDuring: number[] = [];
    let rssLoaded = 0;
    const per = SECONDS / ROUNDS;
    for (let i = 0; i < ROUNDS; i++) {
      for (const withCrowd of i % 2 ? [true, false] : [false, true]) {
        if (withCrowd) {
          await crowd.start();
          await sleep(1500);
          openDuring.push((await crowd.count()).open);
          await loadRound(url, { connections: CONNECTIONS, seconds: per, headers, into: loaded, serverPid: pid });
          openDuring.push((await crowd.count()).open);
          rssLoaded = Math.max(rssLoaded, rssMiB(pid));
          closedByServer += (await crowd.stop()).closedByServer;
        } else {
          await loadRound(url, { connections: CONNECTIONS, seconds: per, headers, into: quiet, serverPid: pid });
        }
      }
    }
    const minOpen = Math.min(...openDuring);
    console.log(`quiet ${Math.round(quiet.rps)} req/s, with ${SLOW} slow clients ${Math.round(loaded.rps)} req/s (open: ${openDuring.join(', ')})`);
    const note =
      `${CONNECTIONS} connections, ${SECONDS} s per condition in ${ROUNDS} alternating rounds; slow clients open at the start and end of each loaded round: ` +
      `${openDuring.join(', ')} (the server closed ${closedByServer} and each was replaced); non-2xx/errors quiet ${quiet.bad + quiet.errors}, loaded ${loaded.bad + loaded.errors}`;
    return [
      {
        name: `v1 list throughput with ${SLOW} slow clients`,
        value: loaded.rps,
        unit: 'req/s',
        peer: 'same endpoint, no slow clients',
        peerValue: quiet.rps,
        ratio: loaded.rps / quiet.rps,
        target: '>= 0.8x',
        note: minOpen < SLOW * 0.9 ? `${note}; WARNING: fewer slow clients held than asked` : note,
      },
      {
        name: `v1 list p99 latency with ${SLOW} slow clients`,
        value: loaded.percentile(99),
        unit: 'ms',
        peer: 'same endpoint, no slow clients',
        peerValue: quiet.percentile(99),
        ratio: loaded.percentile(99) / quiet.percentile(99),
        note: `p50 ${loaded.percentile(50).toFixed(2)} ms loaded, ${quiet.percentile(50).toFixed(2)} ms quiet`,
      },
      {
        name: `appliance RSS with ${SLOW} slow clients`,
        value: rssLoaded,
        unit: 'MiB',
        peer: 'quiet',
        peerValue: rssQuiet,
        ratio: rssLoaded / rssQuiet,
        note: 'peak RSS sampled at the end of each loaded round',
      },
    ];
  } finally {
    await crowd?.close();
    await app?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
