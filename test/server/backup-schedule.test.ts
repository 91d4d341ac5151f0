import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { scratchDirs } from '../support/cleanup.ts';
import { until } from '../support/until.ts';
import { ManualClock } from '../../server/clock.ts';
import { keyFromRecoveryKey, newRecoveryKey } from '../../server/backup/archive.ts';
import { BACKUP_FAILED } from '../../server/backup/service.ts';

/**
 * Scheduled backups run on the server's job runner: each period one archive, the oldest past
 * `keep` removed; a failed run is a run row with its reason, an audit row and a `backup.failed`
 * event of the primary tenant (what webhooks deliver), and /readyz says degraded with the reason.
 */
const dir = scratchDirs('sovcomms-backup-schedule-');
const HOUR = 3_600_000;
let s: TestServer;
const clock = new ManualClock(Date.parse('2026-11-28T00:00:00Z'));

beforeAll(async () => {
  s = await startTestServer({ clock });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

const runs = () => (s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM backup_runs').get() as { n: number }).n;

describe('scheduled backups', { timeout: 120_000 }, () => {
  it('run every period on the job runner and keep the newest `keep`', async () => {
    const b = s.appliance.core.backups;
    const target = path.join(dir(), 'archives');
    b.setSchedule({ everyMs: HOUR, keep: 2, target }, keyFromRecoveryKey(newRecoveryKey()));
    expect(b.state()).toMatchObject({ configured: true, health: 'ok', nextRun: '2026-11-28T01:00:00.000Z', lastSuccess: null });
    for (let i = 1; i <= 3; i++) {
      clock.advance(HOUR + 1000);
      s.appliance.core.jobs.kick();
      await until(() => runs() === i, 60_000, `scheduled run ${i}`);
    }
    const st = b.state();
    expect(st.lastSuccess).toMatchObject({ trigger: 'schedule' });
    expect(st.lastFailure).toBeNull();
    expect(Date.parse(st.nextRun!)).toBeGreaterThan(clock.now());
    expect(fs.readdirSync(target).filter((n) => n.endsWith('.sovbak'))).toHaveLength(2);
    const ready = (await (await s.fetch('/readyz')).json()) as { status: string; backup: { health: string; lastSuccess: string } };
    expect(ready.backup).toMatchObject({ health: 'ok', lastSuccess: st.lastSuccess!.at });
  });

  it('a failed run: its reason in the state, an audit row, a backup.failed event, /readyz degraded', async () => {
    const b = s.appliance.core.backups;
    // A file where the target folder should be: the archive cannot be written.
    const blocked = path.join(dir(), 'not-a-folder');
    fs.writeFileSync(blocked, 'x');
    b.setSchedule({ everyMs: HOUR, keep: 2, target: blocked }, keyFromRecoveryKey(newRecoveryKey()));
    const before = runs();
    clock.advance(HOUR + 1000);
    s.appliance.core.jobs.kick();
    await until(() => runs() === before + 1, 60_000, 'failed run');
    const st = b.state();
    expect(st.health).toBe('failing');
    expect(st.lastFailure).toMatchObject({ trigger: 'schedule', reason: expect.stringMatching(/EEXIST|ENOTDIR/) });
    const db = s.appliance.core.db;
    const ev = db.prepare('SELECT tenant_id, data FROM events WHERE name = ?').get(BACKUP_FAILED) as { tenant_id: string; data: string };
    expect(ev.tenant_id).toBe(s.primary.id);
    expect(JSON.parse(ev.data)).toMatchObject({ trigger: 'schedule', target: blocked });
    const audit = db.prepare("SELECT * FROM audit_log WHERE event = 'backup-failed'").all();
    expect(audit).toHaveLength(1);
    const res = await s.fetch('/readyz');
    const ready = (await res.json()) as { status: string; backup: { health: string; lastFailure: { reason: string } } };
    expect(res.status).toBe(200);
    expect(ready.status).toBe('degraded');
    expect(ready.backup.health).toBe('failing');
    expect(ready.backup.lastFailure.reason).toMatch(/EEXIST|ENOTDIR/);
    // And the next run is still scheduled.
    expect(Date.parse(b.state().nextRun!)).toBeGreaterThan(clock.now());
  });
});
