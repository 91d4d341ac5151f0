import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../../server/cli.ts';
import telephony from '../../../plugins/telephony/index.ts';
import type { AnyPlugin } from '../../../server/plugin.ts';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { adm, j, until, type Json } from './helpers.ts';

/**
 * SECURITY.md "Per-tenant caps" (issue 26 item 2): one tenant admin must not be able to take every
 * tenant's trunks off the bridge (995 trunks of one tenant made the bridge refuse the whole set,
 * at most 1000 items), nor fill the store without bound.
 */
const V1 = '/api.ashx/v1';

/** Trunks as a tenant saved them (the rows `?trunks=save` writes), `n` of them in one go. */
function storeTrunks(s: TestServer, tenantId: string, n: number, prefix = 't'): void {
  const now = new Date().toISOString();
  const ins = s.appliance.core.db.prepare(
    'INSERT INTO tel_trunks (tenant_id, id, name, host, port, transport, created_at, updated_at) VALUES (?, ?, ?, ?, 5060, ?, ?, ?)',
  );
  s.appliance.core.db.transaction(() => {
    for (let i = 0; i < n; i++) ins.run(tenantId, `${prefix}${i}`, `Trunk ${i}`, `sip${i}.carrier.example`, 'udp', now, now);
  })();
}

async function cli(s: TestServer, args: string[], stdin = ''): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => stdin };
  const code = await main([...args, '--data-dir', s.dataDir], io, { plugins: [telephony as AnyPlugin] });
  return { code, out, err };
}

describe('per-tenant caps: 409 tenant_limit naming the cap and its limit', () => {
  let s: TestServer | undefined;
  const dataDir = tempDir();
  afterAll(async () => {
    await s?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('trunks (default 50): the API and the CLI refuse the next one; replacing one at the cap still works', async () => {
    s = await startTestServer();
    storeTrunks(s, s.primary.id, 50);
    const r = await j(adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'one-more', name: 'One more', host: '127.0.0.1' }));
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ error: 'tenant_limit', cap: 'trunks', limit: 50 });
    expect(r.body.error_description).toContain('at most 50 trunks');
    const c = await cli(s, ['trunk', 'add', '--name', 'Via CLI', '--host', '127.0.0.1']);
    expect(c.code).toBe(1);
    expect(c.err.join('\n')).toContain('at most 50 trunks');
    // A trunk the tenant has is replaced, not added: the cap does not stand in the way.
    expect((await j(adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 't0', name: 'Renamed', host: '127.0.0.1' }))).status).toBe(200);
    expect((s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_trunks WHERE tenant_id = ?').get(s.primary.id) as { n: number }).n).toBe(50);
    // Another tenant's count is its own.
    const other = s.appliance.core.tenants.add('branch.example', 'Branch');
    expect((await cli(s, ['trunk', 'add', '--name', 'Branch main', '--host', '127.0.0.1', '--tenant', other.host])).code).toBe(0);
    await s.stop();
    s = undefined;
  });

  it('numbers, desk phones, inbound and outbound routes: each cap from the plugin settings', async () => {
    // In the data dir's config.json, where the CLI reads them too.
    fs.writeFileSync(path.join(dataDir, 'config.json'), JSON.stringify({ plugins: { telephony: { limits: { numbers: 2, phones: 2, routes: 2 } } } }));
    s = await startTestServer({ dataDir });
    const srv = s;
    const refused = (r: { status: number; body: Json }, cap: string) => {
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({ error: 'tenant_limit', cap, limit: 2 });
    };
    const number = (n: string) => j(adm(srv, '/signal.ashx?numbers=save', 'numbers-save', { number: n, name: `n${n}` }));
    expect((await number('+4930100001')).status).toBe(200);
    expect((await number('+4930100002')).status).toBe(200);
    refused(await number('+4930100003'), 'numbers');
    expect((await number('+4930100002')).status).toBe(200); // an existing one is saved again

    const phone = (user: string) => j(adm(srv, '/signal.ashx?phones=add', 'phones-add', { user }));
    expect((await phone('alice')).status).toBe(200);
    expect((await phone('bob')).status).toBe(200);
    refused(await phone('carol'), 'phones');
    expect((await phone('alice')).status).toBe(200); // a new password for an existing login
    const c = await cli(srv, ['phone', 'add', 'dave', '--password-stdin'], 'dave-password-1\n');
    expect(c.code).toBe(1);
    expect(c.err.join('\n')).toContain('at most 2 phones');

    await adm(srv, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' });
    const outbound = (match: string) => j(srv.fetch(`${V1}/outbound-routes`, { method: 'POST', key: srv.adminKey, json: { match, trunkIds: ['main'] } }));
    expect((await outbound('+49*')).status).toBe(201);
    expect((await outbound('+43*')).status).toBe(201);
    refused(await outbound('+41*'), 'routes');

    // Inbound: the auto-inserted `*` catchall is not counted.
    const inbound = (Did: string) => j(srv.fetch(`${V1}/inbound-routes`, { method: 'POST', key: srv.adminKey, json: { Did, User: 'alice' } }));
    expect((await inbound('+4930100001')).status).toBe(201);
    expect((await inbound('+4930100002')).status).toBe(201);
    refused(await inbound('+4930100003'), 'routes');
  });
});

describe("one tenant's trunk volume never takes another tenant's trunks off the bridge", () => {
  const dataDir = tempDir();
  let s: TestServer | undefined;
  afterAll(async () => {
    await s?.stop().catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('995 trunks of one tenant and one of another are both on a restarted bridge; a refused set leaves only its own tenant out', async () => {
    s = await startTestServer({
      dataDir,
      overrides: {
        plugins: {
          telephony: {
            bridge: {
              mode: 'embedded',
              entry: 'test/support/fake-bridge-main.ts',
              sipPort: 0,
              restartMinMs: 100,
              restartMaxMs: 1000,
              readyTimeoutMs: 15_000,
              healthPollMs: 200,
            },
          },
        },
      },
    });
    const srv = s;
    const status = async (): Promise<Json> => (await j(adm(srv, '/signal.ashx?bridge=status', 'bridge-status'))).body;
    const ready = async (not?: number): Promise<Json> =>
      until(
        async () => {
          const b = await status();
          return b.state === 'ready' && b.pid !== not ? b : null;
        },
        15_000,
        'bridge ready',
      );
    const bridgeTrunks = async (url: string): Promise<string[]> =>
      ((await (await fetch(`${url}/_test/state`)).json()) as Json).trunks.map((t: { id: string }) => t.id);

    const st = await ready();
    const big = srv.appliance.core.tenants.add('big.example', 'Big');
    // Stored as a tenant admin saved them before the caps (the cap is 50 now; the bridge takes 1000 a request).
    storeTrunks(srv, big.id, 995);
    expect((await j(adm(srv, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' }))).status).toBe(200);
    const mine = `${srv.primary.id}.main`;

    await fetch(`${st.controlUrl}/_test/crash`, { method: 'POST' });
    const st2 = await ready(st.pid as number);
    const after = await until(
      async () => ((await bridgeTrunks(st2.controlUrl)).length === 996 ? bridgeTrunks(st2.controlUrl) : null),
      10_000,
      'all trunks pushed',
    );
    expect(after).toContain(mine);
    expect(after.filter((id) => id.startsWith(`${big.id}.`))).toHaveLength(995);

    // More than the bridge takes in one request (trunks stored before the caps, say): that
    // tenant's set is refused, the other tenant's trunk is on the bridge after a restart.
    storeTrunks(srv, big.id, 6, 'late');
    await fetch(`${st2.controlUrl}/_test/crash`, { method: 'POST' });
    const st3 = await ready(st2.pid as number);
    await until(async () => (await bridgeTrunks(st3.controlUrl)).includes(mine), 10_000, "the other tenant's trunk pushed");
    expect((await bridgeTrunks(st3.controlUrl)).filter((id) => id.startsWith(`${big.id}.`))).toEqual([]);
    const refusals = srv.logs.lines.map((l) => JSON.parse(l) as Json).filter((l) => l.msg === "bridge refused a tenant's trunk set");
    expect(refusals.map((l) => l.tenant)).toContain(big.id);
  }, 90_000);
});
