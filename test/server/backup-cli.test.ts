import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readDataDirDb, runCli } from '../support/cli.ts';
import { scratchDirs } from '../support/cleanup.ts';

/**
 * The backup commands of the CLI, each on a data dir of its own (so they run side by side): a
 * passphrase is read from stdin and never printed, a generated recovery key is printed exactly
 * once, `list` shows what is there, `schedule` sets, shows and clears the server's schedule.
 */
const dir = scratchDirs('sovcomms-backup-cli-');

describe.concurrent('the CLI: passphrase, list, schedule; secrets printed once', { timeout: 240_000 }, () => {
  it('backup create --passphrase-stdin; restore with it; the passphrase is never printed', async () => {
    const d = dir();
    expect((await runCli(['tenant', 'add', 'pp.example'], { dataDir: d })).code).toBe(0);
    const pass = 'correct horse battery staple';
    const made = await runCli(['backup', 'create', '--passphrase-stdin', '--to', path.join(d, 'out')], { dataDir: d, stdin: `${pass}\n` });
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout + made.stderr).not.toContain(pass);
    expect(made.stdout).not.toMatch(/Recovery key/);
    const master = fs.readFileSync(path.join(d, 'master.key'), 'utf8').trim();
    expect(made.stdout + made.stderr).not.toContain(master);
    const list = await runCli(['backup', 'list', '--to', path.join(d, 'out'), '--json'], { dataDir: d });
    const items = JSON.parse(list.stdout) as { name: string; state: string; protection: string; bytes: number }[];
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ state: 'complete', protection: 'passphrase' });
    const file = path.join(d, 'out', items[0]!.name);
    const wrong = await runCli(['backup', 'restore', file, '--passphrase-stdin'], { dataDir: path.join(dir(), 'x'), stdin: 'not the passphrase' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('wrong passphrase or recovery key');
    const target = path.join(dir(), 'y');
    const ok = await runCli(['backup', 'restore', file, '--passphrase-stdin'], { dataDir: target, stdin: `${pass}\n` });
    expect(ok.code, ok.stderr).toBe(0);
    readDataDirDb(target, (db) => expect(db.prepare("SELECT COUNT(*) AS n FROM tenant_hosts WHERE host = 'pp.example'").get()).toEqual({ n: 1 }));
  });

  it('backup create without a passphrase prints the recovery key exactly once', async () => {
    const d = dir();
    const made = await runCli(['backup', 'create'], { dataDir: d });
    expect(made.code, made.stderr).toBe(0);
    const keys = (made.stdout + made.stderr).match(/[A-Z2-7]{4}(?:-[A-Z2-7]{1,4}){12}/g) ?? [];
    expect(keys).toHaveLength(1);
    // Not in the audit row of the change either.
    readDataDirDb(d, (db) => {
      const rows = db.prepare("SELECT * FROM audit_log WHERE event LIKE 'cli-backup%'").all();
      expect(rows.length).toBe(1);
      expect(JSON.stringify(rows)).not.toContain(keys[0]);
    });
  });

  it('backup schedule sets, shows and clears; the next run is a job of the server', async () => {
    const d = dir();
    const set = await runCli(['backup', 'schedule', '--every', '24h', '--keep', '14', '--to', path.join(d, 'sched'), '--passphrase-stdin'], {
      dataDir: d,
      stdin: 'a schedule passphrase',
    });
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/backups every 24h, keeping 14/);
    const shown = await runCli(['backup', 'schedule', 'show', '--json'], { dataDir: d });
    const st = JSON.parse(shown.stdout) as { configured: boolean; schedule: { every: string; keep: number }; nextRun: string; health: string };
    expect(st).toMatchObject({ configured: true, schedule: { every: '24h', keep: 14 }, health: 'ok' });
    readDataDirDb(d, (db) => {
      const job = db.prepare("SELECT run_at FROM jobs WHERE queue = 'core.backup' AND state = 'pending'").get() as { run_at: number };
      expect(new Date(job.run_at).toISOString()).toBe(st.nextRun);
      // The key is stored sealed, never the passphrase.
      const all = JSON.stringify(db.prepare('SELECT * FROM settings').all());
      expect(all).not.toContain('a schedule passphrase');
    });
    const cleared = await runCli(['backup', 'schedule', 'clear'], { dataDir: d });
    expect(cleared.stdout).toContain('cleared');
    readDataDirDb(d, (db) => {
      expect(db.prepare("SELECT COUNT(*) AS n FROM jobs WHERE queue = 'core.backup' AND state = 'pending'").get()).toEqual({ n: 0 });
      expect(db.prepare("SELECT COUNT(*) AS n FROM settings WHERE key = 'secret:backup-key'").get()).toEqual({ n: 0 });
    });
    expect((await runCli(['backup', 'schedule', '--every', '10s', '--keep', '1'], { dataDir: d })).code).toBe(2);
  });
});
