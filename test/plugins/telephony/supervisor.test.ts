import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { adm, call, eventsOf, j, until, type Json } from './helpers.ts';

const V1 = '/api.ashx/v1';

/**
 * Embedded mode: the plugin spawns the bridge entry (here the fake bridge as a process, which
 * speaks CONTROL-API.md), waits for its bridge-ready line, pushes trunks, restarts it with backoff
 * when it dies, and ends the calls it carried as failed ('bridge restarted').
 */
const config = (entry = 'test/support/fake-bridge-main.ts') => ({
  plugins: { telephony: { bridge: { mode: 'embedded', entry, sipPort: 0, restartMinMs: 100, restartMaxMs: 1000, readyTimeoutMs: 15_000 } } },
});

async function status(s: TestServer): Promise<Json> {
  return (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body;
}
async function fakeState(url: string): Promise<Json> {
  return (await fetch(`${url}/_test/state`)).json();
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('embedded bridge supervision', () => {
  const dataDir = tempDir();
  let s: TestServer | undefined;
  afterAll(async () => {
    await s?.stop().catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('spawns the bridge, pushes trunks, restarts it when it dies and fails the calls it carried', async () => {
    s = await startTestServer({ dataDir, overrides: config() });
    const st = await until(
      async () => {
        const b = await status(s!);
        return b.state === 'ready' ? b : null;
      },
      15_000,
      'bridge ready',
    );
    expect(st).toMatchObject({ ok: true, mode: 'embedded', health: { status: 'ok' } });
    const pid1 = st.pid as number;
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1', password: 'pw-embedded' });
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
    await until(async () => (await fakeState(st.controlUrl)).trunks.length === 1, 3000, 'trunk push');
    expect((await fakeState(st.controlUrl)).trunks[0]).toMatchObject({ id: `${s.primary.id}.main`, password: 'pw-embedded' });

    const id = (await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ email: undefined }) }))).body.callId as string;
    await fetch(`${st.controlUrl}/_test/emit`, {
      method: 'POST',
      body: JSON.stringify({ type: 'answered', callId: id, trunkId: `${s.primary.id}.main`, answeredAt: new Date().toISOString(), answerMs: 500 }),
    });
    await until(async () => (await j(s!.fetch(`${V1}/calls/${id}`, { key: s!.adminKey }))).body.answeredAtUtc, 3000, 'answered');

    // An inbound call the bridge carries (it asked the core where the INVITE goes).
    await adm(s, '/signal.ashx?numbers=save', 'numbers-save', { number: '+4930555000', name: 'Reception', geminiApiKey: 'AIza-embedded-key' });
    await s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: '+4930555000', User: '+4930555000' } });
    const askInbound = async (url: string): Promise<string> => {
      const r = (await (
        await fetch(`${url}/_test/inbound`, {
          method: 'POST',
          body: JSON.stringify({ trunkId: `${s!.primary.id}.main`, did: '+4930555000', from: '+4917612345678' }),
        })
      ).json()) as Json;
      expect(r.body).toMatchObject({ accept: true });
      return r.body.callId as string;
    };
    const inboundRow = (id: string) => s!.appliance.core.db.prepare('SELECT * FROM tel_inbound_calls WHERE call_id = ?').get(id) as Json;
    const vnum = await askInbound(st.controlUrl);

    await fetch(`${st.controlUrl}/_test/crash`, { method: 'POST' });
    const rec = await until(
      async () => {
        const b = (await j(s!.fetch(`${V1}/calls/${id}`, { key: s!.adminKey }))).body;
        return b.status === 'ended-failed-final' ? b : null;
      },
      5000,
      'call failed',
    );
    expect(rec).toMatchObject({ endedReason: 'failed', errorDetail: 'bridge restarted' });
    expect(eventsOf(s, id).find((e) => e.name === 'outbound-ai.finished')!.data).toMatchObject({
      outcome: 'failed',
      answered: true,
      errorDetail: 'bridge restarted',
    });

    await until(() => inboundRow(vnum).ended_at !== null, 5000, 'inbound call ended');
    expect(inboundRow(vnum)).toMatchObject({ outcome: 'failed', error_detail: 'bridge restarted' });
    expect(
      eventsOf(s, vnum)
        .filter((e) => e.name === 'call.ended')
        .map((e) => e.data),
    ).toEqual([expect.objectContaining({ outcome: 'failed', source: 'sip' })]);

    const st2 = await until(
      async () => {
        const b = await status(s!);
        return b.state === 'ready' && b.pid !== pid1 ? b : null;
      },
      15_000,
      'bridge restarted',
    );
    expect(st2.lastExit).toContain('code 3');
    await until(async () => (await fakeState(st2.controlUrl)).trunks.length === 1, 3000, 'trunks pushed to the new bridge');
    expect(alive(pid1)).toBe(false);

    // A new call goes to the new bridge.
    const id2 = (await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ email: undefined }) }))).body.callId as string;
    expect((await fakeState(st2.controlUrl)).placed.map((p: Json) => p.callId)).toEqual([id2]);

    // Stopping the appliance stops the bridge; calls in flight then end failed at the next start.
    const vnum2 = await askInbound(st2.controlUrl);
    await s.stop();
    s = undefined;
    expect(alive(st2.pid)).toBe(false);
    s = await startTestServer({ dataDir, overrides: config() });
    expect((await j(s.fetch(`${V1}/calls/${id2}`, { key: s.adminKey }))).body).toMatchObject({ status: 'ended-failed-final', errorDetail: 'bridge restarted' });
    expect(inboundRow(vnum2)).toMatchObject({ outcome: 'failed', error_detail: 'bridge restarted' });
    expect(eventsOf(s, vnum2).filter((e) => e.name === 'call.ended')).toHaveLength(1);
  }, 60_000);

  it('a bridge entry that never gets ready is killed and retried; calls meanwhile get 502', async () => {
    await s?.stop();
    s = await startTestServer({
      dataDir,
      overrides: { plugins: { telephony: { bridge: { mode: 'embedded', entry: 'test/support/no-such-bridge.ts', restartMinMs: 200, readyTimeoutMs: 2000 } } } },
    });
    const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ email: undefined }) }));
    expect(r.status).toBe(502);
    expect(r.body.error).toBe('bridge_unreachable');
    const b = await until(
      async () => {
        const x = await status(s!);
        return x.lastExit ? x : null;
      },
      10_000,
      'exit noticed',
    );
    expect(b.ok).toBe(false);
    const ready = (await j(s.fetch('/readyz'))).body;
    expect(ready.plugins.telephony.health.status).toBe('degraded');
  }, 30_000);
});
