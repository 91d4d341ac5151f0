import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';

/**
 * Unauthenticated failed sign-ins are aggregated: one audit row per event, account, address and
 * minute with a count, instead of one row per attempt (a guessing run wrote 283 rows in 20 s).
 */
let s: TestServer;
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  s = await startTestServer({
    clock,
    // No pause in the slow lane, so the test does not wait; the per-account limit stays at 5.
    overrides: { plugins: { oidc: { loginPerIpPerMinute: 1000, loginSlowdownMs: 0 } } },
  });
});
afterAll(async () => {
  await s?.stop();
});

/** A password grant from a chosen loopback address (127.0.0.x are all this machine). */
function guess(username: string, password: string, localAddress = '127.0.0.1'): Promise<number> {
  const body = new URLSearchParams({ grant_type: 'password', client_id: 'sovcomms-console', username, password }).toString();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: s.port,
        localAddress,
        method: 'POST',
        path: '/oauth2/v1/token',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': Buffer.byteLength(body), 'User-Agent': `guesser ${Math.random()}` },
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

const rows = (event: string, user: string) =>
  s.appliance.core.db.prepare('SELECT ip, extra FROM audit_log WHERE tenant_id = ? AND event = ? AND user = ? ORDER BY id').all(s.primary.id, event, user) as {
    ip: string;
    extra: string;
  }[];

describe('failed sign-ins in the audit log', () => {
  it('12 wrong passwords from one address and 3 from another are one row each per address and minute, with a count', { timeout: 120_000 }, async () => {
    for (let i = 0; i < 12; i++) expect(await guess('admin', `wrong ${i} password`)).toBe(400);
    for (let i = 0; i < 3; i++) expect(await guess('admin', `other ${i} password`, '127.0.0.2')).toBe(400);
    const fails = rows('login-fail', 'admin');
    expect(fails.map((r) => r.ip)).toEqual(['127.0.0.1', '127.0.0.2']);
    expect(fails[0]!.extra).toMatch(/reason=bad-password count=12$/);
    expect(fails[1]!.extra).toMatch(/reason=bad-password count=3$/);
    // Past the per-account limit the attempts were slowed: that is aggregated too.
    const limited = rows('login-rate-limited', 'admin');
    expect(limited.map((r) => r.ip)).toEqual(['127.0.0.1', '127.0.0.2']);
    expect(limited[0]!.extra).toMatch(/by=account count=7$/);
    expect(limited[1]!.extra).toMatch(/by=account count=3$/);
    // Another account (an unknown name here) has its own row.
    expect(await guess('nobody', 'wrong password 1')).toBe(400);
    expect(rows('login-fail', 'nobody')).toHaveLength(1);
    expect(rows('login-fail', 'nobody')[0]!.extra).not.toMatch(/count=/);
    // The listing shows the aggregated row like any other.
    const log = (await (await s.fetch('/api.ashx/v1/auditlog?event=login-fail&user=admin', { key: s.adminKey })).json()) as {
      data: { extra: string; ip: string }[];
    };
    expect(log.data.map((e) => e.extra).join('\n')).toMatch(/count=12/);
  });

  it('a new minute starts a new row; a correct sign-in is never aggregated', { timeout: 60_000 }, async () => {
    clock.advance(61_000);
    expect(await guess('nobody', 'wrong password 2')).toBe(400);
    expect(rows('login-fail', 'nobody')).toHaveLength(2);
    const ok = () => guess('admin', s.adminPassword);
    expect(await ok()).toBe(200);
    expect(await ok()).toBe(200);
    expect(rows('login-ok', 'admin')).toHaveLength(2);
  });
});
