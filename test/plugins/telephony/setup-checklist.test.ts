import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { setupItems, sipListening } from '../../../plugins/telephony/setup/checklist.ts';
import { telephonyConfig } from '../../../plugins/telephony/schemas.ts';
import type { TelephonyAdmin } from '../../../plugins/telephony/trunks/admin.ts';
import { adm, j, until } from './helpers.ts';

const TOKEN = 'fake-bridge-control-token-checklist-01';
const V1 = '/api.ashx/v1';
const B = 'office-b.example';
let s: TestServer;
let fake: FakeBridge;
let keyB: string;

beforeAll(async () => {
  fake = new FakeBridge(TOKEN, '');
  await fake.start();
  s = await startTestServer({
    overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN }, mail: { host: '127.0.0.1', port: 2525 } } } },
  });
  fake.callbackUrl = `${s.url}/internal/bridge/events`;
  keyB = (await s.addTenant(B)).adminKey;
});
afterAll(async () => {
  await s?.stop();
  await fake?.stop();
});

const get = (key = s.adminKey, host?: string) => j(s.fetch(`${V1}/setup/checklist`, { key, host }));
const states = (body: { items: { id: string; state: string }[] }) => Object.fromEntries(body.items.map((i) => [i.id, i.state]));

describe('setup checklist (GET /api.ashx/v1/setup/checklist)', () => {
  it('a new tenant: every item to do, in order, each with its console form; no backup scheduled; SIP of a remote bridge not known', async () => {
    const r = await get();
    expect(r.status).toBe(200);
    expect(r.body.done).toBe(false);
    expect(r.body.items.map((i: { id: string; form?: string }) => [i.id, i.form])).toEqual([
      ['engine-key', '/telephony?tab=settings'],
      ['trunk-registered', '/telephony?tab=trunks'],
      ['outbound-route', '/telephony?tab=outbound'],
      ['default-trunk', '/telephony?tab=settings'],
      ['sip-lan', '/telephony?tab=settings'],
      ['mail-relay', undefined],
      ['backup-target', '/backups'],
    ]);
    expect(states(r.body)).toEqual({
      'engine-key': 'todo',
      'trunk-registered': 'todo',
      'outbound-route': 'todo',
      'default-trunk': 'todo',
      'sip-lan': 'not-available',
      'mail-relay': 'done',
      'backup-target': 'todo',
    });
    expect(r.body.sip).toBeNull();
  });

  it('done once a key, a registered trunk, an outbound route and a default trunk are set; the other tenant still has everything to do', async () => {
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { engineApiKey: 'AIza-checklist-key' });
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'plain', name: 'Plain', host: '127.0.0.2' });
    expect(states((await get()).body)['trunk-registered']).toBe('todo'); // a trunk, but none registers
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
      id: 'carrier',
      name: 'Carrier',
      host: '127.0.0.1',
      register: true,
      username: 'u',
      password: 'p',
    });
    await until(() => fake.trunks.some((t) => t.id.endsWith('.carrier')), 3000, 'trunk at the bridge');
    await s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: 'global', trunkIds: ['carrier'] } });
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'carrier' });
    // The appliance's backup schedule (`sovcomms backup schedule`) is the last item.
    expect((await get()).body.done).toBe(false);
    expect(states((await get()).body)['backup-target']).toBe('todo');
    s.appliance.core.db
      .prepare('INSERT INTO backup_schedule (id, every_ms, keep, target, created_at) VALUES (1, 86400000, 14, ?, ?)')
      .run('/srv/sovcomms-backups', Date.now());
    const r = await get();
    expect(r.body.done).toBe(true);
    expect(r.body.items.find((i: { id: string }) => i.id === 'backup-target')).toMatchObject({ state: 'done', detail: 'backups to /srv/sovcomms-backups' });
    expect(r.body.items.find((i: { id: string }) => i.id === 'trunk-registered')).toMatchObject({ state: 'done', detail: 'registered: carrier' });
    const other = await get(keyB, B);
    expect(states(other.body)['engine-key']).toBe('todo');
    expect(other.body.done).toBe(false);
    expect((await j(s.fetch(`${V1}/setup/checklist`))).status).toBe(401);
    const openapi = (await j(s.fetch('/openapi.json'))).body;
    expect(openapi.paths[`${V1}/setup/checklist`].get).toBeDefined();
  });

  it("SIP on the LAN: an embedded bridge's sipHost on loopback is to do (naming sovcomms setup), a LAN address or every interface is done", () => {
    const cfg = (bridge: Record<string, unknown>) => telephonyConfig.parse({ bridge });
    const item = (bridge: Record<string, unknown>) => {
      // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- the sip-lan item reads only the settings, never the admin
      const sip = setupItems({ admin: {} as TelephonyAdmin, config: cfg(bridge) }).find((i) => i.id === 'sip-lan')!;
      return sip.check({ tenant: s.primary, registered: new Map() });
    };
    expect(item({ mode: 'embedded' })).toEqual({ state: 'todo', detail: 'udp, tcp on 127.0.0.1:5060: only this machine reaches it (sovcomms setup)' });
    expect(item({ mode: 'embedded', sipHost: '192.168.1.20', sipPort: 5070 })).toEqual({ state: 'done', detail: 'udp, tcp on 192.168.1.20:5070' });
    expect(item({ mode: 'embedded', sipHost: '0.0.0.0' }).state).toBe('done');
    expect(item({ mode: 'embedded', sipHost: '::1' }).state).toBe('todo');
    expect(item({ mode: 'off' }).state).toBe('not-available');
    expect(sipListening(cfg({ mode: 'remote', url: 'http://127.0.0.1:1', token: 'x'.repeat(32) }).bridge)).toBeNull();
  });
});

describe('/readyz says where SIP listens (embedded bridge)', () => {
  let e: TestServer;
  const sipPort = 31000 + Math.floor(Math.random() * 2000);
  beforeAll(async () => {
    const base = 44000 + 2 * Math.floor(Math.random() * 2000);
    e = await startTestServer({
      overrides: {
        plugins: { telephony: { bridge: { mode: 'embedded', sipHost: '127.0.0.1', sipPort, rtpPorts: `${base}-${base + 19}`, readyTimeoutMs: 20_000 } } },
      },
    });
    await until(async () => (await j(e.fetch('/readyz'))).body.plugins.telephony.health?.detail?.state === 'ready', 20_000, 'bridge ready');
  }, 40_000);
  afterAll(async () => {
    await e?.stop();
  });
  it('address, port, transports, and that no LAN peer reaches a loopback address; the checklist says the same', async () => {
    const r = (await j(e.fetch('/readyz'))).body;
    expect(r.plugins.telephony.health.detail.sip).toEqual({ host: '127.0.0.1', port: sipPort, transports: ['udp', 'tcp'], lan: false });
    const c = (await j(e.fetch(`${V1}/setup/checklist`, { key: e.adminKey }))).body;
    expect(c.sip).toEqual({ host: '127.0.0.1', port: sipPort, transports: ['udp', 'tcp'], lan: false });
    expect(states(c)['sip-lan']).toBe('todo');
  });
});
