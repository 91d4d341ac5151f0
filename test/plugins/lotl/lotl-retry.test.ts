/**
 * Scheduled refresh when the upstream is down: the retry ladder (retryMinutes), capped at the
 * interval, and back to the interval once the LOTL is fetched again. Real server, real job queue,
 * a loopback upstream that answers 503 until it is "repaired", a manual clock.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { nextDelayMs } from '../../../plugins/lotl/index.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { until } from '../../support/until.ts';
import { SNAPSHOT } from './support.ts';

const FIXED = Date.parse('2026-08-22T00:00:00Z');
const clock = new ManualClock(FIXED);
let s: TestServer;
let upstream: http.Server;
let healthy = false;
let lotlRequests = 0;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const name = path.basename(new URL(req.url ?? '/', 'http://x').pathname);
    if (name === 'eu-lotl.xml') lotlRequests++;
    if (!healthy) return void res.writeHead(503, { 'Retry-After': '60' }).end('maintenance');
    if (name !== 'eu-lotl.xml') return void res.writeHead(404).end(); // the LOTL is what counts here
    res.writeHead(200, { 'Content-Type': 'application/xml' });
    fs.createReadStream(path.join(SNAPSHOT, 'eu-lotl.xml')).pipe(res);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const mirrorBaseUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/tl/`;
  s = await startTestServer({ clock, overrides: { plugins: { lotl: { autoRefresh: true, mirrorBaseUrl, fetchTimeoutMs: 5000 } } } });
});

afterAll(async () => {
  await s?.stop();
  await new Promise((r) => upstream?.close(r));
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked by the assertions
type Json = any;
const status = async (): Promise<Json> => (await s.fetch('/lotl.ashx?status')).json();
/** The status once the scheduled run has counted `failures` and queued the next one. */
const afterRun = (failures: number, what: string): Promise<Json> =>
  until(
    async () => {
      const b = await status();
      return b.refresh_failures === failures && b.next_refresh_at ? b : null;
    },
    20_000,
    what,
  );

describe('scheduled trusted-list refresh with the upstream down', { timeout: 60_000 }, () => {
  it('retries after 5, then 15 minutes, and returns to the 24 h interval once the LOTL is fetched', async () => {
    const first = await status();
    expect(first.refresh_failures).toBe(0);
    expect(Date.parse(first.next_refresh_at)).toBe(FIXED + 10 * 60_000);

    clock.advance(11 * 60_000); // the first refresh runs and finds the upstream down
    let st = await afterRun(1, 'the first failed run');
    expect(Date.parse(st.next_refresh_at) - Date.parse(st.as_of)).toBe(5 * 60_000);
    expect(lotlRequests).toBe(1);

    clock.advance(6 * 60_000);
    st = await afterRun(2, 'the second failed run');
    expect(Date.parse(st.next_refresh_at) - Date.parse(st.as_of)).toBe(15 * 60_000);

    healthy = true;
    clock.advance(16 * 60_000);
    st = await afterRun(0, 'the good run');
    expect(Date.parse(st.next_refresh_at) - Date.parse(st.as_of)).toBe(24 * 3600_000);
    expect(st.lists.find((l: Json) => l.territory === 'EU')).toMatchObject({ stored: true, sequence: 390 });
    expect(lotlRequests).toBe(3);
  });

  it('the ladder repeats its last step and never waits longer than the interval', () => {
    const cfg = { refreshIntervalHours: 2, retryMinutes: [5, 15, 60, 240] };
    expect([0, 1, 2, 3, 4, 5, 9].map((f) => nextDelayMs(cfg, f) / 60_000)).toEqual([120, 5, 15, 60, 120, 120, 120]);
    expect(nextDelayMs({ refreshIntervalHours: 24, retryMinutes: [30] }, 7)).toBe(30 * 60_000);
  });
});
