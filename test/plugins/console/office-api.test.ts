import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvCell, toCsv } from '../../../server/http/csv.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adm, call, j } from '../telephony/helpers.ts';
import { adminCall, registerClient } from '../rp-ca/helpers.ts';

/**
 * The API side of the console's office tasks: what a form can only show right when the API says
 * it (a past schedule time, a trunk still in use, a whitelist entry to remove or re-comment, a
 * webhook to edit, an RP certificate only for a registered client and its PEM) and the CSV
 * exports of calls, transcripts and the audit log.
 */
let s: TestServer;
const V1 = '/api.ashx/v1';
const HOUR = 3600_000;

beforeAll(async () => {
  s = await startTestServer({
    overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: 'http://127.0.0.1:9/', token: 'office-api-bridge-token-0123456789' } } } },
  });
}, 60_000);
afterAll(async () => {
  await s?.stop();
});

const post = (body: unknown) => j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: body }));

describe('scheduling a call', () => {
  it('a time in the past is refused (400 schedule_in_past naming scheduleAtUtc); within the 60 s grace it dials now; a future one is scheduled', async () => {
    const past = await post(call({ scheduleAtUtc: new Date(Date.now() - 10 * 60_000).toISOString() }));
    expect(past.status).toBe(400);
    expect(past.body).toMatchObject({ error: 'schedule_in_past', field: 'scheduleAtUtc' });
    expect((await j(s.fetch(`${V1}/calls`, { key: s.adminKey }))).body.total).toBe(0);

    // 20 s behind: a client clock a little slow. Not refused; dialled at once (the bridge is down: 502).
    const skew = await post(call({ scheduleAtUtc: new Date(Date.now() - 20_000).toISOString() }));
    expect(skew.status).not.toBe(400);

    const at = new Date(Date.now() + 2 * HOUR).toISOString();
    const later = await post(call({ scheduleAtUtc: at }));
    expect(later.status).toBe(200);
    expect(later.body).toMatchObject({ status: 'scheduled', bridgeReply: `scheduled for ${at}` });
  });
});

describe('trunks used by outbound routes', () => {
  it('remove answers 409 trunk_in_use naming the routes; with force the trunk leaves them and an emptied route goes, in one step', async () => {
    for (const id of ['sipgate', 'backup'])
      expect((await j(adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id, name: id, host: '127.0.0.1' }))).status).toBe(200);
    await j(s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: '+49*', trunkIds: ['sipgate', 'backup'] } }));
    await j(s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: 'global', trunkIds: ['sipgate'] } }));

    const refused = await j(adm(s, '/signal.ashx?trunks=remove', 'trunks-remove', { id: 'sipgate' }));
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: 'trunk_in_use', routes: ['+49*', 'global'] });
    expect(refused.body.error_description).toContain('trunk sipgate is used by 2 outbound route(s): +49*, global');
    expect((await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body.trunks.map((t: { id: string }) => t.id)).toContain('sipgate');

    const forced = await j(adm(s, '/signal.ashx?trunks=remove', 'trunks-remove', { id: 'sipgate', force: true }));
    expect(forced.status).toBe(200);
    expect(forced.body).toMatchObject({ ok: true, routesChanged: ['+49*'], routesRemoved: ['global'] });
    const routes = (await j(s.fetch(`${V1}/outbound-routes`, { key: s.adminKey }))).body.data;
    expect(routes).toEqual([{ match: '+49*', trunkIds: ['backup'] }]);
    // A trunk no route lists goes without force.
    expect((await j(adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'spare', name: 'spare', host: '127.0.0.1' }))).status).toBe(200);
    expect((await j(adm(s, '/signal.ashx?trunks=remove', 'trunks-remove', { id: 'spare' }))).status).toBe(200);
  });

  it('a trunk is edited by saving it again under its id: caller id, codecs, max calls and SRV change, the password stays', async () => {
    await j(adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'edit', name: 'Edit', host: '127.0.0.1', password: 'secret-1' }));
    const r = await j(
      adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
        id: 'edit',
        name: 'Edited',
        host: 'sip.example',
        callerId: '+4930999',
        codecs: ['PCMA'],
        maxConcurrentCalls: 3,
        dnsSrv: true,
      }),
    );
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      id: 'edit',
      name: 'Edited',
      callerId: '+4930999',
      codecs: ['PCMA'],
      maxConcurrentCalls: 3,
      dnsSrv: true,
      hasPassword: true,
    });
  });
});

describe('whitelist', () => {
  it('a second add of a listed number takes its new comment; remove takes it off (404 when absent)', async () => {
    const a = await j(adm(s, '/signal.ashx?whitelist=add', 'whitelist-add', { number: '+4930555000', comment: 'first' }));
    expect(a.body).toMatchObject({ ok: true, added: true, updated: false });
    const b = await j(adm(s, '/signal.ashx?whitelist=add', 'whitelist-add', { number: '+4930555000', comment: 'reception desk' }));
    expect(b.body).toMatchObject({ ok: true, added: false, updated: true });
    const list = (await j(adm(s, '/signal.ashx?whitelist=list', 'whitelist-list'))).body as { number: string; comment: string }[];
    expect(list.filter((w) => w.number === '+4930555000')).toMatchObject([{ comment: 'reception desk' }]);

    const rm = await j(adm(s, '/signal.ashx?whitelist=remove', 'whitelist-remove', { number: '+4930555000' }));
    expect(rm.status).toBe(200);
    expect(rm.body.removed).toMatchObject({ number: '+4930555000', comment: 'reception desk' });
    expect(((await j(adm(s, '/signal.ashx?whitelist=list', 'whitelist-list'))).body as { number: string }[]).some((w) => w.number === '+4930555000')).toBe(
      false,
    );
    expect((await j(adm(s, '/signal.ashx?whitelist=remove', 'whitelist-remove', { number: '+4930555000' }))).status).toBe(404);
    const audit = (await j(s.fetch(`${V1}/auditlog?event=whitelist-remove`, { key: s.adminKey }))).body.data;
    expect(audit[0].extra).toContain('+4930555000');
  });
});

describe('webhooks', () => {
  it('update changes the URL (checked as on add) and the events; the secret and the id stay', async () => {
    const add = await j(
      adminCall(s, 'POST', '/signal.ashx?webhooks=add', 'webhooks-add', { json: { url: 'https://crm.example/hook', events: ['call.ended'] } }),
    );
    expect(add.status).toBe(200);
    const id = add.body.id as string;
    const up = await j(adminCall(s, 'POST', '/signal.ashx?webhooks=update', 'webhooks-update', { json: { id, url: 'https://crm2.example/hook' } }));
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({ id, url: 'https://crm2.example/hook', events: ['call.ended'] });
    const ev = await j(adminCall(s, 'POST', '/signal.ashx?webhooks=update', 'webhooks-update', { json: { id, events: ['call.ended', 'call.started'] } }));
    expect(ev.body).toMatchObject({ url: 'https://crm2.example/hook', events: ['call.ended', 'call.started'] });
    const bad = await j(adminCall(s, 'POST', '/signal.ashx?webhooks=update', 'webhooks-update', { json: { id, url: 'ftp://x' } }));
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe('url');
    // An event name nobody declares is refused on update as on add, naming the known ones.
    const typo = await j(adminCall(s, 'POST', '/signal.ashx?webhooks=update', 'webhooks-update', { json: { id, events: ['not.an.event'] } }));
    expect(typo.status).toBe(400);
    expect(typo.body.error).toBe('unknown_event');
    expect(String(typo.body.error_description)).toContain('call.ended');
    const missing = await j(
      adminCall(s, 'POST', '/signal.ashx?webhooks=update', 'webhooks-update', { json: { id: '0123456789abcdef', url: 'https://a.example/' } }),
    );
    expect(missing.status).toBe(404);
  });
});

describe('RP certificates', () => {
  it('are issued only for a registered OIDC client of the tenant; the certificate is served as PEM by serial', async () => {
    const refused = await j(adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', { json: { client_id: 'unknown-verifier.example' } }));
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: 'invalid_client_id', field: 'client_id' });
    expect(refused.body.error_description).toContain('not a registered OIDC client');

    await registerClient(s, 'verifier.example');
    const ok = await j(
      adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', { json: { client_id: 'x509_san_dns:verifier.example', include_key: true } }),
    );
    expect(ok.status).toBe(200);
    const pem = await adminCall(s, 'GET', `/rp-cert.ashx?cert&serial=${ok.body.serial as string}`, 'rp-cert-cert');
    expect(pem.status).toBe(200);
    expect(pem.headers.get('content-type')).toContain('application/x-pem-file');
    expect(pem.headers.get('content-disposition')).toBe(`attachment; filename="rp-cert-${ok.body.serial as string}.pem"`);
    expect(await pem.text()).toBe(ok.body.certificate);
    expect((await adminCall(s, 'GET', '/rp-cert.ashx?cert&serial=00ff', 'rp-cert-cert')).status).toBe(404);
  });
});

describe('CSV exports', () => {
  it('cells are RFC 4180 quoted and formula-looking cells are defused', () => {
    expect(csvCell('plain')).toBe('plain');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"\nbye')).toBe('"say ""hi""\nbye"');
    for (const f of ['=1+1', '+4930', '-2', '@SUM(A1)', '\tx']) expect(csvCell(f).startsWith(`'`) || csvCell(f).startsWith(`"'`)).toBe(true);
    expect(csvCell('=HYPERLINK("http://x","y")')).toBe(`"'=HYPERLINK(""http://x"",""y"")"`);
    expect(csvCell(-3)).toBe('-3');
    expect(toCsv(['a', 'b'], [[1, null]])).toBe('\uFEFFa,b\r\n1,\r\n');
  });

  it('calls, transcripts and the audit log export the filter as text/csv', async () => {
    const evil = await post(call({ displayName: '=cmd|calc', scheduleAtUtc: new Date(Date.now() + 5 * HOUR).toISOString() }));
    expect(evil.status).toBe(200);
    const res = await s.fetch(`${V1}/calls/export?status=scheduled`, { key: s.adminKey });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="calls.csv"');
    const lines = (await res.text())
      .replace(/^\uFEFF/, '')
      .trim()
      .split('\r\n');
    expect(lines[0]).toMatch(/^callId,status,phone,displayName,/);
    expect(lines.length).toBe(3);
    for (const l of lines.slice(1)) expect(l).toContain(',scheduled,');
    expect(lines.find((l) => l.includes(evil.body.callId as string))).toContain(`,'=cmd|calc,`);
    // The filter is the list's: an unknown state is the same 400.
    expect((await s.fetch(`${V1}/calls/export?status=nope`, { key: s.adminKey })).status).toBe(400);

    const tr = await s.fetch(`${V1}/transcripts/export?source=both`, { key: s.adminKey });
    expect(tr.status).toBe(200);
    expect(tr.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect((await tr.text()).replace(/^\uFEFF/, '').split('\r\n')[0]).toMatch(/^callId,callerSource,startedUtc,/);

    const au = await s.fetch(`${V1}/auditlog/export?event=trunk-remove`, { key: s.adminKey });
    expect(au.status).toBe(200);
    const rows = (await au.text())
      .replace(/^\uFEFF/, '')
      .trim()
      .split('\r\n');
    expect(rows[0]).toBe('ts,event,user,ip,ua,extra');
    expect(rows.length).toBeGreaterThan(1);
    for (const r of rows.slice(1)) expect(r).toContain(',trunk-remove,');
    // Admins only, like the lists.
    expect((await s.fetch(`${V1}/auditlog/export`)).status).toBe(401);
  });
});
