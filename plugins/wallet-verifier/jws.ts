import crypto from 'node:crypto';

/**
 * Compact JWS signature check (RFC 7515 §5.2) with Node's crypto directly: synchronous, no
 * WebCrypto round trip, which roughly triples presentations verified per second. Only the
 * asymmetric algorithms the verifier accepts; `none` and HMAC never verify.
 */
const PARAMS: Record<string, { hash: string | null; opts: Partial<crypto.VerifyKeyObjectInput> }> = {
  ES256: { hash: 'sha256', opts: { dsaEncoding: 'ieee-p1363' } },
  ES384: { hash: 'sha384', opts: { dsaEncoding: 'ieee-p1363' } },
  ES512: { hash: 'sha512', opts: { dsaEncoding: 'ieee-p1363' } },
  PS256: { hash: 'sha256', opts: { padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 } },
  EdDSA: { hash: null, opts: {} },
};

export function verifyCompactJws(jws: string, alg: string, key: crypto.KeyObject): boolean {
  const p = PARAMS[alg];
  const last = jws.lastIndexOf('.');
  if (!p || last < 0) return false;
  const sig = Buffer.from(jws.slice(last + 1), 'base64url');
  if (!sig.length) return false;
  try {
    return crypto.verify(p.hash, Buffer.from(jws.slice(0, last), 'ascii'), { key, ...p.opts }, sig);
  } catch {
    return false;
  }
}

/**
 * The same check with the key as a public JWK (a holder's cnf.jwk): handed to crypto.verify as it
 * is, which imports it natively without a KeyObject around it (about a tenth of the import and
 * verification together). Returns 'bad_key' when the JWK is no usable public key (the caller names
 * that check), false when the signature does not verify.
 */
export function verifyCompactJwsJwk(jws: string, alg: string, jwk: crypto.JsonWebKey): boolean | 'bad_key' {
  const p = PARAMS[alg];
  const last = jws.lastIndexOf('.');
  if (!p || last < 0) return false;
  const sig = Buffer.from(jws.slice(last + 1), 'base64url');
  if (!sig.length) return false;
  // Only the public members count: a `d` would make Node import a private key.
  const key: crypto.JsonWebKey = { ...jwk, d: undefined };
  try {
    return crypto.verify(p.hash, Buffer.from(jws.slice(0, last), 'ascii'), { ...p.opts, key, format: 'jwk' }, sig);
  } catch {
    // Tell a key that does not import from a signature that does not fit it (rare: only on failure).
    try {
      crypto.createPublicKey({ key, format: 'jwk' });
    } catch {
      return 'bad_key';
    }
    return false;
  }
}
