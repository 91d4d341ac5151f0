import { NO_RESPONSE_TEXT } from '../../../plugins/webhooks/service.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { Receiver, admin, sleep, testPlugins, until } from './support.ts';

let s: TestServer;
let rx: Receiver;
// Starts at the real time so webhook-timestamp stays fresh; moves only when a test says so.
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  rx = await new Receiver().start();
  s = await startTestServer({
    plugins: testPlugins(),
    clock,
    // The receiver is an operator-sanctioned one (allowCidrs): its answers are shown in full.
    overrides: { plugins: { webhooks: { allowCidrs: ['127.0.0.1/32'], timeoutMs: 400 } } },
  });
});
afterAll(async () => {
  await s?.stop();
  await rx?.stop();
});

const db = () => s.appliance.core.db;
const emit = (callId: string) => s.appliance.core.events.emit(s.primary.id, 'call.ended', { callId });
const at = (path: string) => rx.received.filter((x) => x.path === path);

/** Waits until no webhook job is running or due at the manual clock's "now". */
async function settle(): Promise<void> {
  s.appliance.core.jobs.kick();
  await until(
    () => {
      const r = db()
        .prepare("SELECT COUNT(*) AS n FROM jobs WHERE queue = 'webhook-delivery' AND (state = 'running' OR (state = 'pending' AND run_at <= ?))")
        .get(clock.now()) as { n: number };
      const q = db().prepare("SELECT COUNT(*) AS n FROM events WHERE id > (SELECT last_id FROM event_consumers WHERE name = 'webhooks')").get() as {
        n: number;
      };
      return r.n === 0 && q.n === 0;
    },
    10_000,
    'webhook jobs to settle',
  );
}

async function advance(ms: number): Promise<void> {
  clock.advance(ms);
  await settle();
}

async function subscribe(path: string): Promise<{ id: string; secret: string }> {
  const r = await admin(s, 'add', { body: { url: `${rx.url}${path}`, events: ['call.ended'] } });
  expect(r.status).toBe(200);
  return r.json;
}

const sub = (id: string) =>
  db().prepare('SELECT active, failures, last_fired_at FROM webhook_subscriptions WHERE id = ?').get(id) as {
    active: number;
    failures: number;
    last_fired_at: string | null;
  };

describe('webhook retries (controlled clock)', () => {
  it('retries after 5 s, 30 s and 120 s with the same delivery id and signature, then gives up after 4 attempts', async () => {
    rx.respond = (r) => (r.path === '/r500' ? { status: 500, body: 'boom' } : { status: 200 });
    const { id } = await subscribe('/r500');
    emit('c-retry');
    await settle();
    expect(at('/r500')).toHaveLength(1);
    for (const [wait, n] of [
      [5_000, 2],
      [30_000, 3],
      [120_000, 4],
    ] as const) {
      await advance(wait - 1);
      expect(at('/r500')).toHaveLength(n - 1);
      await advance(1);
      expect(at('/r500')).toHaveLength(n);
    }
    await advance(3_600_000);
    const got = at('/r500');
    expect(got).toHaveLength(4);
    expect(got.map((g) => g.headers['x-service-attempt'])).toEqual(['1', '2', '3', '4']);
    expect(new Set(got.map((g) => g.headers['x-service-delivery-id'])).size).toBe(1);
    expect(new Set(got.map((g) => g.headers['x-service-signature'])).size).toBe(1);

    const log = await admin(s, 'deliveries', { query: `&id=${id}` });
    const d = log.json.data[0];
    expect(d).toMatchObject({ state: 'failed', attempts: 4, lastStatus: 500, nextTryUtc: null });
    expect(d.log.map((a: { status: number }) => a.status)).toEqual([500, 500, 500, 500]);
    expect(d.log[0].error).toBe('HTTP 500: boom');
    // Each failed attempt names its next try: +5 s, +30 s, +120 s after it.
    const gaps = d.log.slice(0, 3).map((a: { startedUtc: string; nextTryUtc: string }) => Date.parse(a.nextTryUtc) - Date.parse(a.startedUtc));
    expect(gaps).toEqual([5_000, 30_000, 120_000]);
    expect(d.log[3].nextTryUtc).toBeNull();
    expect(sub(id)).toMatchObject({ active: 1, failures: 1 });

    // A success resets the tally and sets lastFiredUtc.
    rx.respond = () => ({ status: 204 });
    emit('c-retry-ok');
    await settle();
    expect(sub(id)).toMatchObject({ active: 1, failures: 0, last_fired_at: new Date(clock.now()).toISOString() });
    await admin(s, 'remove', { body: { id } });
  });

  it('410 Gone disables the subscription at once, without retries', async () => {
    rx.respond = () => ({ status: 410 });
    const { id } = await subscribe('/gone');
    emit('c-gone');
    await settle();
    await advance(600_000);
    expect(at('/gone')).toHaveLength(1);
    expect(sub(id)).toMatchObject({ active: 0 });
    const log = await admin(s, 'deliveries', { query: `&id=${id}` });
    expect(log.json.data[0]).toMatchObject({ state: 'failed', attempts: 1, lastStatus: 410 });
    // Paused: new events are not delivered, test-fire says so.
    emit('c-gone-2');
    await advance(1000);
    expect(at('/gone')).toHaveLength(1);
    expect((await admin(s, 'test', { body: { id } })).json.error).toBe('subscription_paused');
    await admin(s, 'remove', { body: { id } });
  });

  it('429 with Retry-After waits as long as the receiver asked, not the default 5 s', async () => {
    let n = 0;
    rx.respond = () => (++n === 1 ? { status: 429, headers: { 'Retry-After': '17' } } : { status: 200 });
    const { id } = await subscribe('/busy');
    emit('c-busy');
    await settle();
    await advance(16_999);
    expect(at('/busy')).toHaveLength(1);
    await advance(1);
    expect(at('/busy')).toHaveLength(2);
    expect(at('/busy')[1]!.headers['x-service-attempt']).toBe('2');
    const log = await admin(s, 'deliveries', { query: `&id=${id}` });
    expect(log.json.data[0]).toMatchObject({ state: 'delivered', attempts: 2 });
    expect(log.json.data[0].log[0]).toMatchObject({ status: 429, error: 'HTTP 429' });
    await admin(s, 'remove', { body: { id } });
  });

  it('a 3xx is a failed attempt and is not followed; a silent receiver times out', async () => {
    rx.respond = (r) => (r.path === '/moved' ? { status: 302, headers: { Location: '/elsewhere' } } : r.path === '/silent' ? 'hang' : { status: 200 });
    const moved = await subscribe('/moved');
    const silent = await subscribe('/silent');
    emit('c-3xx');
    await settle();
    expect(at('/moved')).toHaveLength(1);
    expect(at('/elsewhere')).toHaveLength(0);
    const m = (await admin(s, 'deliveries', { query: `&id=${moved.id}` })).json.data[0];
    expect(m.log[0]).toMatchObject({ status: 302, error: 'HTTP 302 (redirects are not followed)' });
    const t = (await admin(s, 'deliveries', { query: `&id=${silent.id}` })).json.data[0];
    // The tenant's log does not tell a timeout from a refused connection (no LAN mapping through it).
    expect(t.log[0]).toMatchObject({ status: null, error: NO_RESPONSE_TEXT });
    expect(t.log[0].durationMs).toBeGreaterThanOrEqual(390);
    expect(t.state).toBe('pending');
    await admin(s, 'remove', { body: { id: moved.id } });
    await admin(s, 'remove', { body: { id: silent.id } });
  });

  it('an operator pauses a subscription (nothing delivered, audited) and resumes it', async () => {
    rx.respond = () => ({ status: 200 });
    const { id } = await subscribe('/paused');
    const paused = await admin(s, 'pause', { body: { id } });
    expect(paused.status).toBe(200);
    expect(paused.json).toMatchObject({ id, active: false });
    emit('c-paused-1');
    await settle();
    await advance(300_000);
    expect(at('/paused')).toHaveLength(0);
    expect((await admin(s, 'pause', { body: { id: '0000000000000000' } })).status).toBe(404);
    expect((await admin(s, 'resume', { body: { id } })).json).toMatchObject({ active: true });
    emit('c-paused-2');
    await settle();
    await sleep(50);
    await settle();
    expect(at('/paused').length).toBeGreaterThanOrEqual(1);
    expect(db().prepare("SELECT COUNT(*) AS n FROM audit_log WHERE event = 'webhook-pause'").get()).toEqual({ n: 1 });
    await admin(s, 'remove', { body: { id } });
  });

  it('pauses after exactly 20 consecutive failed deliveries; resume re-activates', async () => {
    rx.respond = (r) => (r.path === '/dead' ? { status: 503 } : { status: 200 });
    const { id } = await subscribe('/dead');
    for (let i = 0; i < 23; i++) emit(`c-dead-${i}`);
    await settle();
    for (let i = 0; i < 40 && sub(id).active === 1; i++) await advance(121_000);
    expect(sub(id)).toEqual({ active: 0, failures: 20, last_fired_at: null });
    await advance(3_600_000);
    // 20 deliveries × 4 attempts, plus first attempts of later deliveries admitted while the last ones ran.
    expect(at('/dead').length).toBeGreaterThanOrEqual(80);
    expect(at('/dead').length).toBeLessThan(84);
    const states = db().prepare('SELECT state, COUNT(*) AS n FROM webhook_deliveries WHERE subscription_id = ? GROUP BY state ORDER BY state').all(id);
    expect(states).toEqual([
      { state: 'failed', n: 20 },
      { state: 'skipped', n: 3 },
    ]);
    expect((await admin(s, 'list')).json.find((x: { id: string }) => x.id === id)).toMatchObject({ active: false, failures: 20 });

    const resumed = await admin(s, 'resume', { body: { id } });
    expect(resumed.json).toMatchObject({ active: true, failures: 0 });
    rx.respond = () => ({ status: 200 });
    expect((await admin(s, 'test', { body: { id } })).status).toBe(200);
    await settle();
    await sleep(50);
    await settle();
    expect(at('/dead').at(-1)!.headers['x-service-event']).toBe('webhook.test');
    expect(sub(id).last_fired_at).not.toBeNull();
    await admin(s, 'remove', { body: { id } });
  });
});
