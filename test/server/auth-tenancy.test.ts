import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { AUDIT_WRITER } from '../../server/core-services.ts';
import { probePlugin, withBuiltins } from './fixtures/test-plugins.ts';
import type { Tenant } from '../../server/tenancy.ts';
import fs from 'node:fs';
import path from 'node:path';
import { AuthService, policy, signAdminHmacV2, type AuthPolicy } from '../../server/auth.ts';
import { RateLimitedError } from '../../server/errors.ts';
import { main } from '../../server/cli.ts';
import { defaultHmacBucket } from '../../server/http/dispatch.ts';

let s: TestServer;
let a: { tenant: Tenant; adminKey: string };
let b: { tenant: Tenant; adminKey: string };
const A = 'office-a.example';
const B = 'office-b.example';

beforeAll(async () => {
  s = await startTestServer({ plugins: await withBuiltins(probePlugin) });
  a = await s.addTenant(A);
  b = await s.addTenant(B);
});
afterAll(async () => {
  await s?.stop();
});

async function expect401(r: Response): Promise<Record<string, unknown>> {
  expect(r.status).toBe(401);
  expect(r.headers.get('www-authenticate')).toMatch(/^Bearer realm="[^"]+"$/);
  const body = (await r.json()) as Record<string, unknown>;
  expect(typeof body.error).toBe('string');
  expect(typeof body.error_description).toBe('string');
  expect(JSON.stringify(body)).not.toMatch(/\bat .*\.ts:\d+/);
  return body;
}

describe('tenant isolation', () => {
  it('audit entries written under Host A are invisible under Host B', async () => {
    const audit = s.appliance.host.provided(AUDIT_WRITER)!;
    audit.write(a.tenant, { event: 'login.success', user: 'alice-only-in-a@example.com', ip: '10.0.0.1' });
    audit.write(b.tenant, { event: 'login.failure', user: 'bob-only-in-b@example.com', ip: '10.0.0.2' });
    const ra = await s.fetch('/api.ashx/v1/auditlog', { host: A, key: a.adminKey });
    const rb = await s.fetch('/api.ashx/v1/auditlog', { host: B, key: b.adminKey });
    expect(ra.status).toBe(200);
    expect(rb.status).toBe(200);
    const ta = await ra.text();
    const tb = await rb.text();
    expect(ta).toContain('alice-only-in-a');
    expect(ta).not.toContain('bob-only-in-b');
    expect(tb).toContain('bob-only-in-b');
    expect(tb).not.toContain('alice-only-in-a');
    // The primary tenant (unknown Host falls back to it) sees neither.
    const rp = await (await s.fetch('/api.ashx/v1/auditlog', { key: s.adminKey })).text();
    expect(rp).not.toContain('alice-only-in-a');
    expect(rp).not.toContain('bob-only-in-b');
    // Port and case of the Host header do not matter.
    const rc = await s.fetch('/api.ashx/v1/auditlog', { host: 'OFFICE-A.example:8443', key: a.adminKey });
    expect(await rc.text()).toContain('alice-only-in-a');
  });

  it('API keys of tenant A are not listed for tenant B', () => {
    const auth = s.appliance.core.auth;
    const idsA = auth.listApiKeys(a.tenant).map((k) => k.id);
    const idsB = auth.listApiKeys(b.tenant).map((k) => k.id);
    expect(idsA.length).toBeGreaterThan(0);
    expect(idsB.length).toBeGreaterThan(0);
    expect(idsA.filter((id) => idsB.includes(id))).toEqual([]);
    expect(auth.getApiKey(b.tenant, idsA[0]!)).toBeUndefined();
    // Revoking through the wrong tenant is a 404, and leaves the key working.
    expect(() => auth.revokeApiKey(b.tenant, idsA[0]!)).toThrow(/no API key/);
    expect(auth.getApiKey(a.tenant, idsA[0]!)?.revokedAt).toBeNull();
  });

  it('an ak_ key of tenant B is refused on tenant A (401), on every route and address that takes keys', async () => {
    // Routes of a plugin that is not running answer 503 before auth; they are not this test's subject.
    const keyed = s.appliance.dispatcher.routes.filter(
      (r) =>
        r.def.auth.kind === 'credentials' &&
        r.def.auth.accept.includes('apiKey') &&
        (r.plugin === 'core' || s.appliance.host.isStarted(r.plugin)) &&
        // A live stream answers its own tenant's key with a stream that never ends (test/server/live.test.ts).
        r.def.responses?.[200]?.description !== 'text/event-stream',
    );
    expect(keyed.length).toBeGreaterThan(0);
    for (const r of keyed) {
      for (const address of r.addresses) {
        const url = address.replace(/:[A-Za-z0-9_]+/g, 'x');
        const what = `${r.def.method} ${address}`;
        const res = await s.fetch(url, { method: r.def.method, host: A, key: b.adminKey });
        const body = await expect401(res);
        expect(body.error, what).toBe('invalid_token');
        // ... and the same key passes authentication on its own tenant (reads only: no side effects).
        const superOnly = r.def.auth.kind === 'credentials' && r.def.auth.superAdmin;
        if (r.def.method === 'GET' && !superOnly) expect([401, 403], what).not.toContain((await s.fetch(url, { host: B, key: b.adminKey })).status);
      }
    }
  });

  it('super-admin is role admin on the primary tenant, not on any other', async () => {
    const auth = s.appliance.core.auth;
    const superPolicy: AuthPolicy = { kind: 'credentials', accept: ['apiKey'], role: 'admin', superAdmin: true };
    const call = (key: string, tenant: Tenant) =>
      auth.authenticate(superPolicy, { headers: { authorization: `Bearer ${key}` }, tenant, rawHost: tenant.host, bodyLen: 0 });
    expect((await call(s.adminKey, s.primary))?.superAdmin).toBe(true);
    await expect(call(a.adminKey, a.tenant)).rejects.toMatchObject({ status: 403 });
    // A user (not admin) of the primary tenant is not super-admin either.
    const u = await s.appliance.core.users.add(s.primary, { name: 'plain-user', role: 'user', password: 'long enough password' });
    const k = auth.createApiKey(s.primary, u, { createdBy: 'test' }).key;
    await expect(call(k, s.primary)).rejects.toMatchObject({ status: 403 });
  });
});

describe('auth failures', () => {
  it('a missing Authorization header answers 401 with WWW-Authenticate and an error body', async () => {
    const body = await expect401(await s.fetch('/api.ashx/v1/auditlog'));
    expect(body.error).toBe('invalid_token');
  });

  it('a malformed Authorization header answers 401', async () => {
    for (const h of ['Basic YWRtaW46cGFzcw==', 'Bearer', 'Bearer a b', 'ak_xyz', 'Bearer\tak_ with space']) {
      const body = await expect401(await s.fetch('/api.ashx/v1/auditlog', { headers: { Authorization: h } }));
      expect(['invalid_request', 'invalid_token']).toContain(body.error);
    }
  });

  it('an unknown, malformed or revoked ak_ key answers 401', async () => {
    await expect401(await s.fetch('/api.ashx/v1/auditlog', { key: 'ak_' + 'A'.repeat(43) }));
    await expect401(await s.fetch('/api.ashx/v1/auditlog', { key: 'ak_!!notbase64' }));
    await expect401(await s.fetch('/api.ashx/v1/auditlog', { key: 'ak_' + 'x'.repeat(400) }));
    const core = s.appliance.core;
    const admin = core.users.byName(s.primary, 'admin')!;
    const { key, info } = core.auth.createApiKey(s.primary, admin, { name: 'to-revoke', createdBy: 'test' });
    expect((await s.fetch('/api.ashx/v1/auditlog', { key })).status).toBe(200);
    expect(core.auth.getApiKey(s.primary, info.id)?.lastUsedAt).not.toBeNull();
    core.auth.revokeApiKey(s.primary, info.id);
    const body = await expect401(await s.fetch('/api.ashx/v1/auditlog', { key }));
    expect(body.error_description).toMatch(/revoked/);
  });

  it("a disabled user's key answers 401", async () => {
    const core = s.appliance.core;
    const u = await core.users.add(s.primary, { name: 'soon-disabled', role: 'admin', password: 'long enough password' });
    const { key } = core.auth.createApiKey(s.primary, u, { createdBy: 'test' });
    expect((await s.fetch('/api.ashx/v1/auditlog', { key })).status).toBe(200);
    core.users.setStatus(s.primary, u.id, 'disabled');
    await expect401(await s.fetch('/api.ashx/v1/auditlog', { key }));
  });

  it("a non-admin user's ak_ key answers 403 on v1 (authenticated, not privileged)", async () => {
    const core = s.appliance.core;
    const u = await core.users.add(b.tenant, { name: 'just-a-user', role: 'user', password: 'long enough password' });
    const { key } = core.auth.createApiKey(b.tenant, u, { createdBy: 'test' });
    const r = await s.fetch('/api.ashx/v1/auditlog', { host: B, key });
    expect(r.status).toBe(403);
    expect(r.headers.get('www-authenticate')).toBeNull();
    expect(await r.json()).toMatchObject({ error: 'insufficient_scope' });
  });

  it('an ak_ key cannot mint another key (admin-bearer-only routes refuse it with 403)', async () => {
    expect(policy.adminBearerOnly).toMatchObject({ accept: ['bearer'] });
    const r = await s.fetch('/api.ashx/v1/probe/mint', { method: 'POST', key: s.adminKey });
    expect(r.status).toBe(403);
    expect(((await r.json()) as { error: string }).error).toBe('insufficient_scope');
  });
});

describe('admin HMAC (X-Service-Admin-Signature)', () => {
  const echo = '/signal.ashx?test=echo';

  it('a good signature over bucket|Host is accepted without a body', async () => {
    const r = await s.fetch(echo, { method: 'POST', headers: { 'X-Service-Admin-Signature': s.hmac('test-echo') } });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ kind: 'hmac', bodyLen: 0, superAdmin: true });
  });

  it('a request with a body: the spec form bucket|Host is accepted on every bucket, and bucket|Host|bodyLen too', async () => {
    const body = JSON.stringify({ msg: 'hello' });
    const withLen = await s.fetch(echo, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/json', 'X-Service-Admin-Signature': s.hmac('test-echo', undefined, Buffer.byteLength(body)) },
    });
    expect(withLen.status).toBe(200);
    expect(await withLen.json()).toMatchObject({ kind: 'hmac', bodyLen: Buffer.byteLength(body), msg: 'hello' });
    // A script written to the spec signs bucket|Host only, whatever the body (it was refused: 401).
    const spec = await s.fetch(echo, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/json', 'X-Service-Admin-Signature': s.hmac('test-echo') },
    });
    expect(spec.status).toBe(200);
    // A wrong length is still refused.
    const wrongLen = await s.fetch(echo, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/json', 'X-Service-Admin-Signature': s.hmac('test-echo', undefined, 3) },
    });
    expect((await expect401(wrongLen)).error).toBe('invalid_signature');
  });

  it('the V2 header binds the body and a time: accepted once, refused when stale, replayed or for another body', async () => {
    const body = JSON.stringify({ msg: 'v2' });
    const host = `127.0.0.1:${s.port}`;
    const secret = s.appliance.core.auth.adminSecret();
    const send = (v: string, b = body) =>
      s.fetch(echo, { method: 'POST', body: b, headers: { 'Content-Type': 'application/json', 'X-Service-Admin-Signature-V2': v } });
    const v = signAdminHmacV2(secret, 'test-echo', host, body);
    const ok = await send(v);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ kind: 'hmac', msg: 'v2' });
    expect((await expect401(await send(v))).error).toBe('replayed_signature');
    const now = Math.floor(Date.now() / 1000);
    expect((await expect401(await send(signAdminHmacV2(secret, 'test-echo', host, body, now - 400)))).error).toBe('stale_signature');
    expect((await expect401(await send(signAdminHmacV2(secret, 'test-echo', host, body, now + 400)))).error).toBe('stale_signature');
    // Signed for one body, sent with another of the same length: the V1 forms cannot tell, V2 can.
    expect((await expect401(await send(signAdminHmacV2(secret, 'test-echo', host, body), JSON.stringify({ msg: 'v3' })))).error).toBe('invalid_signature');
    expect((await expect401(await send(signAdminHmacV2(secret, 'test-other', host, body)))).error).toBe('invalid_signature');
    expect((await expect401(await send('t=1,sig=zz'))).error).toBe('invalid_signature');
  });

  it('`sovcomms admin-secret sign` prints a header the server accepts as it is', async () => {
    const body = JSON.stringify({ msg: 'from a script' });
    const file = path.join(s.dataDir, 'body.json');
    fs.writeFileSync(file, body);
    const out: string[] = [];
    const io = { out: (l: string) => out.push(l), err: () => {}, stdin: async () => '' };
    expect(
      await main(['admin-secret', 'sign', 'test-echo', '--host', `127.0.0.1:${s.port}`, '--body-file', file, '--data-dir', s.dataDir], io, {
        plugins: await withBuiltins(probePlugin),
      }),
    ).toBe(0);
    expect(out).toHaveLength(1);
    const [name, value] = out[0]!.split(/:\s(.*)/s) as [string, string];
    expect(name).toBe('X-Service-Admin-Signature-V2');
    const r = await s.fetch(echo, { method: 'POST', body, headers: { 'Content-Type': 'application/json', [name]: value } });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ msg: 'from a script' });
  });

  it('a bad signature, a wrong bucket, another host or a malformed header answers 401', async () => {
    const sig = s.hmac('test-echo');
    const flipped = (sig[0] === 'a' ? 'b' : 'a') + sig.slice(1);
    for (const bad of [flipped, s.hmac('test-other'), s.hmac('test-echo', B), 'zz', sig.slice(0, 63), sig.toUpperCase() + '0']) {
      const r = await s.fetch(echo, { method: 'POST', headers: { 'X-Service-Admin-Signature': bad } });
      await expect401(r);
    }
    // Upper-case hex of the right signature is the same signature.
    expect((await s.fetch(echo, { method: 'POST', headers: { 'X-Service-Admin-Signature': sig.toUpperCase() } })).status).toBe(200);
  });

  it("HMAC on another tenant's host is that tenant's admin, not super-admin", async () => {
    const onB = await s.fetch(echo, { method: 'POST', host: B, headers: { 'X-Service-Admin-Signature': s.hmac('test-echo', B) } });
    expect(onB.status).toBe(200);
    expect(await onB.json()).toMatchObject({ kind: 'hmac', superAdmin: false });
    const whoB = await s.fetch('/signal.ashx?test=whoami', { host: B, headers: { 'X-Service-Admin-Signature': s.hmac('test-whoami', B) } });
    expect(whoB.status).toBe(403);
    const whoP = await s.fetch('/signal.ashx?test=whoami', { headers: { 'X-Service-Admin-Signature': s.hmac('test-whoami') } });
    expect(whoP.status).toBe(200);
    expect(await whoP.json()).toMatchObject({ kind: 'hmac', superAdmin: true });
  });

  it('every HMAC bucket is the verb of its address (spec examples, and every registered route)', () => {
    expect(defaultHmacBucket('/signal.ashx?whitelist=add')).toBe('whitelist-add');
    expect(defaultHmacBucket('/signal.ashx?oidc-clients-save=1')).toBe('oidc-clients-save');
    expect(defaultHmacBucket('/rp-cert.ashx?issue')).toBe('rp-cert-issue');
    expect(defaultHmacBucket('/lotl.ashx?refresh')).toBe('lotl-refresh');
    const off = s.appliance.dispatcher.routes
      .filter((r) => r.def.auth.kind === 'credentials' && r.def.auth.hmacBucket)
      .filter((r) => !r.addresses.map(defaultHmacBucket).includes((r.def.auth as { hmacBucket: string }).hmacBucket))
      .map((r) => `${r.plugin}: ${r.def.method} ${r.addresses.join(' | ')} signs ${(r.def.auth as { hmacBucket: string }).hmacBucket}`);
    expect(off).toEqual([]);
  });

  it('each bucket names one method and address (why V2 need not sign the method or path)', () => {
    const seen = new Map<string, string>();
    const shared: string[] = [];
    for (const r of s.appliance.dispatcher.routes) {
      if (r.def.auth.kind !== 'credentials' || !r.def.auth.hmacBucket) continue;
      const where = `${r.plugin}: ${r.def.method} ${r.addresses[0]}`;
      const before = seen.get(r.def.auth.hmacBucket);
      if (before) shared.push(`${r.def.auth.hmacBucket}: ${before} and ${where}`);
      else seen.set(r.def.auth.hmacBucket, where);
    }
    expect(seen.size).toBeGreaterThan(10);
    expect(shared).toEqual([]);
  });

  it('V2 replay memory is bounded and fails closed: when full, new signatures get 429, a remembered one stays refused', () => {
    const core = s.appliance.core;
    const auth = new AuthService(core.db, core.secrets, () => true, 'sovcomms', { replayMax: 2 });
    const secret = auth.adminSecret();
    const host = 'h.example';
    const now = Math.floor(Date.now() / 1000);
    const sign = (body: string, t = now) => signAdminHmacV2(secret, 'test-echo', host, body, t);
    const verify = (v: string, body: string, atSec = now) => auth.verifyHmacV2(v, 'test-echo', host, Buffer.from(body), atSec * 1000);
    const first = sign('1');
    verify(first, '1');
    verify(sign('2'), '2');
    let e: unknown;
    try {
      verify(sign('3'), '3');
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(RateLimitedError);
    expect((e as RateLimitedError).headers['Retry-After']).toBe('600');
    // Nothing was forgotten to make room: the first signature is still a replay.
    expect(() => verify(first, '1')).toThrow(expect.objectContaining({ code: 'replayed_signature' }) as Error);
    // Ten minutes on, the remembered ones have left the window and there is room again.
    verify(sign('4', now + 601), '4', now + 601);
  });

  it('a rotated admin secret invalidates signatures made with the old one', async () => {
    const old = s.hmac('test-echo');
    s.appliance.core.auth.rotateAdminSecret();
    await expect401(await s.fetch(echo, { method: 'POST', headers: { 'X-Service-Admin-Signature': old } }));
    expect((await s.fetch(echo, { method: 'POST', headers: { 'X-Service-Admin-Signature': s.hmac('test-echo') } })).status).toBe(200);
  });
});
