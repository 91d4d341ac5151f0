import crypto from 'node:crypto';

/**
 * Compact JWS signature check (RFC 7515 §5.2) with Node's crypto directly: synchronous, no
 * WebCrypto round trip, which roughly triples presentations verified per second. Only the
 * asymmetric algorithms the verifier accepts; `none` and HMAC never verify.
 */
const PARAMS: Record<string, { hash: string | null; input: (key: crypto.KeyObject) => crypto.VerifyKeyObjectInput | crypto.KeyObject }> = {
  ES256: { hash: 'sha256', input: (key) => ({ key, dsaEncoding: 'ieee-p1363' }) },
  ES384: { hash: 'sha384', input: (key) => ({ key, dsaEncoding: 'ieee-p1363' }) },
  ES512: { hash: 'sha512', input: (key) => ({ key, dsaEncoding: 'ieee-p1363' }) },
  PS256: { hash: 'sha256', input: (key) => ({ key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }) },
  EdDSA: { hash: null, input: (key) => key },
};

export function verifyCompactJws(jws: string, alg: string, key: crypto.KeyObject): boolean {
  const p = PARAMS[alg];
  const last = jws.lastIndexOf('.');
  if (!p || last < 0) return false;
  const sig = Buffer.from(jws.slice(last + 1), 'base64url');
  if (!sig.length) return false;
  try {
    return crypto.verify(p.hash, scratchAscii(jws, last), p.input(key), sig);
  } catch {
    return false;
  }
}

/**
 * The signing input (the first `n` characters of a compact JWS, ASCII) in a buffer reused by
 * every verification: crypto.verify is synchronous and keeps nothing of it. A new Buffer per
 * verification (a kilobyte and more for an issuer JWT with x5c) drained Node's buffer pool every
 * few presentations, and each new pool is external memory the garbage collector accounts for.
 */
let scratch = Buffer.allocUnsafe(8192);
function scratchAscii(s: string, n: number): Uint8Array {
  if (n > scratch.length) scratch = Buffer.allocUnsafe(Math.max(n, 2 * scratch.length));
  const len = scratch.write(s.slice(0, n), 0, 'latin1');
  return new Uint8Array(scratch.buffer, scratch.byteOffset, len);
}
