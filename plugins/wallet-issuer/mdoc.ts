/**
 * mdoc issuance (ISO/IEC 18013-5 §8.3.2.1.2 IssuerSigned, §9.1.2.4 MobileSecurityObject), encoded
 * here (cbor.ts). Neither @animo-id/mdoc 0.5 nor @owf/mdoc 0.6 can put the Token Status List
 * reference (draft-ietf-oauth-status-list §6.3: MSO `status` → `status_list` {idx, uri}) into
 * the MSO, and building the structure directly is also what keeps an issuance close to one
 * signature's cost. Tests verify the result with @owf/mdoc 0.6 and @animo-id/mdoc.
 */
import crypto from 'node:crypto';
import { CborTag, CborWriter, releaseWriter, takeWriter } from './cbor.ts';
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
  /** Dates, or their toISOString() texts when the caller has them already (the service does, for the row). */
  signed: Date | string;
  validUntil: Date | string;
  status: { idx: number; uri: string };
}

/** RFC 8943 full-date (tag 1004), as 18013-5 and the PID rulebook use for dates. */
const fullDate = (s: string) => new CborTag(1004, s);
/** RFC 8949 tdate (tag 0) text without fractional seconds (18013-5 §9.1.2.4). */
const tdateOf = (d: Date | string) => {
  // toISOString always ends in .sssZ: cut the milliseconds (a regular expression cost more).
  const s = typeof d === 'string' ? d : d.toISOString();
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(s)) throw new TypeError(`not an ISO 8601 UTC time with milliseconds: ${s}`);
  return `${s.slice(0, -5)}Z`;
};

/**
 * PID claim names of the SD-JWT VC (PID Rulebook) mapped to the mdoc data elements of
 * eu.europa.ec.eudi.pid.1, as [name, value] pairs. `signed` and `until` are the tdate texts of
 * the validity: the issuance and expiry dates are their first ten characters.
 */
function elements(c: SubjectClaims, i: MdocInput, signed: string, until: string): [string, unknown][] {
  const out: [string, unknown][] = [];
  let country = false;
  let authority = false;
  for (const k in c) {
    const v = (c as Record<string, unknown>)[k];
    if (v === undefined) continue;
    if (k === 'birthdate' && typeof v === 'string') out.push(['birth_date', fullDate(v)]);
    else if (k === 'nationalities') out.push(['nationality', v]);
    else if (k === 'place_of_birth' && v && typeof v === 'object') out.push(['place_of_birth', new Map(Object.entries(v))]);
    else if (k === 'email') out.push(['email_address', v]);
    else {
      if (k === 'issuing_country') country = true;
      else if (k === 'issuing_authority') authority = true;
      out.push([k, v]);
    }
  }
  if (!country) out.push(['issuing_country', i.country]);
  if (!authority) out.push(['issuing_authority', i.authority]);
  out.push(['issuance_date', fullDate(signed.slice(0, 10))]);
  out.push(['expiry_date', fullDate(until.slice(0, 10))]);
  return out;
}

// The fixed parts of the structure, encoded once.
const fixed = (write: (w: CborWriter) => void): Buffer => {
  const w = new CborWriter();
  write(w);
  return w.copy();
};
const PROTECTED_ES256 = fixed((w) => w.value(new Map([[1, -7]])));
/** IssuerSigned = {"nameSpaces": {docType: [ (then the items) */
const ISSUER_SIGNED_HEAD = fixed((w) => {
  w.head(5, 2);
  w.text('nameSpaces');
  w.head(5, 1);
  w.text(PID_DOCTYPE);
});
/** IssuerSignedItem = {"digestID": (then the id) */
const ITEM_HEAD = fixed((w) => {
  w.head(5, 4);
  w.text('digestID');
});
const K_RANDOM = fixed((w) => w.text('random'));
/** ITEM_HEAD, the digest ID, "random" and the salt's bstr head (16 bytes), per digest ID below 64: one copy per item instead of four writes. */
const ITEM_PREFIX = Array.from({ length: 64 }, (_, id) =>
  fixed((w) => {
    w.raw(ITEM_HEAD);
    w.head(0, id);
    w.raw(K_RANDOM);
    w.head(2, 16);
  }),
);
const K_ELEMENT_IDENTIFIER = fixed((w) => w.text('elementIdentifier'));
const K_ELEMENT_VALUE = fixed((w) => w.text('elementValue'));
/** "issuerAuth": COSE_Sign1 [protected, (then the unprotected header, payload, signature) */
const ISSUER_AUTH_HEAD = fixed((w) => {
  w.text('issuerAuth');
  w.head(4, 4);
  w.bstr(PROTECTED_ES256);
});
/** MobileSecurityObject = {"version": "1.0", "digestAlgorithm": "SHA-256", "valueDigests": {docType: (then the digests) */
const MSO_HEAD = fixed((w) => {
  w.head(5, 7);
  w.text('version');
  w.text('1.0');
  w.text('digestAlgorithm');
  w.text('SHA-256');
  w.text('valueDigests');
  w.head(5, 1);
  w.text(PID_DOCTYPE);
});
/** "deviceKeyInfo": {"deviceKey": COSE_Key {1 (kty): 2 (EC2), -1 (crv): 1 (P-256), -2 (x): (then x) */
const DEVICE_KEY_HEAD = fixed((w) => {
  w.text('deviceKeyInfo');
  w.head(5, 1);
  w.text('deviceKey');
  w.head(5, 4);
  for (const v of [1, 2, -1, 1, -2]) w.value(v);
});
const COSE_KEY_Y = fixed((w) => w.value(-3));
/** "docType": docType, "validityInfo": {"signed": (then a tdate) */
const VALIDITY_HEAD = fixed((w) => {
  w.text('docType');
  w.text(PID_DOCTYPE);
  w.text('validityInfo');
  w.head(5, 3);
  w.text('signed');
});
const K_VALID_FROM = fixed((w) => w.text('validFrom'));
const K_VALID_UNTIL = fixed((w) => w.text('validUntil'));
/** draft-ietf-oauth-status-list §6.3: "status": {"status_list": {"idx": (then idx, "uri", uri) */
const STATUS_HEAD = fixed((w) => {
  w.text('status');
  w.head(5, 1);
  w.text('status_list');
  w.head(5, 2);
  w.text('idx');
});
const K_URI = fixed((w) => w.text('uri'));
/** Sig_structure = ["Signature1", body_protected, external_aad (empty), (then the payload bstr)] (RFC 9052 §4.4). */
const SIG1_HEAD = fixed((w) => {
  w.head(4, 4);
  w.text('Signature1');
  w.bstr(PROTECTED_ES256);
  w.bstr(Buffer.alloc(0));
});

/** The unprotected header {33 (x5chain): document signer certificate} per signing key: the same for every credential it signs. */
const unprotected = new WeakMap<IssuerKey, Buffer>();
function unprotectedOf(key: IssuerKey): Buffer {
  let u = unprotected.get(key);
  if (!u) unprotected.set(key, (u = fixed((w) => w.value(new Map([[33, key.certDer]])))));
  return u;
}

function writeTdate(w: CborWriter, s: string): void {
  w.head(6, 0);
  w.text(s);
}

/**
 * Returns the CBOR IssuerSigned structure {nameSpaces, issuerAuth}, which OpenID4VCI 1.0
 * Appendix A.2.4 puts base64url-encoded in the credential response. Each element is an
 * IssuerSignedItemBytes (tag 24) with a 16-byte random salt; the MSO holds their SHA-256
 * digests (digest IDs drawn in a random order, listed by ID), the holder's key from the proof as
 * deviceKey (COSE_Key EC2 P-256), validity, and the status list reference; issuerAuth is an
 * untagged COSE_Sign1 (ES256) over MobileSecurityObjectBytes with the document signer
 * certificate in x5chain (label 33). Written in one pass into one buffer: each item is hashed
 * where it lies, and the signature input is the payload as written.
 */
export async function issueMdoc(i: MdocInput): Promise<Buffer> {
  const signed = tdateOf(i.signed);
  const until = tdateOf(i.validUntil);
  const els = elements(i.claims, i, signed, until);
  const n = els.length;
  // The salts (16 bytes per element) and the shuffle's draws (4 per element) in one draw from the pool.
  const rnd = randomBytes(20 * n);
  const ids = shuffledIds(n, rnd, 16 * n);
  const digests: string[] = new Array<string>(n);
  // Held across the (asynchronous) signature: a writer of this issuance's own.
  const w = takeWriter();
  try {
    w.raw(ISSUER_SIGNED_HEAD);
    w.head(4, n);
    for (let k = 0; k < n; k++) {
      const [name, value] = els[k]!;
      const item = w.openEmbedded();
      const id = ids[k]!;
      if (id < ITEM_PREFIX.length) w.raw(ITEM_PREFIX[id]!);
      else {
        w.raw(ITEM_HEAD);
        w.head(0, id);
        w.raw(K_RANDOM);
        w.head(2, 16);
      }
      w.copyFrom(rnd, 16 * k, 16);
      w.raw(K_ELEMENT_IDENTIFIER);
      w.text(name);
      w.raw(K_ELEMENT_VALUE);
      w.value(value);
      w.closeBstr(item);
      // 18013-5 §9.1.2.5: the digest is over IssuerSignedItemBytes, tag 24 included (it starts 2 bytes before the bstr).
      // crypto.hash: one call, a third of createHash's cost for inputs this small. As binary (latin1) text (one
      // character per byte): a Buffer each would be a native allocation, and nine of them per
      // credential kept the garbage collector busier than the encoding.
      // A plain Uint8Array view: Buffer#subarray costs several times its construction.
      digests[ids[k]!] = crypto.hash('sha256', new Uint8Array(w.buf.buffer, w.buf.byteOffset + item - 2, w.at - item + 2), 'binary');
    }
    w.raw(ISSUER_AUTH_HEAD);
    w.raw(unprotectedOf(i.key));
    const payload = w.openBstr();
    const mso = w.openEmbedded();
    w.raw(MSO_HEAD);
    w.head(5, n);
    for (let id = 0; id < n; id++) {
      w.head(0, id);
      w.encodedBstr(digests[id]!, 'latin1');
    }
    w.raw(DEVICE_KEY_HEAD);
    w.encodedBstr(i.holder.x, 'base64url');
    w.raw(COSE_KEY_Y);
    w.encodedBstr(i.holder.y, 'base64url');
    w.raw(VALIDITY_HEAD);
    writeTdate(w, signed);
    w.raw(K_VALID_FROM);
    writeTdate(w, signed);
    w.raw(K_VALID_UNTIL);
    writeTdate(w, until);
    w.raw(STATUS_HEAD);
    w.head(0, i.status.idx);
    w.raw(K_URI);
    w.text(i.status.uri);
    w.closeBstr(mso);
    w.closeBstr(payload);
    // The payload bstr as written is the Sig_structure's last member.
    const signature = await i.key.signer.sign(Buffer.concat([SIG1_HEAD, w.buf.subarray(payload, w.at)]));
    w.bstr(signature);
    return w.copy();
  } finally {
    releaseWriter(w);
  }
}

/** 0..n-1 in a random order (digest IDs must not reveal the order of the elements), drawn from r at `at` (4 bytes per element). */
function shuffledIds(n: number, r: Buffer, at: number): number[] {
  const a = new Array<number>(n);
  for (let k = 0; k < n; k++) a[k] = k;
  for (let k = n - 1; k > 0; k--) {
    // 32 random bits per draw: the modulo bias for n <= 50 is below 2^-26.
    const j = r.readUInt32BE(at + 4 * k) % (k + 1);
    const t = a[k]!;
    a[k] = a[j]!;
    a[j] = t;
  }
  return a;
}
