import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';
import { openLive } from '../support/sse.ts';

/**
 * The console's live feed (server/live.ts, GET /api.ashx/v1/events): a tenant's durable events
 * pushed as they commit, none of another tenant's, every missed one replayed after a reconnect
 * with Last-Event-ID (none lost, none twice), status frames, and streams ended at shutdown.
 */
let s: TestServer;
let keyB: string;

const open = (host: string, key: string, headers: Record<string, string> = {}) => openLive(s.port, host, key, headers);

const emit = (tenantId: string, callId: string) =>
  s.appliance.core.events.emit(tenantId, 'webhook.test', { subscriptionId: callId, message: 'live', requestedBy: 'test' });

beforeAll(async () => {
  s = await startTestServer();
  keyB = (await s.addTenant('b.test')).adminKey;
});
afterAll(async () => {
  await s?.stop();
});

describe('live feed', () => {
  it('needs an admin credential', async () => {
    const r = await s.fetch('/api.ashx/v1/events', { key: null });
    expect(r.status).toBe(401);
  });

  it('pushes the tenant’s events as they happen, never another tenant’s; sends status first', async () => {
    const a = open(`localhost:${s.port}`, s.adminKey);
    const b = open(`b.test:${s.port}`, keyB);
    expect(await a.status).toBe(200);
    await until(() => a.frames.some((f) => f.event === 'status') && b.frames.some((f) => f.event === 'status'), 5000, 'status frames');
    const st = a.frames.find((f) => f.event === 'status')!.data as { plugins: Record<string, { state: string }> };
    expect(st.plugins.webhooks!.state).toBe('started');
    expect((a.frames.find((f) => f.event === 'status')!.data as { masterKey: string }).masterKey).toBe('file');
    emit(s.primary.id, 'a-1');
    emit(s.appliance.core.tenants.byHost('b.test')!.id, 'b-1');
    await until(() => a.frames.some((f) => f.event === 'webhook.test') && b.frames.some((f) => f.event === 'webhook.test'), 5000, 'events');
    const ofA = a.frames.filter((f) => f.event === 'webhook.test').map((f) => (f.data as { data: { subscriptionId: string } }).data.subscriptionId);
    const ofB = b.frames.filter((f) => f.event === 'webhook.test').map((f) => (f.data as { data: { subscriptionId: string } }).data.subscriptionId);
    expect(ofA).toEqual(['a-1']);
    expect(ofB).toEqual(['b-1']);
    a.close();
    b.close();
  });

  it('resumes after a drop with Last-Event-ID: every missed event once, in order, then the live ones', async () => {
    const first = open(`localhost:${s.port}`, s.adminKey);
    await until(() => first.frames.some((f) => f.event === 'hello'), 5000, 'hello');
    emit(s.primary.id, 'r-1');
    await until(() => first.frames.some((f) => f.event === 'webhook.test'), 5000, 'r-1');
    const lastId = first.frames.filter((f) => f.id).at(-1)!.id!;
    first.close();
    for (let i = 2; i <= 30; i++) emit(s.primary.id, `r-${i}`);
    const again = open(`localhost:${s.port}`, s.adminKey, { 'Last-Event-ID': lastId });
    emit(s.primary.id, 'r-31');
    await until(() => again.frames.filter((f) => f.event === 'webhook.test').length >= 30, 5000, 'replayed and live');
    await new Promise((r) => setTimeout(r, 300));
    const ids = again.frames.filter((f) => f.event === 'webhook.test').map((f) => (f.data as { data: { subscriptionId: string } }).data.subscriptionId);
    expect(ids).toEqual(Array.from({ length: 30 }, (_, i) => `r-${i + 2}`));
    const seq = again.frames.filter((f) => f.id).map((f) => Number(f.id));
    expect([...seq].sort((x, y) => x - y)).toEqual(seq);
    again.close();
  });

  it('too many missed events: one reset frame instead of a flood', async () => {
    const one = open(`localhost:${s.port}`, s.adminKey);
    await until(() => one.frames.some((f) => f.event === 'hello'), 5000, 'hello');
    const from = (one.frames.find((f) => f.event === 'hello')!.data as { lastId: number }).lastId;
    one.close();
    const db = s.appliance.core.db;
    const ins = db.prepare("INSERT INTO events (tenant_id, name, data, ts) VALUES (?, 'webhook.test', '{}', ?)");
    db.transaction(() => {
      for (let i = 0; i < 5100; i++) ins.run(s.primary.id, new Date().toISOString());
    })();
    const two = open(`localhost:${s.port}`, s.adminKey, { 'Last-Event-ID': String(from) });
    await until(() => two.frames.some((f) => f.event === 'reset'), 5000, 'reset');
    expect(two.frames.filter((f) => f.event === 'webhook.test').length).toBe(0);
    two.close();
  });

  it('streams end at shutdown so the drain does not wait for them', async () => {
    const other = await startTestServer();
    const c = http.get({ host: '127.0.0.1', port: other.port, path: '/api.ashx/v1/events', headers: { Authorization: `Bearer ${other.adminKey}` } });
    const ended = new Promise<void>((r) => c.on('response', (res) => (res.resume(), res.on('end', () => r()), res.on('close', () => r()))));
    await until(() => (other.appliance.live?.size ?? 0) === 1, 5000, 'stream open');
    const t0 = Date.now();
    await other.stop();
    await ended;
    expect(Date.now() - t0).toBeLessThan(5000);
  });
});
