import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { saveClient, tokenForm } from '../oidc/helpers.ts';
import { adminToken, basic, j, type Json } from './helpers.ts';

/**
 * Users over HTTP (plugins/admin): list, add, change role, reset password, disable and enable, on
 * the real server with real bearer tokens; disabled accounts lose every credential; the last-admin
 * and self rules; a super-admin across tenants and nobody else; every change audited.
 */
const V1 = '/api.ashx/v1';
const B_HOST = 'b.test';
const B_PASSWORD = 'correct horse battery';
let s: TestServer;
let A: string;
let B: string;
let tokA: string;
let tokB: string;
let svcSecret: string;

beforeAll(async () => {
  s = await startTestServer();
  A = `localhost:${s.port}`;
  B = `${B_HOST}:${s.port}`;
  await s.addTenant(B_HOST);
  tokA = await adminToken(s, A, 'admin', s.adminPassword);
  tokB = await adminToken(s, B, 'admin', B_PASSWORD);
  svcSecret = (
    await saveClient(s, A, {
      client_id: 'svc',
      redirect_uris: ['http://127.0.0.1/cb'],
      grant_types: ['password', 'refresh_token'],
      token_endpoint_auth_method: 'client_secret_basic',
    })
  ).client_secret!;
});
afterAll(async () => {
  await s?.stop();
});

interface Init {
  method?: string;
  json?: unknown;
  body?: string;
  headers?: Record<string, string>;
}
const as =
  (token: string, host: string) =>
  (p: string, init: Init = {}) =>
    j(s.fetch(p, { ...init, method: init.method ?? (init.json !== undefined || init.body !== undefined ? 'POST' : 'GET'), host, key: token }));
const a = (p: string, init?: Init) => as(tokA, A)(p, init);
const b = (p: string, init?: Init) => as(tokB, B)(p, init);
const idOf = async (name: string, host = A, token = tokA) =>
  ((await as(token, host)(`${V1}/users?limit=500`)).body.data as Json[]).find((u) => u.name === name)!.id as string;
const login = (host: string, username: string, password: string) =>
  tokenForm(s, host, { grant_type: 'password', client_id: 'sovcomms-console', username, password, scope: 'openid' });
const audit = async (host: string, token: string, event: string) => (await as(token, host)(`${V1}/auditlog?event=${event}&limit=500`)).body.data as Json[];

describe('who may call', () => {
  it("an admin bearer only: none 401 with WWW-Authenticate, ak_ key 403, a user's bearer 403, the admin HMAC 401", async () => {
    const none = await s.fetch(`${V1}/users`, { host: A });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
    expect((await j(s.fetch(`${V1}/users`, { host: A, key: s.adminKey }))).status).toBe(403);
    await s.appliance.core.users.add(s.primary, { name: 'uma', role: 'user', password: 'uma password 1' });
    const uma = (await login(A, 'uma', 'uma password 1')).body.access_token as string;
    expect((await as(uma, A)(`${V1}/users`)).status).toBe(403);
    expect((await j(s.fetch(`${V1}/users`, { host: A, headers: { 'x-service-admin-signature': s.hmac('users', A) } }))).status).toBe(401);
    expect((await a(`${V1}/users`)).status).toBe(200);
  });
});

describe('listing and adding users', () => {
  it("GET lists the tenant's users in the envelope, without any password material", async () => {
    const r = await a(`${V1}/users`);
    expect(r.body).toMatchObject({ limit: 50, offset: 0, next: null });
    const admin = r.body.data.find((u: Json) => u.name === 'admin');
    expect(Object.keys(admin).sort()).toEqual(['createdAtUtc', 'email', 'hasPassword', 'id', 'language', 'name', 'role', 'status', 'tenant']);
    expect(admin).toMatchObject({ role: 'admin', status: 'active', hasPassword: true, tenant: 'localhost' });
    expect(JSON.stringify(r.body)).not.toMatch(/scrypt|password_hash|passwordHash/);
    expect((await a(`${V1}/users/${admin.id}`)).body).toEqual(admin);
    expect((await a(`${V1}/users?role=user`)).body.data.every((u: Json) => u.role === 'user')).toBe(true);
    expect((await a(`${V1}/users?limit=1`)).body).toMatchObject({ limit: 1, next: expect.stringContaining('offset=1') });
  });

  it('POST with a password: 201, active, and that password signs in', async () => {
    const r = await a(`${V1}/users`, { json: { name: 'alice', role: 'user', email: 'alice@example.test', password: 'alice password 1' } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ name: 'alice', role: 'user', email: 'alice@example.test', status: 'active', hasPassword: true, tenant: 'localhost' });
    expect(r.body.password).toBeUndefined();
    expect((await login(A, 'alice', 'alice password 1')).status).toBe(200);
  });

  it('POST with generatePassword: the password is returned once and works; PascalCase keys accepted', async () => {
    const r = await a(`${V1}/users`, { json: { Name: 'bob', Role: 'admin', GeneratePassword: true } });
    expect(r.status).toBe(201);
    expect(r.body.password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect((await login(A, 'bob', r.body.password)).status).toBe(200);
    const again = await a(`${V1}/users/${r.body.id}`);
    expect(again.body.password).toBeUndefined();
    expect(JSON.stringify((await a(`${V1}/auditlog?limit=500`)).body)).not.toContain(r.body.password);
    expect(s.logs.text()).not.toContain(r.body.password);
  });

  it('POST without a password makes an invitation (status invited, no sign-in yet)', async () => {
    const r = await a(`${V1}/users`, { json: { name: 'dave' } });
    expect(r.body).toMatchObject({ name: 'dave', role: 'user', status: 'invited', hasPassword: false });
  });

  it('bad input answers 4xx naming the problem, never 500', async () => {
    const cases: [unknown, number, string][] = [
      [{ name: 'carl', password: 'short' }, 400, 'weak_password'],
      [{ name: 'alice', password: 'another password 1' }, 409, 'duplicate_user'],
      [{ name: 'has space' }, 400, 'invalid_request'],
      [{ name: '' }, 400, 'invalid_request'],
      [{ name: 'carl', role: 'root' }, 400, 'invalid_request'],
      [{ name: 'carl', email: 'not-an-email' }, 400, 'invalid_request'],
      [{ name: 'carl', password: 'a long password 1', generatePassword: true }, 400, 'invalid_request'],
      [{ name: 'carl', isSuperAdmin: true }, 400, 'invalid_request'],
      [{ name: 'x'.repeat(129) }, 400, 'invalid_request'],
      [[1, 2], 400, 'invalid_request'],
    ];
    for (const [json, status, error] of cases) {
      const r = await a(`${V1}/users`, { json });
      expect(r.status, JSON.stringify(json)).toBe(status);
      expect(r.body.error, JSON.stringify(json)).toBe(error);
    }
    expect((await a(`${V1}/users`, { body: '{"name":', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    expect((await a(`${V1}/users?limit=abc`)).status).toBe(400);
    expect((await a(`${V1}/users?status=gone`)).status).toBe(400);
    expect((await a(`${V1}/users/u_0000000000000000`)).body.error).toBe('not_found');
    expect((await a(`${V1}/users/${'x'.repeat(65)}`)).status).toBe(400);
    expect((await a(`${V1}/users/%00`)).status).toBe(404);
    expect((await a(`${V1}/users/x`, { method: 'DELETE' })).status).toBe(405);
  });
});

describe('role and password', () => {
  it('PATCH changes the role, and the v1 surface follows at once', async () => {
    const id = await idOf('alice');
    const tok = (await login(A, 'alice', 'alice password 1')).body.access_token as string;
    expect((await as(tok, A)(`${V1}/auditlog`)).status).toBe(403);
    const up = await a(`${V1}/users/${id}`, { method: 'PATCH', json: { role: 'admin' } });
    expect(up.status).toBe(200);
    expect(up.body.role).toBe('admin');
    expect((await as(tok, A)(`${V1}/auditlog`)).status).toBe(200);
    expect((await a(`${V1}/users/${id}`, { method: 'PATCH', json: { role: 'user' } })).body.role).toBe('user');
    expect((await as(tok, A)(`${V1}/auditlog`)).status).toBe(403);
    expect((await a(`${V1}/users/${id}`, { method: 'PATCH', json: { role: 'owner' } })).status).toBe(400);
    expect((await a(`${V1}/users/${id}`, { method: 'PATCH', json: { role: 'user', email: 'x@y.z' } })).status).toBe(400);
    expect((await a(`${V1}/users/${id}`, { method: 'PATCH', json: {} })).status).toBe(400);
    expect((await a(`${V1}/users/u_0000000000000000`, { method: 'PATCH', json: { role: 'user' } })).status).toBe(404);
  });

  it('reset to a given password: the new one works, the old one no longer; a weak one is refused', async () => {
    const id = await idOf('alice');
    const r = await a(`${V1}/users/${id}/password`, { json: { password: 'alice password 2' } });
    expect(r.status).toBe(200);
    expect(r.body.password).toBeUndefined();
    expect((await login(A, 'alice', 'alice password 2')).status).toBe(200);
    expect((await login(A, 'alice', 'alice password 1')).status).toBe(400);
    const weak = await a(`${V1}/users/${id}/password`, { json: { password: 'short' } });
    expect(weak.status).toBe(400);
    expect(weak.body.error).toBe('weak_password');
    expect((await a(`${V1}/users/${id}/password`, { json: { password: 'x', extra: 1 } })).status).toBe(400);
    expect((await a(`${V1}/users/u_0000000000000000/password`, { json: {} })).status).toBe(404);
  });

  it('reset without a password generates one, returned once; an invitation becomes an active account', async () => {
    const id = await idOf('dave');
    const r = await a(`${V1}/users/${id}/password`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ name: 'dave', status: 'active', hasPassword: true });
    expect(r.body.password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect((await login(A, 'dave', r.body.password)).status).toBe(200);
  });
});

describe('disabling and enabling', () => {
  let carolId = '';
  const carolPw = 'carol password 1';
  it('a disabled user loses every credential at once: access token, refresh token, ak_ key, sign-in', async () => {
    carolId = (await a(`${V1}/users`, { json: { name: 'carol', role: 'admin', password: carolPw } })).body.id;
    const access = (await login(A, 'carol', carolPw)).body.access_token as string;
    const rt = await tokenForm(
      s,
      A,
      { grant_type: 'password', username: 'carol', password: carolPw, scope: 'openid offline_access' },
      { authorization: basic('svc', svcSecret) },
    );
    expect(rt.status).toBe(200);
    const refresh = rt.body.refresh_token as string;
    const key = (await j(s.fetch('/signal.ashx?apikey-create=1', { method: 'POST', host: A, key: access, json: { name: 'carol-key' } }))).body.key as string;
    expect((await as(access, A)(`${V1}/auditlog`)).status).toBe(200);
    expect((await j(s.fetch(`${V1}/auditlog`, { host: A, key }))).status).toBe(200);

    const d = await a(`${V1}/users/${carolId}/disable`, { method: 'POST' });
    expect(d.status).toBe(200);
    expect(d.body.status).toBe('disabled');

    expect((await as(access, A)(`${V1}/auditlog`)).status).toBe(401);
    expect((await j(s.fetch(`${V1}/auditlog`, { host: A, key }))).status).toBe(401);
    const again = await login(A, 'carol', carolPw);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
    // Introspection first: a refresh attempt consumes the token, which would hide the reason.
    const intro = await j(
      s.fetch('/oauth2/v1/introspect', {
        method: 'POST',
        host: A,
        body: new URLSearchParams({ token: refresh }),
        headers: { authorization: basic('svc', svcSecret) },
      }),
    );
    expect(intro.body).toEqual({ active: false });
    const refreshed = await tokenForm(s, A, { grant_type: 'refresh_token', refresh_token: refresh }, { authorization: basic('svc', svcSecret) });
    expect(refreshed.body.error).toBe('invalid_grant');
    const keys = await a(`${V1}/apikeys?user=carol`);
    expect(keys.body.data[0]).toMatchObject({ userName: 'carol', userStatus: 'disabled', status: 'active' });

    // Idempotent: disabling again answers the same and audits nothing new.
    expect((await a(`${V1}/users/${carolId}/disable`, { method: 'POST' })).body.status).toBe('disabled');
    expect((await audit(A, tokA, 'user-disable')).filter((e) => e.extra.includes('target=carol'))).toHaveLength(1);
  });

  it('enable restores the account and, with it, its key', async () => {
    const e = await a(`${V1}/users/${carolId}/enable`, { method: 'POST' });
    expect(e.body.status).toBe('active');
    expect((await login(A, 'carol', carolPw)).status).toBe(200);
    const key = (await a(`${V1}/apikeys?user=carol`)).body.data[0];
    expect(key.userStatus).toBe('active');
    expect((await a(`${V1}/users/${carolId}/enable`, { method: 'POST' })).body.status).toBe('active');
  });

  it('an invitation of a disabled account cannot be claimed (404, not a sign-in), and enable returns it to invited', async () => {
    const erin = (await a(`${V1}/users`, { json: { name: 'erin', email: 'erin@example.test' } })).body;
    const body = JSON.stringify({ user: 'erin' });
    const inv = await j(
      s.fetch('/signal.ashx?oidc-invite=1', {
        method: 'POST',
        host: A,
        body,
        headers: { 'content-type': 'application/json', 'x-service-admin-signature': s.hmac('oidc-invite', A, Buffer.byteLength(body)) },
      }),
    );
    expect(inv.status).toBe(200);
    const t = new URL(inv.body.claim_url as string).searchParams.get('t')!;
    await a(`${V1}/users/${erin.id}/disable`, { method: 'POST' });
    expect((await j(s.fetch(`/oidc.ashx/claim-info?t=${t}`, { host: A }))).status).toBe(404);
    expect((await s.fetch(`/claim.html?t=${t}`, { host: A })).status).toBe(400);
    const claim = await j(s.fetch('/oidc.ashx/claim', { method: 'POST', host: A, json: { t, password: 'erin password 1' } }));
    expect(claim.status).toBe(404);
    expect((await login(A, 'erin', 'erin password 1')).status).toBe(400);
    expect((await a(`${V1}/users/${erin.id}/enable`, { method: 'POST' })).body).toMatchObject({ status: 'invited', hasPassword: false });
  });

  it('nobody disables themselves; the last active admin is neither disabled nor demoted (409)', async () => {
    const self = await a(`${V1}/users/${await idOf('admin')}/disable`, { method: 'POST' });
    expect(self.status).toBe(409);
    expect(self.body.error).toBe('cannot_disable_self');
    // Tenant B has one admin: the super-admin may reach it, but not leave B without an admin.
    const bAdmin = await idOf('admin', B, tokB);
    const dis = await a(`${V1}/users/${bAdmin}/disable?tenant=${B_HOST}`, { method: 'POST' });
    expect(dis.status).toBe(409);
    expect(dis.body.error).toBe('last_admin');
    const dem = await a(`${V1}/users/${bAdmin}?tenant=${B_HOST}`, { method: 'PATCH', json: { role: 'user' } });
    expect(dem.status).toBe(409);
    expect(dem.body.error).toBe('last_admin');
    // With a second admin in B, demoting the first is fine.
    const b2 = await a(`${V1}/users?tenant=${B_HOST}`, { json: { name: 'admin2', role: 'admin', password: 'admin2 password 1' } });
    expect(b2.status).toBe(201);
    expect((await a(`${V1}/users/${bAdmin}?tenant=${B_HOST}`, { method: 'PATCH', json: { role: 'user' } })).body.role).toBe('user');
    expect((await a(`${V1}/users/${bAdmin}?tenant=${B_HOST}`, { method: 'PATCH', json: { role: 'admin' } })).body.role).toBe('admin');
  });

  it('disable and enable take no body, and 404 an unknown user', async () => {
    expect((await a(`${V1}/users/${carolId}/disable`, { json: { really: true } })).status).toBe(400);
    expect((await a(`${V1}/users/u_0000000000000000/disable`, { method: 'POST' })).status).toBe(404);
    expect((await a(`${V1}/users/u_0000000000000000/enable`, { method: 'POST' })).status).toBe(404);
  });
});

describe('tenants', () => {
  it('an admin of another tenant sees only their own users; ?tenant= of another host is 403 whether it exists or not', async () => {
    const own = await b(`${V1}/users`);
    expect(own.body.data.every((u: Json) => u.tenant === B_HOST)).toBe(true);
    expect(own.body.data.map((u: Json) => u.name)).not.toContain('alice');
    expect((await b(`${V1}/users?tenant=${B_HOST}`)).status).toBe(200);
    expect((await b(`${V1}/users?tenant=B.TEST`)).status).toBe(200);
    for (const q of ['localhost', 'nowhere.example', '*']) {
      const r = await b(`${V1}/users?tenant=${q}`);
      expect(r.status, q).toBe(403);
      expect(r.body.error).toBe('insufficient_scope');
    }
    // A's user ids mean nothing on B.
    expect((await b(`${V1}/users/${await idOf('alice')}`)).status).toBe(404);
    expect((await b(`${V1}/users/${await idOf('alice')}/disable`, { method: 'POST' })).status).toBe(404);
    // A's token on B's host is not B's.
    expect((await as(tokA, B)(`${V1}/users`)).status).toBe(401);
  });

  it('the super-admin reaches any tenant by host, or all with *; an unknown host is 404; * is for lists only', async () => {
    const inB = await a(`${V1}/users?tenant=${B_HOST}`);
    expect(inB.status).toBe(200);
    expect(inB.body.data.every((u: Json) => u.tenant === B_HOST)).toBe(true);
    const all = await a(`${V1}/users?tenant=*&limit=500`);
    expect(new Set(all.body.data.map((u: Json) => u.tenant))).toEqual(new Set(['localhost', B_HOST]));
    expect(all.body.total).toBe(all.body.data.length);
    expect((await a(`${V1}/users?tenant=nowhere.example`)).status).toBe(404);
    const star = await a(`${V1}/users?tenant=*`, { json: { name: 'zed' } });
    expect(star.status).toBe(400);
    expect(star.body.field).toBe('tenant');
  });

  it("a super-admin's change lands in the other tenant, audited there with via=", async () => {
    const r = await a(`${V1}/users?tenant=${B_HOST}`, { json: { name: 'frank', generatePassword: true } });
    expect(r.body).toMatchObject({ name: 'frank', tenant: B_HOST });
    expect((await login(B, 'frank', r.body.password)).status).toBe(200);
    expect((await login(A, 'frank', r.body.password)).status).toBe(400);
    const entry = (await audit(B, tokB, 'user-add')).find((e) => e.extra.includes('target=frank'))!;
    expect(entry).toMatchObject({ user: 'admin', tenant: B_HOST });
    expect(entry.extra).toContain('via=localhost');
    expect(entry.extra).toContain('generated=true');
  });
});

describe('audit and API description', () => {
  it('every kind of change is audited with the actor, IP and user agent, never a password', async () => {
    const names = ['user-add', 'user-role-change', 'user-password-reset', 'user-disable', 'user-enable'];
    for (const n of names) {
      const entries = await audit(A, tokA, n);
      expect(entries.length, n).toBeGreaterThan(0);
      expect(entries[0]).toMatchObject({ event: n, user: 'admin', ip: '127.0.0.1' });
    }
    const all = JSON.stringify((await a(`${V1}/auditlog?event=user-&limit=500`)).body);
    for (const pw of ['alice password 1', 'alice password 2', 'carol password 1']) expect(all).not.toContain(pw);
    expect(s.logs.text()).not.toContain('alice password 2');
  });

  it('every users endpoint is in /openapi.json, bearer only', async () => {
    const doc = (await j(s.fetch('/openapi.json'))).body;
    const ops: [string, string][] = [
      ['/api.ashx/v1/users', 'get'],
      ['/api.ashx/v1/users', 'post'],
      ['/api.ashx/v1/users/{id}', 'get'],
      ['/api.ashx/v1/users/{id}', 'patch'],
      ['/api.ashx/v1/users/{id}/password', 'post'],
      ['/api.ashx/v1/users/{id}/disable', 'post'],
      ['/api.ashx/v1/users/{id}/enable', 'post'],
    ];
    for (const [p, m] of ops) {
      expect(doc.paths[p]?.[m], `${m} ${p}`).toBeDefined();
      expect(doc.paths[p][m].security).toEqual([{ bearer: [] }]);
      expect(doc.paths[p][m].parameters.some((x: Json) => x.name === 'tenant' && x.in === 'query')).toBe(true);
    }
  });
});
