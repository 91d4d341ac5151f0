import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { adminToken, j } from '../plugins/admin/helpers.ts';
import { until } from '../support/until.ts';

/**
 * X-Sovcomms-Tenant, the console's tenant switcher: a super-admin's own bearer acts on another
 * tenant's admin routes from the primary host; nobody else may, and routes about the caller
 * themselves refuse it rather than quietly answering for the primary tenant.
 */
const V1 = '/api.ashx/v1';
let s: TestServer;
let P: string;
let tokP: string;
let tokB: string;
let keyP: string;

beforeAll(async () => {
  s = await startTestServer();
  P = `localhost:${s.port}`;
  await s.addTenant('b.test');
  tokP = await adminToken(s, P, 'admin', s.adminPassword);
  tokB = await adminToken(s, `b.test:${s.port}`, 'admin', 'correct horse battery');
  keyP = (await j(s.fetch('/signal.ashx?apikey-create=1', { method: 'POST', host: P, key: tokP, json: { name: 'script' } }))).body.key;
});
afterAll(async () => {
  await s?.stop();
});

const asP = (path: string, opts: { tenant?: string; json?: unknown; key?: string; method?: string } = {}) =>
  j(
    s.fetch(path, {
      method: opts.method ?? (opts.json === undefined ? 'GET' : 'POST'),
      host: P,
      key: opts.key ?? tokP,
      json: opts.json,
      headers: opts.tenant ? { 'X-Sovcomms-Tenant': opts.tenant } : undefined,
    }),
  );

describe('tenant switch (X-Sovcomms-Tenant)', () => {
  it("a super-admin reads and changes another tenant's data; the change lands there, audited with who acted", async () => {
    const usersB = await asP(`${V1}/users`, { tenant: 'b.test' });
    expect(usersB.status).toBe(200);
    expect(usersB.body.data.map((u: { name: string }) => u.name)).toEqual(['admin']);
    const made = await asP(`${V1}/users`, { tenant: 'b.test', json: { name: 'clerk', role: 'user', generatePassword: true } });
    expect(made.status).toBe(201);
    // It is B's user: B's own admin sees it, the primary tenant does not have it.
    const fromB = await j(s.fetch(`${V1}/users`, { host: `b.test:${s.port}`, key: tokB }));
    expect(fromB.body.data.map((u: { name: string }) => u.name)).toContain('clerk');
    const fromP = await asP(`${V1}/users`);
    expect(fromP.body.data.map((u: { name: string }) => u.name)).not.toContain('clerk');
    // B's audit log names the super-admin and the host they came from.
    const audit = await j(s.fetch(`${V1}/auditlog?limit=20`, { host: `b.test:${s.port}`, key: tokB }));
    expect(JSON.stringify(audit.body.data)).toContain('admin@localhost');
  });

  it('the header set to the own tenant changes nothing; the tenant is named by any of its host names', async () => {
    const own = await asP(`${V1}/users`, { tenant: 'localhost' });
    expect(own.status).toBe(200);
    expect((await asP(`${V1}/users`, { tenant: 'B.TEST' })).status).toBe(200);
  });

  it('refused: an unknown host (404), an API key or an HMAC (403), an admin of another tenant (403)', async () => {
    const unknown = await asP(`${V1}/users`, { tenant: 'nosuch.test' });
    expect(unknown).toMatchObject({ status: 404, body: { error: 'not_found' } });
    expect((await asP(`${V1}/calls`, { tenant: 'b.test', key: keyP })).status).toBe(403);
    const hmac = await s.fetch('/signal.ashx?trunks=list', {
      host: P,
      headers: { 'X-Service-Admin-Signature': s.hmac('trunks-list', P), 'X-Sovcomms-Tenant': 'b.test' },
    });
    expect(hmac.status).toBe(403);
    const fromB = await j(s.fetch(`${V1}/users`, { host: `b.test:${s.port}`, key: tokB, headers: { 'X-Sovcomms-Tenant': 'localhost' } }));
    expect(fromB.status).toBe(403);
    expect(JSON.stringify(fromB.body)).not.toContain('"data"');
  });

  it('routes about the caller themselves answer 400 tenant_switch_not_allowed; without credentials it is 401 as ever', async () => {
    const me = await asP('/chat.ashx?op=me', { tenant: 'b.test' });
    expect(me).toMatchObject({ status: 400, body: { error: 'tenant_switch_not_allowed' } });
    const anon = await s.fetch(`${V1}/users`, { host: P, key: null, headers: { 'X-Sovcomms-Tenant': 'b.test' } });
    expect(anon.status).toBe(401);
  });

  it('the live feed follows the switch: the target tenant’s events arrive, the primary’s do not', async () => {
    let text = '';
    const req = http.get(
      { host: '127.0.0.1', port: s.port, path: `${V1}/events`, headers: { Host: P, Authorization: `Bearer ${tokP}`, 'X-Sovcomms-Tenant': 'b.test' } },
      (res) => {
        expect(res.statusCode).toBe(200);
        res.on('data', (c: Buffer) => (text += c.toString()));
      },
    );
    try {
      await until(() => text.includes('event: status'), 5000, 'status frame');
      const b = s.appliance.core.tenants.byHost('b.test')!;
      s.appliance.core.events.emit(s.primary.id, 'webhook.test', { subscriptionId: 'of-primary', message: 'p', requestedBy: 'test' });
      s.appliance.core.events.emit(b.id, 'webhook.test', { subscriptionId: 'of-b', message: 'b', requestedBy: 'test' });
      await until(() => text.includes('of-b'), 5000, 'B event');
      expect(text).not.toContain('of-primary');
    } finally {
      req.destroy();
    }
  });
});
