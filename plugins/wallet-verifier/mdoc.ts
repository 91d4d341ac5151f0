/**
 * mdoc verification (ISO/IEC 18013-5 §9.1, OpenID4VP 1.0 Appendix B.2): a DeviceResponse from
 * the vp_token, check by check, each failure naming its check.
 *
 * `@owf/mdoc` 0.6 is the wallet side of the tests and supplies the CBOR tag types: on import it
 * registers with cbor-x tag 24 as its DataItem (which keeps the bytes as they arrived), tag 0 as a
 * Date and tag 1004 as a DateOnly. Decoding is cbor-x's, through one decoder kept for the process. Its verifier (`Verifier.verifyDeviceResponse`) is not used, and
 * neither are its zod models on this path, because it does not meet the spec or the budget:
 * - COSE (RFC 9052 §4.4) signs the protected header bstr as sent; the library re-encodes the
 *   decoded header map (`ProtectedHeaders.encodedStructure`), and takes `alg` from the unprotected
 *   header too (18013-5 §9.1.3.6 wants it protected). Sig_structure is built here from the raw bstr.
 * - DeviceAuthentication (§9.1.3.4) carries DeviceNameSpacesBytes as sent; the library's
 *   `DeviceAuthentication.create` re-encodes the decoded namespaces.
 * - It checks neither docType in the document against the MSO nor keyAuthorizations (§9.1.2.4)
 *   for device-signed items, requires a country in the DS subject (an mDL rule, not a PID one),
 *   and accepts deviceMac, which needs a reader key OpenID4VP does not have.
 * - Its zod decoding of a DeviceResponse costs ~4 ms, twenty times the two ECDSA verifications a
 *   presentation needs (bench/verifier.bench.ts); the structure is checked here on the decoded CBOR.
 * Certificate paths go through the verifier's own chain check (x509.ts) against the tenant's
 * anchors, as for SD-JWT VC.
 */
import crypto from 'node:crypto';
import { DataItem } from '@owf/mdoc';
import { Decoder } from 'cbor-x';
import { type Anchor, CheckFailed, leafKey, validateChain } from './x509.ts';
import { has, own } from './own.ts';
import { importEcPoint } from './holder-key.ts';

/** COSE alg → Node hash, for ECDSA (RFC 9053 §2.1); HAIP asks for ES256, the others are accepted. */
const COSE_ALGS: Record<number, string> = { [-7]: 'sha256', [-35]: 'sha384', [-36]: 'sha512' };
const DIGEST_ALGS: Record<string, string> = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
const HDR_ALG = 1;
const HDR_X5CHAIN = 33;

export interface MdocExpectations {
  /** docType values the preset allows. */
  doctypes: string[];
  clientId: string;
  nonce: string;
  responseUri: string;
  /** SHA-256 JWK thumbprint of the verifier's encryption key when the response came encrypted, else null. */
  jwkThumbprint: Uint8Array | null;
  now: number;
  anchors: Anchor[];
}

export interface VerifiedMdoc {
  docType: string;
  issuer: string;
  /** Every disclosed issuer-signed element, by name (namespaces merged, the docType's own first). */
  claims: Record<string, unknown>;
  namespaces: Record<string, Record<string, unknown>>;
  anchor: string;
}

// --- CBOR writers for the few fixed shapes signed or hashed here (RFC 8949 preferred serialization,
// definite lengths). The codec builds a new encoder per call (~25 µs); these are a few bytes each.
function head(major: number, n: number): Buffer {
  const m = major << 5;
  if (n < 24) return Buffer.from([m | n]);
  if (n < 0x100) return Buffer.from([m | 24, n]);
  if (n < 0x10000) return Buffer.from([m | 25, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = m | 26;
  b.writeUInt32BE(n, 1);
  return b;
}
function headLength(n: number): number {
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
}
/** Writes a CBOR head at `at`; returns the offset after it. */
function writeHead(b: Buffer, at: number, major: number, n: number): number {
  const m = major << 5;
  if (n < 24) b[at++] = m | n;
  else if (n < 0x100) {
    b[at++] = m | 24;
    b[at++] = n;
  } else if (n < 0x10000) {
    b[at++] = m | 25;
    b[at++] = n >> 8;
    b[at++] = n & 0xff;
  } else {
    b[at++] = m | 26;
    b.writeUInt32BE(n, at);
    at += 4;
  }
  return at;
}
const cText = (s: string) => {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([head(3, b.length), b]);
};
const cBytes = (b: Uint8Array) => Buffer.concat([head(2, b.length), b]);
/** #6.24(bstr .cbor X) around bytes that already are CBOR. */
const cTag24 = (b: Uint8Array) => Buffer.concat([Buffer.from([0xd8, 0x18]), cBytes(b)]);

/**
 * The bytes cTag24(b) makes, as a view of the received message when b lies in it right behind
 * exactly those tag and length bytes (then they are the same bytes, so the same digest), else a
 * copy as cTag24 builds it. An IssuerSignedItemBytes is nearly always received so; the view
 * spares two copies per item.
 */
const HEAD_SCRATCH = Buffer.alloc(7);
function tag24Bytes(b: Uint8Array): Uint8Array {
  HEAD_SCRATCH[0] = 0xd8;
  HEAD_SCRATCH[1] = 0x18;
  const n = writeHead(HEAD_SCRATCH, 2, 2, b.length);
  const start = b.byteOffset - n;
  if (start >= 0) {
    const before = new Uint8Array(b.buffer, start, n);
    let same = true;
    for (let k = 0; k < n; k++) if (before[k] !== HEAD_SCRATCH[k]) same = false;
    if (same) return new Uint8Array(b.buffer, start, n + b.length);
  }
  const out = Buffer.allocUnsafe(n + b.length);
  HEAD_SCRATCH.copy(out, 0, 0, n);
  out.set(b, n);
  return out;
}
const NULL = Buffer.from([0xf6]);
const SIGNATURE1 = cText('Signature1');
/** The array head and first member of DeviceAuthentication. */
const DEVICE_AUTHENTICATION_HEAD = Buffer.concat([head(4, 4), cText('DeviceAuthentication')]);

/**
 * OpenID4VP 1.0 §B.2.6.1: SessionTranscript = [null, null, ["OpenID4VPHandover",
 * SHA-256(CBOR [client_id, nonce, jwkThumbprint / null, response_uri])]] (CBOR-encoded).
 */
export function oid4vpSessionTranscript(o: { clientId: string; nonce: string; jwkThumbprint: Uint8Array | null; responseUri: string }): Buffer {
  const info = Buffer.concat([head(4, 4), cText(o.clientId), cText(o.nonce), o.jwkThumbprint ? cBytes(o.jwkThumbprint) : NULL, cText(o.responseUri)]);
  const hash = crypto.hash('sha256', info, 'buffer');
  return Buffer.concat([head(4, 3), NULL, NULL, head(4, 2), cText('OpenID4VPHandover'), cBytes(hash)]);
}

type RawMap = Map<unknown, unknown>;
const isMap = (v: unknown): v is RawMap => v instanceof Map;
const isBytes = (v: unknown): v is Uint8Array => v instanceof Uint8Array;

/** A map member of the expected kind, or the structure check fails naming the path. */
function member<T>(m: unknown, key: string | number, is: (v: unknown) => v is T, path: string, check = 'device_response'): T {
  const v = isMap(m) ? m.get(key) : undefined;
  if (!is(v)) throw new CheckFailed(check, `${path}.${String(key)} is missing or malformed`);
  return v;
}
const isString = (v: unknown): v is string => typeof v === 'string';
const isArray = (v: unknown): v is unknown[] => Array.isArray(v);
const isDataItem = (v: unknown): v is DataItem => v instanceof DataItem;
const isDate = (v: unknown): v is Date | string => v instanceof Date || typeof v === 'string';

/**
 * One decoder for every call: `@owf/mdoc`'s cborDecode builds a new cbor-x codec per call, and a
 * response needs about ten decodes. Maps stay Maps (CBOR keys are not only text), no records.
 */
const decoder = new Decoder({ mapsAsObjects: false, useRecords: false } as ConstructorParameters<typeof Decoder>[0]);

/** As `@owf/mdoc`'s cborDecode: a top-level tag 24 item is unwrapped to its content. */
function decodeBytes(b: Uint8Array): unknown {
  const v: unknown = decoder.decode(b);
  return v instanceof DataItem ? v.data : v;
}

// The tag types above come from @owf/mdoc's registration with cbor-x; without it (another cbor-x
// copy, a changed library) items would lose the bytes they are hashed over: refuse to load.
if (!(decoder.decode(Buffer.from([0xd8, 0x18, 0x41, 0xa0])) instanceof DataItem))
  throw new Error('wallet-verifier: cbor-x does not decode tag 24 as @owf/mdoc DataItem');

function dataOf(d: DataItem, check: string, what: string): unknown {
  try {
    return decodeBytes(d.buffer);
  } catch {
    throw new CheckFailed(check, `${what} does not decode`);
  }
}

function timeOf(v: Date | string, what: string): number {
  const t = v instanceof Date ? v.getTime() : Date.parse(v);
  if (!Number.isFinite(t)) throw new CheckFailed('mso', `${what} is not a date`);
  return t;
}

function rawSign1(v: unknown, check: string): { protectedBytes: Uint8Array; unprotected: RawMap; payload: Uint8Array | null; signature: Uint8Array } {
  if (!isArray(v) || v.length !== 4 || !isBytes(v[0]) || !isMap(v[1]) || !(v[2] === null || isBytes(v[2])) || !isBytes(v[3]))
    throw new CheckFailed(check, 'not a COSE_Sign1');
  return { protectedBytes: v[0], unprotected: v[1], payload: v[2], signature: v[3] };
}

/** The signed alg: from the protected header only (a COSE_Sign1 whose alg is unprotected is refused). */
/** {1: -7}: the protected header of nearly every ES256 COSE_Sign1 a wallet sends (the device signature's). */
const ES256_ONLY = { hash: 'sha256', header: new Map([[HDR_ALG, -7]]) as RawMap };
function protectedAlg(protectedBytes: Uint8Array, check: string): { hash: string; header: RawMap } {
  // Read without the decoder when it is exactly a1 01 26 (read-only use of the shared map).
  if (protectedBytes.length === 3 && protectedBytes[0] === 0xa1 && protectedBytes[1] === 0x01 && protectedBytes[2] === 0x26) return ES256_ONLY;
  let h: unknown;
  try {
    h = protectedBytes.length ? decodeBytes(protectedBytes) : new Map();
  } catch {
    throw new CheckFailed(check, 'the protected header does not decode');
  }
  const alg = isMap(h) ? h.get(HDR_ALG) : undefined;
  const hash = typeof alg === 'number' ? COSE_ALGS[alg] : undefined;
  if (!hash || !isMap(h)) throw new CheckFailed(check, `signature algorithm ${String(alg)} is not accepted (ES256, ES384, ES512; in the protected header)`);
  return { hash, header: h };
}

/**
 * Sig_structure = ["Signature1", body_protected, external_aad (empty), payload] (RFC 9052 §4.4),
 * written into a buffer reused by every verification (crypto.verify is synchronous and keeps
 * nothing of it; a new one per signature drained Node's buffer pool).
 */
let sigScratch = Buffer.allocUnsafe(8192);
function sigStructure(protectedBytes: Uint8Array, payload: Uint8Array): Uint8Array {
  const ph = headLength(protectedBytes.length);
  const pl = headLength(payload.length);
  const len = 1 + SIGNATURE1.length + ph + protectedBytes.length + 1 + pl + payload.length;
  if (len > sigScratch.length) sigScratch = Buffer.allocUnsafe(Math.max(len, 2 * sigScratch.length));
  const out = sigScratch;
  let at = 0;
  out[at++] = 0x84;
  at += SIGNATURE1.copy(out, at);
  at = writeHead(out, at, 2, protectedBytes.length);
  out.set(protectedBytes, at);
  at += protectedBytes.length;
  out[at++] = 0x40;
  at = writeHead(out, at, 2, payload.length);
  out.set(payload, at);
  return new Uint8Array(out.buffer, out.byteOffset, len);
}

function verifySign1(key: crypto.KeyObject, hash: string, protectedBytes: Uint8Array, payload: Uint8Array, signature: Uint8Array): boolean {
  try {
    return crypto.verify(hash, sigStructure(protectedBytes, payload), { key, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

const CRV: Record<number, string> = { 1: 'P-256', 2: 'P-384', 3: 'P-521' };

/** COSE_Key (RFC 9053 §7.1.1, EC2) → its curve and coordinates. */
function coseEc2Point(k: unknown): { crv: string; x: Uint8Array; y: Uint8Array } {
  const kty = isMap(k) ? k.get(1) : undefined;
  const crv = isMap(k) ? CRV[k.get(-1) as number] : undefined;
  const x = isMap(k) ? k.get(-2) : undefined;
  const y = isMap(k) ? k.get(-3) : undefined;
  if (kty !== 2 || !crv || !isBytes(x) || !isBytes(y)) throw new CheckFailed('device_signature', 'the MSO device key is not an EC2 key on P-256/384/521');
  return { crv, x, y };
}

/** CBOR values as JSON: dates as ISO text (full-date for tag 1004), bytes as base64url, maps as objects. */
export function plain(v: unknown): unknown {
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64url');
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), plain(x)]));
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') {
    // DateOnly (tag 1004) and other value types of the codec print as their text form.
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- probes the codec's value types for their text form; [object Object] is checked right below
    const s = String(v);
    if (s !== '[object Object]') return s;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  }
  return v;
}

/**
 * What the checks read of a document signer certificate (its validity and subject), kept with the
 * certificate object, which the chain cache hands out for every presentation of that issuer: each
 * X509Certificate getter builds a new string natively.
 */
const SIGNER_INFO = new WeakMap<crypto.X509Certificate, { from: number; to: number; subject: string }>();
function signerInfo(leaf: crypto.X509Certificate): { from: number; to: number; subject: string } {
  let i = SIGNER_INFO.get(leaf);
  if (!i) {
    i = { from: Date.parse(leaf.validFrom), to: Date.parse(leaf.validTo), subject: leaf.subject.split('\n').filter(Boolean).join(', ') };
    SIGNER_INFO.set(leaf, i);
  }
  return i;
}

/** The bstr inside #6.24(bstr): the MobileSecurityObject of an issuerAuth payload. */
function msoInner(payload: Uint8Array): Uint8Array | undefined {
  if (payload[0] !== 0xd8 || payload[1] !== 0x18 || payload[2] === undefined || payload[2] >> 5 !== 2) return undefined;
  const ai = payload[2] & 0x1f;
  let p = 3;
  let n: number;
  if (ai < 24) {
    n = ai;
    p = 3;
  } else if (ai === 24) n = payload[p++]!;
  else if (ai === 25) {
    n = (payload[3]! << 8) | payload[4]!;
    p = 5;
  } else if (ai === 26) {
    n = Buffer.from(payload.buffer, payload.byteOffset, payload.length).readUInt32BE(3);
    p = 7;
  } else return undefined;
  return p + n === payload.length ? payload.subarray(p) : undefined;
}

/** Verifies a DeviceResponse (CBOR bytes) for one OpenID4VP session. Throws CheckFailed. */
export async function verifyMdoc(bytes: Uint8Array, e: MdocExpectations): Promise<VerifiedMdoc> {
  // --- structure (18013-5 §8.3.2.1.2.2) ---
  let raw: unknown;
  try {
    raw = decodeBytes(bytes);
  } catch {
    throw new CheckFailed('device_response', 'not CBOR');
  }
  if (!isMap(raw)) throw new CheckFailed('device_response', 'not a CBOR map');
  const version = member(raw, 'version', isString, 'DeviceResponse');
  if (!/^1\.\d+$/.test(version)) throw new CheckFailed('device_response', `unsupported version ${version}`);
  const status = raw.get('status');
  if (typeof status !== 'number') throw new CheckFailed('device_response', 'DeviceResponse.status is missing');
  if (status !== 0) throw new CheckFailed('device_response', `status ${status}: the wallet reported an error`);
  const docs = raw.get('documents');
  if (!isArray(docs) || !docs.length) throw new CheckFailed('device_response', 'no document in the DeviceResponse');
  if (docs.length > 1) throw new CheckFailed('device_response', 'more than one document: the request asks for one credential');
  const doc = docs[0];
  const docType = member(doc, 'docType', isString, 'Document');
  const issuerSigned = member(doc, 'issuerSigned', isMap, 'Document');
  const deviceSigned = member(doc, 'deviceSigned', isMap, 'Document');
  const deviceNsBytes = member(deviceSigned, 'nameSpaces', isDataItem, 'DeviceSigned');
  const deviceAuth = member(deviceSigned, 'deviceAuth', isMap, 'DeviceSigned');
  const issuerNs = issuerSigned.get('nameSpaces') ?? new Map();
  if (!isMap(issuerNs)) throw new CheckFailed('device_response', 'IssuerSigned.nameSpaces is malformed');
  // --- issuerAuth: chain to an IACA anchor, then the signature ---
  const ia = rawSign1(issuerSigned.get('issuerAuth'), 'issuer_auth');
  const { hash: iaHash, header: iaProtected } = protectedAlg(ia.protectedBytes, 'issuer_auth');
  const chainHdr = iaProtected.get(HDR_X5CHAIN) ?? ia.unprotected.get(HDR_X5CHAIN);
  const chain = isBytes(chainHdr) ? [chainHdr] : isArray(chainHdr) && chainHdr.every(isBytes) ? chainHdr : [];
  if (!chain.length) throw new CheckFailed('x5chain', 'issuerAuth carries no x5chain');
  let leaf: crypto.X509Certificate;
  let anchor: Anchor;
  try {
    ({ leaf, anchor } = validateChain(
      chain.map((c) => Buffer.from(c.buffer, c.byteOffset, c.length)),
      e.anchors,
      e.now,
    ));
  } catch (err) {
    if (err instanceof CheckFailed) throw new CheckFailed('x5chain', err.message.replace(/x5c \/ x5chain|x5c/g, 'x5chain'));
    throw err;
  }
  if (!ia.payload) throw new CheckFailed('issuer_auth', 'issuerAuth has no payload (the MSO)');
  if (!verifySign1(leafKey(leaf), iaHash, ia.protectedBytes, ia.payload, ia.signature))
    throw new CheckFailed('issuer_signature', 'the issuerAuth signature does not verify with the document signer certificate');

  // --- the MSO (§9.1.2.4): MobileSecurityObjectBytes = #6.24(bstr .cbor MobileSecurityObject) ---
  const msoBytes = msoInner(ia.payload);
  if (!msoBytes) throw new CheckFailed('mso', 'the issuerAuth payload is not a tagged MobileSecurityObject');
  let mso: unknown;
  try {
    mso = decodeBytes(msoBytes);
  } catch {
    throw new CheckFailed('mso', 'the MobileSecurityObject does not decode');
  }
  if (!isMap(mso)) throw new CheckFailed('mso', 'the issuerAuth payload is not a tagged MobileSecurityObject');
  const msoDocType = member(mso, 'docType', isString, 'MSO', 'mso');
  if (msoDocType !== docType) throw new CheckFailed('doc_type', `the document says ${docType}, its MSO ${msoDocType}`);
  if (!e.doctypes.includes(docType)) throw new CheckFailed('doc_type', `docType ${docType} is not what this request asked for`);
  const validity = member(mso, 'validityInfo', isMap, 'MSO', 'mso');
  const validFrom = timeOf(member(validity, 'validFrom', isDate, 'validityInfo', 'mso'), 'validFrom');
  const validUntil = timeOf(member(validity, 'validUntil', isDate, 'validityInfo', 'mso'), 'validUntil');
  const signed = timeOf(member(validity, 'signed', isDate, 'validityInfo', 'mso'), 'signed');
  if (validFrom > e.now) throw new CheckFailed('validity', 'the MSO is not valid yet (validFrom)');
  if (validUntil < e.now) throw new CheckFailed('validity', 'the MSO has expired (validUntil)');
  const signer = signerInfo(leaf);
  if (signed < signer.from || signed > signer.to)
    throw new CheckFailed('validity', 'the MSO was signed outside the validity of the document signer certificate');

  // --- every issuer-signed item against its digest ---
  const digestAlgName = member(mso, 'digestAlgorithm', isString, 'MSO', 'mso');
  const digestAlg = DIGEST_ALGS[digestAlgName];
  if (!digestAlg) throw new CheckFailed('digest', `digest algorithm ${digestAlgName} is not supported`);
  const valueDigests = member(mso, 'valueDigests', isMap, 'MSO', 'mso');
  const namespaces: Record<string, Record<string, unknown>> = {};
  for (const [ns, items] of issuerNs) {
    if (typeof ns !== 'string' || !isArray(items)) throw new CheckFailed('device_response', 'IssuerSigned.nameSpaces is malformed');
    const digests = valueDigests.get(ns);
    if (!isMap(digests)) throw new CheckFailed('digest', `the MSO has no digests for namespace ${ns}`);
    const seen = new Set<unknown>();
    const out: Record<string, unknown> = {};
    for (const di of items) {
      if (!isDataItem(di)) throw new CheckFailed('digest', `an item of ${ns} is not tagged IssuerSignedItemBytes`);
      const item = dataOf(di, 'digest', `an item of ${ns}`);
      const id = isMap(item) ? item.get('digestID') : undefined;
      const name = isMap(item) ? item.get('elementIdentifier') : undefined;
      if (typeof id !== 'number' || typeof name !== 'string' || !isBytes((item as RawMap).get('random')) || !(item as RawMap).has('elementValue'))
        throw new CheckFailed('device_response', `an IssuerSignedItem of ${ns} is malformed`);
      if (seen.has(id)) throw new CheckFailed('digest', `digestID ${id} appears twice in ${ns}`);
      seen.add(id);
      const want = digests.get(id);
      // IssuerSignedItemBytes = #6.24(bstr .cbor IssuerSignedItem), hashed as received.
      const got = crypto.hash(digestAlg, tag24Bytes(di.buffer), 'buffer');
      if (!isBytes(want) || want.length !== got.length || !crypto.timingSafeEqual(want, got))
        throw new CheckFailed('digest', `${ns}/${name} does not match its digest in the MSO`);
      if (has(out, name)) throw new CheckFailed('digest', `${ns}/${name} is disclosed twice`);
      own(out, name, plain((item as RawMap).get('elementValue')));
    }
    own(namespaces, ns, out);
  }

  // --- device authentication: keyAuthorizations, then the signature over the OpenID4VP transcript ---
  const deviceKeyInfo = member(mso, 'deviceKeyInfo', isMap, 'MSO', 'mso');
  const keyAuth = deviceKeyInfo.get('keyAuthorizations');
  const authNs = isMap(keyAuth) ? keyAuth.get('nameSpaces') : undefined;
  const authEl = isMap(keyAuth) ? keyAuth.get('dataElements') : undefined;
  const deviceNs = dataOf(deviceNsBytes, 'device_response', 'DeviceNameSpaces');
  if (!isMap(deviceNs)) throw new CheckFailed('device_response', 'DeviceNameSpaces is not a map');
  for (const [ns, items] of deviceNs) {
    if (!isMap(items)) throw new CheckFailed('device_response', 'DeviceNameSpaces is malformed');
    for (const name of items.keys()) {
      const whole = isArray(authNs) && authNs.includes(ns);
      const listed = isMap(authEl) && isArray(authEl.get(ns)) && (authEl.get(ns) as unknown[]).includes(name);
      if (!whole && !listed) throw new CheckFailed('key_authorizations', `the device key is not authorized to sign ${String(ns)}/${String(name)}`);
    }
  }
  if (!deviceAuth.has('deviceSignature'))
    throw new CheckFailed('device_signature', 'no deviceSignature (deviceMac needs a reader key, which OpenID4VP does not have)');
  const ds = rawSign1(deviceAuth.get('deviceSignature'), 'device_signature');
  if (ds.payload) throw new CheckFailed('device_signature', 'the deviceSignature payload must be detached (null)');
  const { hash: dsHash } = protectedAlg(ds.protectedBytes, 'device_signature');
  const devPoint = coseEc2Point(deviceKeyInfo.get('deviceKey'));
  // The device key through the raw point import (holder-key.ts): it refuses a point off its curve.
  let devKey: crypto.KeyObject;
  try {
    devKey = await importEcPoint(devPoint.crv, devPoint.x, devPoint.y);
  } catch {
    throw new CheckFailed('device_signature', 'the MSO device key is not a point on its curve');
  }
  const transcript = oid4vpSessionTranscript({ clientId: e.clientId, nonce: e.nonce, jwkThumbprint: e.jwkThumbprint, responseUri: e.responseUri });
  // DeviceAuthenticationBytes = #6.24(bstr .cbor ["DeviceAuthentication", SessionTranscript, DocType, DeviceNameSpacesBytes]).
  const deviceAuthBytes = cTag24(Buffer.concat([DEVICE_AUTHENTICATION_HEAD, transcript, cText(docType), cTag24(deviceNsBytes.buffer)]));
  if (!verifySign1(devKey, dsHash, ds.protectedBytes, deviceAuthBytes, ds.signature))
    throw new CheckFailed('device_signature', 'the device signature does not verify over this session (client_id, nonce, response_uri, encryption key)');

  const claims: Record<string, unknown> = {};
  for (const ns of [docType, ...Object.keys(namespaces).filter((n) => n !== docType)]) {
    for (const [k, v] of Object.entries(namespaces[ns] ?? {})) if (!has(claims, k)) own(claims, k, v);
  }
  return { docType, issuer: signer.subject, claims, namespaces, anchor: anchor.sha256 };
}
