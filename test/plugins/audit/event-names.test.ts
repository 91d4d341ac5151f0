import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { AUDIT_WRITER } from '../../../server/core-services.ts';
import { adminToken } from '../admin/helpers.ts';

/**
 * Audit gaps and names (issue 27 item 12): outbound route changes and call placement are
 * audited, `apikey-create` names the key (id and name, never the secret), and every name is
 * written in the one style most names use (`trunk-save`); an old dotted name still finds its rows.
 */
let s: TestServer;
let host: string;

interface Entry {
  event: string;
  user: string;
  extra: string;
}

beforeAll(async () => {
  s = await startTestServer({
    // A bridge that never answers: calls are accepted, scheduled ones wait, immediate ones fail later.
    overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: 'http://127.0.0.1:9/', token: 'audit-names-bridge-token-0123456789' } } } },
  });
  host = `127.0.0.1:${s.port}`;
});
afterAll(async () => {
  await s?.stop();
});

async function log(event: string): Promise<Entry[]> {
  const r = await s.fetch(`/api.ashx/v1/auditlog?event=${encodeURIComponent(event)}&limit=500`, { key: s.adminKey });
  expect(r.status).toBe(200);
  return ((await r.json()) as { data: Entry[] }).data;
}

const send = (method: string, path: string, body?: unknown, key = s.adminKey) =>
  s.fetch(path, { method, key, headers: { 'Content-Type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

describe('audit event names', () => {
  it('are written with dashes; filtering by an old dotted name finds the old rows and the new ones', async () => {
    const t = s.primary;
    // A row from before the rename, as it was stored.
    s.appliance.core.db
      .prepare(
        "INSERT INTO audit_log (tenant_id, ts, event, user, ip, ua, extra) VALUES (?, '2026-01-01T00:00:00.000Z', 'webhook.pause', 'old', '', '', 'id=old')",
      )
      .run(t.id);
    // A writer still passing a dotted name (a plugin not yet renamed) is stored in the one style.
    s.appliance.host.provided(AUDIT_WRITER)!.write(t, { event: 'webhook.pause', user: 'writer', extra: { id: 'new' } });
    const rows = s.appliance.core.db.prepare("SELECT event FROM audit_log WHERE user = 'writer'").all() as { event: string }[];
    expect(rows).toEqual([{ event: 'webhook-pause' }]);

    for (const filter of ['webhook.pause', 'webhook-pause', 'WEBHOOK.PAUSE']) {
      expect((await log(filter)).map((e) => e.user).sort(), filter).toEqual(['old', 'writer']);
    }
    // The webhooks plugin's own pause over the API is written in the new style.
    const add = await send('POST', '/signal.ashx?webhooks=add', { url: 'http://10.9.9.9/hook', events: ['*'] }, await bearer());
    expect(add.status).toBe(200);
    const { id } = (await add.json()) as { id: string };
    expect((await send('POST', '/signal.ashx?webhooks=pause', { id }, await bearer())).status).toBe(200);
    expect((await log('webhook.pause')).find((e) => e.extra === `id=${id}`)?.event).toBe('webhook-pause');
    expect((await log('webhook-add')).some((e) => e.extra.startsWith(`id=${id} `))).toBe(true);
  });

  it('outbound route changes are audited: add, update, remove, with the match and the trunks', async () => {
    const trunk = await send('POST', '/signal.ashx?trunks=save', { id: 'main', name: 'Main', host: '127.0.0.1' }, await bearer());
    expect(trunk.status).toBe(200);
    expect((await send('POST', '/api.ashx/v1/outbound-routes', { match: '+43*', trunkIds: ['main'] })).status).toBe(201);
    expect((await send('PUT', `/api.ashx/v1/outbound-routes/${encodeURIComponent('+43*')}`, { trunkIds: ['main'] })).status).toBe(200);
    expect((await send('DELETE', `/api.ashx/v1/outbound-routes/${encodeURIComponent('+43*')}`)).status).toBe(200);
    const entries = await log('outbound-route');
    expect(entries.map((e) => [e.event, e.extra]).reverse()).toEqual([
      ['outbound-route-add', 'match=+43* trunks=main'],
      ['outbound-route-update', 'match=+43* trunks=main'],
      ['outbound-route-remove', 'match=+43*'],
    ]);
    // A refused change is not audited.
    expect((await send('DELETE', `/api.ashx/v1/outbound-routes/${encodeURIComponent('+43*')}`)).status).toBe(404);
    expect(await log('outbound-route')).toHaveLength(3);
  });

  it('placing and scheduling a call are audited with the call id, the number and the time', async () => {
    const at = new Date(Date.now() + 7 * 86400_000).toISOString();
    const sched = await send('POST', '/api.ashx/v1/calls', { phone: '+4930555111', systemPrompt: 'Hi.', scheduleAtUtc: at, apiKey: 'AIza-audit-test' });
    expect(sched.status, await sched.clone().text()).toBe(200);
    const scheduled = (await sched.json()) as { callId: string };
    const now = await send('POST', '/api.ashx/v1/calls', { phone: '+4930555222', systemPrompt: 'Hi.', apiKey: 'AIza-audit-test' });
    expect(now.status, await now.clone().text()).toBe(200);
    const placed = (await now.json()) as { callId: string };

    const [s1] = await log('call-schedule');
    expect(s1).toMatchObject({ event: 'call-schedule', user: expect.any(String), extra: `call=${scheduled.callId} phone=+4930555111 at=${at}` });
    const [p1] = await log('call-place');
    expect(p1).toMatchObject({ event: 'call-place', extra: `call=${placed.callId} phone=+4930555222` });
    // The engine key given with the call never reaches the log.
    expect(JSON.stringify(await log('call-'))).not.toContain('AIza');
  });

  it("apikey-create records the new key's id and name, never the key", async () => {
    const r = await send('POST', '/signal.ashx?apikey-create=1', { name: 'crm-sync' }, await bearer());
    expect(r.status).toBe(200);
    const made = (await r.json()) as { key: string; id: string };
    const [e] = await log('apikey-create');
    expect(e!.extra).toBe(`id=${made.id} name=crm-sync for=admin`);
    expect(JSON.stringify(e)).not.toContain(made.key);
  });
});

let token: string | undefined;
async function bearer(): Promise<string> {
  token ??= await adminToken(s, host, 'admin', s.adminPassword);
  return token;
}
