import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../../server/keys.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminToken, j, type Json } from './helpers.ts';

/**
 * ak_ API keys over HTTP (plugins/admin): listed without the key or its hash, filtered, revoked at
 * once and idempotently, each revocation audited, tenant isolation, and the super-admin's reach.
 */
const V1 = '/api.ashx/v1';
const B_HOST = 'b.test';
let s: TestServer;
let A: string;
let B: string;
let tokA: string;
let tokB: string;
let keyB: string;
const minted: Record<string, { key: string; id: string }> = {};

const as =
  (token: string, host: string) =>
  (p: string, init: { method?: string; json?: unknown } = {}) =>
    j(s.fetch(p, { ...init, method: init.method ?? (init.json !== undefined ? 'POST' : 'GET'), host, key: token }));
const a = (p: string, init?: { method?: string; json?: unknown }) => as(tokA, A)(p, init);
const b = (p: string, init?: { method?: string; json?: unknown }) => as(tokB, B)(p, init);
const revoke = (id: string, q = '') => a(`${V1}/apikeys/${id}/revoke${q}`, { method: 'POST' });

/** Mints a key the way the console does: POST ?apikey-create=1 with an admin bearer. */
async function mint(host: string, token: string, user: string, name: string): Promise<{ key: string; id: string }> {
  const r = await j(s.fetch('/signal.ashx?apikey-create=1', { method: 'POST', host, key: token, json: { user, name } }));
  expect(r.status).toBe(200);
  return { key: r.body.key, id: r.body.id };
}

beforeAll(async () => {
  s = await startTestServer();
  A = `localhost:${s.port}`;
  B = `${B_HOST}:${s.port}`;
  keyB = (await s.addTenant(B_HOST)).adminKey;
  tokA = await adminToken(s, A, 'admin', s.adminPassword);
  tokB = await adminToken(s, B, 'admin', 'correct horse battery');
  await a(`${V1}/users`, { json: { name: 'alice', role: 'admin', password: 'alice password 1' } });
  minted.alice1 = await mint(A, tokA, 'alice', 'build server');
  minted.alice2 = await mint(A, tokA, 'alice', 'laptop');
  minted.admin = await mint(A, tokA, 'admin', 'cron');
});
afterAll(async () => {
  await s?.stop();
});

describe('listing keys', () => {
  it("the envelope of the tenant's keys: prefix and metadata, never the key or its hash", async () => {
    const r = await a(`${V1}/apikeys`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ limit: 50, offset: 0, next: null });
    const item = r.body.data.find((k: Json) => k.id === minted.alice1!.id);
    expect(Object.keys(item).sort()).toEqual([
      'createdAtUtc',
      'createdBy',
      'id',
      'lastUsedAtUtc',
      'name',
      'prefix',
      'revokedAtUtc',
      'status',
      'tenant',
      'userId',
      'userName',
      'userStatus',
    ]);
    expect(item).toMatchObject({
      userName: 'alice',
      userStatus: 'active',
      name: 'build server',
      prefix: minted.alice1!.key.slice(0, 10),
      status: 'active',
      createdBy: 'admin',
      revokedAtUtc: null,
      tenant: 'localhost',
    });
    const text = JSON.stringify(r.body);
    for (const m of Object.values(minted)) {
      expect(text).not.toContain(m.key);
      expect(text).not.toContain(sha256Hex(m.key));
    }
    expect(text).not.toContain(sha256Hex(s.adminKey));
  });

  it('filters by user and status, pages with next', async () => {
    const alice = await a(`${V1}/apikeys?user=ALICE`);
    expect(alice.body.data.map((k: Json) => k.id).sort()).toEqual([minted.alice1!.id, minted.alice2!.id].sort());
    expect((await a(`${V1}/apikeys?status=revoked`)).body.total).toBe(0);
    const page = await a(`${V1}/apikeys?limit=1`);
    expect(page.body.data).toHaveLength(1);
    expect(page.body.next).toContain('offset=1');
    expect((await a(`${V1}/apikeys?user=nobody`)).body).toMatchObject({ total: 0, data: [] });
  });

  it('bad input is 4xx, never 500', async () => {
    expect((await a(`${V1}/apikeys?status=lost`)).status).toBe(400);
    expect((await a(`${V1}/apikeys?limit=0`)).status).toBe(400);
    expect((await a(`${V1}/apikeys?offset=-1`)).status).toBe(400);
    expect((await a(`${V1}/apikeys?tenant=${'x'.repeat(300)}`)).status).toBe(400);
    expect((await a(`${V1}/apikeys/${'k'.repeat(65)}/revoke`, { method: 'POST' })).status).toBe(400);
    expect((await a(`${V1}/apikeys/${minted.admin!.id}/revoke`, { json: { why: 'x' } })).status).toBe(400);
    expect((await a(`${V1}/apikeys/${minted.admin!.id}/revoke`, { method: 'GET' })).status).toBe(405);
  });

  it('an ak_ key may not manage keys (403); no credential 401', async () => {
    expect((await j(s.fetch(`${V1}/apikeys`, { host: A, key: s.adminKey }))).status).toBe(403);
    expect((await j(s.fetch(`${V1}/apikeys/${minted.admin!.id}/revoke`, { method: 'POST', host: A, key: minted.alice1!.key }))).status).toBe(403);
    expect((await j(s.fetch(`${V1}/apikeys`, { host: A }))).status).toBe(401);
  });
});

describe('revoking keys', () => {
  it('works at once; revoking again keeps the first time and audits once', async () => {
    const k = minted.alice1!;
    expect((await j(s.fetch(`${V1}/auditlog`, { host: A, key: k.key }))).status).toBe(200);
    const r = await revoke(k.id);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: k.id, status: 'revoked', userName: 'alice', revokedAtUtc: expect.any(String) });
    expect(JSON.stringify(r.body)).not.toContain(k.key);
    const denied = await j(s.fetch(`${V1}/auditlog`, { host: A, key: k.key }));
    expect(denied.status).toBe(401);
    expect(denied.body.error).toBe('invalid_token');
    const again = await revoke(k.id);
    expect(again.body.revokedAtUtc).toBe(r.body.revokedAtUtc);
    // The other keys still work.
    expect((await j(s.fetch(`${V1}/auditlog`, { host: A, key: minted.alice2!.key }))).status).toBe(200);
    expect((await a(`${V1}/apikeys?status=revoked`)).body.data.map((x: Json) => x.id)).toEqual([k.id]);
    const audit = (await a(`${V1}/auditlog?event=apikey-revoke`)).body.data.filter((e: Json) => e.extra.includes(`id=${k.id}`));
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ user: 'admin', ip: '127.0.0.1' });
    expect(audit[0].extra).toContain('owner=alice');
  });

  it('an unknown key is 404', async () => {
    const r = await revoke('key_000000000000');
    expect(r.status).toBe(404);
    expect(r.body.error).toBe('not_found');
  });
});

describe('tenants', () => {
  it("each admin sees and revokes only their own tenant's keys", async () => {
    const inB = await b(`${V1}/apikeys`);
    expect(inB.body.data.every((k: Json) => k.tenant === B_HOST)).toBe(true);
    expect(inB.body.data.map((k: Json) => k.id)).not.toContain(minted.admin!.id);
    // A's key id, addressed on B: not B's key.
    expect((await b(`${V1}/apikeys/${minted.admin!.id}/revoke`, { method: 'POST' })).status).toBe(404);
    expect((await b(`${V1}/apikeys/${minted.admin!.id}/revoke?tenant=localhost`, { method: 'POST' })).status).toBe(403);
    expect((await b(`${V1}/apikeys?tenant=localhost`)).status).toBe(403);
    expect((await b(`${V1}/apikeys?tenant=*`)).status).toBe(403);
    // And B's key, addressed on A without ?tenant: not A's.
    const bKeyId = inB.body.data[0].id as string;
    expect((await revoke(bKeyId)).status).toBe(404);
    expect((await j(s.fetch(`${V1}/auditlog`, { host: B, key: keyB }))).status).toBe(200);
  });

  it("the super-admin lists every tenant's keys with * and revokes in another tenant, audited there", async () => {
    const all = await a(`${V1}/apikeys?tenant=*&limit=500`);
    expect(new Set(all.body.data.map((k: Json) => k.tenant))).toEqual(new Set(['localhost', B_HOST]));
    const bKey = all.body.data.find((k: Json) => k.tenant === B_HOST);
    const r = await revoke(bKey.id, `?tenant=${B_HOST}`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: bKey.id, status: 'revoked', tenant: B_HOST });
    expect((await j(s.fetch(`${V1}/auditlog`, { host: B, key: keyB }))).status).toBe(401);
    const entry = (await b(`${V1}/auditlog?event=apikey-revoke`)).body.data.find((e: Json) => e.extra.includes(`id=${bKey.id}`));
    expect(entry.extra).toContain('via=localhost');
    expect((await revoke('key_000000000000', '?tenant=nowhere.example')).status).toBe(404);
    expect((await revoke(bKey.id, '?tenant=*')).status).toBe(400);
  });

  it('both endpoints are in /openapi.json, bearer only', async () => {
    const doc = (await j(s.fetch('/openapi.json'))).body;
    expect(doc.paths['/api.ashx/v1/apikeys'].get.security).toEqual([{ bearer: [] }]);
    expect(doc.paths['/api.ashx/v1/apikeys/{id}/revoke'].post.security).toEqual([{ bearer: [] }]);
  });
});
