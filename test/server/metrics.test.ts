import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { main, type CliIo } from '../../server/cli.ts';
import { SCRAPE_TOKEN_SETTING } from '../../server/metrics.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { saveClient, tokenForm } from '../plugins/oidc/helpers.ts';

/**
 * GET /metrics through the real server: the Prometheus text format (parsed here line by line as a
 * scraper reads it), the series the operations page names, route templates as labels (never a raw
 * path), and who may scrape: the super-admin's key, or the scrape token the CLI rotates (stored
 * only as its hash), never an anonymous caller or another tenant's admin.
 */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The text exposition format 0.0.4: HELP/TYPE comments, then `name{l="v",...} value`. */
function parseProm(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line) continue;
    const t = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (t) {
      types.set(t[1]!, t[2]!);
      continue;
    }
    if (line.startsWith('# HELP ')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+-]+|[Nn]a[Nn]|[+-]Inf)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, '$1');
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { samples, types };
}

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
});

async function cli(args: string[], dataDir = s.dataDir): Promise<{ code: number; out: string[] }> {
  const out: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: () => {}, stdin: async () => '' };
  return { code: await main([...args, '--data-dir', dataDir], io), out };
}

const value = (ss: Sample[], name: string, labels: Record<string, string> = {}) =>
  ss.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))?.value;

describe('GET /metrics', () => {
  it('answers in the Prometheus text format with the appliance, process and plugin series', async () => {
    // Requests to count: a templated route with two different ids, a 404.
    for (const id of ['call-aaaa', 'call-bbbb']) await s.fetch(`/api.ashx/v1/calls/${id}`, { key: s.adminKey });
    await s.fetch('/no/such/path/secret-looking-42');
    const r = await s.fetch('/metrics', { key: s.adminKey });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await r.text();
    const { samples, types } = parseProm(text);
    // The route template, not the raw path; the 404 under a fixed word.
    const calls = samples.filter((x) => x.name === 'sovcomms_http_requests_total' && x.labels.route === '/api.ashx/v1/calls/:id');
    expect(calls.reduce((a, x) => a + x.value, 0)).toBe(2);
    expect(calls[0]!.labels).toMatchObject({ method: 'GET', status: '404' });
    expect(value(samples, 'sovcomms_http_requests_total', { route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain('call-aaaa');
    expect(text).not.toContain('secret-looking-42');
    expect(types.get('sovcomms_http_request_duration_seconds')).toBe('histogram');
    expect(value(samples, 'sovcomms_http_request_duration_seconds_count', { route: '/api.ashx/v1/calls/:id', method: 'GET' })).toBe(2);
    expect(value(samples, 'sovcomms_http_request_duration_seconds_bucket', { route: '/api.ashx/v1/calls/:id', le: '+Inf' })).toBe(2);
    // Cumulative buckets in le order (0.005 ... 10, +Inf), a sum of the two durations, one HELP/TYPE each.
    const buckets = samples.filter((x) => x.name === 'sovcomms_http_request_duration_seconds_bucket' && x.labels.route === '/api.ashx/v1/calls/:id');
    expect(buckets.map((b) => b.labels.le)).toEqual(['0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '+Inf']);
    expect(buckets.every((b, i) => i === 0 || b.value >= buckets[i - 1]!.value)).toBe(true);
    expect(buckets.at(-2)!.value).toBe(2);
    const sum = value(samples, 'sovcomms_http_request_duration_seconds_sum', { route: '/api.ashx/v1/calls/:id', method: 'GET' })!;
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(20);
    expect(text.match(/^# TYPE sovcomms_http_requests_total counter$/gm)).toHaveLength(1);
    // Process: RSS and event loop lag.
    expect(value(samples, 'sovcomms_process_resident_memory_bytes')).toBeGreaterThan(10_000_000);
    expect(value(samples, 'sovcomms_nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    // Plugins: calls by kind, bridge, webhooks backlog, trusted lists, OIDC tokens, verifier and issuer.
    for (const kind of ['outbound', 'inbound', 'room']) expect(value(samples, 'sovcomms_calls_in_flight', { kind })).toBe(0);
    expect(types.get('sovcomms_calls_ended_total')).toBe('counter');
    expect(value(samples, 'sovcomms_bridge_up')).toBe(0);
    expect(value(samples, 'sovcomms_bridge_restarts_total')).toBe(0);
    for (const state of ['queued', 'pending', 'delivered', 'failed']) expect(value(samples, 'sovcomms_webhook_deliveries', { state })).toBe(0);
    expect(value(samples, 'sovcomms_webhook_attempt_failures_total')).toBe(0);
    expect(value(samples, 'sovcomms_trusted_list_age_seconds', { list: 'lotl' })).toBe(-1);
    expect(value(samples, 'sovcomms_verifier_sessions', { status: 'verified' })).toBe(0);
    expect(value(samples, 'sovcomms_issuer_credentials_issued_total')).toBe(0);
    expect(types.get('sovcomms_oidc_tokens_issued_total')).toBe('counter');
    expect(types.get('sovcomms_jobs')).toBe('gauge');
    // Every series the Grafana dashboard under resources/ queries is one this server exposes.
    const dash = fs.readFileSync(path.resolve(import.meta.dirname, '../../resources/grafana/sovcomms-dashboard.json'), 'utf8');
    const used = new Set([...dash.matchAll(/sovcomms_[a-z0-9_]+/g)].map((m) => m[0]));
    for (const name of used) expect(samples.some((x) => x.name === name) || types.has(name), `dashboard series ${name}`).toBe(true);
    // No label names a tenant or host.
    for (const x of samples) for (const k of Object.keys(x.labels)) expect(['tenant', 'host', 'user', 'call_id', 'trunk']).not.toContain(k);
  });

  it('counts issued OIDC tokens by grant type (client_credentials through the pre-router)', async () => {
    const host = `localhost:${s.port}`;
    const { client_secret } = await saveClient(s, host, {
      client_id: 'metrics-app',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_post',
    });
    const n = async () =>
      value(parseProm(await (await s.fetch('/metrics', { key: s.adminKey })).text()).samples, 'sovcomms_oidc_tokens_issued_total', {
        grant_type: 'client_credentials',
      }) ?? 0;
    const n0 = await n();
    for (let i = 0; i < 3; i++) {
      const t = await tokenForm(s, host, { grant_type: 'client_credentials', client_id: 'metrics-app', client_secret: client_secret! });
      expect(t.status).toBe(200);
    }
    expect(await tokenForm(s, host, { grant_type: 'client_credentials', client_id: 'metrics-app', client_secret: 'wrong' })).toMatchObject({ status: 401 });
    expect(await n()).toBe(n0 + 3);
    const { samples } = parseProm(await (await s.fetch('/metrics', { key: s.adminKey })).text());
    expect(samples.some((x) => x.name === 'sovcomms_http_requests_total' && x.labels.route.startsWith('pre-router:'))).toBe(true);
  });

  it("refuses anonymous callers and another tenant's admin; takes the scrape token the CLI rotates, hashed at rest", async () => {
    const anon = await s.fetch('/metrics');
    expect(anon.status).toBe(401);
    expect(anon.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(await anon.json()).toMatchObject({ error: 'invalid_token' });
    const other = await s.addTenant('other.example');
    expect((await s.fetch('/metrics', { key: other.adminKey, host: 'other.example' })).status).toBe(401);

    const first = await cli(['metrics', 'token', 'rotate']);
    expect(first.code).toBe(0);
    const token = first.out[0]!;
    expect(token).toMatch(/^ms_[A-Za-z0-9_-]{40,}$/);
    // Only the hash is stored.
    const stored = s.appliance.core.db.prepare('SELECT value FROM settings WHERE key = ?').get(SCRAPE_TOKEN_SETTING) as { value: string };
    expect(stored.value).toMatch(/^[0-9a-f]{64}$/);
    const dump = JSON.stringify(s.appliance.core.db.prepare('SELECT * FROM settings').all());
    expect(dump).not.toContain(token);
    expect((await s.fetch('/metrics', { key: token })).status).toBe(200);
    expect((await s.fetch('/metrics', { key: token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A') })).status).toBe(401);
    // Rotation: the old token stops working at once.
    const second = (await cli(['metrics', 'token', 'rotate'])).out[0]!;
    expect((await s.fetch('/metrics', { key: token })).status).toBe(401);
    expect((await s.fetch('/metrics', { key: second })).status).toBe(200);
    expect((await cli(['metrics', 'token', 'status'])).out).toEqual(['scrape token: set']);
    expect((await cli(['metrics', 'token', 'revoke'])).code).toBe(0);
    expect((await s.fetch('/metrics', { key: second })).status).toBe(401);
    expect(s.logs.text()).not.toContain(second);
  });

  it('is listed in /openapi.json', async () => {
    const doc = (await (await s.fetch('/openapi.json')).json()) as { paths: Record<string, { get?: { responses: Record<string, unknown> } }> };
    expect(doc.paths['/metrics']?.get?.responses['200']).toBeDefined();
  });
});

describe('metrics on their own listener', () => {
  it('metrics.port: served there (scrape token), not on the public port', async () => {
    const free = net.createServer();
    await new Promise<void>((r) => free.listen(0, '127.0.0.1', () => r()));
    const port = (free.address() as net.AddressInfo).port;
    await new Promise<void>((r) => free.close(() => r()));
    const t = await startTestServer({ overrides: { metrics: { port } } });
    try {
      expect((await t.fetch('/metrics', { key: t.adminKey })).status).toBe(404);
      const token = (await cli(['metrics', 'token', 'rotate'], t.dataDir)).out[0]!;
      const ok = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      const { samples } = parseProm(await ok.text());
      expect(value(samples, 'sovcomms_process_resident_memory_bytes')).toBeGreaterThan(0);
      const admin = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${t.adminKey}` } });
      expect(admin.status).toBe(200);
      const anon = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(anon.status).toBe(401);
      expect(await anon.json()).toMatchObject({ error: 'invalid_token' });
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(404);
    } finally {
      await t.stop();
    }
  });
});
