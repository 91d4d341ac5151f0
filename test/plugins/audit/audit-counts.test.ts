import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { AuditRepo } from '../../../plugins/audit/repo.ts';

// The unfiltered auditlog `total` comes from audit_counts (migration 0002, kept by triggers);
// it must equal COUNT(*) through inserts, deletes, prunes and per tenant.
describe('audit totals', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s.stop();
  });

  const total = async (key: string, host?: string, q = '') => {
    const r = await s.fetch(`/api.ashx/v1/auditlog?limit=1${q}`, { key, host });
    expect(r.status).toBe(200);
    return ((await r.json()) as { total: number }).total;
  };
  const counted = (tenantId: string) =>
    (s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM audit_log WHERE tenant_id = ?').get(tenantId) as { n: number }).n;

  it('matches COUNT(*) after inserts, a prune and a direct delete, per tenant', async () => {
    const db = s.appliance.core.db;
    const repo = new AuditRepo(db);
    const b = await s.addTenant('b.example');
    const row = (ts: string) => ({ ts, event: 'bench.test', user: 'x@example.org', ip: '127.0.0.1', ua: 't', extra: '' });
    db.transaction(() => {
      for (let i = 0; i < 30; i++) repo.insert(s.primary, row(`2020-01-01T00:00:${String(i).padStart(2, '0')}.000Z`));
      for (let i = 0; i < 7; i++) repo.insert(b.tenant, row(`2020-01-02T00:00:0${i}.000Z`));
    })();
    expect(await total(s.adminKey)).toBe(counted(s.primary.id));
    expect(await total(b.adminKey, 'b.example')).toBe(counted(b.tenant.id));
    // Filtered totals still count (and agree with the unfiltered one when the filter matches all).
    expect(await total(s.adminKey, undefined, '&event=bench.test')).toBe(30);

    expect(repo.prune('2020-01-01T00:00:10.000Z')).toBe(10);
    expect(await total(s.adminKey)).toBe(counted(s.primary.id));
    db.prepare("DELETE FROM audit_log WHERE tenant_id = ? AND event = 'bench.test'").run(b.tenant.id);
    expect(await total(b.adminKey, 'b.example')).toBe(counted(b.tenant.id));
    db.prepare('DELETE FROM audit_log').run();
    expect(await total(s.adminKey)).toBe(0);
    expect(await total(b.adminKey, 'b.example')).toBe(0);
  });
});
