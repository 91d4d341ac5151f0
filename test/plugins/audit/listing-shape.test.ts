import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { AUDIT_WRITER } from '../../../server/core-services.ts';
import { ManualClock } from '../../../server/clock.ts';
import type { Tenant } from '../../../server/tenancy.ts';
import audit from '../../../plugins/audit/index.ts';
import { AuditRepo } from '../../../plugins/audit/repo.ts';
import type { AnyPlugin } from '../../../server/plugin.ts';

/**
 * GET /auditlog reads its page in the answer's shape (AuditRepo.entries: the tenant's host bound
 * as a column) instead of copying each stored row: the bytes must be what the copy gave, key
 * order included (`ts, event, tenant, user, ip, ua, extra`), filtered or not, in every tenant.
 */
const T0 = Date.parse('2026-03-01T00:00:00Z');
const clock = new ManualClock(T0);
let s: TestServer;
let other: { tenant: Tenant; adminKey: string };

beforeAll(async () => {
  s = await startTestServer({ clock, plugins: [audit as AnyPlugin] });
  other = await s.addTenant('other.example');
  const writer = s.appliance.host.provided(AUDIT_WRITER)!;
  for (let i = 0; i < 120; i++) {
    clock.set(T0 + i * 1000);
    writer.write(i % 4 ? s.primary : other.tenant, {
      event: i % 3 ? 'login-ok' : 'login-fail',
      user: `user${i}@example.com`,
      ip: '192.0.2.1',
      ua: 'agent "quoted"',
      extra: { attempt: i, note: 'a b' },
    });
  }
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

describe('the audit listing answers the rows in their old shape', () => {
  it.each(['', '?limit=7&offset=3', '?event=fail', '?user=user1', '?since=2026-03-01T00:00:30', '?event=LOGIN&limit=500'])('%s', async (q) => {
    for (const [tenant, key] of [
      [s.primary, s.adminKey],
      [other.tenant, other.adminKey],
    ] as const) {
      const r = await s.fetch(`/api.ashx/v1/auditlog${q}`, { key, host: tenant.host });
      expect(r.status).toBe(200);
      const text = await r.text();
      const body = JSON.parse(text) as { data: unknown[]; total: number; limit: number; offset: number };
      // What the handler answered before: every stored row of the same filter, copied with the tenant's host.
      const p = new URLSearchParams(q);
      const since = p.get('since');
      const old = new AuditRepo(s.appliance.core.db).list(tenant, {
        limit: Number(p.get('limit') ?? 50),
        offset: Number(p.get('offset') ?? 0),
        event: p.get('event') ?? undefined,
        user: p.get('user') ?? undefined,
        since: since ? new Date(`${since}Z`).toISOString() : undefined,
      });
      const copied = old.rows.map((x) => ({ ts: x.ts, event: x.event, tenant: tenant.host, user: x.user, ip: x.ip, ua: x.ua, extra: x.extra }));
      expect(body.data.length).toBeGreaterThan(0);
      expect(JSON.stringify(body.data)).toBe(JSON.stringify(copied));
      expect(text.startsWith(`{"data":[{"ts":`)).toBe(true);
      expect(Object.keys(body.data[0] as object)).toEqual(['ts', 'event', 'tenant', 'user', 'ip', 'ua', 'extra']);
      expect(body.total).toBe(old.total);
    }
  });
});
