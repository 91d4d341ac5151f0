import fs from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../support/server.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CHILD = path.join(ROOT, 'test/support/job-child.ts');
const RUN_TS = path.join(ROOT, 'bin/run-ts.mjs');
const JOBS = 200;

const children = new Set<ChildProcess>();
const dirs: string[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/** Starts the child appliance and resolves once it prints its ready line. */
function startChild(
  dataDir: string,
  out: string,
  enqueue?: number,
): Promise<{ child: ChildProcess; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> }> {
  const child = spawn(process.execPath, [RUN_TS, CHILD, dataDir, out, ...(enqueue ? [String(enqueue)] : [])], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal, stderr }));
  });
  return new Promise((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new Error(`child not ready in 90 s; stderr: ${stderr}`)), 90_000);
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
      if (stdout.includes('"ready"')) {
        clearTimeout(timer);
        resolve({ child, exited });
      }
    });
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${code}) before ready: ${stderr}`));
    });
  });
}

function lines(out: string): { id: number; pid: number }[] {
  if (!fs.existsSync(out)) return [];
  return fs
    .readFileSync(out, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [id, pid] = l.split(' ');
      return { id: Number(id), pid: Number(pid) };
    });
}

function jobStates(dataDir: string): Map<number, string> {
  const db = new Database(path.join(dataDir, 'appliance.db'), { readonly: true, fileMustExist: true });
  try {
    const rows = db.prepare("SELECT id, state FROM jobs WHERE queue = 'crash-append'").all() as { id: number; state: string }[];
    return new Map(rows.map((r) => [r.id, r.state]));
  } finally {
    db.close();
  }
}

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('job queue across a crash (real child processes)', () => {
  it('SIGKILL mid-work, restart: every job runs, no finished job runs again, the database is intact', { timeout: 300_000 }, async () => {
    const dataDir = tempDir('sovcomms-crash-');
    dirs.push(dataDir);
    const out = path.join(dataDir, 'ran.txt');

    const first = await startChild(dataDir, out, JOBS);
    await until(() => lines(out).length >= 40, 90_000, '40 jobs done before the kill');
    first.child.kill('SIGKILL');
    const e1 = await first.exited;
    expect(e1.signal).toBe('SIGKILL');

    // What the crashed process had finished, as the database recorded it.
    const before = jobStates(dataDir);
    expect(before.size).toBe(JOBS);
    const doneBefore = [...before].filter(([, s]) => s === 'done').map(([id]) => id);
    expect(doneBefore.length).toBeGreaterThan(0);
    expect(doneBefore.length).toBeLessThan(JOBS);

    const second = await startChild(dataDir, out);
    await until(() => [...jobStates(dataDir).values()].every((s) => s === 'done'), 120_000, 'every job done after the restart');
    second.child.kill('SIGTERM');
    const e2 = await second.exited;
    expect(e2.code, e2.stderr).toBe(0);

    const ran = lines(out);
    const ids = new Set(ran.map((r) => r.id));
    // Every job ran at least once.
    for (const id of before.keys()) expect(ids.has(id), `job ${id} never ran`).toBe(true);
    // No job the first process had finished ran again in the second.
    const secondPid = new Set(ran.filter((r) => r.pid !== ran[0]!.pid).map((r) => r.pid));
    expect(secondPid.size).toBe(1);
    const rerunDone = ran.filter((r) => secondPid.has(r.pid) && doneBefore.includes(r.id));
    expect(rerunDone).toEqual([]);
    // Re-runs are only of jobs that were in flight at the kill (at most the concurrency of 4).
    const counts = new Map<number, number>();
    for (const r of ran) counts.set(r.id, (counts.get(r.id) ?? 0) + 1);
    expect([...counts.values()].filter((n) => n > 1).length).toBeLessThanOrEqual(4);

    const db = new Database(path.join(dataDir, 'appliance.db'));
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(db.prepare("SELECT * FROM jobs WHERE queue = 'crash-append' AND (state != 'done' OR lease_owner IS NOT NULL)").all()).toEqual([]);
    } finally {
      db.close();
    }
  });

  it('SIGTERM stops cleanly: exit 0, running jobs drain to done, nothing left leased', { timeout: 200_000 }, async () => {
    const dataDir = tempDir('sovcomms-term-');
    dirs.push(dataDir);
    const out = path.join(dataDir, 'ran.txt');
    const c = await startChild(dataDir, out, 40);
    await until(() => lines(out).length >= 4, 90_000, 'some jobs done');
    c.child.kill('SIGTERM');
    const e = await c.exited;
    expect(e.code, e.stderr).toBe(0);
    expect(e.stderr).toContain('SIGTERM: stopping');
    const states = jobStates(dataDir);
    // Drained: nothing stays 'running'; jobs not yet started remain pending for the next start.
    expect([...states.values()].filter((s) => s === 'running')).toEqual([]);
    const done = [...states]
      .filter(([, s]) => s === 'done')
      .map(([id]) => id)
      .sort((a, b) => a - b);
    expect(done.sort((a, b) => a - b)).toEqual([...new Set(lines(out).map((l) => l.id))].sort((a, b) => a - b));
    const db = new Database(path.join(dataDir, 'appliance.db'));
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      // The WAL was checkpointed and truncated at the clean stop.
      const wal = path.join(dataDir, 'appliance.db-wal');
      expect(!fs.existsSync(wal) || fs.statSync(wal).size === 0).toBe(true);
    } finally {
      db.close();
    }
  });
});
