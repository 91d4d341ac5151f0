import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../server/clock.ts';
import { runCli, ROOT } from '../support/cli.ts';
import { startTestServer, tempDir, type TestServer } from '../support/server.ts';
import { saveClient, tokenForm } from '../plugins/oidc/helpers.ts';
import { adm, j, type Json } from '../plugins/telephony/helpers.ts';
import { admin as webhookAdmin } from '../plugins/webhooks/support.ts';

/**
 * An upgrade: today's appliance started on a data dir the previous release wrote (commit d91eb23,
 * the last commit of the session before last; test/fixtures/upgrade/, made by
 * scripts/make-upgrade-fixture.ts with real rows in every plugin through that release's API and a
 * real SIPp call). `sovcomms doctor` sees the pending migrations first; the start applies them;
 * then every row the manifest names is read back through today's API and CLI, credentials
 * included (the API keys, the OIDC client secret and the master key still open what they opened),
 * and doctor finds nothing pending. A migration that drops or mangles a plugin's data fails here.
 */
const RELEASE = 'd91eb23';
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'upgrade', `${RELEASE}.tar.gz`);
const V1 = '/api.ashx/v1';

let dir: string;
let dataDir: string;
let m: Json;
let s: TestServer;
/** Each part's schema version in the fixture as the old release left it (read before anything opens it). */
let before: Record<string, number>;

beforeAll(async () => {
  dir = tempDir('sovcomms-upgrade-');
  execFileSync('tar', ['-xzf', FIXTURE, '-C', dir]);
  dataDir = path.join(dir, 'data');
  m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  const db = new Database(path.join(dataDir, 'appliance.db'), { readonly: true });
  before = Object.fromEntries(
    (db.prepare('SELECT plugin, MAX(version) AS v FROM schema_migrations GROUP BY plugin').all() as { plugin: string; v: number }[]).map((r) => [
      r.plugin,
      r.v,
    ]),
  );
  db.close();
  // Two minutes after the fixture's own clock: the imported lists and certificates are current
  // and the verifier session (five minutes to live) is still open, as the old release left them.
  s = await startTestServer({
    dataDir,
    clock: new ManualClock(Date.parse('2026-08-10T09:02:00Z')),
    publicOrigin: true,
    overrides: { plugins: { webhooks: { allowCidrs: ['127.0.0.1/32'] } } },
  });
}, 120_000);

afterAll(async () => {
  await s?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const host = () => `127.0.0.1:${s.port}`;
const get = async (p: string, key: string = m.adminKey, h?: string) => j(s.fetch(p, { key, host: h }));

describe(`upgrade from release ${RELEASE}`, () => {
  it('the fixture is the old release: its schema was behind today’s (core 0004 and 0005, telephony 0006 to 0008 to apply)', () => {
    const release = JSON.parse(fs.readFileSync(path.join(dir, 'release.json'), 'utf8')) as { commit: string };
    expect(release.commit.startsWith(RELEASE)).toBe(true);
    expect(before).toMatchObject({
      core: 3,
      telephony: 5,
      oidc: 2,
      webhooks: 2,
      chat: 1,
      lotl: 1,
      'rp-ca': 1,
      'wallet-issuer': 4,
      'wallet-verifier': 6,
      audit: 2,
    });
    const now = new Database(path.join(dataDir, 'appliance.db'), { readonly: true });
    const after = Object.fromEntries(
      (now.prepare('SELECT plugin, MAX(version) AS v FROM schema_migrations GROUP BY plugin').all() as { plugin: string; v: number }[]).map((r) => [
        r.plugin,
        r.v,
      ]),
    );
    now.close();
    expect(after.core).toBeGreaterThan(3);
    expect(after.telephony).toBeGreaterThan(5);
  });

  it('tenants, users and API keys: both tenants, their admins’ keys, alice and bob with theirs', async () => {
    const tenants = await runCli(['tenant', 'list'], { dataDir });
    expect(tenants.code, tenants.stderr).toBe(0);
    expect(tenants.stdout).toContain(m.branch.tenantId);
    expect(tenants.stdout).toContain(m.primaryTenantId);
    expect(tenants.stdout).toMatch(/^branch\.example\s/m);
    const users = await runCli(['user', 'list'], { dataDir });
    expect(users.code, users.stderr).toBe(0);
    for (const u of ['admin', 'alice', 'bob']) expect(users.stdout).toMatch(new RegExp(`^${u}\\s+\\w+\\s+active\\s`, 'm'));
    expect(users.stdout).toContain(m.users.alice.id);
    // The stored key hashes still match the keys handed out before the upgrade.
    expect((await get(`${V1}/numbers`, m.branch.adminKey, 'branch.example')).status).toBe(200);
    for (const u of ['alice', 'bob']) {
      const me = await get('/chat.ashx?op=me', m.users[u].key);
      expect(me.status).toBe(200);
      expect(JSON.stringify(me.body)).toContain(u);
    }
  });

  it('telephony: the trunk, the number, both routes, the call with its trunk and the transcript file', async () => {
    const trunks = await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'));
    expect(trunks.status).toBe(200);
    const trunk = (trunks.body.trunks ?? trunks.body.data ?? trunks.body).find((t: Json) => t.id === 'carrier1');
    expect(trunk).toMatchObject({ id: 'carrier1', name: 'Carrier One', host: '127.0.0.1', transport: 'udp', username: 'office' });
    expect(JSON.stringify(trunks.body)).not.toContain('trunk-s3cret');
    const numbers = await get(`${V1}/numbers`);
    expect(JSON.stringify(numbers.body)).toContain('+4930555000');
    expect(JSON.stringify(numbers.body)).toContain('Hotline');
    const inbound = await get(`${V1}/inbound-routes`);
    expect(inbound.status).toBe(200);
    const route = JSON.stringify(inbound.body);
    for (const v of ['"200"', '"+49*"', '"alice"']) expect(route).toContain(v);
    const outbound = await get(`${V1}/outbound-routes`);
    expect(JSON.stringify(outbound.body)).toContain('+4930*');
    expect(JSON.stringify(outbound.body)).toContain('carrier1');
    const c = await get(`${V1}/calls/${m.call.id}`);
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ status: m.call.status, trunkId: 'carrier1' });
    const t = await get(`${V1}/transcripts/${m.call.id}`);
    expect(t.status).toBe(200);
    expect(t.body.turns.map((x: { speaker: string; text: string }) => [x.speaker, x.text])).toEqual(m.call.turns);
  });

  it('the trunk password still opens with the master key (sealed before the upgrade): saving without one keeps it', async () => {
    const r = await j(
      adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
        id: 'carrier1',
        name: 'Carrier One',
        host: '127.0.0.1',
        port: 5099,
        transport: 'udp',
        username: 'office',
      }),
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // The audit row of that save says the credential did not change: the sealed one was read and kept.
    const audit = await get(`${V1}/auditlog?limit=5`);
    expect(JSON.stringify(audit.body)).toMatch(/trunk=carrier1[^"]*credentialChanged=false/);
  });

  it('webhooks: the subscription and its delivery log', async () => {
    const list = await webhookAdmin(s, 'list');
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.json)).toContain(m.webhook.id);
    expect(JSON.stringify(list.json)).toContain(m.webhook.url);
    const deliveries = await webhookAdmin(s, 'deliveries', { query: `&id=${m.webhook.id}` });
    expect(deliveries.status).toBe(200);
    expect(deliveries.json.data.map((d: { id: string }) => d.id)).toEqual(expect.arrayContaining(m.webhook.deliveries));
  });

  it('OIDC: the client is listed and its secret (stored hashed) still gets a token', async () => {
    const tok = await tokenForm(s, host(), { grant_type: 'client_credentials', client_id: m.oidc.clientId, client_secret: m.oidc.clientSecret });
    expect(tok.status, JSON.stringify(tok.body)).toBe(200);
    expect(typeof tok.body.access_token).toBe('string');
    // And a new client next to it works as it would on a fresh install.
    const { client_secret } = await saveClient(s, host(), {
      client_id: 'after-upgrade',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_post',
    });
    expect((await tokenForm(s, host(), { grant_type: 'client_credentials', client_id: 'after-upgrade', client_secret: client_secret! })).status).toBe(200);
  });

  it('wallet issuer: both credentials with their offers, the revoked one revoked, and the status list says so', async () => {
    const list = async (offer: string) =>
      (await (await s.fetch(`/vci.ashx?credentials&offer_id=${offer}`, { headers: { 'X-Service-Admin-Signature': s.hmac('vci-credentials') } })).json()) as {
        data: { id: string; statusIndex: number; revokedAt: string | null }[];
      };
    const kept = await list(m.issuer.offerId);
    const revoked = await list(m.issuer.revokedOfferId);
    expect(kept.data).toHaveLength(1);
    expect(revoked.data).toHaveLength(1);
    expect(kept.data[0]!.statusIndex).toBe(m.issuer.statusIdx);
    expect(kept.data[0]!.revokedAt).toBeNull();
    expect(revoked.data[0]!.revokedAt).not.toBeNull();
    const jwt = await (await s.fetch(`/vci.ashx${new URL(m.issuer.statusUri as string).search}`)).text();
    const statusList = getListFromStatusListJWT(jwt);
    expect(statusList.getStatus(kept.data[0]!.statusIndex)).toBe(0);
    expect(statusList.getStatus(revoked.data[0]!.statusIndex)).toBe(1);
  });

  it('wallet verifier: the session a wallet left open is still there, pending', async () => {
    const r = await get(`/oidc.ashx?action=vp-result&session_id=${m.verifier.sessionId}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(JSON.stringify(r.body)).toMatch(/pending/);
    expect((await get('/oidc.ashx?action=vp-result&session_id=not-a-session')).status).toBe(404);
  });

  it('trusted lists: the LOTL and the national list imported from files, with their anchors', async () => {
    const st = (await get('/lotl.ashx?status')).body;
    expect(st).toMatchObject({
      lotl_sequence: m.lotl.status.lotl_sequence,
      anchor_count: m.lotl.status.anchor_count,
      countries_covered: m.lotl.status.countries_covered,
    });
    expect(m.lotl.status.anchor_count).toBeGreaterThan(0);
  });

  it('RP certificate authority: the issued certificate, listed with its serial and good', async () => {
    const r = await j(adm(s, '/rp-cert.ashx?list', 'rp-cert-list'));
    expect(r.status).toBe(200);
    const text = JSON.stringify(r.body).toLowerCase();
    expect(text).toContain(String(m.rpCert.serial).toLowerCase());
    expect(text).toContain('wallet-rp.example');
    const pem = new crypto.X509Certificate(m.rpCert.certificate as string);
    const ca = new crypto.X509Certificate(await (await s.fetch('/rp-cert.ashx?ca')).text());
    expect(pem.verify(ca.publicKey)).toBe(true);
  });

  it('chat: the thread’s messages in order, and the uploaded file byte for byte', async () => {
    const h = await get(`/chat.ashx?op=history&threadId=${m.chat.threadId}`, m.users.bob.key);
    expect(h.status).toBe(200);
    const texts = h.body.messages.map((x: { text: string | null }) => x.text).filter(Boolean);
    expect(texts).toEqual(m.chat.messages);
    const sha = m.chat.upload.file.sha as string;
    const file = await s.fetch(`/chat.ashx?op=download&sha=${sha}`, { key: m.users.bob.key });
    expect(file.status).toBe(200);
    expect(
      crypto
        .createHash('sha256')
        .update(Buffer.from(await file.arrayBuffer()))
        .digest('hex'),
    ).toBe(sha);
  });

  it('audit: every row of the old release is still in the log', async () => {
    const r = await get(`${V1}/auditlog?limit=500`);
    expect(r.status).toBe(200);
    const events = (r.body.data as { event: string }[]).map((a) => a.event);
    const left = [...(m.audit.events as string[])];
    for (const e of events) {
      const i = left.indexOf(e);
      if (i >= 0) left.splice(i, 1);
    }
    expect(left).toEqual([]);
    expect(r.body.total ?? events.length).toBeGreaterThanOrEqual(m.audit.total);
  });

  it('doctor on the old data dir (another copy, before any start) says which migrations were pending, and that its run applied them', async () => {
    const other = tempDir('sovcomms-upgrade-doctor-');
    try {
      execFileSync('tar', ['-xzf', FIXTURE, '-C', other]);
      const d = await runCli(['doctor'], { dataDir: path.join(other, 'data') });
      const out = d.stdout + d.stderr;
      expect(out).toContain(
        'warn  schema core was at version 3: 3 migration(s) were pending and were applied now (0004-backup, 0005-tenant-epoch, 0006-user-language); at version 6',
      );
      expect(out).toMatch(
        /warn {2}schema telephony was at version 5: 3 migration\(s\) were pending and were applied now \(0006-trunk-tls, 0007-srtp-g722, 0008-prompts-voicemail\); at version 8/,
      );
      expect(out).toMatch(/ok {4}schema oidc at version 2, none pending/);
      // A second run finds nothing left.
      const again = await runCli(['doctor'], { dataDir: path.join(other, 'data') });
      expect(again.stdout).not.toContain('were pending');
      expect(again.stdout).toMatch(/schema telephony at version 8, none pending/);
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
  });

  it('doctor after the start: every schema current, none pending', async () => {
    const d = await runCli(['doctor'], { dataDir });
    const out = d.stdout + d.stderr;
    expect(out).not.toMatch(/migration\(s\) pending/);
    expect(out).toMatch(/schema telephony at version \d+, none pending/);
    expect(out).toMatch(/schema core at version \d+, none pending/);
  });
});
