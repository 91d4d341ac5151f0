/**
 * Nobody can keep an owner out (SECURITY.md, "Rate limits that do not lock out"): guesses from
 * other addresses never fill the owner's sign-in lane, and unauthenticated requests from an
 * address never spend the sensitive-route budget of a valid credential at the same address.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { adminToken } from '../plugins/admin/helpers.ts';

let s: TestServer;
let host: string;

beforeAll(async () => {
  s = await startTestServer({
    overrides: {
      // The product's sensitive budget (30 a minute per address), and a short sign-in pause.
      rateLimit: { sensitivePerMinute: 30 },
      plugins: { oidc: { loginSlowdownMs: 400 } },
    },
  });
  host = `localhost:${s.port}`;
});
afterAll(async () => {
  await s?.stop();
});

/** A form POST from a given loopback source address (each is its own client address to the server). */
function postFrom(localAddress: string, path: string, form: Record<string, string>): Promise<number> {
  const body = new URLSearchParams(form).toString();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: s.port,
        localAddress,
        method: 'POST',
        path,
        headers: { Host: host, 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('no lock-out', { timeout: 180_000 }, () => {
  it('guesses in flight from four other addresses do not keep the owner out: the right password signs in', async () => {
    await s.appliance.core.users.add(s.primary, { name: 'owner', role: 'admin', password: 'owner password 1' });
    const guess = (ip: string, i: number) =>
      postFrom(ip, '/oidc.ashx/token', { grant_type: 'password', client_id: 'sovcomms-console', username: 'owner', password: `guess ${i}` });
    // Past the account's failure budget: the account is slowed from now on.
    for (let i = 0; i < 5; i++) expect(await guess('127.0.0.2', i)).toBe(400);
    // Four addresses each keep their lane full (three waiting, the fourth refused).
    const attackers = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'].flatMap((ip) => [0, 1, 2, 3].map((i) => guess(ip, 10 + i)));
    await new Promise((r) => setTimeout(r, 100));
    const owner = await postFrom('127.0.0.1', '/oidc.ashx/token', {
      grant_type: 'password',
      client_id: 'sovcomms-console',
      username: 'owner',
      password: 'owner password 1',
    });
    // Its own lane (one pause), not a place behind the attackers' queue, which is full: 429.
    expect(owner).toBe(200);
    const codes = await Promise.all(attackers);
    expect(codes.filter((c) => c === 429)).toHaveLength(4);
    expect(codes.filter((c) => c === 400)).toHaveLength(12);
  });

  it("35 unauthenticated requests to a sensitive admin route from one address do not block the super-admin's own requests from it", async () => {
    const token = await adminToken(s, host, 'admin', s.adminPassword);
    for (let i = 0; i < 35; i++) {
      const r = await s.fetch('/api.ashx/v1/users', { method: 'POST', host, json: { name: `nobody${i}`, role: 'user' } });
      expect(r.status).toBe(401);
    }
    const ok = await s.fetch('/api.ashx/v1/users', {
      method: 'POST',
      host,
      key: token,
      json: { name: 'newcomer', role: 'user', password: 'newcomer password 1' },
    });
    expect(ok.status).toBe(201);
    // The admin's own budget is per credential: 30 a minute, then 429 for that credential only.
    const codes = await Promise.all(
      Array.from(
        { length: 40 },
        async () => (await s.fetch('/api.ashx/v1/users', { method: 'POST', host, key: token, json: { name: 'x', role: 'bogus' } })).status,
      ),
    );
    expect(codes).toContain(429);
    const other = await adminToken(s, host, 'owner', 'owner password 1');
    expect(
      (await s.fetch('/api.ashx/v1/users', { method: 'POST', host, key: other, json: { name: 'second', role: 'user', password: 'second password 1' } })).status,
    ).toBe(201);
  });
});
