import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INTERNAL_FAILED_TEXT } from '../../../plugins/webhooks/service.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { Receiver, admin, testPlugins, until } from './support.ts';

/**
 * Webhooks to the office's own network (private, loopback or link-local targets a class allowance
 * lets through) must not map it: the tenant's delivery log says delivered or failed, with one
 * generic text, no status, no reply and no telling timing; the operator's log has the detail.
 * Here loopback stands for the LAN (allowLoopback makes it an allowed internal class).
 */
const TIMEOUT = 1500;
let s: TestServer;
let rx: Receiver;
let closedPort: number;

beforeAll(async () => {
  rx = await new Receiver().start();
  rx.respond = (r) =>
    r.path === '/router'
      ? { status: 401, body: '<html><title>FRITZ!Box 7590 login</title></html>' }
      : r.path === '/silent'
        ? 'hang'
        : { status: 200, body: 'ok' };
  // A port nothing listens on: bind one, then let it go.
  const probe = http.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  closedPort = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
  s = await startTestServer({ plugins: testPlugins(), overrides: { plugins: { webhooks: { allowLoopback: true, timeoutMs: TIMEOUT } } } });
});
afterAll(async () => {
  await s?.stop();
  await rx?.stop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the log is read field by field
type Item = any;
const firstLog = async (id: string): Promise<Item> => (await admin(s, 'deliveries', { query: `&id=${id}` })).json.data[0];

describe('the delivery log of internal targets', () => {
  it('a router login page, a closed port and a silent host read alike: failed, one text, no status, whole seconds, recorded a timeout after the attempt', async () => {
    const subs: Record<string, string> = {};
    for (const [name, url] of [
      ['router', `${rx.url}/router`],
      ['closed', `http://127.0.0.1:${closedPort}/hook`],
      ['silent', `${rx.url}/silent`],
      ['fine', `${rx.url}/fine`],
    ] as const) {
      const r = await admin(s, 'add', { body: { url, events: ['call.ended'] } });
      expect(r.status, name).toBe(200);
      subs[name] = r.json.id;
    }
    const t0 = Date.now();
    s.appliance.core.events.emit(s.primary.id, 'call.ended', { callId: 'lan-map' });
    const seen: Record<string, number> = {};
    await until(
      async () => {
        for (const [name, id] of Object.entries(subs)) if (!(name in seen) && (await firstLog(id))?.log?.length) seen[name] = Date.now() - t0;
        return Object.keys(seen).length === 4;
      },
      20_000,
      'first attempts of all four',
    );
    const fine = await firstLog(subs.fine!);
    expect(fine).toMatchObject({ state: 'delivered', lastStatus: null, lastError: null });
    expect(fine.log[0]).toMatchObject({ status: null, error: null });
    expect(fine.log[0].durationMs % 1000).toBe(0);
    const failed = await Promise.all(['router', 'closed', 'silent'].map((n) => firstLog(subs[n]!)));
    for (const f of failed) {
      expect(f.lastStatus).toBeNull();
      expect(f.lastError).toBe(INTERNAL_FAILED_TEXT);
      expect(f.log[0]).toMatchObject({ status: null, error: INTERNAL_FAILED_TEXT, durationMs: 2000 });
    }
    expect(JSON.stringify(failed)).not.toMatch(/FRITZ|401|login|ECONNREFUSED|refused|timed out/);
    // The closed port and the 401 were known at once, but the log changed only a timeout later.
    expect(seen.closed).toBeGreaterThanOrEqual(TIMEOUT - 100);
    expect(seen.router).toBeGreaterThanOrEqual(TIMEOUT - 100);
    // The operator's log has what happened.
    const ops = s.logs.text();
    expect(ops).toMatch(/"status":401[^\n]*FRITZ!Box 7590 login|FRITZ!Box 7590 login[^\n]*"status":401/);
    expect(ops).toMatch(/ECONNREFUSED/);
    for (const id of Object.values(subs)) await admin(s, 'remove', { body: { id } });
  });
});
