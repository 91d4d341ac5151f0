import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { AUDIT_WRITER } from '../../../server/core-services.ts';
import { ManualClock } from '../../../server/clock.ts';
import type { Tenant } from '../../../server/tenancy.ts';
import audit from '../../../plugins/audit/index.ts';
import type { AnyPlugin } from '../../../server/plugin.ts';

/**
 * GET /api.ashx/v1/auditlog: the list envelope (limit default 50, cap 500, offset, total, next
 * as a relative URL or null) over many rows, the filters, and tenant isolation of rows and totals.
 */
const ROWS = 1234;
const T0 = Date.parse('2026-03-01T00:00:00Z');
const clock = new ManualClock(T0);
let s: TestServer;
let other: { tenant: Tenant; adminKey: string };

interface Entry {
  ts: string;
  event: string;
  tenant: string;
  user: string;
  ip: string;
  ua: string;
  extra: string;
}
interface Env {
  data: Entry[];
  total: number;
  limit: number;
  offset: number;
  next: string | null;
}

beforeAll(async () => {
  s = await startTestServer({ clock, plugins: [audit as AnyPlugin] });
  other = await s.addTenant('other.example');
  const writer = s.appliance.host.provided(AUDIT_WRITER)!;
  s.appliance.core.db.transaction(() => {
    for (let i = 0; i < ROWS; i++) {
      clock.set(T0 + i * 1000);
      writer.write(s.primary, {
        event: i % 3 === 0 ? 'login-failure' : 'login-success',
        user: i % 10 === 0 ? `Carol.${i}@Example.com` : `user${i}@example.com`,
        ip: '192.0.2.1',
        ua: 'test-agent',
        extra: { client: 'console', attempt: i, password: 'never-stored', accessToken: 'never-stored-either' },
      });
    }
  })();
  clock.set(T0);
  writer.write(other.tenant, { event: 'login-success', user: 'someone@other.example' });
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

const list = async (q = '', key = s.adminKey, host?: string): Promise<Env> => {
  const r = await s.fetch(`/api.ashx/v1/auditlog${q}`, { key, host });
  expect(r.status, await r.clone().text()).toBe(200);
  return r.json() as Promise<Env>;
};

describe('list envelope', () => {
  it('limit defaults to 50, newest first, with total and a relative next', async () => {
    const e = await list();
    expect(e.limit).toBe(50);
    expect(e.offset).toBe(0);
    expect(e.total).toBe(ROWS);
    expect(e.data).toHaveLength(50);
    expect(e.data[0]!.ts).toBe(new Date(T0 + (ROWS - 1) * 1000).toISOString());
    for (let i = 1; i < e.data.length; i++) expect(e.data[i - 1]!.ts >= e.data[i]!.ts).toBe(true);
    expect(e.next).toBe('/api.ashx/v1/auditlog?limit=50&offset=50');
    expect(Object.keys(e.data[0]!).sort()).toEqual(['event', 'extra', 'ip', 'tenant', 'ts', 'ua', 'user']);
    expect(e.data[0]!.tenant).toBe(s.primary.host);
  });

  it('limit is capped at 500', async () => {
    const e = await list('?limit=100000');
    expect(e.limit).toBe(500);
    expect(e.data).toHaveLength(500);
    expect(e.next).toBe('/api.ashx/v1/auditlog?limit=500&offset=500');
  });

  it('following next visits every row exactly once and ends with null', async () => {
    let url: string | null = '/api.ashx/v1/auditlog?limit=300';
    const seen: string[] = [];
    let pages = 0;
    while (url) {
      expect(url.startsWith('/api.ashx/v1/auditlog?')).toBe(true);
      const e: Env = await list(url.slice('/api.ashx/v1/auditlog'.length));
      expect(e.total).toBe(ROWS);
      seen.push(...e.data.map((d) => d.ts));
      url = e.next;
      pages++;
    }
    expect(pages).toBe(Math.ceil(ROWS / 300));
    expect(seen).toHaveLength(ROWS);
    expect(new Set(seen).size).toBe(ROWS);
  });

  it('offset past the end gives an empty page and next null; the last partial page has next null', async () => {
    const past = await list(`?offset=${ROWS + 10}`);
    expect(past).toMatchObject({ data: [], total: ROWS, offset: ROWS + 10, next: null });
    const last = await list(`?limit=50&offset=${ROWS - 4}`);
    expect(last.data).toHaveLength(4);
    expect(last.next).toBeNull();
  });

  it('next keeps the filters', async () => {
    const e = await list('?event=FAILURE&limit=10');
    expect(e.next).toMatch(/^\/api\.ashx\/v1\/auditlog\?/);
    const u = new URL(e.next!, 'http://x');
    expect(Object.fromEntries(u.searchParams)).toEqual({ event: 'FAILURE', limit: '10', offset: '10' });
  });
});

describe('filters', () => {
  it('event: case-insensitive substring', async () => {
    const e = await list('?event=FAILURE&limit=500');
    expect(e.total).toBe(Math.ceil(ROWS / 3));
    expect(e.data.every((d) => d.event === 'login-failure')).toBe(true);
  });

  it('user: case-insensitive substring; LIKE wildcards are literal', async () => {
    const e = await list('?user=carol.&limit=500');
    expect(e.total).toBe(Math.ceil(ROWS / 10));
    expect(e.data.every((d) => d.user.startsWith('Carol.'))).toBe(true);
    expect((await list('?user=%25')).total).toBe(0);
    expect((await list('?user=_')).total).toBe(0);
  });

  it('user matches the subject or the account e-mail (spec: "substring on subject or e-mail")', async () => {
    // Entries by account name (as sign-in events write them); the account's e-mail finds them too.
    await s.appliance.core.users.add(s.primary, { name: 'dave', role: 'user', email: 'Dave.Ops@Branch.example', password: null });
    const writer = s.appliance.host.provided(AUDIT_WRITER)!;
    // Older than every other row, so the ordering tests around this one see the same newest rows.
    clock.set(T0 - 60_000);
    writer.write(s.primary, { event: 'passkey-signin-ok', user: 'dave' });
    writer.write(s.primary, { event: 'logout', user: 'dave' });
    clock.set(T0);
    const byMail = await list('?user=ops@branch');
    expect(byMail.data.map((d) => d.event).sort()).toEqual(['logout', 'passkey-signin-ok']);
    expect((await list('?user=DAVE')).total).toBe(2);
    // Another tenant's account with that e-mail does not widen this tenant's match.
    await s.appliance.core.users.add(other.tenant, { name: 'user1@example.com', role: 'user', email: 'x@branch.example', password: null });
    expect((await list('?user=x@branch')).total).toBe(0);
  });

  it('user: an account found by name or id also finds the entries written with its e-mail, in any case', async () => {
    // Magic-link and recovery entries carry the e-mail as typed; sign-ins carry the login name.
    const erin = await s.appliance.core.users.add(s.primary, { name: 'erin', role: 'user', email: 'e.smith@corp.example', password: null });
    const writer = s.appliance.host.provided(AUDIT_WRITER)!;
    clock.set(T0 - 120_000);
    writer.write(s.primary, { event: 'maglink-start', user: 'E.Smith@Corp.Example' });
    writer.write(s.primary, { event: 'maglink-finish', user: 'erin' });
    clock.set(T0);
    const events = async (q: string) => (await list(`?user=${encodeURIComponent(q)}`)).data.map((d) => d.event).sort();
    expect(await events('erin')).toEqual(['maglink-finish', 'maglink-start']);
    expect(await events(erin.id)).toEqual(['maglink-finish', 'maglink-start']);
    expect(await events('SMITH@corp')).toEqual(['maglink-finish', 'maglink-start']);
    // Many matching accounts are not cut short (the old form bound at most 500 of them).
    const many = 600;
    for (let i = 0; i < many; i++)
      await s.appliance.core.users.add(s.primary, { name: `bulk${i}`, role: 'user', email: `bulk${i}@many.example`, password: null });
    clock.set(T0 - 180_000);
    writer.write(s.primary, { event: 'maglink-start', user: `BULK${many - 1}@many.example` });
    writer.write(s.primary, { event: 'maglink-finish', user: `bulk${many - 1}` });
    clock.set(T0);
    expect(await events('@many.example')).toEqual(['maglink-finish', 'maglink-start']);
    expect(await events(`bulk${many - 1}`)).toEqual(['maglink-finish', 'maglink-start']);
  });

  it('since: only newer events; a value without an offset is read as UTC', async () => {
    const cut = new Date(T0 + (ROWS - 11) * 1000);
    const withZ = await list(`?since=${encodeURIComponent(cut.toISOString())}`);
    expect(withZ.total).toBe(10);
    const noOffset = await list(`?since=${encodeURIComponent(cut.toISOString().replace('Z', ''))}`);
    expect(noOffset.total).toBe(10);
    const plusTwo = await list(`?since=${encodeURIComponent(new Date(cut.getTime() + 2 * 3600_000).toISOString().replace('.000Z', '+02:00'))}`);
    expect(plusTwo.total).toBe(10);
    const combined = await list(`?since=${encodeURIComponent(cut.toISOString())}&event=failure`);
    expect(combined.data.every((d) => d.event === 'login-failure')).toBe(true);
  });
});

describe('tenant isolation and secrets', () => {
  it('another tenant sees only its own rows and its own total', async () => {
    const e = await list('', other.adminKey, 'other.example');
    expect(e.total).toBe(1);
    expect(e.data.map((d) => d.user)).toEqual(['someone@other.example']);
    expect(e.data[0]!.tenant).toBe('other.example');
    expect((await list('?event=login', other.adminKey, 'other.example')).total).toBe(1);
  });

  it('secret-looking keys of `extra` are never stored', async () => {
    const e = await list('?limit=5');
    for (const d of e.data) {
      expect(d.extra).toMatch(/client=console attempt=\d+/);
      expect(d.extra).not.toMatch(/never-stored|password|accessToken/);
    }
    const raw = JSON.stringify(s.appliance.core.db.prepare('SELECT extra FROM audit_log').all());
    expect(raw).not.toContain('never-stored');
  });
});
