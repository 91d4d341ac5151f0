import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adm, call, j, until, type Json } from './helpers.ts';

const V1 = '/api.ashx/v1';
const entry = 'plugins/telephony/bridge/main.ts';
const present = fs.existsSync(path.resolve(entry));

/**
 * The real bridge process (plugins/telephony/bridge/main.ts) under the plugin's supervisor:
 * it must come up from the CONTROL-API.md environment, report ready, take the trunk set, accept
 * a call and hang it up on request. SIP end-to-end scenarios live in the bridge's own tests.
 */
describe.runIf(present)('the real bridge, embedded', () => {
  let s: TestServer | undefined;
  afterAll(async () => { await s?.stop(); });

  it('starts, takes the trunks, places and hangs up a call', async () => {
    s = await startTestServer({
      overrides: { plugins: { telephony: { bridge: { mode: 'embedded', sipPort: 0, rtpPorts: '31000-31099', readyTimeoutMs: 20_000 }, ringTimeoutSec: 5 } } },
    });
    const st = await until(async () => {
      const b = (await j(adm(s!, '/signal.ashx?bridge=status', 'bridge-status'))).body;
      return b.state === 'ready' ? b : null;
    }, 20_000, 'real bridge ready');
    expect(st.health.status).toBe('ok');
    // A trunk nobody answers on (a closed loopback port): the INVITE goes out, nothing comes back.
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'lab', name: 'Lab', host: '127.0.0.1', port: 5, transport: 'udp', register: false });
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'lab' });
    await until(async () => {
      const h = (await j(adm(s!, '/signal.ashx?bridge=status', 'bridge-status'))).body.health as Json;
      return (h.trunks ?? []).some((t: Json) => t.id === `${s!.primary.id}.lab`);
    }, 5000, 'trunks at the bridge');
    const r = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ email: undefined }) }));
    expect(r.status).toBe(200);
    expect(r.body.ok).toBe(true);
    const id = r.body.callId as string;
    const h = await j(s.fetch(`${V1}/calls/${id}/hangup`, { method: 'POST', key: s.adminKey }));
    expect(h.body).toMatchObject({ ok: true, newStatus: 'cancelled' });
    const rec = await until(async () => {
      const b = (await j(s!.fetch(`${V1}/calls/${id}`, { key: s!.adminKey }))).body;
      return b.endedAtUtc ? b : null;
    }, 10_000, 'ended event from the real bridge');
    expect(rec.status).toBe('cancelled');
  }, 60_000);
});
