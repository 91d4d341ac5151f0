import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
});

describe('HTTP conventions', () => {
  it('GET /healthz answers ok and /readyz lists every plugin started', async () => {
    expect(await (await s.fetch('/healthz')).json()).toEqual({ status: 'ok' });
    const r = await s.fetch('/readyz');
    expect(r.status).toBe(200);
    const body = (await r.json()) as { status: string; plugins: Record<string, { state: string }> };
    // Ready to serve; 'degraded' when a plugin reports it (a fresh appliance has no trust anchors yet).
    expect(['ready', 'degraded']).toContain(body.status);
    expect(body.plugins.audit.state).toBe('started');
  });

  it('an unknown path answers 404 not_found with an error body', async () => {
    const r = await s.fetch('/nope');
    expect(r.status).toBe(404);
    expect(await r.json()).toMatchObject({ error: 'not_found' });
  });

  it('a wrong method answers 405 with Allow', async () => {
    const r = await s.fetch('/api.ashx/v1/auditlog', { method: 'DELETE', key: s.adminKey });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET');
    expect(((await r.json()) as { error: string }).error).toBe('method_not_allowed');
  });

  it('v1 responses carry Cache-Control: no-store', async () => {
    const r = await s.fetch('/api.ashx/v1/auditlog', { key: s.adminKey });
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
  });

  it('the Host header picks the tenant; port and case are ignored', async () => {
    const { tenant } = await s.addTenant('Office-B.example');
    expect(s.appliance.core.tenants.resolve('office-b.EXAMPLE:8443').id).toBe(tenant.id);
    expect(s.appliance.core.tenants.resolve('unknown.example').id).toBe(s.primary.id);
    expect(s.appliance.core.tenants.resolve(undefined).id).toBe(s.primary.id);
  });
});

describe('test client', () => {
  it('sends the Host header as given (tenancy depends on it)', async () => {
    const { adminKey } = await s.addTenant('office-c.example');
    // Office C's key is valid only when the request is addressed to office C.
    expect((await s.fetch('/api.ashx/v1/auditlog', { host: 'office-c.example', key: adminKey })).status).toBe(200);
    expect((await s.fetch('/api.ashx/v1/auditlog', { key: adminKey })).status).toBe(401);
  });
});
