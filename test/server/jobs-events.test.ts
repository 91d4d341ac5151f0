import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { CoreServices } from '../../server/app.ts';
import { ManualClock } from '../../server/clock.ts';
import { EventBus, type AppEvent } from '../../server/events.ts';
import { JobQueue, PermanentFailure, RetryAt, type JobRow } from '../../server/jobs.ts';
import { tempDir } from '../support/server.ts';
import { coreHarness } from '../support/core.ts';

const openTestCore = coreHarness('sovcomms-jobs-');

function setup(clock = new ManualClock(), dir?: string): CoreServices {
  return openTestCore({ clock, dir });
}

async function until(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const row = (core: CoreServices, id: number): JobRow => core.jobs.get(id)!;
const num = z.object({ n: z.number() });

describe('job queue', () => {
  it('enqueues and runs jobs with parsed data, once each', async () => {
    const core = setup();
    const seen: number[] = [];
    core.jobs.define({
      name: 'q',
      schema: num,
      async run(job) {
        seen.push(job.data.n);
      },
    });
    core.jobs.start();
    const ids = [1, 2, 3].map((n) => core.jobs.enqueue('q', { n }));
    await until(() => ids.every((id) => row(core, id).state === 'done'), 5000, 'jobs done');
    expect(seen.sort()).toEqual([1, 2, 3]);
    for (const id of ids) expect(row(core, id)).toMatchObject({ attempts: 1, lease_owner: null, last_error: null });
  });

  it("retries with backoff on the queue's clock, then succeeds", async () => {
    const clock = new ManualClock();
    const core = setup(clock);
    const attempts: number[] = [];
    core.jobs.define({
      name: 'flaky',
      schema: z.unknown(),
      backoffMs: (n) => n * 10_000,
      async run(job) {
        attempts.push(job.attempt);
        if (job.attempt < 3) throw new Error(`boom ${job.attempt}`);
      },
    });
    core.jobs.start();
    const id = core.jobs.enqueue('flaky', {});
    await until(() => row(core, id).attempts === 1 && row(core, id).state === 'pending', 5000, 'first failure');
    expect(row(core, id)).toMatchObject({ last_error: 'boom 1', run_at: clock.now() + 10_000 });
    // Nothing runs before the backoff is over.
    await new Promise((r) => setTimeout(r, 100));
    expect(attempts).toEqual([1]);
    clock.advance(10_000);
    core.jobs.kick();
    await until(() => row(core, id).attempts === 2 && row(core, id).state === 'pending', 5000, 'second failure');
    expect(row(core, id).run_at).toBe(clock.now() + 20_000);
    clock.advance(20_000);
    core.jobs.kick();
    await until(() => row(core, id).state === 'done', 5000, 'done');
    expect(attempts).toEqual([1, 2, 3]);
  });

  it('the default backoff is exponential; RetryAt picks the time; PermanentFailure and max attempts stop it', async () => {
    const clock = new ManualClock();
    const core = setup(clock);
    core.jobs.define({
      name: 'default-backoff',
      schema: z.unknown(),
      async run() {
        throw new Error('nope');
      },
    });
    const t0 = clock.now();
    core.jobs.define({
      name: 'retry-at',
      schema: z.unknown(),
      async run() {
        throw new RetryAt(t0 + 123_456);
      },
    });
    core.jobs.define({
      name: 'permanent',
      schema: z.unknown(),
      async run() {
        throw new PermanentFailure('gone for good');
      },
    });
    core.jobs.define({
      name: 'max',
      schema: z.unknown(),
      maxAttempts: 2,
      backoffMs: () => 0,
      async run() {
        throw new Error('always');
      },
    });
    core.jobs.start();
    const a = core.jobs.enqueue('default-backoff', {});
    const b = core.jobs.enqueue('retry-at', {});
    const c = core.jobs.enqueue('permanent', {});
    const d = core.jobs.enqueue('max', {});
    await until(() => row(core, a).attempts === 1 && row(core, a).state === 'pending', 5000, 'default backoff');
    const firstDelay = row(core, a).run_at - clock.now();
    expect(firstDelay).toBeGreaterThan(0);
    clock.advance(firstDelay);
    core.jobs.kick();
    await until(() => row(core, a).attempts === 2 && row(core, a).state === 'pending', 5000, 'second default backoff');
    expect(row(core, a).run_at - clock.now()).toBe(firstDelay * 2);
    await until(() => row(core, b).state === 'pending' && row(core, b).attempts === 1, 5000, 'retry-at');
    expect(row(core, b).run_at).toBe(t0 + 123_456);
    await until(() => row(core, c).state === 'failed', 5000, 'permanent');
    expect(row(core, c)).toMatchObject({ attempts: 1, last_error: 'gone for good' });
    await until(() => row(core, d).state === 'failed', 5000, 'max attempts');
    expect(row(core, d)).toMatchObject({ attempts: 2, max_attempts: 2, last_error: 'always' });
  });

  it('a dedupe key makes enqueue idempotent; cancel stops a pending job; bad data fails the job', async () => {
    const clock = new ManualClock();
    const core = setup(clock);
    const ran: string[] = [];
    core.jobs.define({
      name: 'd',
      schema: z.object({ s: z.string() }),
      async run(job) {
        ran.push(job.data.s);
      },
    });
    const first = core.jobs.enqueue('d', { s: 'one' }, { dedupeKey: 'k1' });
    expect(core.jobs.enqueue('d', { s: 'two' }, { dedupeKey: 'k1' })).toBe(first);
    const later = core.jobs.enqueue('d', { s: 'later' }, { dedupeKey: 'k2', runAt: clock.now() + 3_600_000 });
    const bad = core.jobs.enqueue('d', { s: 42 });
    expect(core.jobs.cancel('d', 'k2')).toBe(true);
    expect(core.jobs.cancel('d', 'no-such-key')).toBe(false);
    core.jobs.start();
    await until(() => row(core, first).state === 'done' && row(core, bad).state === 'failed', 5000, 'jobs settled');
    expect(ran).toEqual(['one']);
    // The schema's reason, with the path: a payload that does not match is never cast and run.
    expect(row(core, bad).last_error).toMatch(/^bad job data: s: /);
    clock.advance(3_600_000);
    core.jobs.kick();
    await new Promise((r) => setTimeout(r, 100));
    expect(row(core, later).state).toBe('cancelled');
    expect(ran).toEqual(['one']);
    // A finished job cannot be cancelled, and its dedupe key still returns it.
    expect(core.jobs.cancel('d', 'k1')).toBe(false);
    expect(core.jobs.enqueue('d', { s: 'again' }, { dedupeKey: 'k1' })).toBe(first);
  });

  it('a dedupe key stays idempotent when another process inserts the same key between check and insert', () => {
    const core = setup(new ManualClock());
    // Simulates the other process winning the race: a row with the key appears just before our insert.
    core.db.exec(`CREATE TEMP TRIGGER race BEFORE INSERT ON jobs WHEN NEW.dedupe_key = 'race' AND NOT EXISTS (SELECT 1 FROM jobs WHERE dedupe_key = 'race')
      BEGIN INSERT INTO jobs (queue, dedupe_key, data, run_at, max_attempts, created_at) VALUES (NEW.queue, 'race', '{"by":"other"}', NEW.run_at, 5, NEW.created_at); END`);
    const id = core.jobs.enqueue('d', { by: 'us' }, { dedupeKey: 'race' });
    const rows = core.db.prepare("SELECT id, data FROM jobs WHERE dedupe_key = 'race'").all();
    expect(rows).toEqual([{ id, data: '{"by":"other"}' }]);
  });

  it('a job leased by a crashed runner is taken over when the lease expires', async () => {
    const clock = new ManualClock();
    const core = setup(clock);
    const ran: number[] = [];
    core.jobs.define({
      name: 'lease',
      schema: z.unknown(),
      async run(job) {
        ran.push(job.attempt);
      },
    });
    const id = core.jobs.enqueue('lease', {});
    // Another node took it and died.
    core.db
      .prepare("UPDATE jobs SET state = 'running', attempts = 1, lease_owner = 'other-node:1:abc', lease_until = ? WHERE id = ?")
      .run(clock.now() + 60_000, id);
    core.jobs.start();
    await new Promise((r) => setTimeout(r, 100));
    expect(ran).toEqual([]);
    clock.advance(60_001);
    core.jobs.kick();
    await until(() => row(core, id).state === 'done', 5000, 'lease takeover');
    expect(ran).toEqual([2]);
  });

  it('shutdown drains running jobs; what cannot finish goes back to pending', async () => {
    const core = setup(new ManualClock());
    core.jobs.define({
      name: 'slow',
      schema: z.unknown(),
      async run() {
        await new Promise((r) => setTimeout(r, 150));
      },
    });
    core.jobs.define({
      name: 'stuck',
      schema: z.unknown(),
      run: (job) =>
        new Promise<void>((_resolve, reject) => {
          job.signal.addEventListener('abort', () => reject(new Error('aborted')));
        }),
    });
    const slow = core.jobs.enqueue('slow', {});
    core.jobs.start();
    await until(() => row(core, slow).state === 'running', 5000, 'slow running');
    await core.jobs.shutdown(2000);
    expect(row(core, slow).state).toBe('done');

    const core2 = setup(new ManualClock());
    core2.jobs.define({
      name: 'stuck',
      schema: z.unknown(),
      run: (job) =>
        new Promise<void>((_resolve, reject) => {
          job.signal.addEventListener('abort', () => reject(new Error('aborted')));
        }),
    });
    const stuck = core2.jobs.enqueue('stuck', {});
    core2.jobs.start();
    await until(() => row(core2, stuck).state === 'running', 5000, 'stuck running');
    await core2.jobs.shutdown(50);
    expect(row(core2, stuck)).toMatchObject({ state: 'pending', lease_owner: null });
  });
});

describe('event bus (outbox)', () => {
  function notes(core: CoreServices): void {
    core.db.exec(
      'CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL); CREATE TABLE IF NOT EXISTS seen (event_id INTEGER NOT NULL, consumer TEXT NOT NULL)',
    );
    core.events.declare('test', 'note.created', z.object({ noteId: z.number().int(), body: z.string() }).strict());
  }
  const createNote = (core: CoreServices, tenantId: string, body: string, fail = false) =>
    core.db
      .transaction(() => {
        const id = Number(core.db.prepare('INSERT INTO notes (body) VALUES (?)').run(body).lastInsertRowid);
        core.events.emit(tenantId, 'note.created', { noteId: id, body });
        if (fail) throw new Error('rolled back after emit');
        return id;
      })
      .immediate();
  const seenCount = (core: CoreServices, consumer: string) =>
    (core.db.prepare('SELECT event_id FROM seen WHERE consumer = ? ORDER BY event_id').all(consumer) as { event_id: number }[]).map((r) => r.event_id);

  it('events emitted in a transaction reach a durable consumer exactly once; rolled-back ones never', async () => {
    const core = setup(new ManualClock());
    notes(core);
    core.events.subscribe({
      name: 'indexer',
      events: ['note.created'],
      handle: (ev) => {
        core.db.prepare('INSERT INTO seen VALUES (?, ?)').run(ev.id, 'indexer');
      },
    });
    const live: AppEvent[] = [];
    core.events.listen((ev) => live.push(ev));
    core.events.start();
    createNote(core, 't1', 'a');
    expect(() => createNote(core, 't1', 'doomed', true)).toThrow(/rolled back/);
    createNote(core, 't1', 'b');
    await until(() => seenCount(core, 'indexer').length >= 2, 5000, 'delivery');
    await new Promise((r) => setTimeout(r, 100));
    const ids = seenCount(core, 'indexer');
    expect(ids).toHaveLength(2);
    expect(new Set(ids).size).toBe(2);
    expect((core.db.prepare('SELECT body FROM notes').all() as { body: string }[]).map((r) => r.body)).toEqual(['a', 'b']);
    await until(() => live.length === 2, 5000, 'listeners');
    expect(live.map((e) => e.data.body)).toEqual(['a', 'b']);
    expect(live[0]).toMatchObject({ tenantId: 't1', name: 'note.created' });
  });

  it('undeclared events and data off the schema are refused (and roll the transaction back)', () => {
    const core = setup(new ManualClock());
    notes(core);
    expect(() => core.events.emit('t1', 'note.deleted', {})).toThrow(/not declared/);
    expect(() =>
      core.db.transaction(() => {
        core.db.prepare("INSERT INTO notes (body) VALUES ('x')").run();
        core.events.emit('t1', 'note.created', { noteId: 'one', body: 'x' });
      })(),
    ).toThrow();
    expect(core.db.prepare('SELECT COUNT(*) AS n FROM notes').get()).toEqual({ n: 0 });
    expect(() => core.events.declare('other-plugin', 'note.created', z.object({}))).toThrow(/declared by both/);
  });

  it('a consumer that throws is retried without double effects; after a restart it resumes where it was', async () => {
    const dir = tempDir('sovcomms-events-');
    const core = setup(new ManualClock(), dir);
    notes(core);
    let failOnce = true;
    core.events.subscribe({
      name: 'flaky',
      events: '*',
      handle: (ev) => {
        core.db.prepare('INSERT INTO seen VALUES (?, ?)').run(ev.id, 'flaky');
        if (ev.data.body === 'second' && failOnce) {
          failOnce = false;
          throw new Error('transient');
        }
      },
    });
    core.events.start();
    createNote(core, 't1', 'first');
    createNote(core, 't1', 'second');
    createNote(core, 't1', 'third');
    await until(() => seenCount(core, 'flaky').length >= 3, 5000, 'flaky delivery');
    expect(seenCount(core, 'flaky')).toHaveLength(3);
    expect(new Set(seenCount(core, 'flaky')).size).toBe(3);

    // "Restart": a second bus on the same database with the same consumer name.
    core.events.stop();
    createNote(core, 't1', 'while-down');
    const bus2 = new EventBus(core.db, core.clock, core.log.child({}), 50);
    bus2.declare('test', 'note.created', z.object({ noteId: z.number().int(), body: z.string() }).strict());
    bus2.subscribe({
      name: 'flaky',
      events: '*',
      handle: (ev) => {
        core.db.prepare('INSERT INTO seen VALUES (?, ?)').run(ev.id, 'flaky');
      },
    });
    // A consumer seen for the first time starts now unless it asks for the beginning.
    bus2.subscribe({
      name: 'late',
      events: '*',
      handle: (ev) => {
        core.db.prepare('INSERT INTO seen VALUES (?, ?)').run(ev.id, 'late');
      },
    });
    bus2.subscribe({
      name: 'replayer',
      events: '*',
      from: 'beginning',
      handle: (ev) => {
        core.db.prepare('INSERT INTO seen VALUES (?, ?)').run(ev.id, 'replayer');
      },
    });
    bus2.start();
    try {
      await until(() => seenCount(core, 'flaky').length >= 4 && seenCount(core, 'replayer').length >= 4, 5000, 'resume');
      await new Promise((r) => setTimeout(r, 100));
      expect(seenCount(core, 'flaky')).toHaveLength(4);
      expect(new Set(seenCount(core, 'flaky')).size).toBe(4);
      expect(seenCount(core, 'late')).toEqual([]);
      expect(seenCount(core, 'replayer')).toHaveLength(4);
    } finally {
      bus2.stop();
    }
  });
});

// The JobQueue class is exported for plugins; keep the import checked.
// eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator -- the import is kept for its types
void JobQueue;

describe('robustness', () => {
  it('a job that outlives its lease is not claimed a second time while it still runs (same process or another)', async () => {
    const clock = new ManualClock();
    const core = setup(clock);
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    core.jobs.define({
      name: 'long',
      schema: z.unknown(),
      leaseMs: 1000,
      async run() {
        runs++;
        await gate;
      },
    });
    const id = core.jobs.enqueue('long', {});
    core.jobs.start();
    await until(() => runs === 1, 5000, 'first run');
    // Far past the lease: this process must not start it again beside itself.
    clock.advance(10_000);
    core.jobs.kick();
    await new Promise((r) => setTimeout(r, 150));
    expect(runs).toBe(1);
    release();
    await until(() => row(core, id).state === 'done', 5000, 'done');
    expect(row(core, id).attempts).toBe(1);
  });

  it('a running job keeps its lease alive, so another runner does not take it over', async () => {
    const dir = tempDir('sovcomms-lease-');
    const core = setup(undefined, dir);
    // Two runners on real time: the lease is 1 s and the job runs 2.5 s.
    const a = new JobQueue(core.db, { now: () => Date.now() }, core.log.child({}), { pollMs: 20, leaseMs: 1000, nodeId: 'node-a' });
    const b = new JobQueue(core.db, { now: () => Date.now() }, core.log.child({}), { pollMs: 20, leaseMs: 1000, nodeId: 'node-b' });
    const ranBy: string[] = [];
    const def = (who: string) => ({
      name: 'slow-lease',
      schema: z.unknown(),
      leaseMs: 1000,
      async run() {
        ranBy.push(who);
        await new Promise((r) => setTimeout(r, 2500));
      },
    });
    a.define(def('a'));
    b.define(def('b'));
    const id = a.enqueue('slow-lease', {});
    a.start();
    await until(() => ranBy.length === 1, 5000, 'a runs it');
    b.start();
    await until(() => core.jobs.get(id)?.state === 'done', 10_000, 'done');
    await a.shutdown(100);
    await b.shutdown(100);
    expect(ranBy).toEqual(['a']);
  }, 20_000);

  it('a consumer that keeps failing does not hold back the other consumers', async () => {
    const core = setup(new ManualClock());
    core.events.declare('test', 'ping', z.object({ n: z.number() }));
    const good: number[] = [];
    core.events.subscribe({
      name: 'a-poisoned',
      events: '*',
      handle: () => {
        throw new Error('always fails');
      },
    });
    core.events.subscribe({
      name: 'b-good',
      events: '*',
      handle: (ev) => {
        good.push(ev.data.n as number);
      },
    });
    core.events.start();
    core.events.emit('t1', 'ping', { n: 1 });
    core.events.emit('t1', 'ping', { n: 2 });
    await until(() => good.length === 2, 3000, 'the good consumer');
    expect(good).toEqual([1, 2]);
    // The failing consumer's cursor did not move: it gets the events again once it recovers.
    expect(core.db.prepare("SELECT last_id FROM event_consumers WHERE name = 'a-poisoned'").get()).toEqual({ last_id: 0 });
  });

  it('in-memory listeners hear only events after start, not the history in the table', async () => {
    const core = setup(new ManualClock());
    core.events.declare('test', 'ping', z.object({ n: z.number() }));
    core.events.emit('t1', 'ping', { n: 1 });
    core.events.emit('t1', 'ping', { n: 2 });
    const heard: number[] = [];
    core.events.listen((ev) => heard.push(ev.data.n as number));
    core.events.start();
    await new Promise((r) => setTimeout(r, 50));
    core.events.emit('t1', 'ping', { n: 3 });
    await until(() => heard.length > 0, 3000, 'a live event');
    await new Promise((r) => setTimeout(r, 50));
    expect(heard).toEqual([3]);
  });
});

describe('event data checks', () => {
  it('bad data from a plugin is a server bug (plain Error), not a client error (ZodError → 400)', async () => {
    const { z } = await import('zod');
    const core = setup(new ManualClock());
    core.events.declare('test', 'thing.done', z.object({ n: z.number() }));
    let err: unknown;
    try {
      core.events.emit('t1', 'thing.done', { n: 'x' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(z.ZodError);
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- whatever was thrown, as text
    expect(String((err as Error).message)).toMatch(/thing\.done: invalid data: n: /);
  });
});
