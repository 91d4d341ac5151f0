/**
 * A presentation's holder key (the SD-JWT VC's cnf.jwk, the mdoc MSO's deviceKey) as a KeyObject.
 *
 * Every presentation brings a key of its own, so its import is part of every verification. An EC
 * key goes in as its uncompressed point through WebCrypto's raw import: OpenSSL decodes the point
 * and refuses one off its curve (on P-256/384/521, whose cofactor is 1, that is the whole public
 * key validation of SP 800-56A §5.6.2.3.4), without the extra n·Q = O multiplication of the JWK
 * import. Measured on the 2-core VM (Node 20, OpenSSL 3.0): raw import + verification 114-116 µs,
 * JWK import + verification 133-149 µs, a verification with a ready key 56 µs. Other key types
 * (OKP, RSA) are imported from their JWK.
 */
import crypto from 'node:crypto';

/** Coordinate length in bytes of each curve the verifier accepts. */
const EC_COORD: Record<string, number> = { 'P-256': 32, 'P-384': 48, 'P-521': 66 };
const B64URL = /^[A-Za-z0-9_-]+$/;

/** The key of an EC point given as its coordinates; throws on a point that is not on the curve. */
export async function importEcPoint(crv: string, x: Uint8Array, y: Uint8Array): Promise<crypto.KeyObject> {
  const n = EC_COORD[crv];
  if (!n || x.length !== n || y.length !== n) throw new Error(`not a point on ${crv}`);
  const point = new Uint8Array(1 + 2 * n);
  point[0] = 0x04;
  point.set(x, 1);
  point.set(y, 1 + n);
  const key = await crypto.webcrypto.subtle.importKey('raw', point, { name: 'ECDSA', namedCurve: crv }, true, ['verify']);
  return crypto.KeyObject.from(key);
}

/** A public JWK as a KeyObject (a private member `d` is ignored); throws when it is no usable key. */
export async function importPublicJwk(jwk: crypto.JsonWebKey): Promise<crypto.KeyObject> {
  if (jwk.kty === 'EC' && typeof jwk.crv === 'string' && EC_COORD[jwk.crv]) {
    const n = EC_COORD[jwk.crv]!;
    const len = Math.ceil((n * 4) / 3);
    if (typeof jwk.x !== 'string' || typeof jwk.y !== 'string' || jwk.x.length !== len || jwk.y.length !== len || !B64URL.test(jwk.x) || !B64URL.test(jwk.y))
      throw new Error(`not a ${jwk.crv} public key`);
    return importEcPoint(jwk.crv, Buffer.from(jwk.x, 'base64url'), Buffer.from(jwk.y, 'base64url'));
  }
  return crypto.createPublicKey({ key: { ...jwk, d: undefined }, format: 'jwk' });
}
