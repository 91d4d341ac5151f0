import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

/**
 * prom-client is loaded by the first scrape of /metrics, not at start (issue 25: idle RSS of the
 * core process): until then the appliance counts requests without it, and the first scrape has
 * every request made before it, with their latency, beside the process and plugin series.
 */
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
});

/** `name{labels} value` lines of the text format whose name and labels match. */
function values(text: string, name: string, labels: Record<string, string>): number[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)))
    .map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)));
}

describe('lazy prom-client', () => {
  it('is not loaded at start nor by requests; the first scrape loads it and counts what came before', async () => {
    const metrics = s.appliance.metrics!;
    expect(metrics).toBeDefined();
    // Requests before any scrape: a templated route three times, a 404 twice.
    for (const id of ['call-1', 'call-2', 'call-3']) expect((await s.fetch(`/api.ashx/v1/calls/${id}`, { key: s.adminKey })).status).toBe(404);
    for (let i = 0; i < 2; i++) await s.fetch(`/no/such/path/${i}`);
    expect(metrics.registry).toBeUndefined();
    expect(metrics.get('sovcomms_process_resident_memory_bytes')).toBeUndefined();

    const r = await s.fetch('/metrics', { key: s.adminKey });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await r.text();
    expect(metrics.registry).toBeDefined();
    expect(values(text, 'sovcomms_http_requests_total', { route: '/api.ashx/v1/calls/:id', method: 'GET', status: '404' })).toEqual([3]);
    expect(values(text, 'sovcomms_http_requests_total', { route: 'unmatched', status: '404' })[0]).toBeGreaterThanOrEqual(2);
    expect(values(text, 'sovcomms_http_request_duration_seconds_count', { route: '/api.ashx/v1/calls/:id', method: 'GET' })).toEqual([3]);
    expect(values(text, 'sovcomms_http_request_duration_seconds_bucket', { route: '/api.ashx/v1/calls/:id', le: '+Inf' })).toEqual([3]);
    // The default collectors and the store's families came with it.
    expect(text).toMatch(/^sovcomms_process_resident_memory_bytes \d+/m);
    expect(text).toMatch(/^# TYPE sovcomms_nodejs_eventloop_lag_seconds gauge$/m);
    expect(text).toMatch(/^# TYPE sovcomms_jobs gauge$/m);

    // Later requests and scrapes go on from there: the same registry, counts growing.
    const registry = metrics.registry;
    await s.fetch('/api.ashx/v1/calls/call-4', { key: s.adminKey });
    const again = await (await s.fetch('/metrics', { key: s.adminKey })).text();
    expect(metrics.registry).toBe(registry);
    expect(values(again, 'sovcomms_http_requests_total', { route: '/api.ashx/v1/calls/:id', method: 'GET', status: '404' })).toEqual([4]);
    expect(values(again, 'sovcomms_http_requests_total', { route: '/metrics', method: 'GET', status: '200' })).toEqual([1]);
  });

  it('scrapes that arrive together load it once', async () => {
    const fresh = await startTestServer();
    try {
      const texts = await Promise.all([0, 1, 2].map(async () => (await fresh.fetch('/metrics', { key: fresh.adminKey })).text()));
      for (const t of texts) expect(t.match(/^# TYPE sovcomms_http_requests_total counter$/gm)).toHaveLength(1);
      expect(fresh.appliance.metrics!.registry).toBeDefined();
    } finally {
      await fresh.stop();
    }
  });
});
