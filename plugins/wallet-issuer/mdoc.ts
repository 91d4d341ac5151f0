/**
 * mdoc issuance (ISO/IEC 18013-5 §8.3.2.1.2 IssuerSigned, §9.1.2.4 MobileSecurityObject), encoded
 * here (cbor.ts). Neither @animo-id/mdoc 0.5 nor @owf/mdoc 0.6 can put the Token Status List
 * reference (draft-ietf-oauth-status-list §6.3: MSO `status` → `status_list` {idx, uri}) into
 * the MSO, and building the structure directly is also what keeps an issuance close to one
 * signature's cost. Tests verify the result with @owf/mdoc 0.6 and @animo-id/mdoc.
 */
import crypto from 'node:crypto';
import { CborRaw, CborTag, cborEncode, embeddedBytes } from './cbor.ts';
import type { IssuerKey } from './keys.ts';
import type { ProvenKey } from './proof.ts';
import { randomBytes } from './random.ts';
import { PID_DOCTYPE, type SubjectClaims } from './schemas.ts';

export interface MdocInput {
  key: IssuerKey;
  holder: ProvenKey['jwk'];
  claims: SubjectClaims;
  country: string;
  authority: string;
  signed: Date;
  validUntil: Date;
  status: { idx: number; uri: string };
}

const encode = cborEncode;

/** RFC 8943 full-date (tag 1004), as 18013-5 and the PID rulebook use for dates. */
const fullDate = (s: string) => new CborTag(1004, s);
/** RFC 8949 tdate (tag 0) without fractional seconds (18013-5 §9.1.2.4). */
const tdate = (d: Date) => new CborTag(0, d.toISOString().replace(/\.\d{3}Z$/, 'Z'));

/** PID claim names of the SD-JWT VC (PID Rulebook) mapped to the mdoc data elements of eu.europa.ec.eudi.pid.1. */
function elements(c: SubjectClaims, i: MdocInput): [string, unknown][] {
  const out = new Map<string, unknown>();
  for (const [k, v] of Object.entries(c)) {
    if (v === undefined) continue;
    if (k === 'birthdate' && typeof v === 'string') out.set('birth_date', fullDate(v));
    else if (k === 'nationalities') out.set('nationality', v);
    else if (k === 'place_of_birth' && v && typeof v === 'object') out.set('place_of_birth', new Map(Object.entries(v)));
    else if (k === 'email') out.set('email_address', v);
    else out.set(k, v);
  }
  if (!out.has('issuing_country')) out.set('issuing_country', i.country);
  if (!out.has('issuing_authority')) out.set('issuing_authority', i.authority);
  out.set('issuance_date', fullDate(i.signed.toISOString().slice(0, 10)));
  out.set('expiry_date', fullDate(i.validUntil.toISOString().slice(0, 10)));
  return [...out];
}

const PROTECTED_ES256 = encode(new Map([[1, -7]]));

/**
 * Returns the CBOR IssuerSigned structure {nameSpaces, issuerAuth}, which OpenID4VCI 1.0
 * Appendix A.2.4 puts base64url-encoded in the credential response. Each element is an
 * IssuerSignedItemBytes (tag 24) with a 16-byte random salt; the MSO holds their SHA-256
 * digests (digest IDs in a random order), the holder's key from the proof as deviceKey
 * (COSE_Key EC2 P-256), validity, and the status list reference; issuerAuth is an untagged
 * COSE_Sign1 (ES256) over MobileSecurityObjectBytes with the document signer certificate in
 * x5chain (label 33).
 */
export async function issueMdoc(i: MdocInput): Promise<Buffer> {
  const els = elements(i.claims, i);
  const salts = randomBytes(16 * els.length);
  const ids = shuffledIds(els.length);
  const items: CborRaw[] = [];
  const digests = new Map<number, Buffer>();
  els.forEach(([name, value], n) => {
    const digestID = ids[n]!;
    const item = embeddedBytes(
      new Map<string, unknown>([
        ['digestID', digestID],
        ['random', salts.subarray(16 * n, 16 * n + 16)],
        ['elementIdentifier', name],
        ['elementValue', value],
      ]),
    );
    items.push(new CborRaw(item));
    // crypto.hash: one call, a third of createHash's cost for inputs this small.
    digests.set(digestID, crypto.hash('sha256', item, 'buffer'));
  });
  const mso = new Map<string, unknown>([
    ['version', '1.0'],
    ['digestAlgorithm', 'SHA-256'],
    ['valueDigests', new Map([[PID_DOCTYPE, digests]])],
    [
      'deviceKeyInfo',
      new Map([
        [
          'deviceKey',
          new Map<number, unknown>([
            [1, 2],
            [-1, 1],
            [-2, Buffer.from(i.holder.x, 'base64url')],
            [-3, Buffer.from(i.holder.y, 'base64url')],
          ]),
        ],
      ]),
    ],
    ['docType', PID_DOCTYPE],
    [
      'validityInfo',
      new Map([
        ['signed', tdate(i.signed)],
        ['validFrom', tdate(i.signed)],
        ['validUntil', tdate(i.validUntil)],
      ]),
    ],
    // draft-ietf-oauth-status-list §6.3: the mdoc's place in the issuer's Token Status List.
    [
      'status',
      new Map([
        [
          'status_list',
          new Map<string, unknown>([
            ['idx', i.status.idx],
            ['uri', i.status.uri],
          ]),
        ],
      ]),
    ],
  ]);
  const payload = embeddedBytes(mso);
  const toBeSigned = encode(['Signature1', PROTECTED_ES256, Buffer.alloc(0), payload]);
  const signature = await i.key.signer.sign(toBeSigned);
  const issuerAuth = [PROTECTED_ES256, new Map([[33, i.key.certDer]]), payload, signature];
  return encode(
    new Map<string, unknown>([
      ['nameSpaces', new Map([[PID_DOCTYPE, items]])],
      ['issuerAuth', issuerAuth],
    ]),
  );
}

/** 0..n-1 in a random order (digest IDs must not reveal the order of the elements). */
function shuffledIds(n: number): number[] {
  const a = Array.from({ length: n }, (_, k) => k);
  const r = randomBytes(4 * n);
  for (let k = n - 1; k > 0; k--) {
    // 32 random bits per draw: the modulo bias for n <= 50 is below 2^-26.
    const j = r.readUInt32BE(4 * k) % (k + 1);
    [a[k], a[j]] = [a[j]!, a[k]!];
  }
  return a;
}
