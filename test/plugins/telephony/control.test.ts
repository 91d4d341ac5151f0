import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { OUTCOMES } from '../../../plugins/telephony/control.ts';
import { adm, call, j, until, type Json } from './helpers.ts';

/**
 * The control contract (plugins/telephony/control.ts) at both edges of the core: what the bridge
 * answers or posts back outside it is refused with a clear error (502 bridge_protocol naming the
 * field to a REST client, a logged refusal for callbacks and background work), never a crash or a
 * 500; and what the core lets in at its own edge is what the bridge accepts, so the bridge never
 * refuses a trunk or a call for a value an admin could type.
 */
const TOKEN = 'fake-bridge-control-token-contract-01';
const V1 = '/api.ashx/v1';
let s: TestServer;
let fake: FakeBridge;

beforeAll(async () => {
  fake = new FakeBridge(TOKEN, '');
  await fake.start();
  s = await startTestServer({
    // No health watch during the tests: each one decides when the bridge is asked.
    overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN, healthPollMs: 600_000 } } } },
  });
  fake.callbackUrl = `${s.url}/internal/bridge/events`;
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1', register: true });
  await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
  await until(() => fake.trunks.length === 1, 3000, 'trunk push');
});
afterAll(async () => {
  await s?.stop();
  await fake?.stop();
});

const trunkId = () => `${s.primary.id}.main`;
const get = async (id: string): Promise<Json> => (await j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey }))).body;
async function inFlight(): Promise<string> {
  const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ email: undefined }) }));
  expect(r.body).toMatchObject({ ok: true, status: 'in-flight' });
  return r.body.callId as string;
}

describe('answers of the bridge outside the contract', () => {
  it('GET /health: the trunk list still answers (status unknown) and bridge=status names the field', async () => {
    fake.answerOverride.health = { status: 200, body: { trunks: 'all fine' } };
    try {
      const l = await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'));
      expect(l.status).toBe(200);
      expect(l.body.trunks[0]).toMatchObject({ id: 'main', registered: null });
      const st = await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'));
      expect(st.status).toBe(200);
      expect(st.body.health.error).toMatch(/GET \/health outside the control contract: status: /);
    } finally {
      delete fake.answerOverride.health;
    }
    expect((await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body.trunks[0]).toMatchObject({ registered: true });
  });

  it("a bridge that refuses or fails: bridge_error with its stable reason, the operation and the bridge's own code", async () => {
    const status = async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health as Json;
    try {
      fake.answerOverride.health = { status: 500, body: { error: 'server_error', error_description: 'boom' } };
      expect(await status()).toMatchObject({
        code: 'bridge_error',
        reason: 'failed',
        operation: 'GET /health',
        bridge_status: 500,
        bridge_code: 'server_error',
      });
      fake.answerOverride.health = { status: 409, body: { error: 'busy' } };
      expect(await status()).toMatchObject({ code: 'bridge_error', reason: 'rejected', bridge_status: 409, bridge_code: 'busy' });
      fake.answerOverride.health = { status: 500, body: 'not json at all' };
      const unreadable = await status();
      expect(unreadable).toMatchObject({ code: 'bridge_error', reason: 'unreadable', bridge_status: 500 });
      expect(unreadable.bridge_code).toBeUndefined();
    } finally {
      delete fake.answerOverride.health;
    }
  });

  it('POST /calls/:id/hangup: 502 bridge_protocol to the REST client, the call stays in flight and can be hung up again', async () => {
    const id = await inFlight();
    fake.answerOverride.hangup = { status: 200, body: { ok: 'sure' } };
    try {
      const r = await j(s.fetch(`${V1}/calls/${id}/hangup`, { method: 'POST', key: s.adminKey }));
      expect(r.status).toBe(502);
      expect(r.body).toEqual({ error: 'bridge_protocol', error_description: expect.stringMatching(/hangup outside the control contract: ok: /) });
      expect((await get(id)).status).toBe('in-flight');
    } finally {
      delete fake.answerOverride.hangup;
    }
    expect((await j(s.fetch(`${V1}/calls/${id}/hangup`, { method: 'POST', key: s.adminKey }))).body).toMatchObject({ ok: true, newStatus: 'cancelled' });
  });

  it('GET /calls: reconciling after a bridge restart decides nothing on it (logged), and does once the answer fits', async () => {
    const id = await inFlight();
    // Callbacks from a new bridge instance make the core reconcile its calls with GET /calls.
    const restarted = (): FakeBridge => new FakeBridge(TOKEN, fake.callbackUrl);
    const poke = (b: FakeBridge) => b.emit({ type: 'dialing', callId: 'oac-000000000000', trunkId: trunkId() });
    await poke(fake);
    fake.calls.delete(id); // the bridge no longer has it...
    fake.answerOverride.listCalls = { status: 200, body: { calls: [{ state: 'answered' }] } };
    try {
      await poke(restarted());
      await until(() => /bridge reconcile failed/.test(s.logs.text()), 3000, 'reconcile refused the answer');
      expect(s.logs.text()).toMatch(/GET \/calls outside the control contract: calls\.0\.callId: /);
      // ...but an answer outside the contract is no evidence of that: the call is kept.
      expect((await get(id)).status).toBe('in-flight');
    } finally {
      delete fake.answerOverride.listCalls;
    }
    await poke(restarted());
    const rec = await until(async () => ((await get(id)).status === 'ended-failed-final' ? get(id) : null), 3000, 'lost call failed');
    expect(rec).toMatchObject({ endedReason: 'failed', errorDetail: 'bridge restarted' });
  });
});

describe('callbacks outside the contract', () => {
  it('an ended event with an outcome outside the list is acknowledged as rejected, naming the field; the call is untouched', async () => {
    const id = await inFlight();
    const bad = await fake.emit(FakeBridge.ended(id, 'hung-up-by-robot'));
    expect(bad.status).toBe(200);
    expect(bad.body).toMatchObject({ ok: true, applied: false, rejected: expect.stringMatching(/^invalid field outcome: /) });
    expect((await get(id)).status).toBe('in-flight');
    expect((await fake.emit(FakeBridge.ended(id, 'finished'))).body).toMatchObject({ ok: true, applied: true });
  });

  it('empty-room is in the one outcome list, and an ended event with it is applied', async () => {
    expect(OUTCOMES).toContain('empty-room');
    const id = await inFlight();
    expect((await fake.emit(FakeBridge.ended(id, 'empty-room'))).body).toMatchObject({ ok: true, applied: true });
    expect(await get(id)).toMatchObject({ status: 'ended-success', endedReason: 'empty-room' });
  });
});

describe("the core's edge holds the bridge's limits", () => {
  const save = (over: Record<string, unknown>) =>
    j(adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'spare', name: 'Spare', host: '127.0.0.2', ...over }));
  // Three codecs and control characters in header fields: routes.test.ts (the contract's own check at save).
  it('a trunk with a codec twice answers 400 naming codecs', async () => {
    const r = await save({ codecs: ['PCMA', 'PCMA'] });
    expect(r.status).toBe(400);
    expect(r.body.field).toBe('codecs');
  });

  it('a call whose displayName or language the bridge would refuse answers 400 naming it, before anything is stored', async () => {
    const before = (await j(s.fetch(`${V1}/calls`, { key: s.adminKey }))).body.total as number;
    for (const [field, over] of [
      ['displayName', { displayName: 'Dr. Example\r\nX' }],
      ['language', { language: 'en-abcdefgh-abcdefgh-abcdefgh-abcdefgh' }],
    ] as const) {
      const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call(over) }));
      expect(r.status).toBe(400);
      expect(r.body.field).toBe(field);
    }
    expect((await j(s.fetch(`${V1}/calls`, { key: s.adminKey }))).body.total).toBe(before);
  });

  it('a stored trunk outside the contract (saved before the checks) is refused alone and logged with its reason; the others stay in service', async () => {
    expect((await save({})).status).toBe(200);
    await until(() => fake.trunks.length === 2, 3000, 'spare pushed');
    s.appliance.core.db.prepare(`UPDATE tel_trunks SET codecs = '["G722","PCMU","PCMA","PCMU"]' WHERE id = 'spare'`).run();
    const puts = fake.trunkPuts;
    expect((await save({ id: 'third', host: '127.0.0.3' })).status).toBe(200);
    await until(() => fake.trunkPuts > puts, 3000, 'trunk push after a save');
    expect(fake.trunks.map((t) => t.id).sort()).toEqual([trunkId(), `${s.primary.id}.third`]);
    // Logged once the bridge's answer is back, a moment after it counted the PUT.
    const logged = await until(
      () =>
        s.logs
          .text()
          .split('\n')
          .find((l) => l.includes('bridge refused some trunks')),
      3000,
      'refusal logged',
    );
    expect(logged).toContain(`${s.primary.id}.spare`);
    expect(logged).toMatch(/codecs: /);
  });
});
