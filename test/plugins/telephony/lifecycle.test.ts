import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { adm, call, eventsOf, j, type Json } from './helpers.ts';
import { until } from './helpers.ts';

const TOKEN = 'fake-bridge-control-token-lifecycle-01';
const V1 = '/api.ashx/v1';
const T0 = Date.parse('2026-03-01T08:00:00Z');

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('no bridge, or one that does not answer', () => {
  it('503 bridge_not_configured when the bridge mode is off, and nothing is stored', async () => {
    const s = await startTestServer();
    try {
      const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call() }));
      expect(r.status).toBe(503);
      expect(r.body).toEqual({ error: 'bridge_not_configured', error_description: expect.stringContaining('no telephony bridge is configured') });
      expect((await j(s.fetch(`${V1}/calls`, { key: s.adminKey }))).body.total).toBe(0);
    } finally {
      await s.stop();
    }
  });
  it('502 bridge_unreachable when the bridge URL does not answer; the call ends failed with the reason', async () => {
    const port = await freePort();
    const s = await startTestServer({
      overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: `http://127.0.0.1:${port}`, token: TOKEN, requestTimeoutMs: 1000 } } } },
    });
    try {
      await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' });
      await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
      const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call() }));
      expect(r.status).toBe(502);
      expect(r.body.error).toBe('bridge_unreachable');
      expect(r.body.error_description).toContain(`http://127.0.0.1:${port}`);
      expect(r.body.callId).toMatch(/^oac-/);
      const rec = (await j(s.fetch(`${V1}/calls/${r.body.callId}`, { key: s.adminKey }))).body;
      expect(rec).toMatchObject({ status: 'ended-failed-final', endedReason: 'failed', errorDetail: expect.stringContaining('did not answer') });
      // The trunk list still answers; registration status is unknown.
      const l = (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body;
      expect(l.trunks[0]).toMatchObject({ id: 'main', registered: null });
    } finally {
      await s.stop();
    }
  });
  it('a remote bridge that answers with 401 (another token) is down from the start, and its trunks are never pushed', async () => {
    const other = new FakeBridge('another-control-token-0123456789', '');
    await other.start();
    const s = await startTestServer({ overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: other.url, token: TOKEN } } } } });
    try {
      const st = await until(
        async () => {
          const b = (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body;
          return b.state === 'starting' ? null : b;
        },
        3000,
        'greeted',
      );
      expect(st).toMatchObject({ ok: false, state: 'down', health: { error: expect.stringContaining('GET /health with 401 invalid_token') } });
      expect(s.logs.text()).toContain('remote bridge not usable at start');
      await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' });
      await new Promise((r) => setTimeout(r, 100));
      expect(other.trunkPuts).toBe(0);
    } finally {
      await s.stop();
      await other.stop();
    }
  });
});

describe('a restart of the appliance neither loses nor doubles a call', () => {
  let fake: FakeBridge;
  let dataDir: string;
  const servers: TestServer[] = [];
  beforeAll(async () => {
    fake = new FakeBridge(TOKEN, '');
    await fake.start();
    dataDir = tempDir();
  });
  afterAll(async () => {
    for (const s of servers) await s.stop().catch(() => {});
    await fake.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  async function boot(at: number): Promise<{ s: TestServer; clock: ManualClock }> {
    const clock = new ManualClock(at);
    const s = await startTestServer({ dataDir, clock, overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN } } } } });
    servers.push(s);
    fake.callbackUrl = `${s.url}/internal/bridge/events`;
    return { s, clock };
  }
  const placed = (id: string) => fake.placed.filter((p) => p.callId === id).length;

  it('a scheduled call dials once, at its time, after a restart in between', async () => {
    const { s } = await boot(T0);
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' });
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
    const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ scheduleAtUtc: '2026-03-01T09:00:00Z' }) }));
    expect(r.body.bridgeReply).toBe('scheduled for 2026-03-01T09:00:00.000Z');
    const id = r.body.callId as string;
    await s.stop();
    expect(placed(id)).toBe(0);

    const { s: s2, clock } = await boot(T0 + 30 * 60_000);
    await new Promise((res) => setTimeout(res, 150));
    expect(placed(id)).toBe(0);
    clock.set(Date.parse('2026-03-01T09:00:00Z'));
    s2.appliance.core.jobs.kick();
    await until(() => placed(id) === 1, 3000, 'scheduled dial');
    await until(async () => (await j(s2.fetch(`${V1}/calls/${id}`, { key: s2.adminKey }))).body.status === 'in-flight', 3000, 'in flight');
    clock.advance(3600_000);
    s2.appliance.core.jobs.kick();
    await new Promise((res) => setTimeout(res, 200));
    expect(placed(id)).toBe(1);
    expect((await j(s2.fetch(`${V1}/calls/${id}`, { key: s2.adminKey }))).body).toMatchObject({ attempt: 1, dispatchedAtUtc: '2026-03-01T09:00:00.000Z' });
    await fake.emit(FakeBridge.ended(id, 'finished'));
    await s2.stop();
  });

  it('a pending retry survives a restart and runs exactly once', async () => {
    const { s } = await boot(T0 + 2 * 3600_000);
    const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ retries: 1, retryDelayMinutes: 10 }) }));
    const id = r.body.callId as string;
    expect(placed(id)).toBe(1);
    await fake.emit(FakeBridge.ended(id, 'no-answer'));
    expect((await j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey }))).body).toMatchObject({ status: 'ended-failed-retry-pending', retriesLeft: 0 });
    await s.stop();

    const { s: s2, clock } = await boot(T0 + 2 * 3600_000 + 11 * 60_000);
    await until(() => placed(id) === 2, 3000, 'retry after restart');
    await until(async () => (await j(s2.fetch(`${V1}/calls/${id}`, { key: s2.adminKey }))).body.status === 'in-flight', 3000, 'in flight');
    clock.advance(3600_000);
    s2.appliance.core.jobs.kick();
    await new Promise((res) => setTimeout(res, 200));
    expect(placed(id)).toBe(2);
    await fake.emit(FakeBridge.ended(id, 'finished'));
    expect((await j(s2.fetch(`${V1}/calls/${id}`, { key: s2.adminKey }))).body).toMatchObject({ status: 'ended-success', attempt: 2 });
    expect(
      eventsOf(s2, id)
        .filter((e) => e.name === 'outbound-ai.finished')
        .map((e) => e.data.outcome),
    ).toEqual(['no-answer', 'finished']);
    await s2.stop();
  });
});

/** A server whose remote bridge is fake bridge A (its port, for a B started after it), with trunk main. */
async function withRemoteBridge(): Promise<{ a: FakeBridge; port: number; s: TestServer }> {
  const a = new FakeBridge(TOKEN, '');
  await a.start();
  const s = await startTestServer({
    overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: a.url, token: TOKEN, healthPollMs: 100, requestTimeoutMs: 500 } } } },
  });
  a.callbackUrl = `${s.url}/internal/bridge/events`;
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' });
  return { a, port: Number(new URL(a.url).port), s };
}

describe('a remote bridge that restarts', () => {
  it('gets the trunk set again, and the calls it lost end as failed', async () => {
    const { a, port, s } = await withRemoteBridge();
    let b: FakeBridge | undefined;
    try {
      await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
      await until(() => a.trunks.length === 1, 3000, 'trunks at A');
      const id = (await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ email: undefined }) }))).body.callId as string;
      await a.emit({ type: 'answered', callId: id, trunkId: `${s.primary.id}.main`, answeredAt: new Date().toISOString(), answerMs: 100 });
      await a.stop();
      await until(async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.state === 'down', 3000, 'bridge seen down');
      b = new FakeBridge(TOKEN, `${s.url}/internal/bridge/events`);
      await b.start(port);
      await until(() => b!.trunks.length === 1, 3000, 'trunks pushed to the restarted bridge');
      const rec = await until(
        async () => {
          const x = (await j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey }))).body;
          return x.status === 'ended-failed-final' ? x : null;
        },
        3000,
        'lost call failed',
      );
      expect(rec.errorDetail).toBe('bridge restarted');
    } finally {
      await s.stop();
      await b?.stop();
    }
  });
});

describe('a remote bridge that restarts with inbound calls open', () => {
  it('ends the inbound calls it no longer lists as failed with their call.ended, and keeps the one it still carries', async () => {
    const { a, port, s } = await withRemoteBridge();
    let b: FakeBridge | undefined;
    try {
      expect(
        (await adm(s, '/signal.ashx?numbers=save', 'numbers-save', { number: '+4930555000', name: 'Reception', geminiApiKey: 'AIza-lifecycle-key' })).status,
      ).toBe(200);
      expect((await s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: '+4930555000', User: '+4930555000' } })).status).toBe(201);
      await until(() => a.trunks.length === 1, 3000, 'trunks at A');
      const trunkId = `${s.primary.id}.main`;
      const ask = async () => {
        const r = await a.askInbound({ trunkId, did: '+4930555000', from: '+4917612345678' });
        expect(r.body).toMatchObject({ accept: true });
        return r.body.callId as string;
      };
      const lost = await ask();
      const kept = await ask();
      for (const id of [lost, kept]) await a.emit({ type: 'answered', callId: id, trunkId, answeredAt: new Date().toISOString(), answerMs: 80 });
      const row = (id: string) => s.appliance.core.db.prepare('SELECT * FROM tel_inbound_calls WHERE call_id = ?').get(id) as Json;
      expect(row(lost)).toMatchObject({ ended_at: null });

      await a.stop();
      await until(async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.state === 'down', 3000, 'bridge seen down');
      b = new FakeBridge(TOKEN, `${s.url}/internal/bridge/events`);
      b.carry(kept, trunkId);
      await b.start(port);
      await until(() => row(lost).ended_at !== null, 3000, 'lost inbound call ended');
      expect(row(lost)).toMatchObject({ status: 'ended', outcome: 'failed', error_detail: 'bridge restarted' });
      expect(row(lost).answered_at).not.toBe('');
      const ended = eventsOf(s, lost).filter((e) => e.name === 'call.ended');
      expect(ended).toHaveLength(1);
      expect(ended[0]!.data).toMatchObject({ callId: lost, outcome: 'failed', source: 'sip', number: '+4930555000' });
      // The bridge still carries the other one: it stays open and ends when the bridge says so.
      expect(row(kept)).toMatchObject({ ended_at: null });
      expect((await b.emit(FakeBridge.ended(kept, 'finished'))).status).toBe(200);
      expect(row(kept)).toMatchObject({ status: 'ended', outcome: 'finished' });
    } finally {
      await s.stop();
      await b?.stop();
    }
  });
});

describe('settings', () => {
  it('a remote bridge without url/token stops the start naming the setting', async () => {
    await expect(startTestServer({ overrides: { plugins: { telephony: { bridge: { mode: 'remote' } } } } })).rejects.toThrow(
      /plugins\.telephony\.bridge\.url: mode remote needs url and token/,
    );
  });
});
