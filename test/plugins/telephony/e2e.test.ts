import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { startSipp, type SippRun } from '../../support/sipp.ts';
import { GeminiLiveFake } from '../../support/gemini-live-fake.ts';
import { adm, call, eventsOf, j, startSmtp, until } from './helpers.ts';

/**
 * Both halves together: the appliance with its embedded real bridge (plugins/telephony/bridge),
 * real SIPp far ends and the local Gemini Live fake. POST /calls → SIP → AI conversation →
 * `ended` callback → call record, transcript file, events and the outcome mail.
 */
const V1 = '/api.ashx/v1';
let s: TestServer;
let engine: GeminiLiveFake;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
const clock = new ManualClock(Date.parse('2026-05-04T09:00:00Z'));
const sipps: SippRun[] = [];

beforeAll(async () => {
  // OPTIONS keepalives would confuse SIPp's fixed scenarios.
  process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
  engine = new GeminiLiveFake({
    apiKey: 'AIza-e2e-key',
    usage: { prompt: 120, response: 30 },
    script: [
      { say: 'Good morning, this is the practice.', audioMs: 600 },
      { hear: 'Hello?', ms: 400 },
      { say: 'Your appointment is tomorrow. Goodbye.', audioMs: 600 },
      { tool: 'end_call' },
    ],
  });
  await engine.start();
  smtp = await startSmtp();
  const base = 42000 + 2 * Math.floor(Math.random() * 4000);
  s = await startTestServer({
    clock,
    overrides: {
      plugins: {
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${base}-${base + 99}`, readyTimeoutMs: 20_000 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
          mail: { host: '127.0.0.1', port: smtp.port },
          ringTimeoutSec: 10,
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
  await smtp?.stop();
  delete process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC;
});

/** A fresh trunk (own id) to a new SIPp far end, made the default once the bridge has it. */
async function trunkTo(scenario: string, calls = 1): Promise<string> {
  const run = await startSipp({ scenario, calls, timeoutSec: 40 });
  sipps.push(run);
  const id = `sipp${sipps.length}`;
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
    id,
    name: scenario,
    host: '127.0.0.1',
    port: run.port,
    transport: 'udp',
    codecs: ['PCMA', 'PCMU'],
  });
  await until(
    async () => {
      const h = (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health;
      return h?.trunks?.some((t: { id: string }) => t.id === `${s.primary.id}.${id}`);
    },
    5000,
    'trunk at the bridge',
  );
  await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: id });
  return id;
}

const rec = (id: string) => j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey })).then((r) => r.body);

describe('outbound AI call end to end (real bridge, SIPp, Gemini Live fake)', () => {
  it('answered conversation → ended-success, transcript, events and mail', async () => {
    const trunk = await trunkTo('answer-play-pcap');
    const r = await j(
      s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: 'AIza-e2e-key', voice: 'Puck', email: 'e2e@example.com' }) }),
    );
    expect(r.body).toMatchObject({ ok: true, whitelistAdded: true });
    const id = r.body.callId as string;
    const done = await until(
      async () => {
        const c = await rec(id);
        return c.status.startsWith('ended') ? c : null;
      },
      30_000,
      'call ended',
    );
    expect(done).toMatchObject({ status: 'ended-success', endedReason: 'finished', trunkId: trunk, errorDetail: '', transcriptPath: `${id}.json` });
    const t = (await j(s.fetch(`${V1}/transcripts/${id}`, { key: s.adminKey }))).body;
    expect(t.turns.map((x: { speaker: string; text: string }) => [x.speaker, x.text])).toEqual([
      ['AI', 'Good morning, this is the practice.'],
      ['Caller', 'Hello?'],
      ['AI', 'Your appointment is tomorrow. Goodbye.'],
    ]);
    expect(t).toMatchObject({ answered: true, outcome: 'finished', voice: 'Puck', inputTurns: 1, outputTurns: 2, tokensTotal: 300 });
    expect(eventsOf(s, id).map((e) => e.name)).toEqual(['call.answered', 'call.started', 'call.ended', 'outbound-ai.finished', 'transcript.saved']);
    expect(eventsOf(s, id)[0]!.data.answerMs).toBeGreaterThanOrEqual(0);
    expect(engine.sessions.at(-1)!.key).toBe('AIza-e2e-key');
    await until(() => smtp.mails.find((m) => m.to.includes('e2e@example.com')), 10_000, 'outcome mail');
    // Neither half logs the engine key (the bridge's log lines are folded into ours).
    expect(s.logs.text()).toContain('"plugin":"telephony"');
    expect(s.logs.text()).not.toContain('AIza-e2e-key');
  }, 60_000);

  it('hangup while it rings: the bridge sends CANCEL, the far end sees it, the call is cancelled', async () => {
    const trunk = await trunkTo('ring-no-answer');
    const sipp = sipps.at(-1)!;
    const id = (await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: 'AIza-e2e-key', email: undefined }) }))).body
      .callId as string;
    await until(async () => (await rec(id)).trunkId === trunk, 10_000, 'dialing event');
    await new Promise((r) => setTimeout(r, 300)); // let the 180 arrive
    expect((await j(s.fetch(`${V1}/calls/${id}/hangup`, { method: 'POST', key: s.adminKey }))).body).toMatchObject({ ok: true, newStatus: 'cancelled' });
    const exit = await sipp.exited;
    expect(exit.code, exit.output).toBe(0);
    const c = await until(
      async () => {
        const x = await rec(id);
        return x.endedAtUtc ? x : null;
      },
      15_000,
      'ended after CANCEL',
    );
    expect(c).toMatchObject({ status: 'cancelled', endedReason: 'cancelled', answeredAtUtc: '' });
  }, 60_000);

  it('busy → retried after retryDelayMinutes through the real bridge → busy again → ended-failed-final', async () => {
    await trunkTo('reject-486', 2);
    const id = (
      await j(
        s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: 'AIza-e2e-key', retries: 1, retryDelayMinutes: 1, email: undefined }) }),
      )
    ).body.callId as string;
    await until(async () => (await rec(id)).status === 'ended-failed-retry-pending', 20_000, 'first attempt busy');
    expect(await rec(id)).toMatchObject({ endedReason: 'busy', attempt: 1, retriesLeft: 0 });
    clock.advance(60_000 + 1);
    s.appliance.core.jobs.kick();
    const fin = await until(
      async () => {
        const c = await rec(id);
        return c.status === 'ended-failed-final' ? c : null;
      },
      20_000,
      'second attempt busy',
    );
    expect(fin).toMatchObject({ endedReason: 'busy', attempt: 2, retriesLeft: 0 });
  }, 60_000);
});
