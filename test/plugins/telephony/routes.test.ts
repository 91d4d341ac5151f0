import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { pickInbound, pickTrunks } from '../../../plugins/telephony/routing.ts';

let s: TestServer;
let keyB: string;
const B = 'office-b.example';
beforeAll(async () => {
  s = await startTestServer();
  keyB = (await s.addTenant(B)).adminKey;
});
afterAll(async () => {
  await s?.stop();
});

const v1 = '/api.ashx/v1';
type Init = Parameters<TestServer['fetch']>[1];
/** s.fetch, with POST as the method when a JSON body is given without one. */
const f = (p: string, init: Init = {}) => s.fetch(p, { ...init, method: init.method ?? (init.json !== undefined || init.body !== undefined ? 'POST' : 'GET') });
/** The admin surface takes a bearer or the admin HMAC (spec "Tenant admin"): sign `bucket|Host[|bodyLen]`. */
const adm = (p: string, bucket: string, json?: unknown, host?: string) => {
  const body = json === undefined ? undefined : JSON.stringify(json);
  const sig = s.hmac(bucket, host ?? `127.0.0.1:${s.port}`, body ? Buffer.byteLength(body) : undefined);
  return s.fetch(p, {
    method: body ? 'POST' : 'GET',
    body,
    host,
    headers: { 'x-service-admin-signature': sig, ...(body ? { 'content-type': 'application/json' } : {}) },
  });
};
// Response bodies are checked field by field below; `any` keeps those checks short.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const j = async (r: Response): Promise<{ status: number; body: any }> => ({ status: r.status, body: await r.json() });

describe('pickTrunks (pure)', () => {
  const routes = [
    { match: '+4930*', trunkIds: ['berlin', 'backup'] },
    { match: '+49*', trunkIds: ['de'] },
    { match: '+15551234567', trunkIds: ['exact'] },
    { match: 'global', trunkIds: ['world'] },
  ];
  it('takes the first matching row in table order, trailing * as a prefix wildcard', () => {
    expect(pickTrunks(routes, 'dflt', '+4930123456')).toEqual(['berlin', 'backup']);
    expect(pickTrunks(routes, 'dflt', '+4989123456')).toEqual(['de']);
  });
  it('a row without * matches exactly; global catches the rest', () => {
    expect(pickTrunks(routes, 'dflt', '+15551234567')).toEqual(['exact']);
    expect(pickTrunks(routes, 'dflt', '+155512345670')).toEqual(['world']);
  });
  it('falls back to the default trunk, then to nothing', () => {
    expect(pickTrunks(routes.slice(0, 2), 'dflt', '+3312345678')).toEqual(['dflt']);
    expect(pickTrunks([], '', '+3312345678')).toEqual([]);
  });
  it('inbound: first match by Did, FromNumber filter, catchall last', () => {
    const rows = [
      { did: '100', fromNumber: '+49*', user: 'de-desk' },
      { did: '100', fromNumber: '', user: 'desk' },
      { did: 'anonymous', fromNumber: '', user: 'anon' },
      { did: '*', fromNumber: '', user: 'reception' },
    ];
    expect(pickInbound(rows, '100', '+4930111')?.user).toBe('de-desk');
    expect(pickInbound(rows, '100', '+3312345')?.user).toBe('desk');
    expect(pickInbound(rows, '999', null)?.user).toBe('anon');
    expect(pickInbound(rows, '999', '+3312345')?.user).toBe('reception');
  });
});

describe('outbound routes v1', () => {
  it('POST appends at the end, GET lists in order with defaultTrunkId in the envelope', async () => {
    for (const id of ['main', 'a', 'b']) await adm('/signal.ashx?trunks=save', 'trunks-save', { id, name: id, host: '127.0.0.1' });
    expect((await j(await adm('/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' }))).status).toBe(200);
    for (const m of ['+49*', 'global', '+4930*']) {
      const r = await j(await f(`${v1}/outbound-routes`, { key: s.adminKey, json: { match: m, trunkIds: ['main'] } }));
      expect(r.status).toBe(201);
      expect(r.body).toEqual({ match: m, trunkIds: ['main'] });
    }
    const l = await j(await f(`${v1}/outbound-routes`, { key: s.adminKey }));
    expect(l.body.data.map((x: { match: string }) => x.match)).toEqual(['+49*', 'global', '+4930*']);
    expect(l.body).toMatchObject({ total: 3, limit: 50, offset: 0, next: null, defaultTrunkId: 'main' });
  });
  it('POST of an existing match answers 409 duplicate_route', async () => {
    const r = await j(await f(`${v1}/outbound-routes`, { key: s.adminKey, json: { Match: '+49*', TrunkIds: ['x'] } }));
    expect(r.status).toBe(409);
    expect(r.body.error).toBe('duplicate_route');
  });
  it('GET one by URL-encoded match (%2B, %2A); 404 not_found otherwise', async () => {
    expect((await j(await f(`${v1}/outbound-routes/%2B49%2A`, { key: s.adminKey }))).body).toEqual({ match: '+49*', trunkIds: ['main'] });
    const r = await j(await f(`${v1}/outbound-routes/%2B33%2A`, { key: s.adminKey }));
    expect(r.status).toBe(404);
    expect(r.body.error).toBe('not_found');
  });
  it('a route naming a trunk the tenant does not have answers 400 naming it (POST and PUT)', async () => {
    const r = await j(await f(`${v1}/outbound-routes`, { key: s.adminKey, json: { match: '+33*', trunkIds: ['main', 'nosuchtrunk'] } }));
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_request', field: 'trunkIds[1]' });
    expect(r.body.error_description).toContain('nosuchtrunk');
    const p = await j(await f(`${v1}/outbound-routes/global`, { method: 'PUT', key: s.adminKey, json: { trunkIds: ['ghost'] } }));
    expect(p.status).toBe(400);
    // Another tenant's trunk is no trunk of this one.
    const other = await j(await f(`${v1}/outbound-routes`, { key: keyB, host: B, json: { match: '+33*', trunkIds: ['main'] } }));
    expect(other.body.field).toBe('trunkIds[0]');
  });

  it('PUT replaces trunkIds only (a match in the body is ignored)', async () => {
    const r = await j(await f(`${v1}/outbound-routes/global`, { method: 'PUT', key: s.adminKey, json: { match: 'other', trunkIds: ['a', 'b'] } }));
    expect(r.body).toEqual({ match: 'global', trunkIds: ['a', 'b'] });
    expect((await j(await f(`${v1}/outbound-routes`, { key: s.adminKey }))).body.data[1]).toEqual({ match: 'global', trunkIds: ['a', 'b'] });
  });
  it('DELETE answers {deleted: row}; 404 for a missing match; the default trunk is not a row', async () => {
    const r = await j(await f(`${v1}/outbound-routes/%2B4930%2A`, { method: 'DELETE', key: s.adminKey }));
    expect(r.body).toEqual({ deleted: { match: '+4930*', trunkIds: ['main'] } });
    expect((await f(`${v1}/outbound-routes/%2B4930%2A`, { method: 'DELETE', key: s.adminKey })).status).toBe(404);
    expect((await f(`${v1}/outbound-routes/main`, { method: 'DELETE', key: s.adminKey })).status).toBe(404);
    expect((await j(await f(`${v1}/outbound-routes`, { key: s.adminKey }))).body.defaultTrunkId).toBe('main');
  });
  it('bad input: 400 naming the field', async () => {
    const r = await j(await f(`${v1}/outbound-routes`, { key: s.adminKey, json: { match: '+49*x', trunkIds: ['a'] } }));
    expect(r.status).toBe(400);
    expect(r.body.field).toBe('match');
    const r2 = await j(await f(`${v1}/outbound-routes`, { key: s.adminKey, json: { match: '+1*', trunkIds: [] } }));
    expect(r2.body.field).toBe('trunkIds');
  });
  it("tenant B sees none of A's routes", async () => {
    const r = await j(await f(`${v1}/outbound-routes`, { key: keyB, host: B }));
    expect(r.body).toMatchObject({ data: [], total: 0, defaultTrunkId: '' });
    expect((await f(`${v1}/outbound-routes/global`, { key: keyB, host: B })).status).toBe(404);
  });
});

describe('inbound routes v1', () => {
  it('the * catchall always exists, even on an empty table', async () => {
    const r = await j(await f(`${v1}/inbound-routes`, { key: s.adminKey }));
    expect(r.body.data).toEqual([{ did: '*', fromNumber: '', user: '' }]);
  });
  it('POST inserts just before the catchall and echoes PascalCase; GET stays camelCase', async () => {
    for (const [did, from, user] of [
      ['100', '', 'alice'],
      ['200', '+49*', 'bob'],
      ['200', '', 'carol'],
    ] as const) {
      const r = await j(await f(`${v1}/inbound-routes`, { key: s.adminKey, json: { Did: did, FromNumber: from, User: user } }));
      expect(r.status).toBe(201);
      expect(r.body).toEqual({ Did: did, FromNumber: from, User: user });
    }
    const l = await j(await f(`${v1}/inbound-routes`, { key: s.adminKey }));
    expect(l.body.data).toEqual([
      { did: '100', fromNumber: '', user: 'alice' },
      { did: '200', fromNumber: '+49*', user: 'bob' },
      { did: '200', fromNumber: '', user: 'carol' },
      { did: '*', fromNumber: '', user: '' },
    ]);
  });
  it('POST of an existing (Did, FromNumber) pair answers 409 duplicate_route', async () => {
    const r = await j(await f(`${v1}/inbound-routes`, { key: s.adminKey, json: { did: '200', fromNumber: '+49*', user: 'x' } }));
    expect(r.status).toBe(409);
    expect(r.body.error).toBe('duplicate_route');
  });
  it('PUT changes only User, addressed by Did and the optional fromNumber query', async () => {
    const r = await j(
      await f(`${v1}/inbound-routes/200?fromNumber=${encodeURIComponent('+49*')}`, { method: 'PUT', key: s.adminKey, json: { User: 'dave', Did: '999' } }),
    );
    expect(r.body).toEqual({ Did: '200', FromNumber: '+49*', User: 'dave' });
    const one = await j(await f(`${v1}/inbound-routes/200?fromNumber=`, { key: s.adminKey }));
    expect(one.body).toEqual({ did: '200', fromNumber: '', user: 'carol' });
    // The catchall is reachable by %2A and its User is editable.
    const c = await j(await f(`${v1}/inbound-routes/%2A`, { method: 'PUT', key: s.adminKey, json: { user: 'reception' } }));
    expect(c.body).toEqual({ Did: '*', FromNumber: '', User: 'reception' });
    expect((await f(`${v1}/inbound-routes/555`, { method: 'PUT', key: s.adminKey, json: { user: 'x' } })).status).toBe(404);
  });
  it('DELETE of the catchall answers 400 cannot_delete_catchall; others {deleted: row} in PascalCase', async () => {
    const r = await j(await f(`${v1}/inbound-routes/%2A`, { method: 'DELETE', key: s.adminKey }));
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('cannot_delete_catchall');
    const d = await j(await f(`${v1}/inbound-routes/200?fromNumber=${encodeURIComponent('+49*')}`, { method: 'DELETE', key: s.adminKey }));
    expect(d.body).toEqual({ deleted: { Did: '200', FromNumber: '+49*', User: 'dave' } });
    expect((await f(`${v1}/inbound-routes/200?fromNumber=${encodeURIComponent('+49*')}`, { method: 'DELETE', key: s.adminKey })).status).toBe(404);
  });
  it('without fromNumber, PUT/DELETE/GET mean the row without a caller filter; FromNumber works as the query key too', async () => {
    for (const [from, user] of [
      ['+1*', 'us-desk'],
      ['', 'desk'],
    ] as const) {
      expect((await f(`${v1}/inbound-routes`, { key: s.adminKey, json: { Did: '+4977', FromNumber: from, User: user } })).status).toBe(201);
    }
    const put = await j(await f(`${v1}/inbound-routes/%2B4977`, { method: 'PUT', key: s.adminKey, json: { User: 'desk-2' } }));
    expect(put.body).toEqual({ Did: '+4977', FromNumber: '', User: 'desk-2' });
    expect((await j(await f(`${v1}/inbound-routes/%2B4977`, { key: s.adminKey }))).body).toEqual({ did: '+4977', fromNumber: '', user: 'desk-2' });
    expect((await j(await f(`${v1}/inbound-routes/%2B4977?FromNumber=%2B1%2A`, { key: s.adminKey }))).body).toEqual({
      did: '+4977',
      fromNumber: '+1*',
      user: 'us-desk',
    });
    expect((await j(await f(`${v1}/inbound-routes/%2B4977`, { method: 'DELETE', key: s.adminKey }))).body).toEqual({
      deleted: { Did: '+4977', FromNumber: '', User: 'desk-2' },
    });
    // With the plain row gone, the Did's first row answers.
    expect((await j(await f(`${v1}/inbound-routes/%2B4977`, { method: 'DELETE', key: s.adminKey }))).body).toEqual({
      deleted: { Did: '+4977', FromNumber: '+1*', User: 'us-desk' },
    });
  });
  it('a * row with a caller filter is an ordinary row: it can be deleted; the catchall still cannot', async () => {
    expect((await f(`${v1}/inbound-routes`, { key: s.adminKey, json: { Did: '*', FromNumber: '+1*', User: 'us' } })).status).toBe(201);
    expect((await j(await f(`${v1}/inbound-routes/%2A`, { key: s.adminKey }))).body).toMatchObject({ did: '*', fromNumber: '' });
    const d = await j(await f(`${v1}/inbound-routes/%2A?fromNumber=%2B1%2A`, { method: 'DELETE', key: s.adminKey }));
    expect(d.body).toEqual({ deleted: { Did: '*', FromNumber: '+1*', User: 'us' } });
    expect((await j(await f(`${v1}/inbound-routes/%2A`, { method: 'DELETE', key: s.adminKey }))).body.error).toBe('cannot_delete_catchall');
  });
  it('a new row after deletions still lands before the catchall', async () => {
    await f(`${v1}/inbound-routes`, { key: s.adminKey, json: { did: 'anonymous', user: 'anon' } });
    const l = await j(await f(`${v1}/inbound-routes`, { key: s.adminKey }));
    expect(l.body.data.map((x: { did: string }) => x.did)).toEqual(['100', '200', 'anonymous', '*']);
  });
  it('tenant B has its own catchall only', async () => {
    const r = await j(await f(`${v1}/inbound-routes`, { key: keyB, host: B }));
    expect(r.body.data).toEqual([{ did: '*', fromNumber: '', user: '' }]);
  });
  it('requires v1 admin credentials', async () => {
    expect((await f(`${v1}/inbound-routes`)).status).toBe(401);
  });
});

describe('PSTN whitelist and trunks (/signal.ashx)', () => {
  it('whitelist=add with the HMAC bucket whitelist-add|Host|bodyLen, then whitelist=list', async () => {
    const body = JSON.stringify({ number: '+4930999888', comment: 'front desk' });
    const sig = s.hmac('whitelist-add', undefined, Buffer.byteLength(body));
    const r = await j(
      await f('/signal.ashx?whitelist=add', { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-service-admin-signature': sig } }),
    );
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, added: true });
    // The spec's own form, bucket|Host without the length, is accepted as well (issue 11 §2).
    const spec = await j(
      await f('/signal.ashx?whitelist=add', {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', 'x-service-admin-signature': s.hmac('whitelist-add') },
      }),
    );
    expect(spec.status).toBe(200);
    expect(spec.body).toMatchObject({ ok: true, added: false });
    const bad = await f('/signal.ashx?whitelist=add', {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'x-service-admin-signature': s.hmac('whitelist-add', undefined, 7) },
    });
    expect(bad.status).toBe(401);
    const l = await j(await adm('/signal.ashx?whitelist=list', 'whitelist-list'));
    expect(l.body).toEqual([expect.objectContaining({ number: '+4930999888', comment: 'front desk', addedBy: 'admin-hmac' })]);
    expect((await j(await adm('/signal.ashx?whitelist=list', 'whitelist-list', undefined, B))).body).toEqual([]);
    const e = await j(await adm('/signal.ashx?whitelist=add', 'whitelist-add', { number: '030 999' }));
    expect(e.status).toBe(400);
    expect(e.body.field).toBe('number');
  });
  it("trunks are checked with the bridge's own contract at save: three codecs or a CR/LF in a SIP header value is a 400 naming the field", async () => {
    const base = { id: 'strict', name: 'Strict', host: 'sip.example.net' };
    const codecs = await j(await adm('/signal.ashx?trunks=save', 'trunks-save', { ...base, codecs: ['PCMU', 'PCMA', 'PCMU'] }));
    expect(codecs.status).toBe(400);
    expect(codecs.body).toMatchObject({ error: 'invalid_request', field: 'codecs' });
    for (const field of ['fromDomain', 'callerId', 'username']) {
      const r = await j(await adm('/signal.ashx?trunks=save', 'trunks-save', { ...base, [field]: 'x\r\nVia: SIP/2.0/UDP evil' }));
      expect(r.status, field).toBe(400);
      expect(r.body.field, field).toBe(field);
    }
    expect((await j(await adm('/signal.ashx?trunks=list', 'trunks-list'))).body.trunks?.some?.((x: { id: string }) => x.id === 'strict') ?? false).toBe(false);
  });
  it('trunks: password sealed at rest and never returned; remove clears the default', async () => {
    const r = await j(
      await adm('/signal.ashx?trunks=save', 'trunks-save', {
        id: 'sipgate',
        name: 'Sipgate',
        host: 'sip.example.net',
        transport: 'tcp',
        username: 'u1',
        password: 's3cret-pw',
        register: true,
        codecs: ['PCMA'],
      }),
    );
    expect(r.body).toMatchObject({ id: 'sipgate', transport: 'tcp', hasPassword: true, register: true, codecs: ['PCMA'], registered: null });
    expect(JSON.stringify(r.body)).not.toContain('s3cret-pw');
    const row = s.appliance.core.db.prepare("SELECT password_sealed FROM tel_trunks WHERE id = 'sipgate'").get() as { password_sealed: string };
    expect(row.password_sealed.startsWith('v1.')).toBe(true);
    const l = await j(await adm('/signal.ashx?trunks=list', 'trunks-list'));
    expect(l.body.trunks.map((t: { id: string }) => t.id)).toEqual(['a', 'b', 'main', 'sipgate']);
    expect(JSON.stringify(l.body)).not.toContain('s3cret-pw');
    expect((await j(await adm('/signal.ashx?trunks=list', 'trunks-list', undefined, B))).body.trunks).toEqual([]);
    // The outbound routes above still list main: refused until the operator says to take it out of them.
    const inUse = await j(await adm('/signal.ashx?trunks=remove', 'trunks-remove', { id: 'main' }));
    expect(inUse.status).toBe(409);
    expect(inUse.body.error).toBe('trunk_in_use');
    expect((await adm('/signal.ashx?trunks=remove', 'trunks-remove', { id: 'main', force: true })).status).toBe(200);
    expect((await j(await adm('/signal.ashx?telephony=settings', 'telephony-settings'))).body.defaultTrunkId).toBe('');
    expect((await adm('/signal.ashx?trunks=remove', 'trunks-remove', { id: 'main' })).status).toBe(404);
    expect(s.logs.text()).not.toContain('s3cret-pw');
    // Admin changes are audited (who, from where), never with the secret.
    const audit = (await j(await f('/api.ashx/v1/auditlog?event=trunk-', { key: s.adminKey }))).body;
    expect(audit.data.map((e: { event: string }) => e.event)).toEqual(expect.arrayContaining(['trunk-save', 'trunk-remove']));
    expect(audit.data.find((e: { extra: string }) => e.extra.includes('trunk=sipgate'))).toMatchObject({ user: 'admin-hmac', ip: '127.0.0.1' });
    expect(JSON.stringify(audit)).toContain('credentialChanged=true');
    expect(JSON.stringify(audit)).not.toContain('s3cret-pw');
  });
});

describe('virtual numbers', () => {
  it('managed from /signal.ashx; GET /numbers lists them with tenant and never the engine key', async () => {
    const r = await j(
      await adm('/signal.ashx?numbers=save', 'numbers-save', {
        number: '+4930555000',
        name: 'Hotline',
        geminiApiKey: 'AIza-secret-key-123',
        systemPrompt: 'Be nice',
      }),
    );
    expect(r.status).toBe(200);
    const l = await j(await f(`${v1}/numbers`, { key: s.adminKey }));
    expect(l.body).toMatchObject({ total: 1, tenant: s.primary.host });
    expect(l.body.data[0]).toMatchObject({
      name: 'Hotline',
      number: '+4930555000',
      mode: 'live-voice-ai',
      voice: 'Aoede',
      maxDurationSec: 3500,
      saveTranscripts: true,
      hasEngineKey: true,
    });
    expect(JSON.stringify(l.body)).not.toContain('AIza-secret-key-123');
    expect(s.logs.text()).not.toContain('AIza-secret-key-123');
    expect((await j(await f(`${v1}/numbers`, { key: keyB, host: B }))).body).toMatchObject({ total: 0, tenant: B });
    await adm('/signal.ashx?numbers=remove', 'numbers-remove', { number: '+4930555000' });
    expect((await j(await f(`${v1}/numbers`, { key: s.adminKey }))).body.total).toBe(0);
  });
});

describe('OpenAPI', () => {
  it('lists the telephony endpoints, the bridge callback as internal', async () => {
    const doc = (await j(await f('/openapi.json'))).body;
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api.ashx/v1/calls', '/api.ashx/v1/inbound-routes/{did}', '/internal/bridge/events']));
    expect(doc.paths['/internal/bridge/events'].post.tags).toEqual(['internal']);
  });
});
