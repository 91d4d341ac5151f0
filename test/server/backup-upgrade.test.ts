import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readDataDirDb, ROOT, runCli } from '../support/cli.ts';
import { scratchDirs } from '../support/cleanup.ts';
import { openStore } from '../../server/store/db.ts';
import { appliedVersion, migrate, type Migration } from '../../server/store/migrate.ts';
import type { Tenant } from '../../server/tenancy.ts';
import { KeyService } from '../../server/keys.ts';
import { keyFromRecoveryKey, newRecoveryKey } from '../../server/backup/archive.ts';
import { createArchive } from '../../server/backup/create.ts';

/**
 * An archive made by the previous release restores onto this one: the data dir is built from the
 * migrations as they were at that release (read from git history, main before backups existed),
 * rows are written, the archive is made, and `sovcomms backup restore` runs the normal
 * migrations on the restored database (core 0004 among them); the rows read back.
 */
const PREVIOUS_RELEASE = 'd91eb23';
const dir = scratchDirs('sovcomms-backup-upgrade-');

function migrationsAt(commit: string): Map<string, Migration[]> {
  const files = execFileSync('git', ['ls-tree', '-r', '--name-only', commit], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((f) => /^(server|plugins\/[a-z-]+)\/migrations\/\d{4}-[a-z0-9-]+\.sql$/.test(f))
    .sort();
  const out = new Map<string, Migration[]>();
  for (const f of files) {
    const plugin = f.startsWith('server/') ? 'core' : f.split('/')[1]!;
    const name = path.basename(f, '.sql');
    const list = out.get(plugin) ?? [];
    list.push({ version: Number(name.slice(0, 4)), name, sql: execFileSync('git', ['show', `${commit}:${f}`], { cwd: ROOT, encoding: 'utf8' }) });
    out.set(plugin, list);
  }
  return out;
}

describe("an archive of the previous release's schema", () => {
  it('restores and migrates forward, every row read back', { timeout: 180_000 }, async () => {
    const old = dir();
    const db = openStore(old);
    const previous = migrationsAt(PREVIOUS_RELEASE);
    for (const [plugin, list] of previous) migrate(db, plugin, list);
    expect(appliedVersion(db, 'core')).toBe(3);
    // The tenant as that release wrote it (its tables, not today's TenantService, which reads
    // tables of later migrations).
    const tenant: Tenant = { id: 'a1b2c3d4e5f6', name: 'Old office', host: 'old.example', hosts: ['old.example'], isPrimary: true, hmacV1: true };
    db.prepare("INSERT INTO tenants (id, name, is_primary, created_at, hmac_v1) VALUES (?, ?, 1, '2026-10-01T00:00:00.000Z', 1)").run(tenant.id, tenant.name);
    db.prepare('INSERT INTO tenant_hosts (host, tenant_id, position) VALUES (?, ?, 0)').run(tenant.host, tenant.id);
    // The user as that release wrote it too (today's UserService writes columns of later migrations, e.g. language).
    db.prepare(
      "INSERT INTO users (id, tenant_id, name, role, password_hash, status, created_at, updated_at) VALUES ('u-old-1', ?, 'olduser', 'admin', NULL, 'active', '2026-10-01T00:00:00.000Z', '2026-10-01T00:00:00.000Z')",
    ).run(tenant.id);
    fs.mkdirSync(path.join(old, 'tenants', tenant.id, 'transcripts'), { recursive: true });
    fs.writeFileSync(path.join(old, 'tenants', tenant.id, 'transcripts', 'call-1.json'), '{"lines":[]}');
    const keys = KeyService.load(old);
    const rk = newRecoveryKey();
    const made = await createArchive({
      db,
      dataDir: old,
      keys,
      key: keyFromRecoveryKey(rk),
      toDir: path.join(dir(), 'out'),
      now: Date.parse('2026-11-01T00:00:00Z'),
      build: 'previous',
    });
    db.close();
    const target = path.join(dir(), 'restored');
    const r = await runCli(['backup', 'restore', made.file, '--recovery-key-stdin'], { dataDir: target, stdin: rk, timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/migrated forward: .*core\/0004-backup/);
    readDataDirDb(target, (rdb) => {
      expect(rdb.pragma('integrity_check', { simple: true })).toBe('ok');
      expect((rdb.prepare("SELECT MAX(version) AS v FROM schema_migrations WHERE plugin = 'core'").get() as { v: number }).v).toBeGreaterThanOrEqual(4);
      expect(rdb.prepare('SELECT COUNT(*) AS n FROM backup_runs').get()).toEqual({ n: 0 });
      expect(rdb.prepare("SELECT name FROM users WHERE name = 'olduser'").get()).toEqual({ name: 'olduser' });
      expect(rdb.prepare("SELECT host FROM tenant_hosts WHERE host = 'old.example'").get()).toEqual({ host: 'old.example' });
    });
    expect(fs.readFileSync(path.join(target, 'tenants', tenant.id, 'transcripts', 'call-1.json'), 'utf8')).toBe('{"lines":[]}');
  });
});
