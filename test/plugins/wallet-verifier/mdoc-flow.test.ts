/**
 * mdoc presentations end to end: @owf/mdoc issues a PID mdoc under a test IACA and answers our
 * request as the wallet (DeviceResponse signed over SessionTranscript.forOid4Vp), sent the ways
 * wallets send it; each check failing alone names itself.
 */
import crypto from 'node:crypto';
import { DataItem, cborDecode, cborEncode } from '@owf/mdoc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminCall, body, openSession, type OpenSession, VERIFIER_OVERRIDES } from './helpers.ts';
import { PID_DOCTYPE, issueMdocPid, presentMdoc } from './mdoc-wallet.ts';
import { makeHolder, makeIssuerCa, type Holder, type TestCa } from './wallet.ts';
import * as jose from 'jose';

let s: TestServer;
let iaca: TestCa;
let holder: Holder;

beforeAll(async () => {
  s = await startTestServer({ overrides: VERIFIER_OVERRIDES });
  iaca = await makeIssuerCa('Test PID IACA');
  holder = await makeHolder();
  const r = await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: iaca.rootPem });
  expect(r.status).toBe(200);
});
afterAll(async () => {
  await s?.stop();
});

const b64 = (u: Uint8Array) => Buffer.from(u).toString('base64url');

/** direct_post.jwt: the DeviceResponse in vp_token, encrypted to the session key (whose thumbprint is in the transcript). */
async function sendEncrypted(o: OpenSession, deviceResponse: Uint8Array): Promise<Response> {
  const jwe = await new jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: { pid_mdoc: [b64(deviceResponse)] }, state: o.state })))
    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM', kid: o.encJwk!.kid })
    .encrypt(await jose.importJWK(o.encJwk!, 'ECDH-ES'));
  const u = new URL(o.responseUri);
  return s.fetch(u.pathname + u.search, { method: 'POST', body: new URLSearchParams({ response: jwe }) });
}

const handover = (o: OpenSession, encrypted = true) => ({
  clientId: o.clientId,
  nonce: o.nonce,
  responseUri: o.responseUri,
  encJwk: encrypted ? o.encJwk : undefined,
});

async function expectCheck(r: Response, check: string) {
  const out = await body(r);
  expect(r.status, JSON.stringify(out)).toBe(400);
  expect(out).toMatchObject({ error: 'invalid_presentation', check, status: 'error' });
  return out;
}

describe('mdoc PID over OpenID4VP 1.0', () => {
  it('direct_post.jwt: verified, the disclosed elements in presentation, vp-result and the webhook event agree', async () => {
    const o = await openSession(s);
    const r = await sendEncrypted(o, await presentMdoc(await issueMdocPid(iaca, holder), holder, handover(o)));
    const out = await body(r);
    expect(r.status, JSON.stringify(out)).toBe(200);
    expect(out).toMatchObject({
      status: 'verified',
      session_id: o.sessionId,
      presentation: { format: 'mso_mdoc', doctype: PID_DOCTYPE, claims: { family_name: 'Mustermann', given_name: 'Erika', birth_date: '1964-08-12' } },
    });
    expect(out.presentation.claims.nationality).toBeUndefined();
    expect(out.presentation.issuer).toContain('Test PID IACA Signer');
    expect((await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${o.sessionId}`))).status).toBe('verified');
    const row = s.appliance.core.db.prepare("SELECT data FROM events WHERE name = 'presentation.verified' ORDER BY id DESC LIMIT 1").get() as { data: string };
    expect(JSON.parse(row.data)).toMatchObject({ sessionId: o.sessionId, format: 'mso_mdoc', claimNames: ['birth_date', 'family_name', 'given_name'] });
  });

  it('a raw CBOR body (first byte a map header) is verified with no encryption key in the transcript', async () => {
    const o = await openSession(s, 'preset=pid&response_mode=direct_post');
    const dr = await presentMdoc(await issueMdocPid(iaca, holder), holder, handover(o, false));
    expect(dr[0]! >= 0xa0 && dr[0]! <= 0xbb).toBe(true);
    const u = new URL(o.responseUri);
    const r = await s.fetch(u.pathname + u.search, { method: 'POST', headers: { 'content-type': 'application/cbor' }, body: Buffer.from(dr) });
    expect(r.status).toBe(200);
    expect((await body(r)).presentation.format).toBe('mso_mdoc');
  });

  it('direct_post form: vp_token as the 1.0 DCQL object with base64url CBOR', async () => {
    const o = await openSession(s, 'preset=pid&response_mode=direct_post');
    const dr = await presentMdoc(await issueMdocPid(iaca, holder), holder, handover(o, false));
    const u = new URL(o.responseUri);
    const r = await s.fetch(u.pathname + u.search, {
      method: 'POST',
      body: new URLSearchParams({ vp_token: JSON.stringify({ pid_mdoc: [b64(dr)] }), state: o.state }),
    });
    expect(r.status).toBe(200);
  });
});

describe('mdoc checks failing alone', () => {
  it('an mdoc from an IACA this tenant does not trust: x5chain', async () => {
    const other = await makeIssuerCa('Untrusted IACA');
    const o = await openSession(s);
    await expectCheck(await sendEncrypted(o, await presentMdoc(await issueMdocPid(other, holder), holder, handover(o))), 'x5chain');
  });

  it('a document whose docType differs from its MSO: doc_type', async () => {
    const o = await openSession(s);
    const dr = cborDecode(
      await presentMdoc(await issueMdocPid(iaca, holder, { docType: 'org.iso.18013.5.1.mDL' }), holder, handover(o), { docType: 'org.iso.18013.5.1.mDL' }),
    ) as Map<string, unknown>;
    (dr.get('documents') as Map<string, unknown>[])[0]!.set('docType', PID_DOCTYPE);
    await expectCheck(await sendEncrypted(o, cborEncode(dr)), 'doc_type');
  });

  it('a tampered item: digest', async () => {
    const o = await openSession(s);
    const dr = cborDecode(await presentMdoc(await issueMdocPid(iaca, holder), holder, handover(o))) as Map<string, unknown>;
    const ns = ((dr.get('documents') as Map<string, unknown>[])[0]!.get('issuerSigned') as Map<string, unknown>).get('nameSpaces') as Map<string, DataItem[]>;
    const items = ns.get(PID_DOCTYPE)!;
    const i = items.findIndex((d) => (d.data as Map<string, unknown>).get('elementIdentifier') === 'family_name');
    const item = items[i]!.data as Map<string, unknown>;
    item.set('elementValue', 'Musterfrau');
    items[i] = DataItem.fromData(item);
    const out = await expectCheck(await sendEncrypted(o, cborEncode(dr)), 'digest');
    expect(out.error_description).toMatch(/family_name/);
  });

  it('a wrong nonce in the handover: device_signature', async () => {
    const o = await openSession(s);
    const dr = await presentMdoc(await issueMdocPid(iaca, holder), holder, { ...handover(o), nonce: crypto.randomBytes(16).toString('base64url') });
    await expectCheck(await sendEncrypted(o, dr), 'device_signature');
  });

  it('another client_id or response_uri in the handover: device_signature', async () => {
    const o = await openSession(s);
    const dr = await presentMdoc(await issueMdocPid(iaca, holder), holder, { ...handover(o), responseUri: 'https://elsewhere.example/cb' });
    await expectCheck(await sendEncrypted(o, dr), 'device_signature');
    const o2 = await openSession(s);
    const dr2 = await presentMdoc(await issueMdocPid(iaca, holder), holder, { ...handover(o2), clientId: 'x509_san_dns:elsewhere.example' });
    await expectCheck(await sendEncrypted(o2, dr2), 'device_signature');
  });

  it('an expired MSO: validity', async () => {
    const o = await openSession(s);
    const day = 86_400_000;
    const mso = await issueMdocPid(iaca, holder, {
      signed: new Date(Date.now() - 0.5 * day),
      validFrom: new Date(Date.now() - 0.5 * day),
      validUntil: new Date(Date.now() - 60_000),
    });
    const out = await expectCheck(await sendEncrypted(o, await presentMdoc(mso, holder, handover(o))), 'validity');
    expect(out.error_description).toMatch(/expired/);
  });

  it('a device signature by another key than the MSO device key: device_signature', async () => {
    const o = await openSession(s);
    const thief = await makeHolder();
    await expectCheck(await sendEncrypted(o, await presentMdoc(await issueMdocPid(iaca, holder), thief, handover(o))), 'device_signature');
  });

  it('a verified DeviceResponse sent again into another session is a replay', async () => {
    const o = await openSession(s);
    const dr = await presentMdoc(await issueMdocPid(iaca, holder), holder, handover(o));
    expect((await sendEncrypted(o, dr)).status).toBe(200);
    const o2 = await openSession(s);
    const r = await sendEncrypted(o2, dr);
    expect(r.status).toBe(400);
    expect((await body(r)).error).toBe('replayed_presentation');
  });
});
