import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { StatusList, createHeaderAndPayload } from '@sd-jwt/jwt-status-list';
import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { runCli } from '../../support/cli.ts';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { adminCall, body, openSession, sendEncrypted, VERIFIER_OVERRIDES } from './helpers.ts';
import { issuePid, makeHolder, makeIssuerCa, presentPid, walletClient, type Holder, type TestCa } from './wallet.ts';

let s: TestServer;
let ca: TestCa;
let holder: Holder;
const clock = new ManualClock(Date.now());
const nowS = () => Math.floor(clock.now() / 1000);

beforeAll(async () => {
  s = await startTestServer({
    clock,
    overrides: {
      plugins: {
        ...VERIFIER_OVERRIDES.plugins,
        'wallet-verifier': { perIpPerMinute: 100_000, statusList: { tenants: { 'accept.test': { unknown: 'accept' } } } },
        // Status lists are fetched under the webhooks' outbound policy: the test's list server is on
        // loopback, which the appliance allows here, except for strict.test (the default: refused).
        webhooks: { allowLoopback: true, tenants: { 'strict.test': { allowLoopback: false } } },
      },
    },
  });
  ca = await makeIssuerCa();
  holder = await makeHolder();
  expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem })).status).toBe(200);
});
afterAll(async () => {
  await s?.stop();
});

describe('verifier identity', () => {
  it('an access certificate from the tenant RP CA: SAN dNSName = tenant host, x509_hash and x509_san_dns client ids; renewed before expiry', async () => {
    const meta = await body(await s.fetch('/.well-known/eudiw-verifier-metadata'));
    expect(await body(await s.fetch('/.well-known/eudiw-verifier-metadata.json'))).toEqual(meta);
    const leafDer = Buffer.from(meta.x5c[0], 'base64');
    const leaf = new crypto.X509Certificate(leafDer);
    const caDer = Buffer.from(await (await s.fetch('/rp-cert.ashx?ca&format=der')).arrayBuffer());
    expect(leaf.verify(new crypto.X509Certificate(caDer).publicKey)).toBe(true);
    expect(leaf.subjectAltName).toBe(`DNS:${s.primary.host}`);
    expect(meta.client_ids).toEqual([`x509_hash:${crypto.createHash('sha256').update(leafDer).digest('base64url')}`, `x509_san_dns:${s.primary.host}`]);
    // The RP CA lists it as one of its certificates.
    const list = await body(await adminCall(s, 'GET', '/rp-cert.ashx?list', 'rp-cert-list'));
    // Serials compare as numbers: the list keeps the stored 32 hex digits, a leading 0 included.
    const asNumber = (hex: string) => BigInt(`0x${hex}`);
    expect(list.data.map((c: { serial: string }) => asNumber(c.serial))).toContain(asNumber(leaf.serialNumber));
    // Same certificate on the next use; a new one once fewer than 30 days are left.
    expect((await body(await s.fetch('/.well-known/eudiw-verifier-metadata'))).x5c).toEqual(meta.x5c);
    clock.advance(61 * 86_400_000);
    try {
      const renewed = await body(await s.fetch('/.well-known/eudiw-verifier-metadata'));
      expect(renewed.x5c).not.toEqual(meta.x5c);
      expect(Date.parse(renewed.certificate_not_after)).toBeGreaterThan(Date.parse(meta.certificate_not_after));
    } finally {
      clock.advance(-61 * 86_400_000);
    }
  });

  it('each tenant has its own verifier identity under its own RP CA', async () => {
    await s.addTenant('verifier-b.example');
    const host = 'verifier-b.example';
    const a = await body(await s.fetch('/.well-known/eudiw-verifier-metadata'));
    const b = await body(await s.fetch('/.well-known/eudiw-verifier-metadata', { host }));
    expect(b.client_ids[1]).toBe('x509_san_dns:verifier-b.example');
    expect(b.x5c[0]).not.toBe(a.x5c[0]);
    const caB = new crypto.X509Certificate(Buffer.from(await (await s.fetch('/rp-cert.ashx?ca&format=der', { host })).arrayBuffer()));
    expect(new crypto.X509Certificate(Buffer.from(b.x5c[0], 'base64')).verify(caB.publicKey)).toBe(true);
  });

  it('x509_san_dns: the request object carries the prefix and @openid4vc/openid4vp accepts it (SAN matches the response_uri host)', async () => {
    const host = `${s.primary.host}:${s.port}`;
    const st = await body(await s.fetch('/oidc.ashx?action=vp-start&preset=pid&client_id_prefix=x509_san_dns', { host }));
    expect(st.client_id).toBe(`x509_san_dns:${s.primary.host}`);
    const caDer = Buffer.from(await (await s.fetch('/rp-cert.ashx?ca&format=der')).arrayBuffer());
    const wallet = walletClient(caDer);
    // The wallet reaches the appliance by its host name (localhost: loopback here).
    const parsed = wallet.parseOpenid4vpAuthorizationRequest({ authorizationRequest: st.openid4vp_url });
    const resolved = await wallet.resolveOpenId4vpAuthorizationRequest({ authorizationRequestPayload: parsed.params as never });
    expect(resolved.client.prefix).toBe('x509_san_dns');
    const req = resolved.authorizationRequestPayload as Record<string, unknown>;
    expect(req).toMatchObject({ response_type: 'vp_token', response_mode: 'direct_post.jwt', client_id: st.client_id });
    expect((req.dcql_query as { credentials: { meta: unknown }[] }).credentials.map((c) => c.meta)).toEqual([
      { vct_values: ['urn:eudi:pid:1'] },
      { doctype_value: 'eu.europa.ec.eudi.pid.1' },
    ]);
  });

  it('the request object as the issue lists it: typ, x5c, client_metadata with an ECDH-ES P-256 key, vp_formats_supported', async () => {
    const o = await openSession(s, 'preset=age_over_18');
    expect(o.header).toMatchObject({ alg: 'ES256', typ: 'oauth-authz-req+jwt' });
    expect(o.header.x5c).toHaveLength(1);
    expect(o.encJwk).toMatchObject({ kty: 'EC', crv: 'P-256', use: 'enc', alg: 'ECDH-ES' });
    expect(o.encJwk!.d).toBeUndefined();
    const meta = o.payload.client_metadata as Record<string, unknown>;
    expect(meta.encrypted_response_enc_values_supported).toEqual(['A128GCM', 'A256GCM']);
    expect(Object.keys(meta.vp_formats_supported as object)).toEqual(['dc+sd-jwt', 'mso_mdoc']);
    expect(o.payload).toMatchObject({ response_mode: 'direct_post.jwt', state: expect.any(String), nonce: expect.any(String) });
    expect(JSON.stringify(o.payload.dcql_query)).toContain('age_equal_or_over');
    const r = await s.fetch(`/oidc.ashx?action=vp-start&preset=unknown`);
    expect(r.status).toBe(400);
  });
});

describe("the seed's other body shapes", () => {
  it('direct_post: a form with vp_token (DCQL object as JSON) and state', async () => {
    const o = await openSession(s, 'preset=pid&response_mode=direct_post');
    expect(o.encJwk).toBeUndefined();
    const token = await presentPid(await issuePid(ca, holder), holder, { aud: o.clientId, nonce: o.nonce, iat: nowS() });
    const r = await s.fetch(`/oidc.ashx?action=vp-response&session_id=${o.sessionId}`, {
      method: 'POST',
      body: new URLSearchParams({ vp_token: JSON.stringify({ pid_sd_jwt: [token] }), state: o.state }),
    });
    expect(r.status).toBe(200);
    expect((await body(r)).presentation.claims.family_name).toBe('Mustermann');
  });

  it('application/jose: the JWE as the whole body', async () => {
    const o = await openSession(s);
    const token = await presentPid(await issuePid(ca, holder), holder, { aud: o.clientId, nonce: o.nonce, iat: nowS() });
    const jwe = await new jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: token, state: o.state })))
      .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM' })
      .encrypt(await jose.importJWK(o.encJwk!, 'ECDH-ES'));
    const r = await s.fetch(`/oidc.ashx?action=vp-response&session_id=${o.sessionId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/jose' },
      body: jwe,
    });
    expect(r.status).toBe(200);
    expect((await body(r)).status).toBe('verified');
  });

  it('a plain form on a session that asked for direct_post.jwt is refused (response_mode)', async () => {
    const o = await openSession(s);
    const token = await presentPid(await issuePid(ca, holder), holder, { aud: o.clientId, nonce: o.nonce, iat: nowS() });
    const r = await s.fetch(`/oidc.ashx?action=vp-response&session_id=${o.sessionId}`, {
      method: 'POST',
      body: new URLSearchParams({ vp_token: token, state: o.state }),
    });
    expect(r.status).toBe(400);
    expect((await body(r)).check).toBe('response_mode');
  });

  it('a JWE encrypted to another key does not decrypt', async () => {
    const o = await openSession(s);
    const other = await jose.exportJWK((await jose.generateKeyPair('ECDH-ES', { crv: 'P-256' })).publicKey);
    const r = await sendEncrypted(s, { ...o, encJwk: other }, 'x.y.z~');
    expect(r.status).toBe(400);
    expect((await body(r)).error).toBe('invalid_request');
  });

  it('mdoc: a raw CBOR body with no issuer anchors at all answers 501 mdoc_verify_not_configured', async () => {
    const host = 'verifier-c.example';
    await s.addTenant(host);
    const st = await body(await s.fetch('/oidc.ashx?action=vp-start&preset=pid&response_mode=direct_post', { host }));
    await s.fetch(`/oidc.ashx?action=vp-request&session_id=${st.session_id}`, { host });
    const cbor = Buffer.from([
      0xa3,
      0x67,
      ...Buffer.from('version'),
      0x63,
      ...Buffer.from('1.0'),
      0x69,
      ...Buffer.from('documents'),
      0x80,
      0x66,
      ...Buffer.from('status'),
      0x00,
    ]);
    const r = await s.fetch(`/oidc.ashx?action=vp-response&session_id=${st.session_id}`, {
      method: 'POST',
      host,
      headers: { 'content-type': 'application/cbor' },
      body: cbor,
    });
    expect(r.status).toBe(501);
    expect((await body(r)).error).toBe('mdoc_verify_not_configured');
  });
});

describe('status list (draft-ietf-oauth-status-list) through the offline cache', () => {
  let server: http.Server;
  let base: string;
  let online = true;
  const lists = new Map<string, string>();

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const jwt = lists.get(req.url ?? '');
      if (!online) return req.socket.destroy();
      if (!jwt) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/statuslist+jwt' }).end(jwt);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  async function publish(p: string, statuses: number[], exp?: number) {
    const uri = `${base}${p}`;
    const claims = { iss: 'https://pid-provider.example', sub: uri, iat: nowS(), ...(exp === undefined ? {} : { exp }) };
    const { header, payload } = createHeaderAndPayload(new StatusList(statuses, 1), claims, {
      alg: 'ES256',
      typ: 'statuslist+jwt',
      x5c: ca.x5c,
    } as never);
    lists.set(
      p,
      await new jose.SignJWT(payload as jose.JWTPayload)
        .setProtectedHeader(header as jose.JWTHeaderParameters)
        .sign(await jose.importJWK(ca.issuerJwk, 'ES256')),
    );
    return uri;
  }

  async function present(uri: string, idx: number, host?: string) {
    const o = await openSession(s, 'preset=pid', host);
    const cred = await issuePid(ca, holder, { extraPayload: { status: { status_list: { idx, uri } } } });
    return sendEncrypted(s, o, await presentPid(cred, holder, { aud: o.clientId, nonce: o.nonce, iat: nowS() }), {}, host);
  }

  it('a cached list past its exp is never used: the status is unknown and refused; a tenant set to accept gets the presentation marked unknown', async () => {
    // The holder's attack: a genuine list from before the revocation, kept and replayed while the
    // issuer cannot be reached. Its exp bounds it; after that nothing vouches for the credential.
    for (const host of ['accept.test']) {
      await s.addTenant(host);
      expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem }, host)).status).toBe(200);
    }
    const uri = await publish('/lists/exp', [0, 0, 0, 0], nowS() + 600);
    expect((await present(uri, 0)).status).toBe(200);
    expect((await present(uri, 0, 'accept.test')).status).toBe(200);
    online = false;
    try {
      clock.advance(2 * 3600_000); // past the cache TTL and the list's exp; the refresh fails
      const refused = await present(uri, 0);
      expect(refused.status).toBe(400);
      const why = await body(refused);
      expect(why).toMatchObject({ check: 'status', error_description: expect.stringContaining('status is unknown') });
      expect(why.error_description).toContain('past its exp');
      const accepted = await present(uri, 0, 'accept.test');
      expect(accepted.status).toBe(200);
      expect((await body(accepted)).presentation).toMatchObject({ format: 'dc+sd-jwt', credential_status: 'unknown' });
    } finally {
      online = true;
      clock.advance(-2 * 3600_000);
    }
    // Back online, a fresh list (within its exp) answers again, and the copy is replaced.
    await publish('/lists/exp', [0, 0, 0, 0], nowS() + 600);
    expect((await present(uri, 0)).status).toBe(200);
  });

  it("fetches status lists under the tenant's outbound address policy: a loopback list is refused where the policy refuses loopback", async () => {
    await s.addTenant('strict.test');
    expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem }, 'strict.test')).status).toBe(200);
    const uri = await publish('/lists/strict', [0, 0]);
    let hits = 0;
    server.on('request', () => hits++);
    const refused = await present(uri, 0, 'strict.test');
    expect(refused.status).toBe(400);
    expect(await body(refused)).toMatchObject({ check: 'status', error_description: expect.stringContaining('cannot be fetched') });
    expect(hits).toBe(0);
    // The same list for a tenant whose policy allows loopback is fetched and verifies.
    expect((await present(uri, 0)).status).toBe(200);
    expect(hits).toBe(1);
  });

  it('valid entry verifies, revoked entry fails the status check; offline the cached list still answers; no copy and offline fails', async () => {
    const uri = await publish('/lists/1', [0, 1, 0, 0]);
    expect((await present(uri, 0)).status).toBe(200);
    const revoked = await present(uri, 1);
    expect(revoked.status).toBe(400);
    expect(await body(revoked)).toMatchObject({ check: 'status', error_description: expect.stringContaining('revoked') });
    online = false;
    try {
      clock.advance(2 * 3600_000); // past the cache TTL: a refresh is tried and fails; the copy serves
      expect((await present(uri, 2)).status).toBe(200);
      const never = await present(`${base}/lists/never-fetched`, 0);
      expect(never.status).toBe(400);
      expect((await body(never)).check).toBe('status');
    } finally {
      online = true;
      clock.advance(-2 * 3600_000);
    }
  });
});

describe('trust anchors: CLI and admin API', () => {
  it('verifier trust add / list --json / remove over the CLI, and the same over the API (auth required)', async () => {
    const other = await makeIssuerCa('CLI Provider');
    const dir = tempDir('verifier-cli-');
    const file = path.join(dir, 'root.pem');
    fs.writeFileSync(file, other.rootPem);
    try {
      const add = await runCli(['verifier', 'trust', 'add', file, '--tenant', s.primary.host], { dataDir: s.dataDir });
      expect(add.stderr).toBe('');
      expect(add.code).toBe(0);
      const sha = crypto.createHash('sha256').update(new crypto.X509Certificate(other.rootPem).raw).digest('hex');
      expect(add.stdout).toContain(sha);
      // The running server sees the anchor the CLI (another process) added: the provider's credential verifies.
      const before = await openSession(s);
      const ok = await sendEncrypted(
        s,
        before,
        await presentPid(await issuePid(other, holder), holder, { aud: before.clientId, nonce: before.nonce, iat: nowS() }),
      );
      expect(ok.status).toBe(200);
      const list = await runCli(['verifier', 'trust', 'list', '--json'], { dataDir: s.dataDir });
      expect(JSON.parse(list.stdout).map((a: { sha256: string }) => a.sha256)).toContain(sha);
      const api = await body(await adminCall(s, 'GET', '/signal.ashx?verifier-anchors=list', 'verifier-anchors-list'));
      expect(api.anchors.map((a: { sha256: string }) => a.sha256)).toContain(sha);
      expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: other.rootPem })).status).toBe(409);
      expect((await runCli(['verifier', 'trust', 'remove', sha], { dataDir: s.dataDir })).code).toBe(0);
      expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=remove', 'verifier-anchors-remove', { sha256: sha })).status).toBe(404);
      expect((await s.fetch('/signal.ashx?verifier-anchors=list')).status).toBe(401);
      expect((await s.fetch('/signal.ashx?verifier-anchors=add', { method: 'POST', json: { pem: other.rootPem } })).status).toBe(401);
      // A credential from that provider now fails x5c again (the server's anchor list follows the CLI's removal).
      const o = await openSession(s);
      const r = await sendEncrypted(s, o, await presentPid(await issuePid(other, holder), holder, { aud: o.clientId, nonce: o.nonce, iat: nowS() }));
      expect((await body(r)).check).toBe('x5c');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    // Three CLI child processes (each starts Node and tsx): on a loaded 2-core machine one took 10 s.
  }, 90_000);
});

describe('pages and limits', () => {
  it('the QR page renders the deep link as an SVG QR code and a same-device link', async () => {
    const st = await body(await s.fetch('/oidc.ashx?action=vp-start&preset=pid'));
    const html = await (await s.fetch(new URL(st.qr_page).pathname + new URL(st.qr_page).search)).text();
    expect(html).toContain('<svg');
    expect(html).toContain(`href="${st.openid4vp_url.replace(/&/g, '&#38;')}"`);
  });

  it('the public endpoints are rate-limited per IP (429 + Retry-After)', async () => {
    const t = await startTestServer({ overrides: { plugins: { 'wallet-verifier': { perIpPerMinute: 3 } } } });
    try {
      const codes: number[] = [];
      for (let i = 0; i < 5; i++) codes.push((await t.fetch('/oidc.ashx?action=vp-start&preset=pid')).status);
      expect(codes.slice(0, 3)).toEqual([200, 200, 200]);
      const r = await t.fetch('/oidc.ashx?action=vp-start&preset=pid');
      expect(r.status).toBe(429);
      expect(r.headers.get('retry-after')).toBeTruthy();
    } finally {
      await t.stop();
    }
  });
});
