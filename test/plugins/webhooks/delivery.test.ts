import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verify } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { main } from '../../../server/cli.ts';
import { openLive } from '../../support/sse.ts';
import { Receiver, admin, testPlugins, until } from './support.ts';

let s: TestServer;
let rx: Receiver;
let slow: Receiver;

beforeAll(async () => {
  rx = await new Receiver().start();
  slow = await new Receiver().start();
  const dataDir = tempDir();
  // config.json rather than overrides: the CLI test below opens the same data dir.
  fs.writeFileSync(path.join(dataDir, 'config.json'), JSON.stringify({ plugins: { webhooks: { allowCidrs: ['127.0.0.1/32'], timeoutMs: 8000 } } }));
  s = await startTestServer({ dataDir, plugins: testPlugins() });
});
afterAll(async () => {
  await s?.stop();
  await rx?.stop();
  await slow?.stop();
});

const emit = (tenantId: string, callId: string) => s.appliance.core.events.emit(tenantId, 'call.ended', { callId, outcome: 'completed' });
const forCall = (r: Receiver, callId: string) => r.received.filter((x) => (JSON.parse(x.body) as { data: { callId: string } }).data.callId === callId);

describe('webhook subscriptions', () => {
  it('add answers the id and the secret once; neither list ever shows the secret', async () => {
    const add = await admin(s, 'add', { body: { url: `${rx.url}/hook`, events: ['call.ended'] } });
    expect(add.status).toBe(200);
    expect(add.json.id).toMatch(/^[0-9a-f]{16}$/);
    expect(add.json.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(add.json).toMatchObject({ url: `${rx.url}/hook`, events: ['call.ended'], active: true, failures: 0, lastFiredUtc: null, createdBy: 'admin-hmac' });

    const v1 = await s.fetch('/api.ashx/v1/webhooks', { key: s.adminKey });
    expect(v1.status).toBe(200);
    const v1Text = await v1.text();
    expect(v1Text).not.toContain(add.json.secret);
    const env = JSON.parse(v1Text);
    expect(env).toMatchObject({ total: expect.any(Number), limit: 50, offset: 0, next: null });
    const item = env.data.find((x: { id: string }) => x.id === add.json.id);
    expect(Object.keys(item).sort()).toEqual(['active', 'createdAtUtc', 'createdBy', 'events', 'failures', 'id', 'lastFiredUtc', 'url']);

    const list = await admin(s, 'list');
    expect(JSON.stringify(list.json)).not.toContain(add.json.secret);
    // Sealed at rest: the database file never holds the secret in the clear.
    const row = s.appliance.core.db.prepare('SELECT secret_sealed FROM webhook_subscriptions WHERE id = ?').get(add.json.id) as { secret_sealed: string };
    expect(row.secret_sealed).toMatch(/^v1\./);
    expect(row.secret_sealed).not.toContain(add.json.secret.slice(6));
    await admin(s, 'remove', { body: { id: add.json.id } });
  });

  it('every webhook route is in /openapi.json', async () => {
    const r = await s.fetch('/openapi.json');
    expect(r.status).toBe(200);
    const text = await r.text();
    for (const verb of ['list', 'add', 'remove', 'resume', 'test', 'deliveries', 'redeliver']) expect(text).toContain(`webhooks=${verb}`);
    expect(text).toContain('/api.ashx/v1/webhooks');
  });

  it('refuses bad input with 400 and clear codes, and unknown ids with 404', async () => {
    expect((await admin(s, 'add', { body: { url: 'ftp://example.com/x', events: ['*'] } })).json.error).toBe('invalid_url');
    expect((await admin(s, 'add', { body: { url: 'http://user:pw@example.com/x', events: ['*'] } })).json.error).toBe('invalid_url');
    expect((await admin(s, 'add', { body: { url: 'not a url', events: ['*'] } })).status).toBe(400);
    expect((await admin(s, 'add', { body: { url: `${rx.url}/x`, events: ['Bad Event'] } })).status).toBe(400);
    expect((await admin(s, 'add', { body: { url: `${rx.url}/x` } })).status).toBe(400);
    expect((await admin(s, 'remove', { body: { id: 'zz' } })).status).toBe(400);
    const nf = await admin(s, 'remove', { body: { id: '0123456789abcdef' } });
    expect(nf.status).toBe(404);
    expect(nf.json.error).toBe('not_found');
    expect((await s.fetch('/signal.ashx?webhooks=list')).status).toBe(401);
  });

  it("pushes each change of a delivery row to the tenant's live feed (queued, pending, delivered; a failed try), never to another tenant's", async () => {
    const other = await s.addTenant('notice-b.test');
    const a = openLive(s.port, `localhost:${s.port}`, s.adminKey);
    const b = openLive(s.port, `notice-b.test:${s.port}`, other.adminKey);
    expect(await a.status).toBe(200);
    expect(await b.status).toBe(200);
    let first = true;
    rx.respond = (r) => {
      if (!r.path.startsWith('/notice') || !first) return { status: 200, body: 'ok' };
      first = false;
      return { status: 503, headers: { 'Retry-After': '0' } };
    };
    try {
      const add = await admin(s, 'add', { body: { url: `${rx.url}/notice`, events: ['call.ended'] } });
      emit(s.primary.id, 'call-notice');
      interface Notice {
        name: string;
        data: { subscriptionId: string; deliveryId?: string; state?: string };
      }
      const notices = () => a.frames.filter((f) => f.event === 'notice').map((f) => f.data as Notice);
      const mine = () => notices().filter((n) => n.name === 'webhook.delivery' && n.data.subscriptionId === add.json.id);
      await until(() => mine().some((n) => n.data.state === 'delivered'), 20_000);
      const states = mine().map((n) => n.data.state);
      // Queued by the fan-out, admitted, still pending after the 503, then delivered: every step.
      expect(states[0]).toBe('queued');
      expect(states.filter((x) => x === 'pending').length).toBeGreaterThanOrEqual(2);
      expect(states.at(-1)).toBe('delivered');
      expect(new Set(mine().map((n) => n.data.deliveryId)).size).toBe(1);
      // What the notice names is what the log says.
      const log = await admin(s, 'deliveries', { query: `&id=${add.json.id}` });
      expect(log.json.data[0]).toMatchObject({ id: mine()[0]!.data.deliveryId, state: 'delivered', attempts: 2 });
      // Sealed: tenant B's feed carried none of A's notices.
      expect(b.frames.filter((f) => f.event === 'notice')).toEqual([]);
      await admin(s, 'remove', { body: { id: add.json.id } });
    } finally {
      rx.respond = () => ({ status: 200, body: 'ok' });
      a.close();
      b.close();
    }
  });

  it('a delivery verifies with @octokit/webhooks-methods and with standardwebhooks', async () => {
    const add = await admin(s, 'add', { body: { url: `${rx.url}/verify`, events: 'call.ended' } });
    const eventId = emit(s.primary.id, 'call-verify');
    const [got] = await until(() => (forCall(rx, 'call-verify').length ? forCall(rx, 'call-verify') : undefined));
    const h = got!.headers;
    expect(await verify(add.json.secret, got!.body, String(h['x-service-signature']))).toBe(true);
    expect(await verify(add.json.secret + 'x', got!.body, String(h['x-service-signature']))).toBe(false);
    const parsed = new Webhook(add.json.secret).verify(got!.body, {
      'webhook-id': String(h['webhook-id']),
      'webhook-timestamp': String(h['webhook-timestamp']),
      'webhook-signature': String(h['webhook-signature']),
    }) as Record<string, unknown>;
    expect(parsed).toMatchObject({ event: 'call.ended', tenant: s.primary.host, data: { callId: 'call-verify', outcome: 'completed' } });
    expect(Object.keys(JSON.parse(got!.body))).toEqual(['event', 'tenant', 'ts', 'data']);
    expect(JSON.parse(got!.body).ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(h['x-service-event']).toBe('call.ended');
    expect(h['x-service-attempt']).toBe('1');
    expect(h['x-service-delivery-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(h['webhook-id']).toBe(h['x-service-delivery-id']);
    expect(h['content-type']).toBe('application/json');
    expect(eventId).toBeGreaterThan(0);
    // Success: tally 0, lastFiredUtc set; the log shows the attempt.
    const sub = await until(async () =>
      (await admin(s, 'list')).json.find((x: { id: string; lastFiredUtc: string | null }) => x.id === add.json.id && x.lastFiredUtc),
    );
    expect(sub.failures).toBe(0);
    const log = await admin(s, 'deliveries', { query: `&id=${add.json.id}` });
    expect(log.status).toBe(200);
    expect(log.json.data[0]).toMatchObject({ id: h['x-service-delivery-id'], event: 'call.ended', state: 'delivered', attempts: 1 });
    expect(log.json.data[0].log[0]).toMatchObject({ attempt: 1, status: 200, error: null, nextTryUtc: null });
    expect(log.json.data[0].log[0].durationMs).toBeGreaterThanOrEqual(0);
    await admin(s, 'remove', { body: { id: add.json.id } });
  });

  it('an event reaches every matching subscription of its own tenant, and only those', async () => {
    const { tenant: b, adminKey: bKey } = await s.addTenant('office-b.example');
    const a1 = await admin(s, 'add', { body: { url: `${rx.url}/a1`, events: ['call.ended'] } });
    const a2 = await admin(s, 'add', { body: { url: `${rx.url}/a2`, events: ['*'] } });
    const a3 = await admin(s, 'add', { body: { url: `${rx.url}/a3`, events: ['transcript.saved'] } });
    const b1 = await admin(s, 'add', { host: 'office-b.example', body: { url: `${rx.url}/b1`, events: ['*'] } });
    expect(b1.status).toBe(200);

    emit(s.primary.id, 'call-iso-a');
    emit(b.id, 'call-iso-b');
    await until(() => forCall(rx, 'call-iso-a').length === 2 && forCall(rx, 'call-iso-b').length === 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(
      forCall(rx, 'call-iso-a')
        .map((x) => x.path)
        .sort(),
    ).toEqual(['/a1', '/a2']);
    expect(forCall(rx, 'call-iso-b').map((x) => x.path)).toEqual(['/b1']);
    expect(JSON.parse(forCall(rx, 'call-iso-b')[0]!.body).tenant).toBe('office-b.example');

    // Tenant B sees and touches only its own subscriptions.
    const bList = await admin(s, 'list', { host: 'office-b.example' });
    expect(bList.json.map((x: { id: string }) => x.id)).toEqual([b1.json.id]);
    const bV1 = (await (await s.fetch('/api.ashx/v1/webhooks', { host: 'office-b.example', key: bKey })).json()) as { data: { id: string }[] };
    expect(bV1.data.map((x) => x.id)).toEqual([b1.json.id]);
    expect((await admin(s, 'remove', { host: 'office-b.example', body: { id: a1.json.id } })).status).toBe(404);
    expect((await admin(s, 'deliveries', { host: 'office-b.example', query: `&id=${a1.json.id}` })).status).toBe(404);
    expect((await admin(s, 'test', { host: 'office-b.example', body: { id: a1.json.id } })).status).toBe(404);
    const aLog = await admin(s, 'deliveries', { query: `&id=${a1.json.id}` });
    expect((await admin(s, 'redeliver', { host: 'office-b.example', body: { deliveryId: aLog.json.data[0].id } })).status).toBe(404);
    // An ak_ key of tenant B is refused on tenant A's v1 list.
    expect((await s.fetch('/api.ashx/v1/webhooks', { key: bKey })).status).toBe(401);
    for (const x of [a1, a2, a3]) await admin(s, 'remove', { body: { id: x.json.id } });
    await admin(s, 'remove', { host: 'office-b.example', body: { id: b1.json.id } });
  });

  it('test-fire sends webhook.test to that subscription only; redelivery reuses the delivery id', async () => {
    const t1 = await admin(s, 'add', { body: { url: `${rx.url}/t1`, events: ['call.ended'] } });
    const t2 = await admin(s, 'add', { body: { url: `${rx.url}/t2`, events: ['*'] } });
    const fire = await admin(s, 'test', { body: { id: t1.json.id } });
    expect(fire.status).toBe(200);
    expect(fire.json).toMatchObject({ ok: true, id: t1.json.id, event: 'webhook.test' });
    const got = await until(() => rx.received.find((x) => x.path === '/t1' && x.headers['x-service-event'] === 'webhook.test'));
    expect(JSON.parse(got.body).data).toMatchObject({ subscriptionId: t1.json.id, requestedBy: 'admin-hmac' });
    expect(await verify(t1.json.secret, got.body, String(got.headers['x-service-signature']))).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    expect(rx.received.filter((x) => x.path === '/t2')).toHaveLength(0);

    const log = await until(async () => {
      const l = await admin(s, 'deliveries', { query: `&id=${t1.json.id}` });
      return l.json.data[0]?.state === 'delivered' && l.json;
    });
    const deliveryId = log.data[0].id;
    const re = await admin(s, 'redeliver', { body: { deliveryId } });
    expect(re.status).toBe(200);
    const again = await until(() => {
      const all = rx.received.filter((x) => x.headers['x-service-delivery-id'] === deliveryId);
      return all.length === 2 ? all : undefined;
    });
    expect(again[1]!.headers['x-service-signature']).toBe(again[0]!.headers['x-service-signature']);
    expect(again[1]!.body).toBe(again[0]!.body);
    expect((await admin(s, 'redeliver', { body: { deliveryId: '00000000-0000-4000-8000-000000000000' } })).status).toBe(404);
    await admin(s, 'remove', { body: { id: t1.json.id } });
    await admin(s, 'remove', { body: { id: t2.json.id } });
  });

  it('a receiver that never answers does not delay another subscription', async () => {
    slow.respond = () => 'hang';
    const dead = await admin(s, 'add', { body: { url: `${slow.url}/dead`, events: ['call.ended'] } });
    const healthy = await admin(s, 'add', { body: { url: `${rx.url}/healthy`, events: ['call.ended'] } });
    const t0 = Date.now();
    for (let i = 0; i < 40; i++) emit(s.primary.id, `call-dead-${i}`);
    await until(() => rx.received.filter((x) => x.path === '/healthy').length === 40, 5000, 'healthy deliveries');
    // All arrived before the dead receiver's first 8 s timeout: nothing waited for it.
    expect(Date.now() - t0).toBeLessThan(6000);
    // The dead receiver holds only its own admitted deliveries (perSubscriptionConcurrency, 4).
    expect(slow.received.length).toBeLessThanOrEqual(4);
    await admin(s, 'remove', { body: { id: dead.json.id } });
    await admin(s, 'remove', { body: { id: healthy.json.id } });
  });
});

describe('webhook plugin diagnostics and edges', () => {
  it('/readyz reports the plugin started with its backlog', async () => {
    const body = (await (await s.fetch('/readyz')).json()) as {
      plugins: Record<string, { state: string; health?: { status: string; detail?: Record<string, number> } }>;
    };
    expect(body.plugins.webhooks).toMatchObject({ state: 'started', health: { status: 'ok', detail: { pausedSubscriptions: expect.any(Number) } } });
  });

  it('a subscription removed while its delivery is in flight leaves no rows and no stuck job', async () => {
    rx.respond = (r) => (r.path === '/gone-mid' ? { status: 200, delayMs: 300 } : { status: 200 });
    const sub = await admin(s, 'add', { body: { url: `${rx.url}/gone-mid`, events: ['call.ended'] } });
    emit(s.primary.id, 'call-mid');
    await until(() => rx.received.find((x) => x.path === '/gone-mid'));
    const db = s.appliance.core.db;
    const { job_id: jobId } = db.prepare('SELECT job_id FROM webhook_deliveries WHERE subscription_id = ?').get(sub.json.id) as { job_id: number };
    expect((await admin(s, 'remove', { body: { id: sub.json.id } })).status).toBe(200);
    await until(() => ['done', 'failed'].includes(s.appliance.core.jobs.get(jobId)?.state ?? ''), 5000, 'the job to end');
    expect(db.prepare('SELECT COUNT(*) AS n FROM webhook_deliveries WHERE subscription_id = ?').get(sub.json.id)).toEqual({ n: 0 });
    expect(rx.received.filter((x) => x.path === '/gone-mid')).toHaveLength(1);
    rx.respond = () => ({ status: 200 });
  });
});

describe('sovcomms webhook (CLI)', () => {
  const run = async (...args: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(
      [...args, '--data-dir', s.dataDir],
      { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' },
      { plugins: testPlugins() },
    );
    return { code, out, err };
  };

  it('add prints the id and secret once; list, test, resume and remove work', async () => {
    const add = await run('webhook', 'add', '--url', `${rx.url}/cli`, '--events', 'call.ended,webhook.test');
    expect(add.code).toBe(0);
    const id = /^id\s+([0-9a-f]{16})$/.exec(add.out[0]!)![1]!;
    const secret = /^secret\s+(whsec_\S+)$/.exec(add.out[1]!)![1]!;

    const list = await run('webhook', 'list', '--json');
    expect(list.code).toBe(0);
    expect(list.out.join('\n')).not.toContain(secret);
    expect(JSON.parse(list.out.join('\n'))).toEqual(
      expect.arrayContaining([expect.objectContaining({ id, events: ['call.ended', 'webhook.test'], createdBy: 'cli' })]),
    );
    expect((await run('webhook', 'list')).out[0]).toMatch(/^ID\s+ACTIVE/);

    expect((await run('webhook', 'test', id)).code).toBe(0);
    const got = await until(() => rx.received.find((x) => x.path === '/cli'), 5000, 'CLI test-fire delivery');
    expect(await verify(secret, got.body, String(got.headers['x-service-signature']))).toBe(true);

    s.appliance.core.db.prepare('UPDATE webhook_subscriptions SET active = 0, failures = 20 WHERE id = ?').run(id);
    expect((await run('webhook', 'test', id)).code).toBe(1);
    expect((await run('webhook', 'resume', id)).code).toBe(0);
    expect((await admin(s, 'list')).json.find((x: { id: string }) => x.id === id)).toMatchObject({ active: true, failures: 0 });

    expect((await run('webhook', 'remove', id)).code).toBe(0);
    expect((await run('webhook', 'remove', id)).code).toBe(1);
    expect((await run('webhook', 'add', '--url', `${rx.url}/x`)).code).toBe(2);
    expect((await run('webhook', 'frobnicate')).code).toBe(2);
  });
});
