import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../../server/cli.ts';
import telephony from '../../../plugins/telephony/index.ts';
import type { AnyPlugin } from '../../../server/plugin.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adm, j } from './helpers.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
});

/** `sovcomms ...` in-process, against the running server's data dir (WAL: both see the same rows). */
async function cli(args: string[], stdin = ''): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => stdin };
  const code = await main([...args, '--data-dir', s.dataDir], io, { plugins: [telephony as AnyPlugin] });
  return { code, out, err };
}

describe('sovcomms trunk', () => {
  it('add (password from stdin, sealed), list (no password), remove', async () => {
    const a = await cli(
      [
        'trunk',
        'add',
        '--id',
        'carrier',
        '--name',
        'Carrier',
        '--host',
        'sip.carrier.test',
        '--transport',
        'tcp',
        '--username',
        'acct',
        '--password-stdin',
        '--register',
        '--default',
      ],
      'cli-secret-pw\n',
    );
    expect(a).toMatchObject({ code: 0, out: [`trunk carrier saved for ${s.primary.host} (default)`] });
    const l = await cli(['trunk', 'list']);
    expect(l.out[0]).toContain('carrier (default)\tCarrier\ttcp://sip.carrier.test:5060\tuser=acct\tpassword=set\tregister=true');
    expect(l.out.join('\n')).not.toContain('cli-secret-pw');
    const http = (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body;
    expect(http.trunks[0]).toMatchObject({ id: 'carrier', hasPassword: true, transport: 'tcp' });
    expect((await j(adm(s, '/signal.ashx?telephony=settings', 'telephony-settings'))).body.defaultTrunkId).toBe('carrier');
    expect((await cli(['trunk', 'remove', 'carrier'])).code).toBe(0);
    expect((await cli(['trunk', 'list'])).out).toEqual([]);
  });
  it('--srv: the host is a domain located by its SIP SRV records', async () => {
    expect((await cli(['trunk', 'add', '--id', 'srv', '--name', 'Provider', '--host', 'provider.example', '--srv'])).code).toBe(0);
    expect((await cli(['trunk', 'list'])).out[0]).toContain('udp://provider.example (SRV)	');
    const http = (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body;
    expect(http.trunks.find((t: { id: string }) => t.id === 'srv')).toMatchObject({ dnsSrv: true, host: 'provider.example' });
    expect((await cli(['trunk', 'remove', 'srv'])).code).toBe(0);
  });
  it('bad input is a usage error (exit 2) naming the problem', async () => {
    const r = await cli(['trunk', 'add', '--name', 'X', '--host', 'h', '--transport', 'sctp']);
    expect(r.code).toBe(2);
    expect(r.err[0]).toContain('transport');
    expect((await cli(['trunk', 'add', '--bogus'])).code).toBe(2);
    expect((await cli(['trunk', 'remove', 'nope'])).code).toBe(1);
  });
});

describe('sovcomms number', () => {
  it('add (engine key from stdin, never shown), list, remove; GET /numbers sees it', async () => {
    expect(
      (await cli(['number', 'add', '+4930777000', '--name', 'Reception', '--voice', 'Kore', '--visibility', 'public', '--api-key-stdin'], 'AIza-cli-key\n'))
        .code,
    ).toBe(0);
    const l = await cli(['number', 'list']);
    expect(l.out[0]).toContain('+4930777000\tReception\tlive-voice-ai\tKore\ten-US\tpublic\tmax=3500s\tkey=set');
    expect(l.out.join('\n')).not.toContain('AIza-cli-key');
    const v1 = (await j(s.fetch('/api.ashx/v1/numbers', { key: s.adminKey }))).body;
    expect(v1.data[0]).toMatchObject({ number: '+4930777000', name: 'Reception', visibility: 'public' });
    expect(JSON.stringify(v1)).not.toContain('AIza-cli-key');
    expect((await cli(['number', 'remove', '+4930777000'])).code).toBe(0);
    expect((await cli(['number', 'list'])).out).toEqual([]);
  });
});

describe('sovcomms phone (desk-phone logins)', () => {
  it('add (password from stdin, never shown), add without one (generated, printed once), list, remove; the admin API sees the same', async () => {
    const a = await cli(['phone', 'add', 'carol', '--password-stdin'], 'desk-phone-pw-1\n');
    expect(a).toMatchObject({ code: 0, out: [`desk phone login carol saved for ${s.primary.host}`] });
    const g = await cli(['phone', 'add', 'dave']);
    expect(g.code).toBe(0);
    const pw = /^password: (\S+)$/.exec(g.out[1] ?? '')?.[1];
    // 128 bits (16 random bytes, base64url without padding).
    expect(pw).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(Buffer.from(pw!, 'base64url')).toHaveLength(16);
    const l = await cli(['phone', 'list']);
    expect(l.out.map((x) => x.split('\t').slice(0, 2))).toEqual([
      ['carol', 'username=carol'],
      ['dave', 'username=dave'],
    ]);
    const http = (await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body;
    expect(http.phones.map((p: { user: string }) => p.user)).toEqual(['carol', 'dave']);
    const all = JSON.stringify([l, http]) + JSON.stringify(s.appliance.core.db.prepare('SELECT * FROM tel_phones').all());
    expect(all).not.toContain('desk-phone-pw-1');
    expect(all).not.toContain(pw);
    expect((await cli(['phone', 'remove', 'dave'])).code).toBe(0);
    expect((await cli(['phone', 'remove', 'dave'])).code).toBe(1);
    expect((await cli(['phone', 'add', 'bad user'])).code).toBe(2);
    expect((await cli(['phone', 'add', 'erin', '--password-stdin'], 'short\n')).code).toBe(2);
    expect((await cli(['phone', 'list'])).out.length).toBe(1);
  });

  it('admin API: 400 naming the field, 404 for an unknown login, 409 for a SIP user name another tenant has', async () => {
    const bad = await j(adm(s, '/signal.ashx?phones=add', 'phones-add', { user: '../x' }));
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('user');
    expect((await j(adm(s, '/signal.ashx?phones=remove', 'phones-remove', { user: 'nobody' }))).status).toBe(404);
    const other = s.appliance.core.tenants.add('branch.example', 'Branch');
    expect((await cli(['phone', 'add', 'frank', '--password-stdin', '--tenant', 'branch.example'], 'branch-pw-123\n')).code).toBe(0);
    const clash = await j(adm(s, '/signal.ashx?phones=add', 'phones-add', { user: 'frank', password: 'another-pw-1' }));
    expect(clash.status).toBe(409);
    expect(JSON.stringify(clash.body)).not.toContain('branch.example');
    expect((await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones.some((p: { user: string }) => p.user === 'frank')).toBe(false);
    expect(other.host).toBe('branch.example');
  });
});

describe('sovcomms route inbound', () => {
  const V1 = '/api.ashx/v1';
  it('add, list, remove as the v1 /inbound-routes API has them; the catchall stays', async () => {
    const a = await cli(['route', 'inbound', 'add', '+4930123', '--user', 'alice']);
    expect(a).toMatchObject({ code: 0, out: ['inbound route +4930123 → alice saved for localhost'] });
    expect((await cli(['route', 'inbound', 'add', '+4930123', '--user', 'bob', '--from-number', '+4917*'])).code).toBe(0);
    // The same (Did, FromNumber) again: 409 duplicate_route, as the API answers.
    const dup = await cli(['route', 'inbound', 'add', '+4930123', '--user', 'carol']);
    expect(dup.code).toBe(1);
    expect(dup.err.join('\n')).toContain('exists');
    expect((await cli(['route', 'inbound', 'list'])).out).toEqual(['+4930123\tfrom=-\tuser=alice', '+4930123\tfrom=+4917*\tuser=bob', '*\tfrom=-\tuser=-']);
    const api = (await j(s.fetch(`${V1}/inbound-routes`, { key: s.adminKey }))).body;
    expect(api.data.map((r: { did: string; user: string }) => `${r.did}:${r.user}`)).toEqual(['+4930123:alice', '+4930123:bob', '*:']);
    expect((await cli(['route', 'inbound', 'remove', '+4930123', '--from-number', '+4917*'])).out).toEqual([
      'inbound route +4930123 from +4917* removed from localhost',
    ]);
    expect((await cli(['route', 'inbound', 'remove', '*'])).err.join('\n')).toContain('catchall');
    expect((await cli(['route', 'inbound', 'add', '--user', 'x'])).code).toBe(2);
    expect((await cli(['route', 'outbound', 'list'])).code).toBe(2);
  });

  it('a target no call could reach is refused naming why (CLI and API alike): a number off the whitelist, a virtual number without an engine key', async () => {
    const off = await cli(['route', 'inbound', 'add', '+4930200', '--user', '+4930999777']);
    expect(off.code).toBe(1);
    expect(off.err.join('\n')).toContain('+4930999777 is not on the PSTN whitelist');
    const api = await j(s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: '+4930200', User: '+4930999777' } }));
    expect(api).toMatchObject({ status: 400, body: { error: 'invalid_request', field: 'user' } });
    expect(api.body.error_description).toContain('not on the PSTN whitelist');
    // Whitelisted, but no outbound route and no default trunk reach it.
    await adm(s, '/signal.ashx?whitelist=add', 'whitelist-add', { number: '+4930999777' });
    expect((await cli(['route', 'inbound', 'add', '+4930200', '--user', '+4930999777'])).err.join('\n')).toContain('no outbound route matches');
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'out', name: 'Out', host: '127.0.0.1' });
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'out' });
    expect((await cli(['route', 'inbound', 'add', '+4930200', '--user', '+4930999777'])).code).toBe(0);
    // A virtual number without a key of its own, and none for the tenant.
    await adm(s, '/signal.ashx?numbers=save', 'numbers-save', { number: '+4930555', name: 'Reception' });
    const nokey = await j(s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: '+4930300', User: '+4930555' } }));
    expect(nokey).toMatchObject({ status: 400, body: { field: 'user' } });
    expect(nokey.body.error_description).toContain('virtual number +4930555 has no engine key');
    // PUT is checked the same way.
    const put = await j(s.fetch(`${V1}/inbound-routes/%2B4930200`, { method: 'PUT', key: s.adminKey, json: { User: '+4930555' } }));
    expect(put).toMatchObject({ status: 400, body: { field: 'user' } });
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { engineApiKey: 'AIza-tenant-key' });
    expect((await j(s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: '+4930300', User: '+4930555' } }))).status).toBe(201);
  });
});
