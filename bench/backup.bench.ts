/**
 * Issue 25's benchmark: a backup of a large data dir while the appliance serves v1 reads, beside
 * `sqlite3 .backup` of the same database alone (the SQLite CLI, /usr/bin/sqlite3), in the same
 * run, under the same read load. Target: the appliance's whole backup (the database's pages read
 * under a held read transaction on the backup's thread, the files, encryption, fsync) <= 1.2x the peer's time, and the
 * p99 of `GET /api.ashx/v1/auditlog?limit=50` during it < 50 ms.
 *
 * The data dir: BENCH_BACKUP_MB (1024) in all, 90 % database (a table of random 8 KiB rows beside
 * 10,000 audit rows) and 10 % files of 1 MiB under the tenant's folder. The appliance runs as
 * `sovcomms serve` in its own process; the backup is the console's `POST /api.ashx/v1/backups`
 * (the same code the schedule runs); reads come from 8 concurrent clients in this process.
 * Rounds alternate peer and appliance (BENCH_ROUNDS, 3 each: an odd count, so the median is one
 * round's) so a neighbour's burst hits both; the note gives each round's ratio too. A quick run:
 * BENCH_BACKUP_MB=256.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { envNumber, type BenchResult } from './lib/contract.ts';
import { freePort, ROOT, sleep, spawnServer, type Spawned } from './lib/load.ts';
import { seedAuditlog, type Seeded } from './lib/seed.ts';

const MB = envNumber('BENCH_BACKUP_MB', 1024);
const ROUNDS = envNumber('BENCH_ROUNDS', 3);
const READERS = 8;
const PATH = '/api.ashx/v1/auditlog?limit=50';

/** The audit rows the readers page through, a bulk table of random 8 KiB rows, and 1 MiB files. */
function seed(dataDir: string): Promise<Seeded> {
  return seedAuditlog(dataDir, 10_000, (core) => {
    core.db.exec('CREATE TABLE bench_bulk (id INTEGER PRIMARY KEY, v BLOB NOT NULL)');
    const ins = core.db.prepare('INSERT INTO bench_bulk (v) VALUES (?)');
    const rows = Math.floor((MB * 0.9 * 1024) / 8);
    const blob = crypto.randomBytes(8192 * 64);
    for (let done = 0; done < rows;) {
      core.db.transaction(() => {
        for (let i = 0; i < 5000 && done < rows; i++, done++) ins.run(blob.subarray((i % 64) * 8192, (i % 64) * 8192 + 8192));
      })();
    }
    const files = path.join(dataDir, 'tenants', core.tenants.primary()!.id, 'transcripts');
    fs.mkdirSync(files, { recursive: true });
    for (let i = 0; i < Math.floor(MB * 0.1); i++) fs.writeFileSync(path.join(files, `f${i}.json`), crypto.randomBytes(1024 * 1024));
  });
}

/** Reads from READERS clients until `until` settles; every latency in ms. */
async function readsDuring(url: string, key: string, until: Promise<unknown>): Promise<{ lat: number[]; bad: number }> {
  let done = false;
  void until.finally(() => (done = true));
  const lat: number[] = [];
  let bad = 0;
  await Promise.all(
    Array.from({ length: READERS }, async () => {
      while (!done) {
        const t = performance.now();
        try {
          const r = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
          await r.arrayBuffer();
          lat.push(performance.now() - t);
          if (r.status !== 200) bad++;
        } catch {
          // A keep-alive socket the server closed as the next request went out: counted, not fatal.
          bad++;
        }
      }
    }),
  );
  return { lat, bad };
}

function p(lat: number[], q: number): number {
  const s = [...lat].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((q / 100) * s.length) - 1)] ?? NaN;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function sqliteBackup(db: string, out: string): Promise<number> {
  const t = performance.now();
  return new Promise((resolve, reject) =>
    execFile('/usr/bin/sqlite3', [db, `.backup '${out}'`], (e) => {
      if (e) reject(new Error(e.message));
      else resolve(performance.now() - t);
    }),
  );
}

export default async function run(): Promise<BenchResult[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-backup-'));
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-bench-backup-out-'));
  let app: Spawned | undefined;
  try {
    const t0 = performance.now();
    const { key, password } = await seed(dataDir);
    const dbBytes = fs.statSync(path.join(dataDir, 'appliance.db')).size;
    console.log(`seeded ${Math.round(dbBytes / 2 ** 20)} MiB database + ${Math.floor(MB * 0.1)} MiB files in ${Math.round(performance.now() - t0)} ms`);
    fs.writeFileSync(
      path.join(dataDir, 'config.json'),
      JSON.stringify({
        log: { level: 'warn' },
        plugins: { telephony: { bridge: { mode: 'off' } }, lotl: { autoRefresh: false } },
        rateLimit: { publicPerMinute: 100_000_000, authenticatedPerMinute: 100_000_000, sensitivePerMinute: 100_000 },
      }),
    );
    const port = await freePort();
    app = await spawnServer({
      modulePath: path.join(ROOT, 'bin', 'sovcomms.mjs'),
      args: ['serve', '--data-dir', dataDir, '--host', '127.0.0.1', '--port', String(port)],
      env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SOVCOMMS_'))),
      readyUrl: `http://127.0.0.1:${port}/readyz`,
    });
    const base = `http://127.0.0.1:${port}`;
    const tok = await fetch(`${base}/oidc.ashx/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', host: `localhost:${port}` },
      body: new URLSearchParams({ grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password, scope: 'openid' }),
    });
    const bearer = ((await tok.json()) as { access_token: string }).access_token;
    if (!bearer) throw new Error(`no console token: ${tok.status}`);
    const quiet = await readsDuring(base + PATH, key, sleep(3000));
    const peerMs: number[] = [];
    const ourMs: number[] = [];
    const peerLat: number[] = [];
    const ourLat: number[] = [];
    let archiveBytes = 0;
    let bad = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const out = path.join(scratch, `peer-${i}.db`);
      const peer = sqliteBackup(path.join(dataDir, 'appliance.db'), out);
      const pr = await readsDuring(base + PATH, key, peer);
      peerMs.push(await peer);
      peerLat.push(...pr.lat);
      fs.rmSync(out, { force: true });
      const t = performance.now();
      const made = fetch(`${base}/api.ashx/v1/backups`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', host: `localhost:${port}` },
        body: '{}',
      }).then(async (r) => {
        const body = (await r.json()) as { name?: string; bytes?: number };
        if (r.status !== 201) throw new Error(`backup answered ${r.status}: ${JSON.stringify(body)}`);
        return { ms: performance.now() - t, ...body };
      });
      const or = await readsDuring(base + PATH, key, made);
      const m = await made;
      ourMs.push(m.ms);
      ourLat.push(...or.lat);
      bad += pr.bad + or.bad;
      archiveBytes = m.bytes ?? 0;
      fs.rmSync(path.join(dataDir, 'backups', m.name!), { force: true });
      console.log(`round ${i + 1}: sqlite3 .backup ${Math.round(peerMs.at(-1)!)} ms, appliance backup ${Math.round(m.ms)} ms`);
    }
    const peer = median(peerMs);
    const ours = median(ourMs);
    const size = `${Math.round(dbBytes / 2 ** 20)} MiB database + ${Math.floor(MB * 0.1)} MiB files`;
    return [
      {
        name: `backup of a ${MB} MB data dir while serving`,
        value: ours,
        unit: 'ms',
        peer: 'sqlite3 .backup of the database alone',
        peerValue: peer,
        ratio: ours / peer,
        target: '<= 1.2x',
        note: `${size}; archive ${Math.round(archiveBytes / 2 ** 20)} MiB; median of ${ROUNDS} alternating rounds each (appliance ${ourMs.map(Math.round).join(', ')} ms; sqlite3 ${peerMs.map(Math.round).join(', ')} ms; per round ${ourMs.map((o, i) => (o / peerMs[i]!).toFixed(2)).join(', ')}x), both under ${READERS} concurrent v1 readers`,
      },
      {
        name: 'v1 read p99 during the backup',
        value: p(ourLat, 99),
        unit: 'ms',
        peer: 'during sqlite3 .backup',
        peerValue: p(peerLat, 99),
        ratio: p(ourLat, 99) / p(peerLat, 99),
        target: '< 50 ms',
        note: `${PATH} with an ak_ key, ${READERS} clients; p50 ${p(ourLat, 50).toFixed(1)} ms (during sqlite3 ${p(peerLat, 50).toFixed(1)} ms, quiet p99 ${p(quiet.lat, 99).toFixed(1)} ms); ${ourLat.length} reads during the appliance's backups, non-200 or failed: ${bad}`,
      },
    ];
  } finally {
    await app?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
