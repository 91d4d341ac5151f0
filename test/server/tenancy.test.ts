import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AUDIT_WRITER } from '../../server/core-services.ts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CORE_MIGRATIONS } from '../../server/app.ts';
import { openStore } from '../../server/store/db.ts';
import { migrate } from '../../server/store/migrate.ts';
import { z } from 'zod';
import { startTestServer, type TestServer } from '../support/server.ts';
import { normalizeHost, TenantService, validateHost, type Tenant } from '../../server/tenancy.ts';
import { withBuiltins } from './fixtures/test-plugins.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ plugins: await withBuiltins() });
});
afterAll(async () => {
  await s?.stop();
});

/** Every table of the store (core and every plugin) that has a tenant_id column. */
function tenantTables(): string[] {
  const db = s.appliance.core.db;
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as { name: string }[]).map(
    (r) => r.name,
  );
  return tables.filter((t) => (db.prepare(`PRAGMA table_info("${t}")`).all() as { name: string }[]).some((c) => c.name === 'tenant_id'));
}
const rowsOf = (tenant: Tenant) =>
  Object.fromEntries(
    tenantTables().map((t) => [t, (s.appliance.core.db.prepare(`SELECT COUNT(*) AS n FROM "${t}" WHERE tenant_id = ?`).get(tenant.id) as { n: number }).n]),
  );

describe('tenancy', () => {
  it('Host selects the tenant: case-insensitive, port and trailing dot ignored, unknown or missing → primary', async () => {
    const { tenant } = await s.addTenant('Mixed-Case.example');
    const t = s.appliance.core.tenants;
    for (const h of ['mixed-case.example', 'MIXED-CASE.EXAMPLE', 'mixed-case.example:8443', 'mixed-case.example.']) expect(t.resolve(h).id, h).toBe(tenant.id);
    for (const h of [undefined, '', 'nobody.example', '127.0.0.1:8080', '[::1]:8080']) expect(t.resolve(h).id, String(h)).toBe(s.primary.id);
    expect(normalizeHost('[::1]:8443')).toBe('[::1]');
    expect(tenant.host).toBe('mixed-case.example');
  });

  it('refuses invalid host names', () => {
    for (const bad of ['', 'has space.example', 'under_score.example', '-lead.example', 'a'.repeat(64) + '.example', 'x/y', 'ü.example']) {
      expect(() => validateHost(bad), bad).toThrow(/invalid host name/);
    }
  });

  it('removing a tenant deletes its rows in every tenant table and its files; other tenants keep theirs', async () => {
    const core = s.appliance.core;
    const a = await s.addTenant('doomed.example');
    const b = await s.addTenant('survivor.example');
    const audit = s.appliance.host.provided(AUDIT_WRITER)!;
    core.events.declare('tenancy-test', 'tenancy.test', z.object({}).loose());
    for (const x of [a, b]) {
      audit.write(x.tenant, { event: 'login.success', user: 'someone' });
      core.jobs.enqueue('tenancy-test-queue', {}, { tenantId: x.tenant.id, runAt: Date.now() + 3_600_000 });
      core.events.emit(x.tenant.id, 'tenancy.test', {});
      const f = s.appliance.host.context('audit')!.paths.tenantFile(x.tenant, 'note.txt');
      fs.mkdirSync(path.dirname(f), { recursive: true });
      fs.writeFileSync(f, 'tenant data');
    }
    const before = rowsOf(a.tenant);
    expect(before.audit_log).toBe(1);
    expect(before.users).toBe(1);
    expect(before.api_keys).toBe(1);
    expect(before.jobs).toBe(1);
    expect(before.events).toBe(1);
    const bBefore = rowsOf(b.tenant);

    const removed = core.tenants.remove('doomed.example');
    expect(removed.id).toBe(a.tenant.id);
    const after = rowsOf(a.tenant);
    expect(Object.entries(after).filter(([, n]) => n > 0)).toEqual([]);
    expect(fs.existsSync(path.join(s.dataDir, 'tenants', a.tenant.id))).toBe(false);
    expect(rowsOf(b.tenant)).toEqual(bBefore);
    expect(fs.existsSync(path.join(s.dataDir, 'tenants', b.tenant.id, 'note.txt'))).toBe(true);
    // Its host now lands on the primary tenant, where its old key means nothing.
    expect(core.tenants.resolve('doomed.example').id).toBe(s.primary.id);
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: 'doomed.example', key: a.adminKey })).status).toBe(401);
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: 'survivor.example', key: b.adminKey })).status).toBe(200);
  });

  it('the primary tenant cannot be removed', () => {
    expect(() => s.appliance.core.tenants.remove(s.primary.host)).toThrow(/primary tenant cannot be removed/);
  });
});

describe('first start', () => {
  it('creates the primary tenant and its admin once; a tenant made with the CLI before the first start still gets its first admin', async () => {
    const { openCore, Appliance } = await import('../../server/app.ts');
    const { LogCapture, tempDir } = await import('../support/server.ts');
    const quiet = { env: {}, plugins: [], logDestination: new LogCapture() };

    const fresh = tempDir('sovcomms-first-');
    const seen: { host: string; user: string }[] = [];
    let a = await Appliance.create({ ...quiet, dataDir: fresh, onFirstRun: (i) => seen.push(i) });
    await a.stop();
    a = await Appliance.create({ ...quiet, dataDir: fresh, onFirstRun: (i) => seen.push(i) });
    await a.stop();
    expect(seen.map((x) => [x.host, x.user])).toEqual([['localhost', 'admin']]);

    const pre = tempDir('sovcomms-first-');
    const core = openCore({ ...quiet, dataDir: pre });
    core.tenants.add('office.example');
    core.db.close();
    const firstRun: { host: string; user: string; password: string }[] = [];
    a = await Appliance.create({ ...quiet, dataDir: pre, onFirstRun: (i) => firstRun.push(i) });
    try {
      expect(firstRun).toHaveLength(1);
      expect(firstRun[0]).toMatchObject({ host: 'office.example', user: 'admin' });
      const t = a.core.tenants.primary()!;
      expect(a.core.users.byName(t, 'admin')?.role).toBe('admin');
    } finally {
      await a.stop();
      fs.rmSync(fresh, { recursive: true, force: true });
      fs.rmSync(pre, { recursive: true, force: true });
    }
  });
});

describe('Host header parsing (RFC 3986 host and port only)', () => {
  it('accepts names, IPv4 and bracketed IPv6 with an optional port; refuses everything else', async () => {
    const { parseHostHeader } = await import('../../server/tenancy.ts');
    expect(parseHostHeader('Office.Example.:8443')).toEqual({ host: 'office.example', port: 8443 });
    expect(parseHostHeader('192.0.2.7')).toEqual({ host: '192.0.2.7', port: undefined });
    expect(parseHostHeader('[::1]:8080')).toEqual({ host: '[::1]', port: 8080 });
    for (const bad of [
      'a.example:@attacker.example',
      'a.example:80@b',
      'user@a.example',
      'a.example/path',
      'a..example',
      'a.example:0',
      'a.example:65536',
      'a example',
      '::1',
      '',
    ]) {
      expect(() => parseHostHeader(bad), bad).toThrow(/malformed Host header/);
    }
  });

  it('the token endpoint (served before the router) refuses a malformed Host with 400 too', async () => {
    const r = await s.fetch('/oauth2/v1/token', {
      method: 'POST',
      host: 'localhost:@attacker.example',
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toBe('invalid_request');
  });
});

describe('the tenant cache and another process', () => {
  it('sees a change committed by another connection (the CLI) at the next request, and reloads for nothing else', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-tenant-cache-'));
    const server = openStore(d);
    const cli = openStore(d);
    try {
      migrate(server, 'core', CORE_MIGRATIONS);
      const served = new TenantService(server, d);
      const other = new TenantService(cli, d);
      const office = other.add('office.example', 'Office', { primary: true });
      // Each request is handled in a later turn of the event loop than the CLI's commit.
      const nextRequest = () => new Promise<void>((r) => setImmediate(r));
      expect(served.resolve('office.example').publicOrigin).toBeUndefined();
      const reloads = vi.spyOn(served, 'reload');
      // Commits to other tables move data_version, but not the tenant epoch: no reload.
      cli.prepare("INSERT INTO settings (key, value) VALUES ('x', '1')").run();
      await nextRequest();
      expect(served.resolve('office.example').id).toBe(office.id);
      expect(reloads).not.toHaveBeenCalled();
      // The CLI's write is there for the very next lookup (no time window).
      other.setOrigin(office.id, 'https://wallet.office.example');
      await nextRequest();
      expect(served.resolve('office.example').publicOrigin).toBe('https://wallet.office.example');
      other.add('branch.example', 'Branch');
      await nextRequest();
      expect(served.resolve('branch.example').name).toBe('Branch');
      other.remove('branch.example');
      await nextRequest();
      expect(served.resolve('branch.example').id).toBe(office.id);
      expect(reloads).toHaveBeenCalledTimes(3);
    } finally {
      server.close();
      cli.close();
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});
