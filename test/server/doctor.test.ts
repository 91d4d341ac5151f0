import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../server/cli.ts';
import path from 'node:path';
import Database from 'better-sqlite3';
import { tempDir } from '../support/server.ts';

/** `sovcomms doctor` reports schema versions, pending migrations, the runtime, disk, TLS, backup state and the SIP address. */
const dataDir = tempDir();
afterAll(() => {
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function doctor(): Promise<string[]> {
  const out: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: () => {}, stdin: async () => '' };
  await main(['doctor', '--data-dir', dataDir], io);
  return out;
}

describe('sovcomms doctor', () => {
  it('names each schema version, the runtime, disk space, TLS, backup and SIP', async () => {
    const out = await doctor();
    expect(out.some((l) => /^ok {4}schema core at version \d+, none pending$/.test(l))).toBe(true);
    expect(out.some((l) => /^ok {4}schema telephony at version \d+, none pending$/.test(l))).toBe(true);
    expect(out.some((l) => l.startsWith(`ok    runtime Node ${process.versions.node}`))).toBe(true);
    expect(out.some((l) => /disk: [\d.]+ GiB free of [\d.]+ GiB under /.test(l))).toBe(true);
    expect(out).toContain('ok    no TLS configured (plain HTTP)');
    expect(out.some((l) => l.startsWith('warn  backup: no schedule (sovcomms backup schedule'))).toBe(true);
    expect(out.some((l) => /SIP (listens on|address) 127\.0\.0\.1:5060/.test(l))).toBe(true);
  });

  it('reads the backup state: a schedule whose last run failed is a failure, with its reason', async () => {
    const db = new Database(path.join(dataDir, 'appliance.db'));
    const now = Date.now();
    db.prepare('INSERT INTO backup_schedule (id, every_ms, keep, target, created_at) VALUES (1, ?, 3, ?, ?)').run(86_400_000, '/srv/backups', now - 7_200_000);
    db.prepare(
      "INSERT INTO backup_runs (trigger, target, started_at, finished_at, ok, error) VALUES ('schedule', '/srv/backups', ?, ?, 0, 'target not writable')",
    ).run(now - 3_600_000, now - 3_599_000);
    db.close();
    expect((await doctor()).some((l) => l.startsWith('FAIL  backup: failing (target not writable at '))).toBe(true);
  });
});
