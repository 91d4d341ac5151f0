/**
 * ES256 signatures (ECDSA over P-256 with SHA-256: RFC 7518 §3.4, FIPS 186-5 §6.4.1) finished
 * from presignatures made beforehand on the signing thread.
 *
 * An ECDSA signature is r = x(k·G) mod n and s = k⁻¹·(z + r·d) mod n, for a fresh secret nonce k,
 * the message's hash z and the private key d. Everything costly (the nonce, the point k·G, the
 * inverse k⁻¹) depends on neither the message nor the key, so the `jws-sign` thread makes them
 * ahead, in bulk, and sends them over a few hundred at a time: per presignature r, a = k⁻¹ and
 * b = k⁻¹·r·d mod n. The event loop then signs a token with one SHA-256 and s = a·z + b mod n,
 * about 3 µs, where a signature by node:crypto is about 30 µs and a hop to the thread per batch of
 * tokens costs the loop about as much again in wake-ups (bench/results/2026-12-06-vm-tokens-4.md).
 *
 * Why by hand: node:crypto (OpenSSL 3) signs in one call and has no presignature API. All elliptic
 * curve work stays in OpenSSL: `ECDH.generateKeys()` draws k uniformly from [1, n-1] with
 * OpenSSL's generator and computes k·G in constant time. Ours is only arithmetic modulo n on
 * BigInts, the way audited JavaScript ECDSA libraries (@noble/curves) compute s; like theirs it is
 * not constant-time at the machine level, and the few nanoseconds a modular reduction can vary
 * are far below a network request's jitter. The private key d never reaches the event loop (only
 * a and b do). The signature is an ordinary ECDSA signature: any verifier accepts it, and the
 * tests check each one with node:crypto and jose.
 *
 * The one rule that matters: a presignature is used once. A nonce used for two messages gives
 * away the key. The caller takes each from its pool with `pop()`; none is copied, stored or sent
 * back anywhere, and a pool lives in memory only (a restart starts empty).
 */
import crypto from 'node:crypto';

/** The order n of P-256's base point (FIPS 186-5 / SP 800-186 §3.2.1.3). */
export const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** One use of one nonce for one key: r, a = k⁻¹ and b = k⁻¹·r·d (mod n). */
export interface Presig {
  r: bigint;
  a: bigint;
  b: bigint;
}

/** Whether presignatures can sign for this key: a P-256 private key. */
export function isP256PrivateKey(key: crypto.KeyObject): boolean {
  return key.type === 'private' && key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';
}

/** The private scalar d of a P-256 private key. */
export function privateScalar(key: crypto.KeyObject): bigint {
  const d = key.export({ format: 'jwk' }).d;
  if (!d) throw new Error('not a private key');
  return big(Buffer.from(d, 'base64url'));
}

/** `count` presignatures for the key whose private scalar is `d`. */
export function presign(d: bigint, count: number): Presig[] {
  const ecdh = crypto.createECDH('prime256v1');
  const ks: bigint[] = [];
  const rs: bigint[] = [];
  while (ks.length < count) {
    // A fresh key pair: k uniform in [1, n-1], and k·G in uncompressed form 04 ‖ X ‖ Y.
    const point = ecdh.generateKeys();
    const r = big(point.subarray(1, 33)) % P256_N;
    if (r === 0n) continue; // FIPS 186-5 §6.4.1 step 8: pick another k (probability about 2⁻²⁵⁶)
    ks.push(big(ecdh.getPrivateKey()));
    rs.push(r);
  }
  const inverses = invertAll(ks);
  const out = new Array<Presig>(count);
  for (let i = 0; i < count; i++) {
    const a = inverses[i]!;
    const r = rs[i]!;
    out[i] = { r, a, b: (((a * r) % P256_N) * d) % P256_N };
  }
  return out;
}

/**
 * The base64url ES256 signature (r ‖ s, 64 octets, RFC 7518 §3.4) of `input` (its UTF-8 octets)
 * from one presignature, or null in the case s = 0 (probability about 2⁻²⁵⁶; sign another way).
 */
export function finishSignature(input: string, p: Presig): string | null {
  const z = BigInt(`0x${crypto.hash('sha256', input, 'hex')}`);
  const s = (p.a * z + p.b) % P256_N;
  if (s === 0n) return null;
  return Buffer.from(hex32(p.r) + hex32(s), 'hex').toString('base64url');
}

function big(b: Uint8Array): bigint {
  return b.length === 0 ? 0n : BigInt(`0x${Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex')}`);
}

function hex32(x: bigint): string {
  return x.toString(16).padStart(64, '0');
}

/** x⁻¹ mod n of every x (none 0 mod n), with one exponentiation for all (Montgomery's trick). */
export function invertAll(xs: readonly bigint[]): bigint[] {
  const n = xs.length;
  if (n === 0) return [];
  // prefix[i] = x0 · … · xi
  const prefix = new Array<bigint>(n);
  let acc = 1n;
  for (let i = 0; i < n; i++) prefix[i] = acc = (acc * xs[i]!) % P256_N;
  // n is prime: y⁻¹ = y^(n-2) (Fermat).
  let inv = powMod(acc, P256_N - 2n, P256_N);
  const out = new Array<bigint>(n);
  for (let i = n - 1; i > 0; i--) {
    out[i] = (inv * prefix[i - 1]!) % P256_N;
    inv = (inv * xs[i]!) % P256_N;
  }
  out[0] = inv;
  return out;
}

function powMod(base: bigint, exp: bigint, m: bigint): bigint {
  let result = 1n;
  let b = base % m;
  let e = exp;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return result;
}
