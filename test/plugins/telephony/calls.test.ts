import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { adm, call, eventsOf, j, startSmtp, until, type Json } from './helpers.ts';
import { callCreate } from '../../../plugins/telephony/schemas.ts';

const TOKEN = 'fake-bridge-control-token-0123456789';
const V1 = '/api.ashx/v1';
const B = 'office-b.example';
let s: TestServer;
let fake: FakeBridge;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let clock: ManualClock;
let keyB: string;

beforeAll(async () => {
  fake = new FakeBridge(TOKEN, '');
  await fake.start();
  smtp = await startSmtp();
  clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
  s = await startTestServer({
    clock,
    overrides: {
      plugins: {
        telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN }, mail: { host: '127.0.0.1', port: smtp.port, from: 'calls@appliance.test' } },
      },
    },
  });
  fake.callbackUrl = `${s.url}/internal/bridge/events`;
  keyB = (await s.addTenant(B)).adminKey;
  expect(
    (await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1', password: 'trunk-pw-1', register: true })).status,
  ).toBe(200);
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'backup', name: 'Backup', host: '127.0.0.2' });
  await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
  await s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: '+49*', trunkIds: ['main', 'backup'] } });
});
afterAll(async () => {
  await s?.stop();
  await fake?.stop();
  await smtp?.stop();
});

const post = (json: unknown, host?: string, key = s.adminKey) => j(s.fetch(`${V1}/calls`, { method: 'POST', key, host, json }));
const get = (id: string) => j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey }));
const hangup = (id: string, key = s.adminKey, host?: string) => j(s.fetch(`${V1}/calls/${id}/hangup`, { method: 'POST', key, host }));
const placedFor = (id: string) => fake.placed.filter((p) => p.callId === id);

describe('POST /calls validation: every bad field answers 400 naming it', () => {
  const cases: [string, Record<string, unknown>][] = [
    ['phone', { phone: undefined }],
    ['phone', { phone: '030123456' }],
    ['phone', { phone: '+0301234' }],
    ['systemPrompt', { systemPrompt: '' }],
    ['email', { email: 'not-an-email' }],
    ['voice', { voice: 'Alloy' }],
    ['language', { language: 'english please' }],
    ['maxSeconds', { maxSeconds: 9 }],
    ['maxSeconds', { maxSeconds: 3601 }],
    ['maxSeconds', { maxSeconds: 30.5 }],
    ['retries', { retries: -1 }],
    ['retries', { retries: 11 }],
    ['retryDelayMinutes', { retryDelayMinutes: 0 }],
    ['retryDelayMinutes', { retryDelayMinutes: 1441 }],
    ['scheduleAtUtc', { scheduleAtUtc: 'tomorrow' }],
    ['scheduleAtUtc', { scheduleAtUtc: '2026-01-01T10:00:00' }], // no zone: whose 10 o'clock?
    ['displayName', { displayName: 'x'.repeat(101) }],
  ];
  it('scheduleAtUtc takes Z or an offset (Python writes +00:00) and keeps it as UTC', () => {
    const base = { phone: '+4930123456', systemPrompt: 'x' };
    expect(callCreate.parse({ ...base, scheduleAtUtc: '2030-01-01T10:00:00+00:00' }).scheduleAtUtc).toBe('2030-01-01T10:00:00.000Z');
    expect(callCreate.parse({ ...base, scheduleAtUtc: '2030-01-01T10:00:00+02:00' }).scheduleAtUtc).toBe('2030-01-01T08:00:00.000Z');
    expect(callCreate.parse({ ...base, scheduleAtUtc: '2030-01-01T10:00:00Z' }).scheduleAtUtc).toBe('2030-01-01T10:00:00.000Z');
  });
  for (const [field, over] of cases) {
    it(`${field} = ${JSON.stringify(Object.values(over)[0])}`, async () => {
      const r = await post(call(over));
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('invalid_request');
      expect(r.body.field).toBe(field);
      expect(r.body.error_description).toContain(field);
    });
  }
  it('apiKey may be omitted only when the tenant stores an engine key', async () => {
    const r = await post(call({ apiKey: undefined }), B, keyB);
    expect(r.status).toBe(400);
    expect(r.body.field).toBe('apiKey');
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { engineApiKey: 'AIza-tenant-b-key' }, B);
    const ok = await post(call({ apiKey: undefined, email: undefined }), B, keyB);
    expect(ok.status).toBe(200);
    // Tenant B has no trunk: the call fails at once, with the reason.
    expect(ok.body.ok).toBe(false);
    expect((await j(s.fetch(`${V1}/calls/${ok.body.callId}`, { key: keyB, host: B }))).body).toMatchObject({
      status: 'ended-failed-final',
      errorDetail: expect.stringContaining('no outbound route'),
    });
  });
  it('nothing is stored for a rejected request', async () => {
    const before = (await j(s.fetch(`${V1}/calls`, { key: s.adminKey }))).body.total;
    await post(call({ retries: 99 }));
    expect((await j(s.fetch(`${V1}/calls`, { key: s.adminKey }))).body.total).toBe(before);
  });
});

describe('placing a call', () => {
  let id = '';
  it('answers {ok, callId, tenant, whitelistAdded, whitelistError, bridgeReply} and hands the call to the bridge', async () => {
    const r = await post(call());
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, tenant: s.primary.host, whitelistAdded: true, whitelistError: null });
    expect(r.body.callId).toMatch(/^oac-[0-9a-f]{12}$/);
    expect(JSON.parse(r.body.bridgeReply)).toEqual({ accepted: true, callId: r.body.callId });
    id = r.body.callId;
    const [p] = placedFor(id);
    expect(p).toMatchObject({
      callId: id,
      tenantId: s.primary.id,
      phone: '+4930123456',
      displayName: 'Dr. Example',
      trunkIds: [`${s.primary.id}.main`, `${s.primary.id}.backup`],
      ringTimeoutSec: 45,
      maxSeconds: 300,
      engine: { apiKey: 'AIza-test-engine-key-42', voice: 'Aoede', language: 'en-US', systemPrompt: 'Confirm the appointment on Tuesday.' },
    });
    expect((await get(id)).body).toMatchObject({
      status: 'in-flight',
      attempt: 1,
      retriesLeft: 0,
      retryDelayMinutes: 5,
      requestedBy: 'admin',
      email: 'ops@example.com',
    });
  });
  it('whitelists the number once; the engine key is sealed and never returned or logged', async () => {
    const wl = (await j(adm(s, '/signal.ashx?whitelist=list', 'whitelist-list'))).body;
    expect(wl.map((e: Json) => e.number)).toContain('+4930123456');
    const again = await post(call());
    expect(again.body.whitelistAdded).toBe(false);
    await hangup(again.body.callId);
    const rec = await get(id);
    expect(JSON.stringify(rec.body)).not.toContain('AIza-test-engine-key-42');
    const row = s.appliance.core.db.prepare('SELECT api_key_sealed FROM tel_calls WHERE call_id = ?').get(id) as { api_key_sealed: string };
    expect(row.api_key_sealed).toMatch(/^v1\./);
    expect(s.logs.text()).not.toContain('AIza-test-engine-key-42');
  });
  it('trunks reach the bridge with decrypted passwords; registration status shows in trunks=list', async () => {
    await until(() => fake.trunks.length === 2, 3000, 'trunk push');
    expect(fake.trunks.find((t) => t.id === `${s.primary.id}.main`)).toMatchObject({ password: 'trunk-pw-1', register: true });
    const l = (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body;
    expect(l.trunks.find((t: Json) => t.id === 'main')).toMatchObject({ registered: true, lastError: null, hasPassword: true });
    expect(JSON.stringify(l)).not.toContain('trunk-pw-1');
  });
  it("bridge events drive the state machine and emit the spec's events in order", async () => {
    expect((await fake.emit({ type: 'dialing', callId: id, trunkId: `${s.primary.id}.main` })).body).toMatchObject({ ok: true, applied: true });
    const ans = await fake.emit({ type: 'answered', callId: id, trunkId: `${s.primary.id}.main`, answeredAt: '2026-01-01T00:00:10Z', answerMs: 2345 });
    expect(ans.body.applied).toBe(true);
    expect((await get(id)).body).toMatchObject({ status: 'in-flight', answeredAtUtc: '2026-01-01T00:00:10.000Z', trunkId: 'main' });
    const end = await fake.emit(FakeBridge.ended(id, 'finished', { trunkId: `${s.primary.id}.main` }));
    expect(end.body.applied).toBe(true);
    const rec = (await get(id)).body;
    expect(rec).toMatchObject({
      status: 'ended-success',
      endedReason: 'finished',
      durationSec: 42,
      endedAtUtc: '2026-01-01T00:00:52.000Z',
      transcriptPath: `${id}.json`,
      errorDetail: '',
    });
    const ev = eventsOf(s, id);
    expect(ev.map((e) => e.name)).toEqual(['call.answered', 'call.started', 'call.ended', 'outbound-ai.finished', 'transcript.saved']);
    expect(ev[0]!.data).toEqual({
      callId: id,
      phone: '+4930123456',
      displayName: 'Dr. Example',
      did: '',
      fromNumber: '',
      trunkId: 'main',
      direction: 'outbound',
      source: 'outbound-ai',
      answerMs: 2345,
    });
    expect(ev[1]!.data).toMatchObject({ callId: id, phone: '+4930123456', displayName: 'Dr. Example', direction: 'outbound', source: 'outbound-ai' });
    expect(ev[2]!.data).toEqual({ callId: id, number: '', room: '', outcome: 'finished', durationSec: 42, tokens: 1234, source: 'sip' });
    expect(ev[3]!.data).toEqual({
      callId: id,
      phone: '+4930123456',
      displayName: 'Dr. Example',
      outcome: 'finished',
      answered: true,
      talkSec: 42,
      trunk: 'main',
      inputTurns: 1,
      outputTurns: 2,
      errorDetail: '',
    });
    expect(ev[4]!.data).toEqual({
      callId: id,
      phone: '+4930123456',
      displayName: 'Dr. Example',
      number: '',
      file: `${id}.json`,
      outcome: 'finished',
      source: 'outbound-ai',
    });
  });
  it('a retried callback (same seq) and a late duplicate (new seq) change nothing', async () => {
    const dup = await fake.emit(FakeBridge.ended(id, 'failed'), { seq: 3 });
    expect(dup.body.applied).toBe(false);
    const late = await fake.emit(FakeBridge.ended(id, 'failed'));
    expect(late.body.applied).toBe(false);
    expect((await get(id)).body.status).toBe('ended-success');
    expect(eventsOf(s, id)).toHaveLength(5);
  });
  it("the transcript is saved with the spec's fields and listed", async () => {
    const t = (await j(s.fetch(`${V1}/transcripts/${id}`, { key: s.adminKey }))).body;
    expect(t).toMatchObject({
      callId: id,
      callerSource: 'outbound-ai',
      tenant: s.primary.host,
      requestedBy: 'admin',
      phone: '+4930123456',
      displayName: 'Dr. Example',
      email: 'ops@example.com',
      voice: 'Aoede',
      language: 'en-US',
      model: 'gemini-live-test',
      trunkId: 'main',
      answeredUtc: '2026-01-01T00:00:10.000Z',
      endedUtc: '2026-01-01T00:00:52.000Z',
      durationSec: 42,
      answered: true,
      outcome: 'finished',
      errorDetail: '',
      inputTurns: 1,
      outputTurns: 2,
      tokensTotal: 1234,
    });
    expect(t.turns).toHaveLength(3);
    expect(t.turns[1]).toEqual({ speaker: 'Caller', text: 'Oh hi, yes, Tuesday works.', ts: '2026-01-01T00:00:15.000Z' });
    const l = (await j(s.fetch(`${V1}/transcripts`, { key: s.adminKey }))).body;
    expect(l.data.find((x: Json) => x.callId === id)).toMatchObject({
      callId: id,
      callerSource: 'outbound-ai',
      source: 'outbound-ai',
      outcome: 'finished',
      turnCount: 3,
      tokensTotal: 1234,
      tokensPrompt: 800,
      file: `${id}.json`,
      phone: '+4930123456',
    });
    expect(l.data.find((x: Json) => x.callId === id).size).toBeGreaterThan(100);
    expect((await j(s.fetch(`${V1}/transcripts/oac-000000000000`, { key: s.adminKey }))).body.error).toBe('not_found');
  });
  it('the outcome mail with the transcript reaches the SMTP relay', async () => {
    await until(() => smtp.mails.find((m) => m.data.includes(id)), 5000, 'outcome mail');
    const m = smtp.mails.find((x) => x.data.includes(id))!;
    expect(m.to).toEqual(['ops@example.com']);
    expect(m.from).toBe('calls@appliance.test');
    expect(m.data).toContain('Outcome: finished');
    // Quoted-printable body (RFC 2045 §6.7): undo soft line breaks and =XX escapes.
    const text = m.data.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_x, h: string) => String.fromCharCode(parseInt(h, 16)));
    expect(text).toContain('Caller: Oh hi, yes, Tuesday works.');
    expect(text).toContain(`filename=${id}.json`);
  });
});

describe('every outcome', () => {
  const expected: Record<string, { status: string; transcript: boolean }> = {
    'far-hangup': { status: 'ended-success', transcript: true },
    voicemail: { status: 'ended-success', transcript: true },
    'not-now': { status: 'ended-success', transcript: true },
    'max-duration': { status: 'ended-success', transcript: true },
    'transferred-to-vnum': { status: 'ended-success', transcript: true },
    'no-answer': { status: 'ended-failed-final', transcript: false },
    busy: { status: 'ended-failed-final', transcript: false },
    failed: { status: 'ended-failed-final', transcript: false },
  };
  for (const [outcome, want] of Object.entries(expected)) {
    it(`${outcome} → ${want.status}`, async () => {
      const id = (await post(call({ email: undefined }))).body.callId as string;
      await fake.emit(FakeBridge.ended(id, outcome));
      const rec = (await get(id)).body;
      expect(rec).toMatchObject({ status: want.status, endedReason: outcome, transcriptPath: want.transcript ? `${id}.json` : '' });
      if (outcome === 'failed') expect(rec.errorDetail).toBe('SIP 503 from trunk');
      const names = eventsOf(s, id).map((e) => e.name);
      expect(names).toEqual(['call.ended', 'outbound-ai.finished', ...(want.transcript ? ['transcript.saved'] : [])]);
      expect(eventsOf(s, id)[1]!.data).toMatchObject({ outcome, answered: want.transcript });
    });
  }
  it("transferred emits call.transferred with the spec's fields", async () => {
    const id = (await post(call({ email: undefined }))).body.callId as string;
    await fake.emit({
      type: 'transferred',
      callId: id,
      toUser: 'alice',
      toPhone: '+4930999',
      transferType: 'outbound-to-user',
      trunkId: `${s.primary.id}.main`,
    });
    expect(eventsOf(s, id)[0]).toEqual({
      name: 'call.transferred',
      data: {
        callId: id,
        fromVnum: '',
        fromOutbound: id,
        fromPhone: '+4930123456',
        toUser: 'alice',
        toPhone: '+4930999',
        transferType: 'outbound-to-user',
        trunkId: 'main',
        room: '',
        source: 'outbound-ai',
      },
    });
    await hangup(id);
  });
});

describe('hangup', () => {
  it('scheduled → cancelled, and the dial job never runs', async () => {
    const r = await post(call({ scheduleAtUtc: '2026-01-01T06:00:00Z' }));
    expect(r.body).toMatchObject({ ok: true, bridgeReply: 'scheduled for 2026-01-01T06:00:00.000Z' });
    expect((await get(r.body.callId)).body).toMatchObject({ status: 'scheduled', scheduledForUtc: '2026-01-01T06:00:00.000Z', attempt: 0 });
    // Clients that always send a JSON body send `{}`: that is still no body.
    const h = await j(s.fetch(`${V1}/calls/${r.body.callId}/hangup`, { method: 'POST', key: s.adminKey, json: {} }));
    expect(h.body).toEqual({ ok: true, callId: r.body.callId, newStatus: 'cancelled', actor: 'admin' });
    expect((await j(s.fetch(`${V1}/calls/${r.body.callId}/hangup`, { method: 'POST', key: s.adminKey, json: { reason: 'x' } }))).status).toBe(400);
    clock.advance(7 * 3600_000);
    s.appliance.core.jobs.kick();
    await new Promise((res) => setTimeout(res, 200));
    expect(placedFor(r.body.callId)).toHaveLength(0);
    expect((await get(r.body.callId)).body.status).toBe('cancelled');
  });
  it('in-flight → cancelled; the bridge is told to hang up (BYE) and its ended event fills the record', async () => {
    const id = (await post(call({ email: undefined }))).body.callId as string;
    await fake.emit({ type: 'answered', callId: id, trunkId: `${s.primary.id}.main`, answeredAt: '2026-01-01T07:00:01Z', answerMs: 900 });
    const h = await hangup(id);
    expect(h.body).toEqual({ ok: true, callId: id, newStatus: 'cancelled', actor: 'admin' });
    expect(fake.hangups).toContain(id);
    const rec = await until(
      async () => {
        const b = (await get(id)).body;
        return b.endedAtUtc ? b : null;
      },
      3000,
      'ended after hangup',
    );
    expect(rec).toMatchObject({ status: 'cancelled', endedReason: 'cancelled' });
    expect(eventsOf(s, id).map((e) => e.name)).toContain('outbound-ai.finished');
  });
  it('in-flight but unknown to the bridge (404 there) → cancelled and ended at once', async () => {
    const id = (await post(call({ email: undefined }))).body.callId as string;
    fake.calls.delete(id);
    expect((await hangup(id)).body).toMatchObject({ ok: true, newStatus: 'cancelled' });
    expect((await get(id)).body).toMatchObject({ status: 'cancelled', endedReason: 'cancelled', endedAtUtc: expect.any(String) });
  });
  it("a call the bridge refuses (503 no_capacity) answers ok:false with the bridge's reply and ends failed", async () => {
    fake.placeOverride = { status: 503, body: { error: 'no_capacity', error_description: 'all trunks busy' } };
    try {
      const r = await post(call({ email: undefined }));
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ ok: false, status: 'ended-failed-final' });
      expect(JSON.parse(r.body.bridgeReply)).toEqual({ error: 'no_capacity', error_description: 'all trunks busy' });
      expect((await get(r.body.callId)).body.errorDetail).toContain('no_capacity');
    } finally {
      fake.placeOverride = undefined;
    }
  });
  it('a bridge answer outside the control contract is 502 bridge_protocol naming the field, and the call ends failed', async () => {
    // A 202 without `accepted: true` (say, a bridge of another protocol version): not taken as accepted.
    fake.placeOverride = { status: 202, body: { callId: 'x' } };
    try {
      const r = await post(call({ email: undefined }));
      expect(r.status).toBe(502);
      expect(r.body).toMatchObject({ error: 'bridge_protocol' });
      expect(r.body.error_description).toMatch(/POST \/calls outside the control contract: accepted: /);
      expect((await get(r.body.callId)).body).toMatchObject({ status: 'ended-failed-final' });
    } finally {
      fake.placeOverride = undefined;
    }
  });
  it('dispatching (the bridge still taking it) → cancelled; the bridge is told as soon as it has the call', async () => {
    fake.placeDelayMs = 400;
    try {
      const pending = post(call({ email: undefined }));
      const row = await until(
        () => s.appliance.core.db.prepare("SELECT call_id FROM tel_calls WHERE status = 'dispatching'").get() as { call_id: string } | undefined,
        3000,
        'dispatching',
      );
      const h = await hangup(row.call_id);
      expect(h.body).toMatchObject({ ok: true, callId: row.call_id, newStatus: 'cancelled' });
      expect((await pending).body.callId).toBe(row.call_id);
      await until(() => fake.hangups.includes(row.call_id), 3000, 'hangup sent after accept');
      const rec = await until(
        async () => {
          const b = (await get(row.call_id)).body;
          return b.endedAtUtc ? b : null;
        },
        3000,
        'ended',
      );
      expect(rec).toMatchObject({ status: 'cancelled', endedReason: 'cancelled' });
    } finally {
      fake.placeDelayMs = 0;
    }
  });
  it('already ended → {ok:true, wasNoop:true}; unknown → 404 not_found', async () => {
    const id = (await post(call({ email: undefined }))).body.callId as string;
    await fake.emit(FakeBridge.ended(id, 'finished'));
    expect((await hangup(id)).body).toMatchObject({ ok: true, wasNoop: true });
    const nf = await hangup('oac-0123456789ab');
    expect(nf.status).toBe(404);
    expect(nf.body.error).toBe('not_found');
  });
});

describe('retries on no-answer and busy', () => {
  it('retry after retryDelayMinutes through the job queue, until retries run out; one mail at the end', async () => {
    const r = await post(call({ retries: 2, retryDelayMinutes: 5, email: 'retry@example.com' }));
    const id = r.body.callId as string;
    await fake.emit(FakeBridge.ended(id, 'no-answer'));
    expect((await get(id)).body).toMatchObject({ status: 'ended-failed-retry-pending', endedReason: 'no-answer', attempt: 1, retriesLeft: 1 });
    clock.advance(4 * 60_000);
    s.appliance.core.jobs.kick();
    await new Promise((res) => setTimeout(res, 150));
    expect(placedFor(id)).toHaveLength(1);
    clock.advance(60_000 + 1);
    s.appliance.core.jobs.kick();
    await until(() => placedFor(id).length === 2, 3000, 'second attempt');
    await until(async () => (await get(id)).body.status === 'in-flight', 3000, 'in flight again');
    expect((await get(id)).body).toMatchObject({ attempt: 2, retriesLeft: 1, endedReason: '', endedAtUtc: null });
    await fake.emit(FakeBridge.ended(id, 'busy'));
    expect((await get(id)).body).toMatchObject({ status: 'ended-failed-retry-pending', attempt: 2, retriesLeft: 0 });
    clock.advance(5 * 60_000 + 1);
    s.appliance.core.jobs.kick();
    await until(() => placedFor(id).length === 3, 3000, 'third attempt');
    await until(async () => (await get(id)).body.status === 'in-flight', 3000, 'in flight again');
    await fake.emit(FakeBridge.ended(id, 'no-answer'));
    expect((await get(id)).body).toMatchObject({ status: 'ended-failed-final', attempt: 3, retriesLeft: 0 });
    await until(() => smtp.mails.some((m) => m.to.includes('retry@example.com')), 5000, 'final mail');
    await new Promise((res) => setTimeout(res, 100));
    expect(smtp.mails.filter((m) => m.to.includes('retry@example.com'))).toHaveLength(1);
  });
  it('hangup of a retry-pending call is a no-op (spec: an ended state); ?cancelRetry=true stops the retry', async () => {
    const id = (await post(call({ retries: 1, email: undefined }))).body.callId as string;
    await fake.emit(FakeBridge.ended(id, 'busy'));
    expect((await hangup(id)).body).toEqual({ ok: true, wasNoop: true, callId: id, status: 'ended-failed-retry-pending' });
    expect((await get(id)).body.status).toBe('ended-failed-retry-pending');
    const r = await j(s.fetch(`${V1}/calls/${id}/hangup?cancelRetry=true`, { method: 'POST', key: s.adminKey }));
    expect(r.body).toMatchObject({ ok: true, newStatus: 'cancelled' });
    expect((await get(id)).body.status).toBe('cancelled');
    clock.advance(10 * 60_000);
    s.appliance.core.jobs.kick();
    await new Promise((res) => setTimeout(res, 150));
    expect(placedFor(id)).toHaveLength(1);
  });
  it('the no-op hangup leaves the pending retry as it was: it still dials; cancelRetry takes only true or false', async () => {
    const id = (await post(call({ retries: 1, retryDelayMinutes: 5, email: undefined }))).body.callId as string;
    await fake.emit(FakeBridge.ended(id, 'no-answer'));
    const before = (await get(id)).body;
    expect((await hangup(id)).body).toMatchObject({ ok: true, wasNoop: true });
    expect((await j(s.fetch(`${V1}/calls/${id}/hangup?cancelRetry=false`, { method: 'POST', key: s.adminKey }))).body).toMatchObject({ wasNoop: true });
    const bad = await j(s.fetch(`${V1}/calls/${id}/hangup?cancelRetry=yes`, { method: 'POST', key: s.adminKey }));
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('cancelRetry');
    expect((await get(id)).body).toEqual(before);
    clock.advance(5 * 60_000 + 1);
    s.appliance.core.jobs.kick();
    await until(() => placedFor(id).length === 2, 3000, 'the retry dials after a no-op hangup');
    await until(async () => (await get(id)).body.status === 'in-flight', 3000, 'retry in flight');
    await hangup(id);
  });
  it('not-now and failed are not retried', async () => {
    for (const o of ['not-now', 'failed']) {
      const id = (await post(call({ retries: 3, email: undefined }))).body.callId as string;
      await fake.emit(FakeBridge.ended(id, o));
      expect((await get(id)).body.retriesLeft).toBe(3);
      expect((await get(id)).body.status).not.toBe('ended-failed-retry-pending');
    }
  });
});

describe('lists, filters and tenants', () => {
  it('GET /calls filters by comma-separated states; an unknown state is a 400', async () => {
    const l = (await j(s.fetch(`${V1}/calls?status=ended-success,cancelled&limit=500`, { key: s.adminKey }))).body;
    expect(l.total).toBeGreaterThan(3);
    expect(new Set(l.data.map((c: Json) => c.status))).toEqual(new Set(['ended-success', 'cancelled']));
    const p = (await j(s.fetch(`${V1}/calls?limit=2`, { key: s.adminKey }))).body;
    expect(p.data).toHaveLength(2);
    expect(p.next).toBe('/api.ashx/v1/calls?limit=2&offset=2');
    const bad = await j(s.fetch(`${V1}/calls?status=ringing`, { key: s.adminKey }));
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe('status');
  });
  it('GET /transcripts: source, q, since, newest first', async () => {
    const all = (await j(s.fetch(`${V1}/transcripts?limit=500`, { key: s.adminKey }))).body;
    expect(all.total).toBeGreaterThan(3);
    const starts = all.data.map((t: Json) => t.startedUtc);
    expect([...starts].sort().reverse()).toEqual(starts);
    expect((await j(s.fetch(`${V1}/transcripts?source=vnum`, { key: s.adminKey }))).body.total).toBe(0);
    expect((await j(s.fetch(`${V1}/transcripts?source=outbound-ai`, { key: s.adminKey }))).body.total).toBe(all.total);
    expect((await j(s.fetch(`${V1}/transcripts?source=both`, { key: s.adminKey }))).body.total).toBe(all.total); // the documented default
    expect((await j(s.fetch(`${V1}/transcripts?q=Dr.%20Ex`, { key: s.adminKey }))).body.total).toBe(all.total);
    expect((await j(s.fetch(`${V1}/transcripts?q=nobody`, { key: s.adminKey }))).body.total).toBe(0);
    expect((await j(s.fetch(`${V1}/transcripts?since=2030-01-01T00:00:00Z`, { key: s.adminKey }))).body.total).toBe(0);
    expect((await j(s.fetch(`${V1}/transcripts?since=nonsense`, { key: s.adminKey }))).status).toBe(400);
  });
  it("tenant B sees none of A's calls or transcripts and cannot hang them up", async () => {
    const a = (await j(s.fetch(`${V1}/calls?limit=1`, { key: s.adminKey }))).body.data[0].callId;
    expect((await j(s.fetch(`${V1}/calls/${a}`, { key: keyB, host: B }))).status).toBe(404);
    expect((await hangup(a, keyB, B)).status).toBe(404);
    const bl = (await j(s.fetch(`${V1}/calls`, { key: keyB, host: B }))).body;
    expect(bl.data.every((c: Json) => c.tenant === B)).toBe(true);
    expect((await j(s.fetch(`${V1}/transcripts`, { key: keyB, host: B }))).body.total).toBe(0);
  });
});

describe('the bridge callback endpoint', () => {
  it('refuses a wrong control token (401) and a missing X-Bridge-Instance (400); acknowledges unknown and malformed events', async () => {
    expect((await fake.emit({ type: 'dialing', callId: 'oac-000000000000', trunkId: 'x' }, { token: 'wrong-token' })).status).toBe(401);
    const r = await fetch(`${s.url}/internal/bridge/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ seq: 1, type: 'dialing', callId: 'x', trunkId: 'y' }),
    });
    expect(r.status).toBe(400);
    expect((await fake.emit({ type: 'dtmf', callId: 'oac-000000000000' })).body).toMatchObject({ ok: true, applied: false });
    // Malformed events are acknowledged (rejected), never answered 4xx: the bridge's queue is in order.
    const bad = await fake.emit({ type: 'answered', callId: 'oac-000000000000', answerMs: 'soon' });
    expect(bad.status).toBe(200);
    expect(bad.body).toMatchObject({ ok: true, applied: false, rejected: expect.stringContaining('trunkId') });
  });
});

describe('the calls list filters and the figures (the console’s Calls page and dashboard)', () => {
  const list = async (q: string) => (await j(s.fetch(`${V1}/calls?${q}`, { key: s.adminKey }))).body;
  it('filters by state, number prefix and a created_at range; bad values are 400 naming the parameter', async () => {
    const all = await list('limit=500');
    expect(all.total).toBeGreaterThan(2);
    const byPhone = await list(`phone=${encodeURIComponent('+4930')}&limit=500`);
    expect(byPhone.data.length).toBeGreaterThan(0);
    expect(byPhone.data.every((c: Json) => c.phone.startsWith('+4930'))).toBe(true);
    expect((await list('phone=%2B99999')).total).toBe(0);
    // A LIKE wildcard in the prefix is a literal, not a match-all.
    expect((await j(s.fetch(`${V1}/calls?phone=%25`, { key: s.adminKey }))).status).toBe(400);
    const first = all.data.at(-1).createdAtUtc as string;
    expect((await list(`since=${encodeURIComponent(first)}&limit=500`)).total).toBe(all.total);
    expect((await list(`until=${encodeURIComponent(first)}`)).total).toBe(0);
    expect((await list('since=2999-01-01T00:00:00Z')).total).toBe(0);
    const bad = await j(s.fetch(`${V1}/calls?since=yesterday`, { key: s.adminKey }));
    expect(bad.status).toBe(400);
    expect(bad.body.error_description).toContain('since');
    const ended = await list('status=ended-success,ended-failed-final&limit=500');
    expect(ended.data.every((c: Json) => ['ended-success', 'ended-failed-final'].includes(c.status))).toBe(true);
  });

  it('figures: totals by state and per hour add up to the list; tenant B sees only its own', async () => {
    const all = await list('limit=500');
    const st = (await j(s.fetch(`${V1}/calls/stats?since=2000-01-01T00:00:00Z`, { key: s.adminKey }))).body;
    expect(st.total).toBe(all.total);
    // Without since: the last 24 hours of the appliance clock, within which every call here was made.
    expect((await j(s.fetch(`${V1}/calls/stats`, { key: s.adminKey }))).body.total).toBe(all.total);
    const byState: Record<string, number> = {};
    for (const c of all.data) byState[c.status] = (byState[c.status] ?? 0) + 1;
    expect(st.byStatus).toEqual(byState);
    expect(st.hours.reduce((n: number, h: Json) => n + Object.values(h.counts as Record<string, number>).reduce((a, b) => a + b, 0), 0)).toBe(all.total);
    expect(st.hours[0].hour).toMatch(/^\d{4}-\d\d-\d\dT\d\d:00:00Z$/);
    expect(st.inFlight).toBe((byState['dispatching'] ?? 0) + (byState['in-flight'] ?? 0));
    const b = (await j(s.fetch(`${V1}/calls/stats?since=2000-01-01T00:00:00Z`, { key: keyB, host: B }))).body;
    expect(b.total).toBe((await j(s.fetch(`${V1}/calls`, { key: keyB, host: B }))).body.total);
  });
});
