import crypto from 'node:crypto';
import { c14nDocument, c14nElement, c14nToString } from './c14n.ts';
import { attr, child, childElements, textOf, type XDocument, type XElement } from './xml.ts';

/**
 * Verification of the enveloped XAdES signature of a trusted list (ETSI TS 119 612 §5.7.1 and
 * annex B; XML-DSig 1.1; XAdES EN 319 132-1). Deliberately narrower than XML-DSig: exactly the
 * shape trusted lists use, and nothing an attacker could bend (the classic wrapping attacks
 * need a second signature, a reference to some other subtree, or ambiguous Ids).
 */

export const DSIG = 'http://www.w3.org/2000/09/xmldsig#';
export const XADES = 'http://uri.etsi.org/01903/v1.3.2#';
const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';
const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
const SIGNED_PROPS_TYPE = 'http://uri.etsi.org/01903#SignedProperties';

const DIGESTS: Record<string, string> = {
  'http://www.w3.org/2001/04/xmlenc#sha256': 'sha256',
  'http://www.w3.org/2001/04/xmldsig-more#sha384': 'sha384',
  'http://www.w3.org/2001/04/xmlenc#sha512': 'sha512',
};

const SIG_ALGS: Record<string, { key: 'rsa' | 'ec'; hash: string; name: string }> = {
  'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256': { key: 'rsa', hash: 'sha256', name: 'rsa-sha256' },
  'http://www.w3.org/2001/04/xmldsig-more#rsa-sha384': { key: 'rsa', hash: 'sha384', name: 'rsa-sha384' },
  'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512': { key: 'rsa', hash: 'sha512', name: 'rsa-sha512' },
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256': { key: 'ec', hash: 'sha256', name: 'ecdsa-sha256' },
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384': { key: 'ec', hash: 'sha384', name: 'ecdsa-sha384' },
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512': { key: 'ec', hash: 'sha512', name: 'ecdsa-sha512' },
};

export type SignatureFailure =
  | 'no_signature'
  | 'multiple_signatures'
  | 'signature_not_root_child'
  | 'duplicate_ids'
  | 'bad_structure'
  | 'unsupported_algorithm'
  | 'digest_mismatch'
  | 'signer_not_pinned'
  | 'signing_certificate_mismatch'
  | 'signature_invalid';

export class SignatureError extends Error {
  constructor(
    readonly code: SignatureFailure,
    message: string,
  ) {
    super(message);
  }
}

export interface PinnedCert {
  /** DER of the certificate. */
  der: Buffer;
  /** hex SHA-256 of the DER. */
  sha256: string;
}

export interface VerifiedSignature {
  algorithm: string;
  /** SHA-256 (hex) of the signer's certificate DER. */
  signerSha256: string;
  /** The signature element: everything outside it in the document is what was signed. */
  signature: XElement;
  signingTime?: string;
}

export function sha256Hex(b: Uint8Array): string {
  return crypto.createHash('sha256').update(b).digest('hex');
}

export function pinned(der: Buffer): PinnedCert {
  return { der, sha256: sha256Hex(der) };
}

function b64(el: XElement | undefined): Buffer {
  const t = textOf(el).replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(t)) throw new SignatureError('bad_structure', 'malformed base64');
  return Buffer.from(t, 'base64');
}

function only(el: XElement, local: string, ns = DSIG): XElement {
  const list = childElements(el, ns, local);
  if (list.length !== 1) throw new SignatureError('bad_structure', `expected exactly one ${local} in ${el.local}, found ${list.length}`);
  return list[0]!;
}

function transformsOf(ref: XElement): string[] {
  const t = child(ref, DSIG, 'Transforms');
  if (!t) return [];
  return childElements(t).map((x) => {
    if (x.ns !== DSIG || x.local !== 'Transform') throw new SignatureError('bad_structure', 'unexpected element in Transforms');
    // A Transform with content (XPath, InclusiveNamespaces) is not in the trusted-list profile.
    if (childElements(x).length) throw new SignatureError('unsupported_algorithm', 'transform parameters are not supported');
    return attr(x, 'Algorithm') ?? '';
  });
}

function digestOf(ref: XElement, feed: (h: crypto.Hash) => void): void {
  const alg = DIGESTS[attr(only(ref, 'DigestMethod'), 'Algorithm') ?? ''];
  if (!alg) throw new SignatureError('unsupported_algorithm', `digest ${attr(only(ref, 'DigestMethod'), 'Algorithm')}`);
  const want = b64(only(ref, 'DigestValue'));
  const h = crypto.createHash(alg);
  feed(h);
  const got = h.digest();
  if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) {
    throw new SignatureError('digest_mismatch', `digest of reference ${JSON.stringify(attr(ref, 'URI'))} does not match`);
  }
}

/**
 * Verifies the one enveloped signature of `doc` against `trusted` signer certificates. Returns
 * the verified signature; throws SignatureError with a stable code otherwise. Data must then be
 * read only from `doc.root` outside the returned signature element (the part the whole-document
 * reference covered).
 */
export function verifyEnvelopedSignature(doc: XDocument, trusted: PinnedCert[]): VerifiedSignature {
  if (doc.signatures.length === 0) throw new SignatureError('no_signature', 'the list is not signed');
  if (doc.signatures.length > 1) throw new SignatureError('multiple_signatures', `${doc.signatures.length} signatures in the document`);
  const sig = doc.signatures[0]!;
  if (sig.parent !== doc.root) throw new SignatureError('signature_not_root_child', 'the signature is not a direct child of the document element');
  if (doc.duplicateIds.size) throw new SignatureError('duplicate_ids', `Id values used twice: ${[...doc.duplicateIds].slice(0, 3).join(', ')}`);

  const signedInfo = only(sig, 'SignedInfo');
  if (childElements(sig, DSIG, 'SignedInfo')[0] !== childElements(sig)[0]) throw new SignatureError('bad_structure', 'SignedInfo must come first');
  const cm = attr(only(signedInfo, 'CanonicalizationMethod'), 'Algorithm');
  if (cm !== EXC_C14N) throw new SignatureError('unsupported_algorithm', `canonicalization ${cm}`);
  const smUri = attr(only(signedInfo, 'SignatureMethod'), 'Algorithm') ?? '';
  const sm = SIG_ALGS[smUri];
  if (!sm) throw new SignatureError('unsupported_algorithm', `signature method ${smUri}`);

  const refs = childElements(signedInfo, DSIG, 'Reference');
  if (refs.length !== 2) throw new SignatureError('bad_structure', `expected exactly 2 references, found ${refs.length}`);
  const whole = refs.filter((r) => attr(r, 'URI') === '');
  const props = refs.filter((r) => attr(r, 'Type') === SIGNED_PROPS_TYPE);
  if (whole.length !== 1 || props.length !== 1 || whole[0] === props[0]) {
    throw new SignatureError('bad_structure', 'expected one whole-document reference and one SignedProperties reference');
  }

  // Every structural check first, then the digests: the cheap refusals come before hashing
  // 3 MB, and a reference that points at the wrong place is reported as such.
  // Reference 1: the whole document minus this signature (TS 119 612 §5.7.1 b/c).
  const wt = transformsOf(whole[0]!);
  if (wt.length !== 2 || wt[0] !== ENVELOPED || wt[1] !== EXC_C14N) {
    throw new SignatureError('bad_structure', 'the whole-document reference must use enveloped-signature then exclusive c14n');
  }
  // Reference 2: the SignedProperties of this signature's QualifyingProperties, by Id.
  const uri = attr(props[0]!, 'URI') ?? '';
  if (!uri.startsWith('#') || uri.length < 2) throw new SignatureError('bad_structure', 'the SignedProperties reference must be a same-document #id');
  const target = doc.ids.get(uri.slice(1));
  const qp = target?.parent;
  const obj = qp?.parent;
  if (
    !target ||
    target.ns !== XADES ||
    target.local !== 'SignedProperties' ||
    !qp ||
    qp.ns !== XADES ||
    qp.local !== 'QualifyingProperties' ||
    !obj ||
    obj.ns !== DSIG ||
    obj.local !== 'Object' ||
    obj.parent !== sig
  ) {
    throw new SignatureError('bad_structure', 'the SignedProperties reference does not point into this signature');
  }
  const qpTarget = attr(qp, 'Target');
  const sigId = attr(sig, 'Id');
  if (qpTarget !== undefined && sigId !== undefined && qpTarget !== `#${sigId}`) {
    throw new SignatureError('bad_structure', 'QualifyingProperties Target is not this signature');
  }
  const pt = transformsOf(props[0]!);
  if (pt.length !== 1 || pt[0] !== EXC_C14N) throw new SignatureError('bad_structure', 'the SignedProperties reference must use exclusive c14n');
  digestOf(props[0]!, (h) => c14nElement(target, (c) => h.update(c, 'utf8')));
  digestOf(whole[0]!, (h) => c14nDocument(doc, (c) => h.update(c, 'utf8'), { exclude: sig }));

  // The signer: the certificate in KeyInfo must be pinned; without one, try every pinned key.
  const sigValue = b64(only(sig, 'SignatureValue'));
  const keyCerts = childElements(child(child(sig, DSIG, 'KeyInfo'), DSIG, 'X509Data') ?? sig, DSIG, 'X509Certificate').map((e) => b64(e));
  let candidates: PinnedCert[];
  if (keyCerts.length) {
    const fp = sha256Hex(keyCerts[0]!);
    candidates = trusted.filter((t) => t.sha256 === fp);
    if (!candidates.length) throw new SignatureError('signer_not_pinned', `signer certificate ${fp} is not among the ${trusted.length} pinned signers`);
  } else {
    candidates = trusted;
  }
  const signedBytes = Buffer.from(c14nToString(signedInfo), 'utf8');
  for (const c of candidates) {
    let key: crypto.KeyObject;
    try {
      key = new crypto.X509Certificate(c.der).publicKey;
    } catch {
      continue;
    }
    const kt = key.asymmetricKeyType;
    if ((sm.key === 'rsa' && kt !== 'rsa') || (sm.key === 'ec' && kt !== 'ec')) continue;
    // XML-DSig 1.1 §6.4.3: an ECDSA SignatureValue is r||s, not DER.
    let ok = false;
    try {
      ok =
        sm.key === 'ec'
          ? crypto.verify(sm.hash, signedBytes, { key, dsaEncoding: 'ieee-p1363' }, sigValue)
          : crypto.verify(sm.hash, signedBytes, key, sigValue);
    } catch {
      ok = false; // a malformed signature value is a failed signature, not a crash
    }
    if (ok) {
      checkSigningCertificate(target, c.der);
      const st = textOf(child(child(target, XADES, 'SignedSignatureProperties'), XADES, 'SigningTime')).trim();
      return { algorithm: sm.name, signerSha256: c.sha256, signature: sig, ...(st ? { signingTime: st } : {}) };
    }
  }
  throw new SignatureError('signature_invalid', 'the signature value does not verify with the signer key');
}

/** XAdES SigningCertificate(V2): when present, one CertDigest must be the signer's. */
function checkSigningCertificate(signedProps: XElement, der: Buffer): void {
  const ssp = child(signedProps, XADES, 'SignedSignatureProperties');
  const sc = child(ssp, XADES, 'SigningCertificateV2') ?? child(ssp, XADES, 'SigningCertificate');
  if (!sc) return;
  for (const cert of childElements(sc, XADES, 'Cert')) {
    const cd = child(cert, XADES, 'CertDigest');
    const alg =
      DIGESTS[attr(child(cd, DSIG, 'DigestMethod'), 'Algorithm') ?? ''] ??
      (attr(child(cd, DSIG, 'DigestMethod'), 'Algorithm') === 'http://www.w3.org/2000/09/xmldsig#sha1' ? 'sha1' : undefined);
    if (!alg) continue;
    if (
      crypto
        .createHash(alg)
        .update(der)
        .digest()
        .equals(b64(child(cd, DSIG, 'DigestValue')))
    )
      return;
  }
  throw new SignatureError('signing_certificate_mismatch', 'the XAdES SigningCertificate does not name the signer');
}
