import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Appliance } from '../../server/app.ts';
import { definePlugin, type AnyPlugin } from '../../server/plugin.ts';
import { appliedVersion, migrate, sqlMigrations, type Migration } from '../../server/store/migrate.ts';
import { openStore } from '../../server/store/db.ts';
import { MigrationError } from '../../server/errors.ts';
import { LogCapture } from '../support/server.ts';
import { withBuiltins } from './fixtures/test-plugins.ts';
import { scratchDirs } from '../support/cleanup.ts';

const dir = scratchDirs('sovcomms-migrate-');

const STEPS: Migration[] = [
  { version: 1, name: '0001-notes', sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, body TEXT NOT NULL) STRICT;' },
  { version: 2, name: '0002-notes-pinned', sql: 'ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;' },
  {
    version: 3,
    name: '0003-notes-upper',
    // A data migration in code: runs in the same transaction as the SQL steps.
    up: (db) => {
      db.prepare('UPDATE notes SET body = upper(body)').run();
    },
  },
];

function notesPlugin(steps: Migration[]): AnyPlugin {
  return definePlugin({ name: 'notes', description: 'migration test plugin', migrations: steps }) as AnyPlugin;
}

async function open(dataDir: string, steps: Migration[]): Promise<Appliance> {
  return Appliance.create({ dataDir, env: {}, plugins: await withBuiltins(notesPlugin(steps)), logDestination: new LogCapture() });
}

describe('migrations', () => {
  it("a fresh database gets every plugin's schema, WAL and foreign keys", async () => {
    const d = dir();
    const a = await open(d, STEPS);
    try {
      const db = a.core.db;
      expect(appliedVersion(db, 'core')).toBeGreaterThanOrEqual(1);
      expect(appliedVersion(db, 'audit')).toBeGreaterThanOrEqual(1);
      expect(appliedVersion(db, 'notes')).toBe(3);
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name);
      expect(tables).toEqual(expect.arrayContaining(['tenants', 'users', 'api_keys', 'jobs', 'events', 'audit_log', 'notes', 'schema_migrations']));
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
      expect(db.pragma('busy_timeout', { simple: true })).toBeGreaterThan(0);
    } finally {
      await a.stop();
    }
  });

  it('an upgrade applies only the new step and keeps the rows', async () => {
    const d = dir();
    let a = await open(d, STEPS.slice(0, 1));
    const tenant = a.core.tenants.primary()!;
    a.core.db.prepare('INSERT INTO notes (tenant_id, body) VALUES (?, ?), (?, ?)').run(tenant.id, 'first', tenant.id, 'second');
    await a.stop();

    a = await open(d, STEPS.slice(0, 2));
    try {
      expect(appliedVersion(a.core.db, 'notes')).toBe(2);
      expect(a.core.db.prepare('SELECT body, pinned FROM notes ORDER BY id').all()).toEqual([
        { body: 'first', pinned: 0 },
        { body: 'second', pinned: 0 },
      ]);
    } finally {
      await a.stop();
    }

    a = await open(d, STEPS);
    try {
      expect(a.core.db.prepare('SELECT body FROM notes ORDER BY id').all()).toEqual([{ body: 'FIRST' }, { body: 'SECOND' }]);
      const rows = a.core.db.prepare("SELECT version, name FROM schema_migrations WHERE plugin = 'notes' ORDER BY version").all();
      expect(rows).toEqual(STEPS.map((m) => ({ version: m.version, name: m.name })));
    } finally {
      await a.stop();
    }
    // A second start with nothing new applies nothing.
    const db = openStore(d);
    try {
      expect(migrate(db, 'notes', STEPS)).toEqual({ applied: [] });
    } finally {
      db.close();
    }
  });

  it('non-monotonic versions are refused before anything runs', () => {
    const db = openStore(dir());
    try {
      const bad: Migration[] = [STEPS[0]!, { version: 1, name: '0001-again', sql: 'CREATE TABLE x (a INTEGER);' }];
      expect(() => migrate(db, 'notes', bad)).toThrow(MigrationError);
      expect(() => migrate(db, 'notes', bad)).toThrow(/0001-again.*monotonic/);
      expect(() => migrate(db, 'notes', [STEPS[1]!, STEPS[0]!])).toThrow(/monotonic/);
      expect(() => migrate(db, 'notes', [{ version: 1.5, name: 'frac', sql: '' }])).toThrow(/monotonic/);
      expect(appliedVersion(db, 'notes')).toBe(0);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE name IN ('notes', 'x')").all()).toEqual([]);
    } finally {
      db.close();
    }
  });

  it('a database from a newer version is refused, and the appliance does not start on it', async () => {
    const d = dir();
    const a = await open(d, STEPS);
    await a.stop();
    const db = openStore(d);
    db.prepare("INSERT INTO schema_migrations (plugin, version, name, applied_at) VALUES ('notes', 4, '0004-from-the-future', 'x')").run();
    expect(() => migrate(db, 'notes', STEPS)).toThrow(/newer/);
    db.close();
    await expect(open(d, STEPS)).rejects.toThrow(/migration notes\/4: the database is at version 4, newer than this appliance knows \(3\)/);
    // The core's own schema is held to the same rule.
    const db2 = openStore(d);
    db2.prepare("DELETE FROM schema_migrations WHERE plugin = 'notes' AND version = 4").run();
    db2.prepare("INSERT INTO schema_migrations (plugin, version, name, applied_at) VALUES ('core', 999, 'future', 'x')").run();
    db2.close();
    await expect(open(d, STEPS)).rejects.toThrow(/core\/999.*newer/);
  });

  it('a failing step rolls back every step of that run and names itself', () => {
    const db = openStore(dir());
    try {
      migrate(db, 'notes', STEPS.slice(0, 1));
      db.prepare("INSERT INTO notes (tenant_id, body) VALUES ('t', 'kept')").run();
      const failing: Migration[] = [
        ...STEPS.slice(0, 2),
        { version: 3, name: '0003-side-table', sql: 'CREATE TABLE side (a INTEGER); INSERT INTO side VALUES (1);' },
        { version: 4, name: '0004-broken', sql: 'ALTER TABLE no_such_table ADD COLUMN z INTEGER;' },
      ];
      let err: unknown;
      try {
        migrate(db, 'notes', failing);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(MigrationError);
      expect((err as MigrationError).migration).toBe('notes/0004-broken');
      expect((err as Error).message).toMatch(/no_such_table/);
      // Steps 2 and 3 of the same run are gone with it; step 1 and its row stay.
      expect(appliedVersion(db, 'notes')).toBe(1);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'side'").all()).toEqual([]);
      expect((db.prepare('PRAGMA table_info(notes)').all() as { name: string }[]).map((c) => c.name)).not.toContain('pinned');
      expect(db.prepare('SELECT body FROM notes').all()).toEqual([{ body: 'kept' }]);
      // A throwing data migration rolls back the same way.
      expect(() =>
        migrate(db, 'notes', [
          ...STEPS.slice(0, 2),
          {
            version: 3,
            name: '0003-throws',
            up: () => {
              throw new Error('bad data');
            },
          },
        ]),
      ).toThrow(/notes\/0003-throws: bad data/);
      expect(appliedVersion(db, 'notes')).toBe(1);
    } finally {
      db.close();
    }
  });

  it('sqlMigrations reads NNNN-name.sql files in order and ignores other files', () => {
    const d = dir();
    const mig = path.join(d, 'migrations');
    fs.mkdirSync(mig);
    fs.writeFileSync(path.join(mig, '0002-b.sql'), 'CREATE TABLE b (x INTEGER);');
    fs.writeFileSync(path.join(mig, '0001-a.sql'), 'CREATE TABLE a (x INTEGER);');
    fs.writeFileSync(path.join(mig, 'README.md'), 'not a migration');
    fs.writeFileSync(path.join(mig, '3-bad-name.sql'), 'nope');
    const steps = sqlMigrations(new URL(`file://${path.join(d, 'index.ts')}`).href);
    expect(steps.map((m) => [m.version, m.name])).toEqual([
      [1, '0001-a'],
      [2, '0002-b'],
    ]);
  });
});
