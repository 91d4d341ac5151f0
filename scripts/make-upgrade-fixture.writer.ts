/* eslint-disable @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-return, @typescript-eslint/restrict-template-expressions -- it reads the old release's JSON answers (any) as the tests do, the same rules eslint.config.js turns off under test/; must() checks each answer */
/**
 * Runs INSIDE an export of the previous release (scripts/make-upgrade-fixture.ts copies it there,
 * to the same path), with that release's code and its own test helpers: starts that appliance on
 * the data dir given in UPGRADE_DATA_DIR and writes real rows in every plugin through its HTTP
 * API (and, where a test of that release does the same, its core services), then stops it and
 * writes what it made to `<data dir>/../manifest.json`, for test/ops/upgrade.test.ts to read back.
 * Every step must succeed: a fixture with a silently missing plugin would test nothing.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ManualClock } from '../server/clock.ts';
import { startTestServer } from '../test/support/server.ts';
import { startSipp, type SippRun } from '../test/support/sipp.ts';
import { GeminiLiveFake } from '../test/support/gemini-live-fake.ts';
import { Receiver, admin as webhookAdmin } from '../test/plugins/webhooks/support.ts';
import { saveClient, tokenForm } from '../test/plugins/oidc/helpers.ts';
import { adm, call as callBody, j } from '../test/plugins/telephony/helpers.ts';
import { adminCall as rpAdminCall } from '../test/plugins/rp-ca/helpers.ts';
import { addUser, call as chatCall, upload } from '../test/plugins/chat/support.ts';
import { CLAIMS, credentialRequest, preAuthToken } from '../test/plugins/wallet-issuer/support.ts';
import { jwtProof, newHolder } from '../test/plugins/wallet-issuer/wallet.ts';

const dataDir = process.env.UPGRADE_DATA_DIR;
const fixtures = process.env.UPGRADE_TRUSTED_LISTS;
if (!dataDir || !fixtures) throw new Error('UPGRADE_DATA_DIR and UPGRADE_TRUSTED_LISTS must be set');
const V1 = '/api.ashx/v1';

function must(ok: unknown, what: string): void {
  if (!ok) throw new Error(`upgrade fixture: ${what}`);
}

async function until<T>(fn: () => Promise<T | null | undefined | false>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`upgrade fixture: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
const engine = new GeminiLiveFake({
  apiKey: 'AIza-upgrade-key',
  usage: { prompt: 120, response: 30 },
  script: [
    { say: 'Good morning, this is the practice.', audioMs: 600 },
    { hear: 'Hello?', ms: 400 },
    { say: 'Your appointment is tomorrow. Goodbye.', audioMs: 600 },
    { tool: 'end_call' },
  ],
});
await engine.start();
const rx = await new Receiver().start();
const base = 44000 + 2 * Math.floor(Math.random() * 2000);
/**
 * The appliance's clock at the trusted-list snapshot's date (August 2026): the lists it imports
 * are current then, whenever the fixture is made, and every row carries a time the reader can know.
 */
const FIXTURE_TIME = Date.parse('2026-08-10T09:00:00Z');
const clock = new ManualClock(FIXTURE_TIME);
const s = await startTestServer({
  clock,
  dataDir,
  publicOrigin: true,
  overrides: {
    plugins: {
      webhooks: { allowCidrs: ['127.0.0.1/32'] },
      telephony: {
        bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${base}-${base + 99}`, readyTimeoutMs: 20_000 },
        engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
        ringTimeoutSec: 10,
      },
    },
  },
});
let sipp: SippRun | null = null;
let stopped = false;
try {
  const m: Record<string, unknown> = { primaryTenantId: s.primary.id, primaryHost: s.primary.host };

  // Core: a second tenant with its own admin and key; users and ak_ keys in the primary.
  const branch = await s.addTenant('branch.example');
  m.branch = { tenantId: branch.tenant.id, host: 'branch.example', adminKey: branch.adminKey };
  m.adminKey = s.adminKey;
  const alice = await addUser(s, s.primary, 'alice', `127.0.0.1:${s.port}`);
  const bob = await addUser(s, s.primary, 'bob', `127.0.0.1:${s.port}`);
  m.users = { alice: { id: alice.id, key: alice.key }, bob: { id: bob.id, key: bob.key } };

  // Telephony: a trunk (with a password, encrypted at rest), a number, routes, and one real call
  // through the embedded bridge to SIPp with the engine fake: call record, transcript, events.
  await until(async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.state === 'ready', 20_000, 'bridge ready');
  sipp = await startSipp({ scenario: 'answer-play-pcap', calls: 1, timeoutSec: 40 });
  const trunk = {
    id: 'carrier1',
    name: 'Carrier One',
    host: '127.0.0.1',
    port: sipp.port,
    transport: 'udp',
    codecs: ['PCMA', 'PCMU'],
    username: 'office',
    password: 'trunk-s3cret',
  };
  must((await adm(s, '/signal.ashx?trunks=save', 'trunks-save', trunk)).status === 200, 'trunk saved');
  await until(
    async () =>
      ((await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health?.trunks ?? []).some(
        (t: { id: string }) => t.id === `${s.primary.id}.carrier1`,
      ),
    5000,
    'trunk at the bridge',
  );
  must((await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'carrier1' })).status === 200, 'default trunk');
  must(
    (
      await adm(s, '/signal.ashx?numbers=save', 'numbers-save', {
        number: '+4930555000',
        name: 'Hotline',
        geminiApiKey: 'AIza-number-key',
        systemPrompt: 'Be nice',
      })
    ).status === 200,
    'number saved',
  );
  const inRoute = await j(s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: '200', FromNumber: '+49*', User: 'alice' } }));
  must(inRoute.status < 300, `inbound route: ${JSON.stringify(inRoute.body)}`);
  must(JSON.stringify((await j(s.fetch(`${V1}/inbound-routes`, { key: s.adminKey }))).body).includes('"200"'), 'inbound route listed');
  const outRoute = await j(s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: '+4930*', trunkIds: ['carrier1'] } }));
  must(outRoute.status < 300, `outbound route: ${JSON.stringify(outRoute.body)}`);
  const placed = await j(
    s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: callBody({ apiKey: 'AIza-upgrade-key', voice: 'Puck', email: undefined }) }),
  );
  must(placed.body.ok === true, `call placed: ${JSON.stringify(placed.body)}`);
  const callId = placed.body.callId as string;
  const ended = await until(
    async () => {
      const c = (await j(s.fetch(`${V1}/calls/${callId}`, { key: s.adminKey }))).body;
      return c.status?.startsWith('ended') && c.transcriptPath ? c : null;
    },
    30_000,
    'call ended with a transcript',
  );
  const transcript = (await j(s.fetch(`${V1}/transcripts/${callId}`, { key: s.adminKey }))).body;
  must(Array.isArray(transcript.turns) && transcript.turns.length >= 2, 'transcript turns');
  m.call = {
    id: callId,
    status: ended.status,
    trunkId: ended.trunkId,
    turns: transcript.turns.map((t: { speaker: string; text: string }) => [t.speaker, t.text]),
  };

  // Webhooks: a subscription and a delivered test event.
  const hook = await webhookAdmin(s, 'add', { body: { url: `${rx.url}/hook`, events: ['call.ended', 'webhook.test'] } });
  must(hook.status === 200, `webhook add: ${JSON.stringify(hook.json)}`);
  must((await webhookAdmin(s, 'test', { body: { id: hook.json.id } })).status === 200, 'webhook test');
  await until(async () => rx.received.find((x) => x.path === '/hook' && x.headers['x-service-event'] === 'webhook.test'), 15_000, 'webhook delivered');
  const deliveries = await until(
    async () => {
      const d = await webhookAdmin(s, 'deliveries', { query: `&id=${hook.json.id}` });
      return d.json?.data?.length ? d.json.data : null;
    },
    10_000,
    'delivery rows',
  );
  m.webhook = { id: hook.json.id, url: `${rx.url}/hook`, deliveries: deliveries.map((d: { id: string }) => d.id) };

  // OIDC: a confidential client, and a token from the token endpoint.
  const host = `127.0.0.1:${s.port}`;
  const { client_secret } = await saveClient(s, host, {
    client_id: 'upgrade-app',
    grant_types: ['client_credentials'],
    token_endpoint_auth_method: 'client_secret_post',
  });
  must(client_secret, 'client secret');
  const tok = await tokenForm(s, host, { grant_type: 'client_credentials', client_id: 'upgrade-app', client_secret: client_secret! });
  must(tok.status === 200, `client_credentials: ${JSON.stringify(tok.body)}`);
  m.oidc = { clientId: 'upgrade-app', clientSecret: client_secret };

  // Wallet issuer: an offer, an SD-JWT VC issued on it (a status list entry), then revoked.
  const t = await preAuthToken(s, { claims: CLAIMS });
  const cred = await credentialRequest(s, t.access_token, {
    format: 'dc+sd-jwt',
    vct: 'urn:eudi:pid:1',
    proof: { proof_type: 'jwt', jwt: await jwtProof(newHolder(), { aud: s.url, nonce: t.c_nonce, iat: Math.floor(clock.now() / 1000) }) },
  });
  must(cred.status === 200, `credential: ${cred.status}`);
  const sdjwt = ((await cred.json()) as { credential: string }).credential;
  const status = (JSON.parse(Buffer.from(sdjwt.split('.')[1]!, 'base64url').toString()) as { status: { status_list: { idx: number; uri: string } } }).status
    .status_list;
  const second = await preAuthToken(s, { claims: { ...CLAIMS, given_name: 'Max' } });
  const cred2 = await credentialRequest(s, second.access_token, {
    format: 'dc+sd-jwt',
    vct: 'urn:eudi:pid:1',
    proof: { proof_type: 'jwt', jwt: await jwtProof(newHolder(), { aud: s.url, nonce: second.c_nonce, iat: Math.floor(clock.now() / 1000) }) },
  });
  must(cred2.status === 200, 'second credential');
  const rev = await s.fetch('/vci.ashx?revoke', {
    method: 'POST',
    json: { offer_id: second.offer_id },
    headers: { 'X-Service-Admin-Signature': s.hmac('vci-revoke') },
  });
  must(rev.status === 200, `revoke: ${rev.status}`);
  m.issuer = { offerId: t.offer_id, revokedOfferId: second.offer_id, statusIdx: status.idx, statusUri: status.uri };

  // Wallet verifier: a presentation session (pending, as a wallet left it).
  // (The helper's openSession checks the request object's exp against the real time, not the fixture's.)
  const started = (await j(s.fetch('/oidc.ashx?action=vp-start&preset=pid'))).body;
  must(started.session_id, `vp-start: ${JSON.stringify(started)}`);
  const requestObject = await s.fetch(`/oidc.ashx?action=vp-request&session_id=${started.session_id}`);
  must(requestObject.status === 200, `vp-request: ${requestObject.status}`);
  const payload = JSON.parse(Buffer.from((await requestObject.text()).split('.')[1]!, 'base64url').toString()) as { client_id: string; nonce: string };
  m.verifier = { sessionId: started.session_id, clientId: payload.client_id, nonce: payload.nonce };

  // Trusted lists: the LOTL and one national list of the August 2026 snapshot, imported from files.
  for (const name of ['eu-lotl.xml', 'CY_TSL_CY.xml']) {
    const body = fs.readFileSync(path.join(fixtures, name));
    const r = await s.fetch(`/lotl.ashx?import&name=${encodeURIComponent(name)}`, {
      method: 'POST',
      body,
      headers: { 'Content-Type': 'application/xml', 'X-Service-Admin-Signature': s.hmac('lotl-import', undefined, body.length) },
    });
    must(r.status === 200, `lotl import ${name}: ${r.status} ${await r.text()}`);
  }
  const lotl = (await j(s.fetch('/lotl.ashx?status'))).body;
  m.lotl = { status: lotl };

  // RP certificate authority: a relying-party certificate.
  const issued = await rpAdminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', {
    json: { client_id: 'wallet-rp.example', include_key: true, days: 365 },
  });
  must(issued.status === 200, `rp cert: ${issued.status}`);
  const rp = (await issued.json()) as Record<string, unknown>;
  m.rpCert = { clientId: 'wallet-rp.example', serial: rp.serial ?? rp.serialNumber, certificate: rp.certificate ?? rp.cert };

  // Chat: a direct thread with messages, and an upload (a file under data/tenants/<id>/).
  const msg1 = await chatCall(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'hello bob, before the upgrade' });
  must(msg1.status === 200, `chat send: ${JSON.stringify(msg1.body)}`);
  const msg2 = await chatCall(s, bob, 'POST', '/chat.ashx?op=send&with=alice', { text: 'hi alice' });
  must(msg2.status === 200, 'chat reply');
  const fileBytes = crypto.createHash('sha256').update('upgrade').digest();
  const up = await upload(s, alice, 'with=bob', 'notes.bin', Buffer.concat([Buffer.from('sovcomms upgrade fixture\n'), fileBytes]));
  must(up.status === 200, `chat upload: ${JSON.stringify(up.body)}`);
  m.chat = { threadId: msg1.body.threadId, messages: ['hello bob, before the upgrade', 'hi alice'], upload: up.body };

  // Audit: what the steps above wrote.
  const audit = (await j(s.fetch(`${V1}/auditlog?limit=500`, { key: s.adminKey }))).body;
  m.audit = { total: audit.total ?? audit.data?.length, events: (audit.data ?? []).map((a: { event: string }) => a.event).sort() };

  await s.stop();
  stopped = true;
  fs.writeFileSync(path.join(path.dirname(dataDir), 'manifest.json'), JSON.stringify(m, null, 2) + '\n');
  console.log(`upgrade fixture written: ${Object.keys(m).join(', ')}`);
} finally {
  if (!stopped) await s.stop();
  await sipp?.stop();
  await engine.stop();
  await rx.stop();
}
process.exit(0);
