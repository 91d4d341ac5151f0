import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CoreServices } from '../../../server/app.ts';
import { z } from 'zod';
import { WEBHOOKS } from '../../../plugins/webhooks/api.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { DEFAULT_POLICY, cachingResolver, mergePolicy, resolveAllowed } from '../../../plugins/webhooks/net-policy.ts';
import { send } from '../../../plugins/webhooks/sender.ts';
import { Receiver, testPlugins, until } from './support.ts';
import { coreHarness } from '../../support/core.ts';

/**
 * The paths the throughput work added: the core queue's `RunningJob.complete()` (the job's
 * "done" in the handler's own transaction), the webhooks plugin's group commit of attempt
 * outcomes, and the admission index.
 */

describe('RunningJob.complete (core job queue)', () => {
  const openTestCore = coreHarness('sovcomms-jobs-complete-');
  const setup = (): CoreServices => {
    const core = openTestCore();
    core.db.exec('CREATE TABLE effects (job INTEGER, attempt INTEGER)');
    return core;
  };

  it("marks the job done in the handler's transaction, together with its effect", async () => {
    const core = setup();
    const states: string[] = [];
    core.jobs.define({
      name: 'c',
      schema: z.unknown(),
      async run(job) {
        core.db
          .transaction(() => {
            core.db.prepare('INSERT INTO effects VALUES (?, ?)').run(job.id, job.attempt);
            job.complete?.();
            // Inside the open transaction the row is already done: one commit carries both.
            states.push(core.jobs.get(job.id)!.state);
          })
          .immediate();
      },
    });
    core.jobs.start();
    const id = core.jobs.enqueue('c', {});
    await until(() => core.jobs.get(id)!.state === 'done', 5000, 'job done');
    expect(states).toEqual(['done']);
    expect(core.jobs.get(id)).toMatchObject({ attempts: 1, lease_owner: null, last_error: null });
    expect(core.db.prepare('SELECT COUNT(*) AS n FROM effects').get()).toEqual({ n: 1 });
  });

  it('a rolled-back complete() leaves the job to the normal retry', async () => {
    const core = setup();
    core.jobs.define({
      name: 'r',
      schema: z.unknown(),
      backoffMs: () => 0,
      async run(job) {
        core.db
          .transaction(() => {
            core.db.prepare('INSERT INTO effects VALUES (?, ?)').run(job.id, job.attempt);
            job.complete?.();
            if (job.attempt === 1) throw new Error('rolled back');
          })
          .immediate();
      },
    });
    core.jobs.start();
    const id = core.jobs.enqueue('r', {});
    await until(() => core.jobs.get(id)!.state === 'done', 5000, 'job done on the 2nd attempt');
    expect(core.jobs.get(id)).toMatchObject({ attempts: 2, state: 'done' });
    // Only the second attempt's effect committed.
    expect(core.db.prepare('SELECT attempt FROM effects').all()).toEqual([{ attempt: 2 }]);
  });
});

describe('group commit of delivery outcomes', () => {
  let s: TestServer;
  let rx: Receiver;
  beforeAll(async () => {
    rx = await new Receiver().start();
    s = await startTestServer({ plugins: testPlugins(), overrides: { plugins: { webhooks: { allowLoopback: true, perSubscriptionConcurrency: 4 } } } });
  });
  afterAll(async () => {
    await s?.stop();
    await rx?.stop();
  });

  it('many deliveries finishing together: each outcome, attempt row and job commit, per-subscription bound held', async () => {
    const svc = s.appliance.host.provided(WEBHOOKS)!;
    const tenant = s.primary;
    const subs: string[] = [];
    for (let i = 0; i < 3; i++) subs.push((await svc.add(tenant, { url: `${rx.url}/gc/${i}`, events: ['call.ended'] }, 'test')).item.id);
    // Track the most deliveries of one subscription the receiver saw in flight at once.
    let inFlight = 0;
    let maxInFlight = 0;
    rx.respond = (r) => {
      if (!r.path.startsWith('/gc/0')) return { status: 200 };
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      setTimeout(() => inFlight--, 15);
      return { status: 200, delayMs: 15 };
    };
    const db = s.appliance.core.db;
    db.transaction(() => {
      for (let i = 0; i < 40; i++) s.appliance.core.events.emit(tenant.id, 'call.ended', { callId: `gc-${i}` });
    }).immediate();
    const q = (sql: string) => db.prepare(sql).get(...subs) as { n: number };
    const marks = subs.map(() => '?').join(',');
    await until(
      () => q(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE subscription_id IN (${marks}) AND state = 'delivered'`).n === 120,
      20_000,
      '120 deliveries',
    );
    expect(q(`SELECT COUNT(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.subscription_id IN (${marks})`).n).toBe(
      120,
    );
    // Every job ended as done (marked in the outcome's transaction, not left running or pending).
    const jobs = db
      .prepare(`SELECT j.state, COUNT(*) AS n FROM jobs j JOIN webhook_deliveries d ON d.job_id = j.id WHERE d.subscription_id IN (${marks}) GROUP BY j.state`)
      .all(...subs);
    expect(jobs).toEqual([{ state: 'done', n: 120 }]);
    expect(maxInFlight).toBeGreaterThan(1);
    expect(maxInFlight).toBeLessThanOrEqual(4);
    // Admission stayed oldest first per subscription: every delivery's event arrived for sub 0.
    expect(rx.received.filter((r) => r.path.startsWith('/gc/0')).length).toBe(40);
    for (const id of subs) svc.remove(tenant, id);
  });

  it('an outcome that fails to commit fails alone: the others of its batch commit, its job retries', async () => {
    const svc = s.appliance.host.provided(WEBHOOKS)!;
    const tenant = s.primary;
    const db = s.appliance.core.db;
    // Answers delayed alike arrive together, so good and poisoned outcomes share a group commit
    // (checked while writing this test: one batch of 8 took the fallback path).
    rx.respond = () => ({ status: 200, delayMs: 60 });
    const subs: string[] = [];
    for (let i = 0; i < 4; i++) subs.push((await svc.add(tenant, { url: `${rx.url}/poison/${i}`, events: ['call.ended'] }, 'test')).item.id);
    // A temporary trigger on this connection makes one delivery's attempt row unwritable.
    db.exec(`CREATE TEMP TRIGGER poison BEFORE INSERT ON webhook_attempts
             WHEN (SELECT payload FROM webhook_deliveries WHERE id = NEW.delivery_id) LIKE '%poison-me%'
             BEGIN SELECT RAISE(ABORT, 'poisoned outcome'); END`);
    try {
      db.transaction(() => {
        for (const c of ['ok-1', 'poison-me', 'ok-2']) s.appliance.core.events.emit(tenant.id, 'call.ended', { callId: c });
      }).immediate();
      const marks = subs.map(() => '?').join(',');
      const byState = () =>
        db.prepare(`SELECT state, COUNT(*) AS n FROM webhook_deliveries WHERE subscription_id IN (${marks}) GROUP BY state ORDER BY state`).all(...subs);
      await until(
        () =>
          JSON.stringify(byState()) ===
          JSON.stringify([
            { state: 'delivered', n: 8 },
            { state: 'pending', n: 4 },
          ]),
        10_000,
        '8 delivered, 4 poisoned pending',
      );
      await until(
        () =>
          (
            db
              .prepare(
                `SELECT COUNT(*) AS n FROM jobs j JOIN webhook_deliveries d ON d.job_id = j.id
                                     WHERE d.subscription_id IN (${marks}) AND j.state = 'pending' AND j.last_error LIKE '%poisoned outcome%'`,
              )
              .get(...subs) as { n: number }
          ).n === 4,
        5000,
        'poisoned jobs back to pending for a retry',
      );
      // Nothing of a poisoned outcome was written; every good one has exactly its attempt row.
      const attempts = db
        .prepare(
          `SELECT d.payload LIKE '%poison-me%' AS poisoned, COUNT(a.id) AS n FROM webhook_deliveries d LEFT JOIN webhook_attempts a ON a.delivery_id = d.id
                                   WHERE d.subscription_id IN (${marks}) GROUP BY d.id ORDER BY poisoned`,
        )
        .all(...subs) as { poisoned: number; n: number }[];
      expect(attempts.filter((a) => a.poisoned === 0).every((a) => a.n === 1)).toBe(true);
      expect(attempts.filter((a) => a.poisoned === 1).map((a) => a.n)).toEqual([0, 0, 0, 0]);
    } finally {
      db.exec('DROP TRIGGER poison');
      for (const id of subs) svc.remove(tenant, id);
    }
  });

  it('the admission query walks the index in (created_at, rowid) order: no temporary sort', () => {
    const plan = s.appliance.core.db
      .prepare("EXPLAIN QUERY PLAN SELECT id FROM webhook_deliveries WHERE subscription_id = ? AND state = 'queued' ORDER BY created_at, rowid LIMIT ?")
      .all('x', 4) as { detail: string }[];
    expect(plan.map((p) => p.detail).join('\n')).not.toContain('TEMP B-TREE');
  });
});

describe('DNS answer cache', () => {
  it('reuses an answer within its time, asks again after it', async () => {
    let now = 1000;
    let calls = 0;
    const r = cachingResolver(
      async () => {
        calls++;
        return [{ address: '10.0.0.1', family: 4 }];
      },
      5000,
      () => now,
    );
    await r('a.example');
    await r('a.example');
    expect(calls).toBe(1);
    await r('b.example');
    expect(calls).toBe(2);
    now += 4999;
    await r('a.example');
    expect(calls).toBe(2);
    now += 1;
    await r('a.example');
    expect(calls).toBe(3);
    // 0 turns it off; an empty answer is never kept.
    const off = cachingResolver(
      async () => {
        calls++;
        return [];
      },
      0,
      () => now,
    );
    await off('c.example');
    await off('c.example');
    expect(calls).toBe(5);
    const empty = cachingResolver(
      async () => {
        calls++;
        return [];
      },
      5000,
      () => now,
    );
    await empty('d.example');
    await empty('d.example');
    expect(calls).toBe(7);
  });

  it('every attempt still checks the cached addresses against the policy, and a rebinding name is refused once the answer expires', async () => {
    const rx = await new Receiver().start();
    try {
      const port = new URL(rx.url).port;
      let now = 0;
      let answer = '127.0.0.1';
      const r = cachingResolver(
        async () => [{ address: answer, family: 4 }],
        5000,
        () => now,
      );
      const loopbackOk = mergePolicy({ allowLoopback: true });
      const d = {
        url: `http://rebind.example:${port}/x`,
        body: '{}',
        event: 'call.ended',
        deliveryId: 'd1',
        attempt: 1,
        secret: 'whsec_AAAA',
        timestampSec: 1,
      };
      expect((await send(d, { policy: loopbackOk, timeoutMs: 2000, maxResponseBytes: 100, resolve: r })).status).toBe(200);
      // The name now points at the metadata service; the cached (checked) answer is still used...
      answer = '169.254.169.254';
      expect(await resolveAllowed(new URL(d.url), loopbackOk, r)).toEqual([{ address: '127.0.0.1', family: 4, internal: true }]);
      // ...but a policy that refuses it refuses it at once, cache or not.
      expect(await send(d, { policy: DEFAULT_POLICY, timeoutMs: 2000, maxResponseBytes: 100, resolve: r })).toMatchObject({ status: null, refused: true });
      // After the cache time the new answer is resolved and checked: refused, nothing sent.
      now += 5000;
      const before = rx.received.length;
      const refused = await send(d, { policy: loopbackOk, timeoutMs: 2000, maxResponseBytes: 100, resolve: r });
      expect(refused).toMatchObject({ status: null, refused: true });
      expect(refused.error).toMatch(/metadata/);
      expect(rx.received.length).toBe(before);
    } finally {
      await rx.stop();
    }
  });
});
