/**
 * Admin-signed requests are checked as far as they can be before their body is read, and a large
 * signed body never sits in memory before its signature checks (SECURITY.md, "Admin signatures
 * and large bodies"). The attack: any X-Service-Admin-Signature(-V2) header, even a bogus one,
 * made the server read the whole body first; 16 x 120 MB to /lotl.ashx?import took RSS to 2 GB.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signAdminHmac, signAdminHmacV2 } from '../../server/auth.ts';
import { runCli } from '../support/cli.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let s: TestServer;
let host: string;

beforeAll(async () => {
  s = await startTestServer({ overrides: { http: { spoolAboveBytes: 1024, maxLargeSignedBodies: 2 } } });
  host = `127.0.0.1:${s.port}`;
});
afterAll(async () => {
  await s?.stop();
});

const secret = () => s.appliance.core.auth.adminSecret();
const spooled = () => {
  const dir = path.join(s.dataDir, 'tmp', 'signed-bodies');
  return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
};

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * Starts a request that declares `declared` bytes but sends only `send` of them, and resolves with
 * the answer (or rejects after `waitMs`): an answer proves the server did not wait for the body.
 */
function partial(o: { path: string; headers: Record<string, string>; declared: number; send: number; waitMs?: number }): {
  answer: Promise<Answer>;
  req: http.ClientRequest;
} {
  const req = http.request({
    host: '127.0.0.1',
    port: s.port,
    method: 'POST',
    path: o.path,
    headers: { ...o.headers, Host: host, 'Content-Length': String(o.declared) },
  });
  const answer = new Promise<Answer>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${o.waitMs ?? 5000} ms`)), o.waitMs ?? 5000);
    req.on('response', (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    req.on('error', () => undefined);
  });
  req.write(Buffer.alloc(o.send, 0x41));
  return { answer, req };
}

describe('admin-signed requests: checked before the body, large bodies spooled', () => {
  it('a stale V2 header and a bogus V1 signature are refused before a 64 MB body is sent', async () => {
    const staleT = Math.floor(Date.now() / 1000) - 3600;
    const stale = partial({
      path: '/lotl.ashx?import',
      headers: { 'Content-Type': 'application/x-tar', 'X-Service-Admin-Signature-V2': `t=${staleT},sig=${'0'.repeat(64)}` },
      declared: 64 * 1024 * 1024,
      send: 1024,
    });
    const a = await stale.answer;
    stale.req.destroy();
    expect(a.status).toBe(401);
    expect(JSON.parse(a.body).error).toBe('stale_signature');

    const bogus = partial({
      path: '/lotl.ashx?import',
      headers: { 'Content-Type': 'application/x-tar', 'X-Service-Admin-Signature': 'f'.repeat(64) },
      declared: 64 * 1024 * 1024,
      send: 1024,
    });
    const b = await bogus.answer;
    bogus.req.destroy();
    expect(b.status).toBe(401);
    expect(JSON.parse(b.body).error).toBe('invalid_signature');
  });

  it('a bogus V2 signature over a large body is refused after it is spooled, and the spool file is gone; a good one is served', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 0x20);
    const t = Math.floor(Date.now() / 1000);
    const r = await s.fetch('/lotl.ashx?import', {
      method: 'POST',
      host,
      headers: { 'Content-Type': 'application/xml', 'X-Service-Admin-Signature-V2': `t=${t},sig=${'0'.repeat(64)}` },
      body: big,
    });
    expect(r.status).toBe(401);
    expect(((await r.json()) as { error: string }).error).toBe('invalid_signature');
    expect(spooled()).toEqual([]);

    // A good V2 signature over a body above the spool threshold: the handler gets the whole body.
    const claims = { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1984-01-26', note: 'x'.repeat(4000) };
    const json = JSON.stringify({ claims, pre_authorized: true });
    const ok = await s.fetch('/vci.ashx?create-offer', {
      method: 'POST',
      host,
      headers: { 'Content-Type': 'application/json', 'X-Service-Admin-Signature-V2': signAdminHmacV2(secret(), 'create-offer', host, json) },
      body: json,
    });
    // The issuer refuses the unknown claim for the PID, or accepts it: either way the signature passed.
    expect([200, 400]).toContain(ok.status);
    if (ok.status === 400) expect(((await ok.json()) as { error: string }).error).not.toMatch(/signature/);
    expect(spooled()).toEqual([]);
  });

  it('at most maxLargeSignedBodies large signed bodies are read at once; the next answers 503 with Retry-After at once', async () => {
    const t = Math.floor(Date.now() / 1000);
    const headers = { 'Content-Type': 'application/x-tar', 'X-Service-Admin-Signature-V2': `t=${t},sig=${'1'.repeat(64)}` };
    const held = [0, 1].map(() => partial({ path: '/lotl.ashx?import', headers, declared: 8 * 1024 * 1024, send: 4096, waitMs: 20_000 }));
    await new Promise((r) => setTimeout(r, 300));
    const third = partial({ path: '/lotl.ashx?import', headers, declared: 8 * 1024 * 1024, send: 4096 });
    const a = await third.answer;
    third.req.destroy();
    expect(a.status).toBe(503);
    expect(a.headers['retry-after']).toBeDefined();
    for (const h of held) {
      h.answer.catch(() => undefined);
      h.req.destroy();
    }
  });

  it('V1 (no body digest) is off for a tenant added later, and can be switched on (CLI) and off (API); V2 always works', async () => {
    const later = s.appliance.core.tenants.add('later.test');
    expect(later.hmacV1).toBe(false);
    const h = `later.test:${s.port}`;
    const LIST = '/signal.ashx?verifier-anchors=list';
    const v1 = () => s.fetch(LIST, { host: h, headers: { 'X-Service-Admin-Signature': signAdminHmac(secret(), 'verifier-anchors-list', h) } });
    const refused = await v1();
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error_description: string }).error_description).toMatch(/V2/);
    const v2 = await s.fetch(LIST, { host: h, headers: { 'X-Service-Admin-Signature-V2': signAdminHmacV2(secret(), 'verifier-anchors-list', h, '') } });
    expect(v2.status).toBe(200);
    // The primary tenant made at first start keeps the spec's form.
    expect((await s.fetch(LIST, { host, headers: { 'X-Service-Admin-Signature': s.hmac('verifier-anchors-list') } })).status).toBe(200);

    const on = await runCli(['tenant', 'set-hmac-v1', 'later.test', 'on'], { dataDir: s.dataDir });
    expect(on.code).toBe(0);
    expect((await v1()).status).toBe(200);
    const off = await s.fetch(`/api.ashx/v1/tenants/${later.id}/hmac-v1`, {
      method: 'POST',
      host,
      headers: { 'X-Service-Admin-Signature': s.hmac('tenants-hmac-v1') },
      json: { enabled: false },
    });
    // Tenant changes need a super-admin's bearer: the HMAC is refused there.
    expect(off.status).toBe(401);
    s.appliance.core.tenants.setHmacV1(later.id, false);
    expect((await v1()).status).toBe(401);
  });

  it('signed requests have a per-IP budget charged before the body', async () => {
    const t = await startTestServer({ overrides: { rateLimit: { signedPerMinute: 5 } } });
    try {
      const codes: number[] = [];
      for (let i = 0; i < 7; i++) {
        codes.push((await t.fetch('/signal.ashx?verifier-anchors=list', { headers: { 'X-Service-Admin-Signature': 'f'.repeat(64) } })).status);
      }
      expect(codes.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
      expect(codes.slice(5)).toEqual([429, 429]);
    } finally {
      await t.stop();
    }
  });
});
