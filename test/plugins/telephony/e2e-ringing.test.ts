import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import type { JobRow } from '../../../server/jobs.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { startSipp, type SippRun } from '../../support/sipp.ts';
import { GeminiLiveFake } from '../../support/gemini-live-fake.ts';
import { adm, call, eventsOf, j, until, type Json } from './helpers.ts';

/**
 * Slow far ends at the product's default ring timeout (45 s, telephony config not overridden),
 * through the whole path: POST /calls → the embedded real bridge → SIPp → `ended` → call record
 * and retry job. RFC 3261 §17.1.1.2 runs Timer B (64*T1 = 32 s) in the Calling state only, so a
 * callee that rings longer than 32 s is the ring timeout's business, not the transaction's.
 * The three tests run at once (one SIPp each, routed by dial prefix), so the file takes ~50 s.
 * The SIPp scenarios check the CANCEL's timing themselves (a pause before the CANCEL is expected).
 */
const V1 = '/api.ashx/v1';
const KEY = 'AIza-ringing-key';
let s: TestServer;
let engine: GeminiLiveFake;
const clock = new ManualClock(Date.parse('2026-05-04T09:00:00Z'));
const sipps: SippRun[] = [];

beforeAll(async () => {
  // OPTIONS keepalives would confuse SIPp's fixed scenarios.
  process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
  engine = new GeminiLiveFake({ apiKey: KEY, script: [{ say: 'Good morning, this is the practice.', audioMs: 400 }, { tool: 'end_call' }] });
  await engine.start();
  const base = 46000 + 2 * Math.floor(Math.random() * 4000);
  s = await startTestServer({
    clock,
    overrides: {
      plugins: {
        telephony: {
          // No ringTimeoutSec here: the default (45 s) is what this file is about.
          bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${base}-${base + 99}`, readyTimeoutMs: 20_000 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
        },
      },
    },
  });
  await until(async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.state === 'ready', 20_000, 'bridge ready');
}, 60_000);
afterAll(async () => {
  await s?.stop();
  for (const x of sipps) await x.stop();
  await engine?.stop();
  delete process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC;
});

/** A trunk to a new SIPp far end, and an outbound route sending `prefix*` to it. */
async function trunkTo(scenario: string, prefix: string): Promise<{ id: string; sipp: SippRun }> {
  const sipp = await startSipp({ scenario, timeoutSec: 75 });
  sipps.push(sipp);
  const id = `ring${sipps.length}`;
  expect(
    (await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id, name: scenario, host: '127.0.0.1', port: sipp.port, transport: 'udp', codecs: ['PCMU'] }))
      .status,
  ).toBe(200);
  expect((await s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: `${prefix}*`, trunkIds: [id] } })).status).toBeLessThan(300);
  await until(
    async () => {
      const h = (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health;
      return h?.trunks?.some((t: { id: string }) => t.id === `${s.primary.id}.${id}`);
    },
    5000,
    'trunk at the bridge',
  );
  return { id, sipp };
}

const rec = (id: string): Promise<Json> => j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey })).then((r) => r.body);

/** Waits for the attempt to end; returns the record and the wall time since `t0`. */
async function endedAfter(id: string, t0: number): Promise<{ c: Json; ms: number }> {
  const c = await until(
    async () => {
      const x = await rec(id);
      return x.endedAtUtc ? x : null;
    },
    80_000,
    `call ${id} ended`,
  );
  return { c, ms: Date.now() - t0 };
}

const place = async (phone: string): Promise<string> => {
  const r = await j(
    s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: KEY, phone, retries: 1, retryDelayMinutes: 1, email: undefined }) }),
  );
  if (!r.body?.ok) throw new Error(`POST /calls: ${JSON.stringify(r.body)}`);
  return r.body.callId as string;
};

// The three far ends, set up one after the other (each trunk save re-sends the bridge its trunks).
let slow: { id: string; sipp: SippRun };
let forever: { id: string; sipp: SippRun };
let trying: { id: string; sipp: SippRun };
beforeAll(async () => {
  slow = await trunkTo('ring-40s-then-answer', '+4931');
  forever = await trunkTo('ring-until-cancel-45s', '+4932');
  trying = await trunkTo('trying-only-cancel-32s', '+4933');
}, 30_000);

// Concurrent: each test waits on real SIP timers for 32-45 s, side by side.
describe.concurrent('slow far ends at the default ring timeout (real bridge, SIPp)', () => {
  it('rings 40 s, then answers: the call is answered (answerMs ≈ 40 000) and goes on with the AI', async ({ expect }) => {
    const t0 = Date.now();
    const id = await place('+4931100001');
    const { c } = await endedAfter(id, t0);
    expect(c).toMatchObject({ status: 'ended-success', endedReason: 'finished', trunkId: slow.id, errorDetail: '' });
    const answerMs = eventsOf(s, id).find((e) => e.name === 'call.answered')!.data.answerMs as number;
    expect(answerMs).toBeGreaterThanOrEqual(39_500);
    expect(answerMs).toBeLessThan(43_000);
    const exit = await slow.sipp.exited; // it got our ACK and, after the AI's goodbye, our BYE
    expect(exit.code, exit.output).toBe(0);
  }, 120_000);

  it('rings forever: CANCEL at 45 s, the 487 is ACKed, no-answer, and the retry is scheduled and dialled', async ({ expect }) => {
    const t0 = Date.now();
    const id = await place('+4932200002');
    const { c, ms } = await endedAfter(id, t0);
    expect(ms).toBeGreaterThanOrEqual(44_500);
    expect(ms).toBeLessThan(52_000);
    expect(c).toMatchObject({
      status: 'ended-failed-retry-pending',
      endedReason: 'no-answer',
      attempt: 1,
      retriesLeft: 0,
      trunkId: forever.id,
      errorDetail: '',
    });
    const exit = await forever.sipp.exited; // CANCEL within [44 s, 49 s] of its 180, then our ACK of its 487
    expect(exit.code, exit.output).toBe(0);
    const job = s.appliance.core.db.prepare('SELECT * FROM jobs WHERE dedupe_key = ?').get(`dial:${id}:2`) as JobRow | undefined;
    expect(job).toMatchObject({ state: 'pending', run_at: clock.now() + 60_000 });
    // When it is due, the call is dialled again as attempt 2 (then hung up: nothing answers now).
    clock.advance(60_000 + 1);
    s.appliance.core.jobs.kick();
    await until(
      async () => {
        const x = await rec(id);
        return x.status === 'in-flight' && x.attempt === 2;
      },
      10_000,
      'second attempt in flight',
    );
    expect((await j(s.fetch(`${V1}/calls/${id}/hangup`, { method: 'POST', key: s.adminKey }))).body).toMatchObject({ ok: true, newStatus: 'cancelled' });
  }, 120_000);

  it('100 Trying and then nothing: CANCEL and failed after 32 s (64*T1, Timer C model of §16.6)', async ({ expect }) => {
    const t0 = Date.now();
    const id = await place('+4933300003');
    const { c, ms } = await endedAfter(id, t0);
    expect(ms).toBeGreaterThanOrEqual(31_500);
    expect(ms).toBeLessThan(40_000);
    expect(c).toMatchObject({
      status: 'ended-failed-final',
      endedReason: 'failed',
      errorDetail: 'SIP transaction timeout (no final response)',
      retriesLeft: 1,
      trunkId: trying.id,
    });
    const exit = await trying.sipp.exited; // CANCEL within [31 s, 36 s] of its 100, then our ACK of its 487
    expect(exit.code, exit.output).toBe(0);
  }, 120_000);
});
