import crypto from 'node:crypto';

/** A verification step that failed: `check` names it (the result's error names the check). */
export class CheckFailed extends Error {
  constructor(
    readonly check: string,
    message: string,
  ) {
    super(message);
  }
}

export function sha256Hex(der: Buffer): string {
  return crypto.createHash('sha256').update(der).digest('hex');
}

/** base64url(SHA-256(DER)): the OpenID4VP 1.0 §5.9.3 `x509_hash` client identifier value. */
export function x509HashOf(der: Buffer): string {
  return crypto.createHash('sha256').update(der).digest('base64url');
}

export function pemOf(der: Buffer): string {
  return `-----BEGIN CERTIFICATE-----\n${der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END CERTIFICATE-----\n`;
}

/** Every CERTIFICATE block of a PEM text, as DER. */
export function dersOfPem(text: string): Buffer[] {
  const out: Buffer[] = [];
  for (const m of text.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)) out.push(Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64'));
  return out;
}

/** A trust anchor as the chain check sees it. */
export interface Anchor {
  sha256: string;
  cert: crypto.X509Certificate;
  source: 'tenant' | 'lotl';
}

/**
 * RFC 5280 §6 path validation, reduced to what an issuer chain in x5c / x5chain needs: each
 * certificate is signed by the next and valid now, every issuer is a CA, and the chain ends in an
 * anchor (the last certificate is itself an anchor, or an anchor issued it). Returns the leaf.
 */
export function validateChain(
  ders: Buffer[],
  anchors: Anchor[],
  now: number,
  /** The x5c header's base64 texts, when the chain came as those: the cache key is made of them without decoding. */
  x5cTexts?: readonly string[],
  /**
   * Where the caller keeps the cache key of this chain between presentations (the SD-JWT
   * verifier's per-issuer header): reused while the anchor set is the same array.
   */
  memo?: { anchors?: Anchor[]; key?: string },
): { leaf: crypto.X509Certificate; anchor: Anchor } {
  // The same issuer chain arrives with every presentation of that issuer: a verified path is kept
  // (keyed by the chain and the anchor set, so adding or removing an anchor starts afresh) while
  // every certificate of it is within its validity.
  let key: string;
  if (memo?.key !== undefined && memo.anchors === anchors) key = memo.key;
  else {
    key = chainKey(x5cTexts ?? ders, anchors);
    if (memo) {
      memo.anchors = anchors;
      memo.key = key;
    }
  }
  const hit = CHAIN_CACHE.get(key);
  if (hit && now >= hit.from && now <= hit.to) return hit.result;
  const result = validateChainUncached(ders, anchors, now);
  if (CHAIN_CACHE.size >= 1000) CHAIN_CACHE.delete(CHAIN_CACHE.keys().next().value!);
  const certs = [...ders.map((d) => new crypto.X509Certificate(d)), result.anchor.cert];
  CHAIN_CACHE.set(key, {
    result,
    from: Math.max(...certs.map((c) => Date.parse(c.validFrom))),
    to: Math.min(...certs.map((c) => Date.parse(c.validTo))),
  });
  return result;
}

/**
 * The chain cache key: the chain itself (its certificates as base64 texts, or their bytes as
 * latin1 text) and the anchors' fingerprints, not a digest over them (the map compares the key in
 * full on a hit). Parts are separated by U+0100 and U+0101, which neither base64 nor latin1 text
 * contains, so no chain and anchor set can spell the key of another (bytes appended to the last
 * certificate cannot pass for an anchor fingerprint of another tenant).
 */
function chainKey(chain: readonly (string | Buffer)[], anchors: Anchor[]): string {
  let key = typeof chain[0] === 'string' ? 'b' : 'd';
  for (const c of chain) key += `\u0100${typeof c === 'string' ? c : c.toString('latin1')}`;
  key += '\u0101';
  for (const a of anchors) key += `\u0100${a.sha256}`;
  return key;
}

/** The leaf's public key, kept with the (chain-cached) certificate object: X509Certificate.publicKey makes a new KeyObject per call. */
const LEAF_KEYS = new WeakMap<crypto.X509Certificate, crypto.KeyObject>();
export function leafKey(leaf: crypto.X509Certificate): crypto.KeyObject {
  let k = LEAF_KEYS.get(leaf);
  if (!k) LEAF_KEYS.set(leaf, (k = leaf.publicKey));
  return k;
}

const CHAIN_CACHE = new Map<string, { result: { leaf: crypto.X509Certificate; anchor: Anchor }; from: number; to: number }>();

function validateChainUncached(ders: Buffer[], anchors: Anchor[], now: number): { leaf: crypto.X509Certificate; anchor: Anchor } {
  if (!ders.length) throw new CheckFailed('x5c', 'no certificate chain (x5c / x5chain) with the signature');
  let certs: crypto.X509Certificate[];
  try {
    certs = ders.map((d) => new crypto.X509Certificate(d));
  } catch {
    throw new CheckFailed('x5c', 'a certificate of the chain does not parse');
  }
  for (const c of certs) {
    if (Date.parse(c.validFrom) > now || Date.parse(c.validTo) < now)
      throw new CheckFailed('x5c', `certificate ${c.subject.replace(/\n/g, ', ')} is not valid now`);
  }
  for (let i = 0; i + 1 < certs.length; i++) {
    const child = certs[i]!;
    const parent = certs[i + 1]!;
    if (!parent.ca || !child.checkIssued(parent) || !child.verify(parent.publicKey))
      throw new CheckFailed('x5c', `certificate ${i} of the chain is not signed by certificate ${i + 1}`);
  }
  const last = certs[certs.length - 1]!;
  const lastSha = sha256Hex(Buffer.from(last.raw));
  for (const a of anchors) {
    if (a.sha256 === lastSha) return { leaf: certs[0]!, anchor: a };
  }
  for (const a of anchors) {
    if (Date.parse(a.cert.validTo) < now) continue;
    if (last.checkIssued(a.cert) && last.verify(a.cert.publicKey)) return { leaf: certs[0]!, anchor: a };
  }
  throw new CheckFailed('x5c', 'the certificate chain does not lead to a trust anchor of this tenant');
}
