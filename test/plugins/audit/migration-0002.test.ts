import { describe, expect, it } from 'vitest';
import audit from '../../../plugins/audit/index.ts';
import { AuditRepo } from '../../../plugins/audit/repo.ts';
import { storeAt } from '../../support/migrations.ts';

describe('audit migration 0002-audit-counts', () => {
  it('counts the rows a version-1 store holds, per tenant, and the triggers keep the count after', () => {
    const { db, tenant, upgrade } = storeAt(audit, 1);
    const ins = db.prepare('INSERT INTO audit_log (tenant_id, ts, event, user) VALUES (?, ?, ?, ?)');
    for (let i = 0; i < 37; i++) ins.run(tenant.id, `2026-01-01T00:00:${String(i % 60).padStart(2, '0')}.000Z`, 'login.success', `u${i}`);
    for (let i = 0; i < 5; i++) ins.run('other-tenant', '2026-01-01T00:00:00.000Z', 'login.failure', 'x');
    expect(upgrade()).toEqual(['0002-audit-counts']);
    const count = (t: string) => (db.prepare('SELECT n FROM audit_counts WHERE tenant_id = ?').get(t) as { n: number } | undefined)?.n;
    expect(count(tenant.id)).toBe(37);
    expect(count('other-tenant')).toBe(5);
    // The unfiltered listing reads the count: it must equal the rows after inserts and deletes.
    const repo = new AuditRepo(db);
    repo.insert(tenant, { ts: '2026-01-02T00:00:00.000Z', event: 'logout', user: 'u1', ip: '', ua: '', extra: '' });
    db.prepare("DELETE FROM audit_log WHERE tenant_id = ? AND user IN ('u2', 'u3')").run(tenant.id);
    const listed = repo.list(tenant, { limit: 10, offset: 0 });
    expect(listed.total).toBe(36);
    expect(listed.total).toBe((db.prepare('SELECT COUNT(*) AS n FROM audit_log WHERE tenant_id = ?').get(tenant.id) as { n: number }).n);
    db.close();
  });
});
