import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminToken, j } from './helpers.ts';

/**
 * Tenants over HTTP (the console's Tenants page): a super-admin lists, adds, gives host names,
 * makes primary and removes (repeating the host); an admin of another tenant sees only its own and
 * can change nothing; every change is audited in the acting tenant.
 */
const V1 = '/api.ashx/v1';
let s: TestServer;
let A: string;
let tokA: string;
let tokB: string;

beforeAll(async () => {
  s = await startTestServer();
  A = `localhost:${s.port}`;
  await s.addTenant('b.test');
  tokA = await adminToken(s, A, 'admin', s.adminPassword);
  tokB = await adminToken(s, `b.test:${s.port}`, 'admin', 'correct horse battery');
});
afterAll(async () => {
  await s?.stop();
});

const a = (p: string, json?: unknown) => j(s.fetch(p, { method: json === undefined ? 'GET' : 'POST', host: A, key: tokA, json }));
const b = (p: string, json?: unknown) => j(s.fetch(p, { method: json === undefined ? 'GET' : 'POST', host: `b.test:${s.port}`, key: tokB, json }));

describe('tenants API', () => {
  it('a super-admin sees every tenant, the primary first; another admin only their own', async () => {
    const all = await a(`${V1}/tenants`);
    expect(all.status).toBe(200);
    expect(all.body.superAdmin).toBe(true);
    expect(all.body.data.map((t: { host: string }) => t.host)).toEqual(['localhost', 'b.test']);
    expect(all.body.data[0]).toMatchObject({ primary: true, hosts: ['localhost'] });
    const own = await b(`${V1}/tenants`);
    expect(own.body).toMatchObject({ superAdmin: false, data: [{ host: 'b.test', primary: false }] });
  });

  it('adds a tenant, a host name, refuses duplicates and bad hosts with the field named', async () => {
    const c = await a(`${V1}/tenants`, { host: 'c.test', name: 'Office C' });
    expect(c.status).toBe(201);
    expect(c.body).toMatchObject({ host: 'c.test', name: 'Office C', primary: false });
    expect((await a(`${V1}/tenants`, { host: 'c.test' })).status).toBe(409);
    const bad = await a(`${V1}/tenants`, { host: 'bad host/../x' });
    expect(bad.status).toBe(400);
    const h = await a(`${V1}/tenants/${c.body.id}/hosts`, { host: 'c2.test' });
    expect(h.body.hosts).toEqual(['c.test', 'c2.test']);
    expect((await a(`${V1}/tenants/${c.body.id}/hosts`, { host: 'localhost' })).status).toBe(409);
    expect((await a(`${V1}/tenants/nosuch/hosts`, { host: 'x.test' })).status).toBe(404);
  });

  it('another tenant’s admin can change nothing (403), a missing bearer is 401', async () => {
    expect((await b(`${V1}/tenants`, { host: 'd.test' })).status).toBe(403);
    const list = await a(`${V1}/tenants`);
    const id = list.body.data.find((t: { host: string }) => t.host === 'b.test').id;
    expect((await b(`${V1}/tenants/${id}/primary`, {})).status).toBe(403);
    expect((await b(`${V1}/tenants/${id}/remove`, { confirm: 'b.test' })).status).toBe(403);
    expect((await j(s.fetch(`${V1}/tenants`, { host: A, key: null }))).status).toBe(401);
    // An ak_ key is not a person: the tenants API takes the admin bearer only.
    expect((await j(s.fetch(`${V1}/tenants`, { host: A, key: s.adminKey }))).status).toBe(403);
  });

  it('removal needs the host repeated, never takes the primary, and deletes the tenant with its data; audited', async () => {
    const list = await a(`${V1}/tenants`);
    const c = list.body.data.find((t: { host: string }) => t.host === 'c.test');
    const primary = list.body.data.find((t: { primary: boolean }) => t.primary);
    const wrong = await a(`${V1}/tenants/${c.id}/remove`, { confirm: 'b.test' });
    expect(wrong).toMatchObject({ status: 400, body: { error: 'confirm_mismatch', field: 'confirm' } });
    expect((await a(`${V1}/tenants/${primary.id}/remove`, { confirm: primary.host })).body.error).toBe('cannot_remove_primary');
    expect((await a(`${V1}/tenants/${c.id}/remove`, { confirm: 'C.TEST' })).body).toEqual({ ok: true, host: 'c.test' });
    expect((await a(`${V1}/tenants`)).body.data.map((t: { host: string }) => t.host)).toEqual(['localhost', 'b.test']);
    const audit = await j(s.fetch(`${V1}/auditlog?event=tenant-`, { host: A, key: s.adminKey }));
    expect(audit.body.data.map((e: { event: string }) => e.event)).toEqual(expect.arrayContaining(['tenant-add', 'tenant-add-host', 'tenant-remove']));
  });

  it('set-primary moves the super-admin role to the other tenant’s admins', async () => {
    const list = await a(`${V1}/tenants`);
    const bt = list.body.data.find((t: { host: string }) => t.host === 'b.test');
    expect((await a(`${V1}/tenants/${bt.id}/primary`, {})).body).toMatchObject({ host: 'b.test', primary: true });
    expect((await b(`${V1}/tenants`)).body.superAdmin).toBe(true);
    const back = (await b(`${V1}/tenants`)).body.data.find((t: { host: string }) => t.host === 'localhost');
    expect((await b(`${V1}/tenants/${back.id}/primary`, {})).body.primary).toBe(true);
  });
});
