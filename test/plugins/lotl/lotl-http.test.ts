import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../../../server/clock.ts';
import { main } from '../../../server/cli.ts';
import { LotlRepo } from '../../../plugins/lotl/repo.ts';
import { LotlService } from '../../../plugins/lotl/service.ts';
import { lotlConfig } from '../../../plugins/lotl/schemas.ts';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import {
  duplicateId,
  expiredNextUpdate,
  fixtureText,
  flipByteInSignedElement,
  moveSignature,
  secondSignature,
  SNAPSHOT,
  tar,
  truncated,
  withDoctype,
} from './support.ts';

const FIXED = Date.parse('2026-08-22T00:00:00Z');
const clock = new ManualClock(FIXED);
let s: TestServer;
let mirror: http.Server;
let mirrorUrl: string;
const hanging = new Set<http.ServerResponse>();
const scratch = tempDir('lotl-tampered-');

/** A loopback stand-in for the upstream publication points: the snapshot, minus two lists. */
function startMirror(): Promise<void> {
  mirror = http.createServer((req, res) => {
    const name = path.basename(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname));
    if (name === 'FI_TSL_FI.xml') {
      hanging.add(res); // never answers: the refresh must give up on its own
      return;
    }
    const file = path.join(SNAPSHOT, name);
    if (name === 'SE_TSL_SE.xml' || !/^[A-Za-z0-9_.-]+\.xml$/.test(name) || !fs.existsSync(file)) {
      res.writeHead(404).end('not here');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/xml' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((r) =>
    mirror.listen(0, '127.0.0.1', () => {
      mirrorUrl = `http://127.0.0.1:${(mirror.address() as AddressInfo).port}/tl/`;
      r();
    }),
  );
}

beforeAll(async () => {
  await startMirror();
  s = await startTestServer({
    clock,
    overrides: { plugins: { lotl: { autoRefresh: true, mirrorBaseUrl: mirrorUrl, fetchTimeoutMs: 5000, refreshBudgetMs: 30_000 } } },
  });
});

afterAll(async () => {
  await s?.stop();
  for (const r of hanging) r.destroy();
  await new Promise((r) => mirror?.close(r));
  fs.rmSync(scratch, { recursive: true, force: true });
});

// Response bodies are checked by the assertions themselves, so `any` is the honest type here.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
const json = async (p: string, init?: Parameters<TestServer['fetch']>[1]): Promise<{ status: number; body: Json }> => {
  const r = await s.fetch(p, init);
  return { status: r.status, body: await r.json() };
};

async function upload(name: string, xml: string | Buffer, opts: { signed?: boolean } = {}) {
  // Tampered copies go through a temp dir, as an operator's stick would (fixtures stay untouched).
  const file = path.join(scratch, name);
  fs.writeFileSync(file, xml);
  const body = fs.readFileSync(file);
  const headers: Record<string, string> = { 'Content-Type': 'application/xml' };
  if (opts.signed !== false) headers['X-Service-Admin-Signature'] = s.hmac('lotl-import', undefined, body.length);
  return s.fetch(`/lotl.ashx?import&name=${encodeURIComponent(name)}`, { method: 'POST', body, headers });
}

describe('trusted-list cache over HTTP', { timeout: 90_000 }, () => {
  it('starts empty: zero anchors, health degraded, a refresh scheduled', async () => {
    const { status, body } = await json('/lotl.ashx?status');
    expect(status).toBe(200);
    expect(body).toMatchObject({ anchor_count: 0, countries_covered: [], lists: [] });
    // Before the first run there is no as_of (it was the epoch, not a date-time of any run): state says why.
    expect(body).toMatchObject({ state: 'never-loaded', as_of: null, auto_refresh: true });
    expect(Date.parse(body.next_refresh_at)).toBe(FIXED + 10 * 60_000);
    const ready = await json('/readyz');
    expect(ready.body.plugins.lotl.state).toBe('started');
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('degraded');
    expect(ready.body.plugins.lotl.health).toMatchObject({ status: 'degraded', reason: expect.stringContaining('no trust anchors') });
  });

  it('POST ?refresh needs an admin: 401 without credentials', async () => {
    const r = await s.fetch('/lotl.ashx?refresh', { method: 'POST' });
    expect(r.status).toBe(401);
    expect(((await r.json()) as Json).error).toBeTruthy();
  });

  it('POST ?refresh fetches the LOTL and every list from the (loopback) upstream and reports each one', async () => {
    const t0 = Date.now();
    const r = await s.fetch('/lotl.ashx?refresh', { method: 'POST', headers: { 'X-Service-Admin-Signature': s.hmac('lotl-refresh') } });
    expect(r.status).toBe(200);
    const rep: Json = await r.json();
    // Bounded: the hanging FI download is given up (timeout) instead of holding the refresh.
    expect(Date.now() - t0).toBeLessThan(30_000 + 20_000);
    const by = new Map<string, { outcome: string; reason?: string; detail?: string }>(rep.lists.map((l: { territory: string }) => [l.territory, l]));
    expect(by.get('EU')).toMatchObject({ outcome: 'accepted', signature: 'valid', sequence: 390 });
    expect(by.get('AT')).toMatchObject({ outcome: 'accepted', signature: 'valid' });
    expect(by.get('EL')).toMatchObject({ outcome: 'accepted', signature: 'valid' });
    expect(by.get('SE')).toMatchObject({ outcome: 'failed', reason: 'network_error', detail: 'HTTP 404' });
    expect(by.get('DE')).toMatchObject({ outcome: 'failed', reason: 'network_error' });
    expect(by.get('FI')).toMatchObject({ outcome: 'failed', reason: 'timeout' });
    expect(by.get('HR')).toMatchObject({ outcome: 'rejected', reason: 'signer_not_pinned', signature: 'untrusted_signer', stale: true });
    expect(by.get('NL')).toMatchObject({ outcome: 'accepted', stale: true });
    expect(
      rep.lists
        .filter((l: Json) => l.outcome !== 'accepted')
        .map((l: Json) => `${l.territory}:${l.reason}`)
        .sort(),
    ).toEqual(['DE:network_error', 'FI:timeout', 'HR:signer_not_pinned', 'LI:network_error', 'SE:network_error']);
    expect(rep.accepted).toBe(27); // LOTL + 26 national lists (not HR, SE, FI; DE and LI are not in the snapshot)
    expect(rep.anchor_count).toBeGreaterThan(2500);
    const log = await json('/api.ashx/v1/auditlog?event=lotl.refresh', { key: s.adminKey });
    expect(log.body.data[0]).toMatchObject({ event: 'lotl-refresh', user: 'admin-hmac' });
  });

  it('sovcomms lotl import PATH imports the whole snapshot with progress lines', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['lotl', 'import', SNAPSHOT, '--data-dir', s.dataDir], { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' });
    expect(err).toEqual([]);
    expect(code).toBe(1); // HR is refused, so the import reports a failure
    expect(out[0]).toBe('importing 30 file(s)');
    expect(out.filter((l) => /^\[\d+\/30\] /.test(l))).toHaveLength(30);
    expect(out.find((l) => l.includes('eu-lotl.xml'))).toMatch(/^\[1\/30\] eu-lotl\.xml EU: unchanged \(sequence 390/);
    expect(out.find((l) => l.includes('SE_TSL_SE.xml'))).toMatch(/SE: accepted \(sequence 62, 18 services\)/);
    expect(out.find((l) => l.includes('NL_TSL_NL.xml'))).toMatch(/STALE/);
    expect(out.find((l) => l.includes('HR_TSL_HR.xml'))).toMatch(/rejected: signer_not_pinned/);
    expect(out.at(-1)).toMatch(/^done in \d+ ms: 29 accepted, 1 rejected, \d+ anchors from \d+ countries$/);
  });

  it('?status: the LotlManifest with per-list detail; NL, NO, HR stale, UK closed (clock 2026-08-22)', async () => {
    const { body } = await json('/lotl.ashx?status');
    expect(body.lotl_sequence).toBe(390);
    // NL and NO are stored but past their next update; as_of is the real time of the last run.
    expect(body.state).toBe('stale');
    expect(new Date(body.as_of).toISOString()).toBe(body.as_of);
    expect(Date.parse(body.as_of)).toBeGreaterThan(0);
    expect(body.anchor_count).toBeGreaterThan(3000);
    expect(body.countries_covered).toHaveLength(25);
    for (const c of ['AT', 'BE', 'GR', 'FI', 'SE', 'SI', 'IT']) expect(body.countries_covered).toContain(c); // ISO 3166-1: GR, not EL
    for (const c of ['HR', 'NL', 'NO', 'UK']) expect(body.countries_covered).not.toContain(c);
    expect(body.countries_missing).toEqual(expect.arrayContaining(['DE', 'LI', 'HR', 'NL', 'NO', 'UK']));
    const l = new Map<string, Record<string, unknown>>(body.lists.map((x: { territory: string }) => [x.territory, x]));
    expect(l.size).toBe(32); // LOTL + 29 lists + DE, LI (failed fetches)
    expect(l.get('EU')).toMatchObject({ kind: 'lotl', sequence: 390, signature: 'valid', signature_algorithm: 'rsa-sha512', stored: true });
    expect(l.get('NL')).toMatchObject({ stale: true, in_service: false, stored: true, signature: 'valid', next_update: '2026-08-10T12:30:21.000Z' });
    expect(l.get('NO')).toMatchObject({ stale: true, in_service: false });
    expect(l.get('HR')).toMatchObject({ stale: true, in_service: false, stored: false, signature: 'untrusted_signer', sequence: 52 });
    expect(l.get('UK')).toMatchObject({ closed: true, in_service: false, next_update: null });
    expect(l.get('AT')).toMatchObject({
      in_service: true,
      stale: false,
      sequence: 72,
      issued: expect.any(String),
      signer_sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(l.get('SI')).toMatchObject({ signature_algorithm: 'ecdsa-sha512' });
    expect(l.get('SE')!.source).toBe('import:SE_TSL_SE.xml');
  });

  it('health is degraded while lists are past their NextUpdate', async () => {
    const { body } = await json('/readyz');
    expect(body.plugins.lotl.health).toMatchObject({ status: 'degraded', reason: expect.stringContaining('NL') });
  });

  it('at the real now every list past its NextUpdate is stale and out of service; acceptExpired keeps them in', () => {
    const cfg = lotlConfig.parse({});
    const now = new LotlService(new LotlRepo(s.appliance.core.db), cfg, systemClock, s.appliance.core.log).manifest(null);
    for (const l of now.lists) {
      if (l.stored && l.next_update) expect(l.stale, l.territory).toBe(Date.parse(l.next_update) <= Date.now());
    }
    for (const c of ['HR', 'NL', 'NO']) expect(now.lists.find((l) => l.territory === c)!.stale).toBe(true);
    expect(now.countries_covered).not.toContain('NL');
    const lenient = new LotlService(new LotlRepo(s.appliance.core.db), lotlConfig.parse({ acceptExpired: true }), systemClock, s.appliance.core.log).manifest(
      null,
    );
    expect(lenient.countries_covered).toEqual(expect.arrayContaining(['NL', 'NO', 'GB']));
    expect(lenient.countries_covered).not.toContain('HR'); // a bad signer is never let in
  });

  it('?anchors lists fingerprints (optionally of one country); ?anchor= serves the PEM', async () => {
    const all = await json('/lotl.ashx?anchors');
    expect(all.status).toBe(200);
    expect(all.body.length).toBeGreaterThan(3000);
    const at = await json('/lotl.ashx?anchors&country=at');
    expect(at.body.length).toBeGreaterThan(10);
    expect(at.body.every((a: { country: string }) => a.country === 'AT')).toBe(true);
    expect(at.body[0]).toMatchObject({
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      service_type: expect.stringMatching(/Svctype/),
      status: expect.any(String),
      tsp_name: expect.any(String),
    });
    const sha = at.body[0].sha256;
    const r = await s.fetch(`/lotl.ashx?anchor=${sha.toUpperCase()}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/x-pem-file/);
    const cert = new crypto.X509Certificate(await r.text());
    expect(crypto.createHash('sha256').update(cert.raw).digest('hex')).toBe(sha);
    expect((await json('/lotl.ashx?anchors&country=NL')).body).toEqual([]); // stale: kept out
    const gr = (await json('/lotl.ashx?anchors&country=GR')).body;
    expect(gr.length).toBeGreaterThan(0);
    expect(gr[0]).toMatchObject({ country: 'GR', territory: 'EL' });
    expect((await json('/lotl.ashx?anchors&country=el')).body).toEqual(gr);
    expect((await s.fetch(`/lotl.ashx?anchor=${'0'.repeat(64)}`)).status).toBe(404);
    const bad = await json('/lotl.ashx?anchor=xyz');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_request');
    expect((await json('/lotl.ashx?anchors&country=Germany')).status).toBe(400);
  });

  it('anchors are appliance-wide public data: another tenant sees the same', async () => {
    await s.addTenant('office-b.example');
    const a = await json('/lotl.ashx?status');
    const b = await json('/lotl.ashx?status', { host: 'office-b.example' });
    expect(b.body.anchor_count).toBe(a.body.anchor_count);
  });

  it("upload import needs the super-admin: 401 anonymous, 403 for another tenant's admin", async () => {
    expect((await upload('CY_TSL_CY.xml', fixtureText('CY_TSL_CY.xml'), { signed: false })).status).toBe(401);
    await s.addTenant('office-c.example');
    const body = Buffer.from(fixtureText('CY_TSL_CY.xml'));
    const r = await s.fetch('/lotl.ashx?import', {
      method: 'POST',
      host: 'office-c.example',
      body,
      headers: { 'Content-Type': 'application/xml', 'X-Service-Admin-Signature': s.hmac('lotl-import', 'office-c.example', body.length) },
    });
    expect(r.status).toBe(403);
    expect(((await r.json()) as Json).error_description).toMatch(/super-admin/);
  });

  it('tampered copies are reported with a reason and kept out; the stored copy stays', async () => {
    const cy = fixtureText('CY_TSL_CY.xml');
    const before = (await json('/lotl.ashx?anchors&country=CY')).body;
    const cases: [string, string][] = [
      [flipByteInSignedElement(cy), 'digest_mismatch'],
      [expiredNextUpdate(cy), 'digest_mismatch'],
      [moveSignature(cy), 'signature_not_root_child'],
      [secondSignature(cy), 'multiple_signatures'],
      [duplicateId(cy), 'duplicate_ids'],
      [withDoctype(cy), 'doctype_refused'],
      [truncated(cy), 'malformed_xml'],
    ];
    for (const [xml, reason] of cases) {
      const r = await upload('CY_TSL_CY.xml', xml);
      expect(r.status).toBe(200);
      const rep: Json = await r.json();
      expect(rep.lists[0], reason).toMatchObject({ territory: 'CY', outcome: 'rejected', reason });
      expect(rep.rejected).toBe(1);
    }
    const st = (await json('/lotl.ashx?status')).body.lists.find((l: { territory: string }) => l.territory === 'CY');
    expect(st).toMatchObject({ in_service: true, sequence: 53, last_attempt: { outcome: 'rejected', reason: 'malformed_xml' } });
    expect((await json('/lotl.ashx?anchors&country=CY')).body).toEqual(before);
  });

  it('an older sequence number is refused (no rollback), an equal one is unchanged', async () => {
    const db = s.appliance.core.db;
    db.prepare("UPDATE lotl_lists SET sequence = 54 WHERE territory = 'CY'").run();
    const r: Json = await (await upload('CY_TSL_CY.xml', fixtureText('CY_TSL_CY.xml'))).json();
    expect(r.lists[0]).toMatchObject({ outcome: 'rejected', reason: 'older_sequence', signature: 'valid', sequence: 53 });
    db.prepare("UPDATE lotl_lists SET sequence = 53 WHERE territory = 'CY'").run();
    const again: Json = await (await upload('CY_TSL_CY.xml', fixtureText('CY_TSL_CY.xml'))).json();
    expect(again.lists[0]).toMatchObject({ outcome: 'unchanged', sequence: 53 });
  });

  it('a tar (or tar.gz) of the LOTL and lists imports through the admin HMAC (bucket lotl-import)', async () => {
    const body = tar(['eu-lotl.xml', 'IS_TSL_IS.xml', 'MT_TSL_MT.xml'].map((n) => ({ name: `stick/${n}`, bytes: fs.readFileSync(path.join(SNAPSHOT, n)) })));
    const r = await s.fetch('/lotl.ashx?import', {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/x-tar', 'X-Service-Admin-Signature': s.hmac('lotl-import', undefined, body.length) },
    });
    expect(r.status).toBe(200);
    const rep: Json = await r.json();
    expect(rep.lists.map((l: { territory: string; outcome: string }) => `${l.territory}:${l.outcome}`)).toEqual([
      'EU:unchanged',
      'IS:unchanged',
      'MT:unchanged',
    ]);
    const gz = zlib.gzipSync(tar([{ name: 'IS_TSL_IS.xml', bytes: fs.readFileSync(path.join(SNAPSHOT, 'IS_TSL_IS.xml')) }]));
    const rz = await s.fetch('/lotl.ashx?import', {
      method: 'POST',
      body: gz,
      headers: { 'Content-Type': 'application/gzip', 'X-Service-Admin-Signature': s.hmac('lotl-import', undefined, gz.length) },
    });
    expect(((await rz.json()) as Json).lists).toEqual([expect.objectContaining({ territory: 'IS', outcome: 'unchanged' })]);
    const junk = Buffer.alloc(1024, 1);
    const bad = await s.fetch('/lotl.ashx?import', {
      method: 'POST',
      body: junk,
      headers: { 'Content-Type': 'application/x-tar', 'X-Service-Admin-Signature': s.hmac('lotl-import', undefined, junk.length) },
    });
    expect(bad.status).toBe(400);
  });

  it('the scheduled refresh runs on the job queue and schedules the next one', async () => {
    const before = (await json('/lotl.ashx?status')).body;
    clock.advance(11 * 60_000);
    const deadline = Date.now() + 60_000;
    let next = before.next_refresh_at;
    while (Date.now() < deadline) {
      next = (await json('/lotl.ashx?status')).body.next_refresh_at;
      if (next && Date.parse(next) > FIXED + 3600_000) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(Date.parse(next)).toBe(Date.parse((await json('/lotl.ashx?status')).body.as_of) + 24 * 3600_000);
  });

  it('sovcomms lotl status prints the manifest', async () => {
    const out: string[] = [];
    expect(await main(['lotl', 'status', '--data-dir', s.dataDir], { out: (l) => out.push(l), err: () => undefined, stdin: async () => '' })).toBe(0);
    expect(out[0]).toMatch(/^state (current|stale) {2}as_of \S+ .* anchors \d+ {2}LOTL sequence 390$/);
    expect(out.find((l) => l.startsWith('HR '))).toMatch(/rejected/);
    const js: string[] = [];
    await main(['lotl', 'status', '--json', '--data-dir', s.dataDir], { out: (l) => js.push(l), err: () => undefined, stdin: async () => '' });
    expect(JSON.parse(js.join('\n')).lotl_sequence).toBe(390);
  });
});
