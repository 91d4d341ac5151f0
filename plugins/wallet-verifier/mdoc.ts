/**
 * mdoc verification (ISO/IEC 18013-5 §9.1, OpenID4VP 1.0 Appendix B.2): a DeviceResponse from
 * the vp_token, check by check, each failure naming its check.
 *
 * `@owf/mdoc` 0.6 parses and validates the structures (its zod schemas are the DeviceResponse
 * structure check) and supplies the MSO and item models. Where it does not meet the spec we check
 * ourselves, on the bytes as received:
 * - COSE (RFC 9052 §4.4) signs the protected header bstr as sent; the library re-encodes the
 *   decoded header map (`ProtectedHeaders.encodedStructure`), so Sig_structure is built here from
 *   the raw bstr.
 * - DeviceAuthentication (18013-5 §9.1.3.4) carries DeviceNameSpacesBytes as sent; the library's
 *   `DeviceAuthentication.create` re-encodes the decoded namespaces.
 * - The library checks neither docType in the document against the MSO nor keyAuthorizations
 *   (§9.1.2.4) for device-signed items, requires a country in the DS subject (an IACA matter, not
 *   a PID one), takes `alg` from the unprotected header too, and accepts deviceMac, which needs a
 *   reader key OpenID4VP does not have.
 * - Certificate paths go through the verifier's own chain check (x509.ts) against the tenant's
 *   anchors, as for SD-JWT VC.
 */
import crypto from 'node:crypto';
import { DataItem, DeviceResponse, type IssuerSignedItem, type MobileSecurityObject, cborDecode, cborEncode } from '@owf/mdoc';
import { type Anchor, CheckFailed, validateChain } from './x509.ts';

/** COSE alg → Node hash, for ECDSA (RFC 9053 §2.1); HAIP asks for ES256, the others are accepted. */
const COSE_ALGS: Record<number, string> = { [-7]: 'sha256', [-35]: 'sha384', [-36]: 'sha512' };
const DIGEST_ALGS: Record<string, string> = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
const HDR_ALG = 1;

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

/**
 * OpenID4VP 1.0 §B.2.6.1: SessionTranscript = [null, null, ["OpenID4VPHandover",
 * SHA-256(CBOR [client_id, nonce, jwkThumbprint / null, response_uri])]] (CBOR-encoded).
 */
export function oid4vpSessionTranscript(o: { clientId: string; nonce: string; jwkThumbprint: Uint8Array | null; responseUri: string }): unknown[] {
  const info = cborEncode([o.clientId, o.nonce, o.jwkThumbprint, o.responseUri]);
  return [null, null, ['OpenID4VPHandover', new Uint8Array(crypto.createHash('sha256').update(info).digest())]];
}

type RawMap = Map<unknown, unknown>;
const isMap = (v: unknown): v is RawMap => v instanceof Map;

function rawSign1(v: unknown, check: string): { protectedBytes: Uint8Array; payload: Uint8Array | null; signature: Uint8Array } {
  if (!Array.isArray(v) || v.length !== 4 || !(v[0] instanceof Uint8Array) || !(v[3] instanceof Uint8Array)) throw new CheckFailed(check, 'not a COSE_Sign1');
  return { protectedBytes: v[0], payload: v[2] instanceof Uint8Array ? v[2] : null, signature: v[3] };
}

/** The signed alg: from the protected header only (a COSE_Sign1 whose alg is unprotected is refused). */
function protectedAlg(protectedBytes: Uint8Array, check: string): string {
  let h: unknown;
  try {
    h = protectedBytes.length ? cborDecode(protectedBytes) : new Map();
  } catch {
    throw new CheckFailed(check, 'the protected header does not decode');
  }
  const alg = isMap(h) ? h.get(HDR_ALG) : undefined;
  const hash = typeof alg === 'number' ? COSE_ALGS[alg] : undefined;
  if (!hash) throw new CheckFailed(check, `signature algorithm ${String(alg)} is not accepted (ES256, ES384, ES512)`);
  return hash;
}

function verifySign1(key: crypto.KeyObject, hash: string, protectedBytes: Uint8Array, payload: Uint8Array, signature: Uint8Array): boolean {
  const tbs = cborEncode(['Signature1', protectedBytes, new Uint8Array(), payload]);
  try {
    return crypto.verify(hash, tbs, { key, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

/** CBOR values as JSON: dates as ISO text (full-date for tag 1004), bytes as base64url, maps as objects. */
export function plain(v: unknown): unknown {
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64url');
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), plain(x)]));
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') {
    // DateOnly (tag 1004) and other library value types print as their text form.
    const s = String(v);
    if (s !== '[object Object]') return s;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  }
  return v;
}

/** Verifies a DeviceResponse (CBOR bytes) for one OpenID4VP session. Throws CheckFailed. */
export function verifyMdoc(bytes: Uint8Array, e: MdocExpectations): VerifiedMdoc {
  // --- structure ---
  let raw: unknown;
  let dr: DeviceResponse;
  try {
    raw = cborDecode(bytes);
    dr = DeviceResponse.fromEncodedStructure(raw as never);
  } catch (err) {
    throw new CheckFailed('device_response', `not a DeviceResponse (${err instanceof Error ? err.message.split('\n')[0] : 'CBOR'})`);
  }
  if (!isMap(raw)) throw new CheckFailed('device_response', 'not a CBOR map');
  if (typeof dr.version !== 'string' || !/^1\.\d+$/.test(dr.version)) throw new CheckFailed('device_response', `unsupported version ${String(dr.version)}`);
  if (dr.status !== 0) throw new CheckFailed('device_response', `status ${dr.status}: the wallet reported an error`);
  const docs = dr.documents ?? [];
  const rawDocs = raw.get('documents');
  if (!docs.length || !Array.isArray(rawDocs) || rawDocs.length !== docs.length) throw new CheckFailed('device_response', 'no document in the DeviceResponse');
  if (docs.length > 1) throw new CheckFailed('device_response', 'more than one document: the request asks for one credential');
  const doc = docs[0]!;
  const rawDoc = rawDocs[0] as RawMap;
  const rawIssuerSigned = rawDoc.get('issuerSigned') as RawMap;
  const rawDeviceSigned = rawDoc.get('deviceSigned') as RawMap;

  // --- issuerAuth: chain to an IACA anchor, then the signature ---
  const issuerAuth = doc.issuerSigned.issuerAuth;
  const ia = rawSign1(rawIssuerSigned.get('issuerAuth'), 'issuer_auth');
  const iaHash = protectedAlg(ia.protectedBytes, 'issuer_auth');
  const chain = issuerAuth.x5chain;
  if (!chain?.length) throw new CheckFailed('x5chain', 'issuerAuth carries no x5chain');
  let leaf: crypto.X509Certificate;
  let anchor: Anchor;
  try {
    ({ leaf, anchor } = validateChain(
      chain.map((c) => Buffer.from(c)),
      e.anchors,
      e.now,
    ));
  } catch (err) {
    if (err instanceof CheckFailed) throw new CheckFailed('x5chain', err.message.replace(/x5c \/ x5chain|x5c/g, 'x5chain'));
    throw err;
  }
  if (!ia.payload) throw new CheckFailed('issuer_auth', 'issuerAuth has no payload (the MSO)');
  if (!verifySign1(leaf.publicKey, iaHash, ia.protectedBytes, ia.payload, ia.signature))
    throw new CheckFailed('issuer_signature', 'the issuerAuth signature does not verify with the document signer certificate');

  // --- the MSO ---
  let mso: MobileSecurityObject;
  try {
    mso = issuerAuth.mobileSecurityObject;
  } catch {
    throw new CheckFailed('mso', 'the MobileSecurityObject does not decode');
  }
  if (mso.docType !== doc.docType) throw new CheckFailed('doc_type', `the document says ${doc.docType}, its MSO ${mso.docType}`);
  if (!e.doctypes.includes(doc.docType)) throw new CheckFailed('doc_type', `docType ${doc.docType} is not what this request asked for`);
  const { validityInfo } = mso;
  if (validityInfo.validFrom.getTime() > e.now) throw new CheckFailed('validity', 'the MSO is not valid yet (validFrom)');
  if (validityInfo.validUntil.getTime() < e.now) throw new CheckFailed('validity', 'the MSO has expired (validUntil)');
  const signed = validityInfo.signed.getTime();
  if (signed < Date.parse(leaf.validFrom) || signed > Date.parse(leaf.validTo))
    throw new CheckFailed('validity', 'the MSO was signed outside the validity of the document signer certificate');

  // --- every issuer-signed item against its digest ---
  const digestAlg = DIGEST_ALGS[mso.digestAlgorithm];
  if (!digestAlg) throw new CheckFailed('digest', `digest algorithm ${String(mso.digestAlgorithm)} is not supported`);
  const rawNs = rawIssuerSigned.get('nameSpaces');
  const namespaces: Record<string, Record<string, unknown>> = {};
  const decodedNs = doc.issuerSigned.issuerNamespaces?.issuerNamespaces ?? new Map<string, IssuerSignedItem[]>();
  for (const [ns, items] of decodedNs) {
    const digests = mso.valueDigests.valueDigests.get(ns);
    if (!digests) throw new CheckFailed('digest', `the MSO has no digests for namespace ${ns}`);
    const rawItems = isMap(rawNs) ? rawNs.get(ns) : undefined;
    if (!Array.isArray(rawItems) || rawItems.length !== items.length) throw new CheckFailed('digest', `namespace ${ns} is malformed`);
    const seen = new Set<number>();
    const out: Record<string, unknown> = {};
    items.forEach((item, i) => {
      const di = rawItems[i];
      if (!(di instanceof DataItem)) throw new CheckFailed('digest', `an item of ${ns} is not tagged IssuerSignedItemBytes`);
      if (seen.has(item.digestId)) throw new CheckFailed('digest', `digestID ${item.digestId} appears twice in ${ns}`);
      seen.add(item.digestId);
      const want = digests.get(item.digestId);
      // IssuerSignedItemBytes = #6.24(bstr .cbor IssuerSignedItem), hashed as received.
      const got = crypto.createHash(digestAlg).update(cborEncode(di)).digest();
      if (!want || want.length !== got.length || !crypto.timingSafeEqual(Buffer.from(want), got))
        throw new CheckFailed('digest', `${ns}/${item.elementIdentifier} does not match its digest in the MSO`);
      if (item.elementIdentifier in out) throw new CheckFailed('digest', `${ns}/${item.elementIdentifier} is disclosed twice`);
      out[item.elementIdentifier] = plain(item.elementValue);
    });
    namespaces[ns] = out;
  }

  // --- device authentication: keyAuthorizations, then the signature over the OpenID4VP transcript ---
  const { deviceKey, keyAuthorizations } = mso.deviceKeyInfo;
  const deviceNs = doc.deviceSigned.deviceNamespaces.deviceNamespaces;
  for (const [ns, items] of deviceNs) {
    for (const name of items.deviceSignedItems.keys()) {
      const whole = keyAuthorizations?.namespaces?.includes(ns) ?? false;
      const one = keyAuthorizations?.dataElements?.get(ns)?.includes(name) ?? false;
      if (!whole && !one) throw new CheckFailed('key_authorizations', `the device key is not authorized to sign ${ns}/${name}`);
    }
  }
  const rawDeviceAuth = rawDeviceSigned.get('deviceAuth') as RawMap;
  if (!rawDeviceAuth.has('deviceSignature'))
    throw new CheckFailed('device_signature', 'no deviceSignature (deviceMac needs a reader key, which OpenID4VP does not have)');
  const ds = rawSign1(rawDeviceAuth.get('deviceSignature'), 'device_signature');
  if (ds.payload) throw new CheckFailed('device_signature', 'the deviceSignature payload must be detached (null)');
  const dsHash = protectedAlg(ds.protectedBytes, 'device_signature');
  let devKey: crypto.KeyObject;
  try {
    devKey = crypto.createPublicKey({ key: deviceKey.jwk as crypto.JsonWebKey, format: 'jwk' });
  } catch {
    throw new CheckFailed('device_signature', 'the MSO device key is not a usable EC key');
  }
  const rawDeviceNs = rawDeviceSigned.get('nameSpaces');
  if (!(rawDeviceNs instanceof DataItem)) throw new CheckFailed('device_response', 'deviceSigned.nameSpaces is not tagged DeviceNameSpacesBytes');
  const transcript = oid4vpSessionTranscript({ clientId: e.clientId, nonce: e.nonce, jwkThumbprint: e.jwkThumbprint, responseUri: e.responseUri });
  // DeviceAuthenticationBytes = #6.24(bstr .cbor ["DeviceAuthentication", SessionTranscript, DocType, DeviceNameSpacesBytes]).
  const deviceAuthBytes = cborEncode(DataItem.fromData(['DeviceAuthentication', transcript, doc.docType, rawDeviceNs]));
  if (!verifySign1(devKey, dsHash, ds.protectedBytes, deviceAuthBytes, ds.signature))
    throw new CheckFailed('device_signature', 'the device signature does not verify over this session (client_id, nonce, response_uri, encryption key)');

  const claims: Record<string, unknown> = {};
  for (const ns of [doc.docType, ...Object.keys(namespaces).filter((n) => n !== doc.docType)]) {
    for (const [k, v] of Object.entries(namespaces[ns] ?? {})) if (!(k in claims)) claims[k] = v;
  }
  return { docType: doc.docType, issuer: leaf.subject.split('\n').filter(Boolean).join(', '), claims, namespaces, anchor: anchor.sha256 };
}
