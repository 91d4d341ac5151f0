/**
 * mdoc verification on public vectors (fixtures/, sources recorded in each file) and on
 * presentations made by @owf/mdoc, without a server: each check of plugins/wallet-verifier/mdoc.ts.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { DataItem, SessionTranscript, cborDecode, cborEncode } from '@owf/mdoc';
import { describe, expect, it } from 'vitest';
import { type MdocExpectations, oid4vpSessionTranscript, verifyMdoc } from '../../../plugins/wallet-verifier/mdoc.ts';
import { CheckFailed, sha256Hex } from '../../../plugins/wallet-verifier/x509.ts';
import { PID_DOCTYPE, issueMdocPid, mdocCtx, presentMdoc } from './mdoc-wallet.ts';
import { makeHolder, makeIssuerCa } from './wallet.ts';

const fixture = (name: string) => JSON.parse(fs.readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8')) as Record<string, string>;
const hexOf = (b: Uint8Array) => Buffer.from(b).toString('hex');

async function failsWith(f: () => unknown, check: string): Promise<CheckFailed> {
  try {
    await f();
  } catch (e) {
    expect(e).toBeInstanceOf(CheckFailed);
    expect((e as CheckFailed).check, (e as Error).message).toBe(check);
    return e as CheckFailed;
  }
  throw new Error(`expected check ${check} to fail`);
}

describe('OpenID4VP 1.0 Appendix B handover vector', () => {
  const v = fixture('openid4vp-1.0-appendix-b-handover.json');
  const input = { clientId: v.clientId!, nonce: v.nonce!, jwkThumbprint: new Uint8Array(Buffer.from(v.jwkThumbprintHex!, 'hex')), responseUri: v.responseUri! };

  it('our SessionTranscript is byte for byte the spec example', () => {
    const st = oid4vpSessionTranscript(input);
    expect(hexOf(st)).toBe(v.sessionTranscriptHex);
    // [null, null, Handover]: the handover follows the array head and the two nulls.
    expect(hexOf(st.subarray(3))).toBe(v.handoverHex);
  });

  it('and the wallet library computes the same bytes', async () => {
    const st = await SessionTranscript.forOid4Vp(input, mdocCtx);
    expect(hexOf(st.encode())).toBe(v.sessionTranscriptHex);
  });
});

describe('ISO 18013-5 D.4.1.2 DeviceResponse vector', () => {
  const v = fixture('iso-18013-5-d412-device-response.json');
  const bytes = new Uint8Array(Buffer.from(v.deviceResponseHex!, 'hex'));
  const raw = cborDecode(bytes) as Map<string, unknown>;
  const doc = (raw.get('documents') as Map<string, unknown>[])[0]!;
  const issuerAuth = (doc.get('issuerSigned') as Map<string, unknown>).get('issuerAuth') as unknown[];
  const dsDer = Buffer.from((issuerAuth[1] as Map<number, Uint8Array>).get(33)!);
  const ds = new crypto.X509Certificate(dsDer);
  const expectations = (over: Partial<MdocExpectations> = {}): MdocExpectations => ({
    doctypes: [v.docType!],
    clientId: 'x',
    nonce: 'n',
    responseUri: 'https://verifier.example/r',
    jwkThumbprint: null,
    now: Date.parse(v.validAt!),
    anchors: [{ sha256: sha256Hex(dsDer), cert: ds, source: 'tenant' }],
    ...over,
  });

  it('structure, issuerAuth signature, MSO docType, validity and every item digest pass; its deviceMac is refused (no reader key in OpenID4VP)', async () => {
    expect(ds.subject).toContain('utopia ds');
    const e = await failsWith(() => verifyMdoc(bytes, expectations()), 'device_signature');
    expect(e.message).toMatch(/deviceMac/);
  });

  it('a changed item value fails its digest', async () => {
    const copy = cborDecode(bytes) as Map<string, unknown>;
    const ns = ((copy.get('documents') as Map<string, unknown>[])[0]!.get('issuerSigned') as Map<string, unknown>).get('nameSpaces') as Map<string, DataItem[]>;
    const items = ns.get('org.iso.18013.5.1')!;
    const item = items[0]!.data as Map<string, unknown>;
    item.set('elementValue', 'Smith');
    items[0] = DataItem.fromData(item);
    expect((await failsWith(() => verifyMdoc(cborEncode(copy), expectations()), 'digest')).message).toMatch(/family_name/);
  });

  it('without the DS or its IACA as an anchor the chain fails; after its validity the chain fails too', async () => {
    const other = await makeIssuerCa('Other IACA');
    const otherAnchor = { sha256: sha256Hex(other.rootDer), cert: new crypto.X509Certificate(other.rootDer), source: 'tenant' as const };
    await failsWith(() => verifyMdoc(bytes, expectations({ anchors: [otherAnchor] })), 'x5chain');
    await failsWith(() => verifyMdoc(bytes, expectations({ now: Date.parse('2022-01-01T00:00:00Z') })), 'x5chain');
  });

  it('a docType the request did not ask for fails doc_type', async () => {
    await failsWith(() => verifyMdoc(bytes, expectations({ doctypes: [PID_DOCTYPE] })), 'doc_type');
  });
});

describe('@owf/mdoc presentations against verifyMdoc', async () => {
  const ca = await makeIssuerCa('Test PID IACA');
  const holder = await makeHolder();
  const anchors = [{ sha256: sha256Hex(ca.rootDer), cert: new crypto.X509Certificate(ca.rootDer), source: 'tenant' as const }];
  const h = {
    clientId: 'x509_hash:abc',
    nonce: crypto.randomBytes(16).toString('base64url'),
    responseUri: 'https://appliance.example/oidc.ashx?action=vp-response&session_id=s1',
  };
  const e = (over: Partial<MdocExpectations> = {}): MdocExpectations => ({
    doctypes: [PID_DOCTYPE],
    jwkThumbprint: null,
    now: Date.now(),
    anchors,
    ...h,
    ...over,
  });

  it('verifies and returns the disclosed elements only', async () => {
    const dr = await presentMdoc(await issueMdocPid(ca, holder), holder, h);
    const v = await verifyMdoc(dr, e());
    expect(v.docType).toBe(PID_DOCTYPE);
    expect(v.claims).toEqual({ family_name: 'Mustermann', given_name: 'Erika', birth_date: '1964-08-12' });
    expect(v.issuer).toContain('Test PID IACA Signer');
  });

  it('the encryption key thumbprint is part of the transcript', async () => {
    const encJwk = { kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' };
    const dr = await presentMdoc(await issueMdocPid(ca, holder), holder, { ...h, encJwk });
    await failsWith(() => verifyMdoc(dr, e()), 'device_signature');
    const thumb = crypto
      .createHash('sha256')
      .update(JSON.stringify({ crv: encJwk.crv, kty: encJwk.kty, x: encJwk.x, y: encJwk.y }))
      .digest();
    expect((await verifyMdoc(dr, e({ jwkThumbprint: new Uint8Array(thumb) }))).docType).toBe(PID_DOCTYPE);
  });

  it('device-signed items outside keyAuthorizations fail key_authorizations', async () => {
    const dr = await presentMdoc(await issueMdocPid(ca, holder), holder, h, { deviceSigned: { given_name: 'Mallory' } });
    await failsWith(() => verifyMdoc(dr, e()), 'key_authorizations');
  });

  it('an MSO signed by the DS but with a different docType than the document fails doc_type', async () => {
    const dr = cborDecode(
      await presentMdoc(await issueMdocPid(ca, holder, { docType: 'org.iso.18013.5.1.mDL' }), holder, h, { docType: 'org.iso.18013.5.1.mDL' }),
    ) as Map<string, unknown>;
    (dr.get('documents') as Map<string, unknown>[])[0]!.set('docType', PID_DOCTYPE);
    expect((await failsWith(() => verifyMdoc(cborEncode(dr), e()), 'doc_type')).message).toMatch(/MSO/);
  });

  it('an item with a trailing byte (two items in one IssuerSignedItemBytes) fails its digest, not the decoding of its neighbours', async () => {
    const dr = cborDecode(await presentMdoc(await issueMdocPid(ca, holder), holder, h)) as Map<string, unknown>;
    const ns = ((dr.get('documents') as Map<string, unknown>[])[0]!.get('issuerSigned') as Map<string, unknown>).get('nameSpaces') as Map<string, DataItem[]>;
    const items = ns.get(PID_DOCTYPE)!;
    items[0] = DataItem.fromBuffer(Buffer.concat([items[0]!.buffer, Buffer.from([0x01])]));
    await failsWith(() => verifyMdoc(cborEncode(dr), e()), 'digest');
    // The same response untouched still verifies (no state left behind).
    expect((await verifyMdoc(await presentMdoc(await issueMdocPid(ca, holder), holder, h), e())).docType).toBe(PID_DOCTYPE);
  });

  it('a tampered issuerAuth signature fails issuer_signature', async () => {
    const dr = cborDecode(await presentMdoc(await issueMdocPid(ca, holder), holder, h)) as Map<string, unknown>;
    const ia = ((dr.get('documents') as Map<string, unknown>[])[0]!.get('issuerSigned') as Map<string, unknown>).get('issuerAuth') as Uint8Array[];
    ia[3]![5] ^= 1;
    await failsWith(() => verifyMdoc(cborEncode(dr), e()), 'issuer_signature');
  });

  it('not CBOR, or not a DeviceResponse, fails device_response', async () => {
    await failsWith(() => verifyMdoc(new Uint8Array([0xa1, 0x01]), e()), 'device_response');
    await failsWith(
      () =>
        verifyMdoc(
          cborEncode(
            new Map<string, unknown>([
              ['version', '1.0'],
              ['status', 0],
            ]),
          ),
          e(),
        ),
      'device_response',
    );
  });
});
