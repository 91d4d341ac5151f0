/**
 * X25519 for werift's DTLS handshakes from OpenSSL instead of tweetnacl.
 *
 * werift's DTLS takes its ECDHE key pair and shared secret (RFC 8422 §5.10, RFC 7748 §6.1) from
 * tweetnacl, pure JavaScript, synchronously, on the thread that also paces every room's 20 ms
 * frames: per join, measured in CPU time on this VM, 35 ms for the thread's first handshake, about
 * 10 ms for the next ones until V8 optimises it, then 1.2 to 1.8 ms; every other room's sender
 * waits that long. node:crypto does it in 0.15 to 0.25 ms (5 ms the first time). werift imports
 * tweetnacl's module object and calls `nacl.box.keyPair()` and `nacl.scalarMult(secret, public)`
 * on it at call time, so replacing those two members in the thread that runs werift is enough;
 * the results are the same bytes (RFC 7748 clamps the scalar in both;
 * test/plugins/telephony/bridge-native-x25519.test.ts).
 * x25519 is the curve negotiated with browsers and werift peers (both list it first); werift's
 * P-256 path uses @noble/curves, whose exported object is frozen, and stays as it is.
 */
import crypto from 'node:crypto';
import { createRequire } from 'node:module';

/** PKCS#8 DER prefix of a raw X25519 private key (RFC 8410 §7). */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');

interface NaclLike {
  scalarMult: (n: Uint8Array, p: Uint8Array) => Uint8Array;
  box: { keyPair: () => { publicKey: Uint8Array; secretKey: Uint8Array } };
}

/**
 * The key objects of the secret keys x25519KeyPair made, by the secret's memory: werift keeps
 * `Buffer.from(secretKey.buffer)`, a view of the same ArrayBuffer, and hands it back to
 * scalarMult. Importing a raw private key costs ~0.45 ms (OpenSSL's PKCS#8 decoder); this way the
 * handshake's ECDHE is a key generation and one derivation (~0.1 ms together).
 */
const generated = new WeakMap<ArrayBufferLike, crypto.KeyObject>();

function privateKeyOf(secret: Uint8Array): crypto.KeyObject {
  const known = secret.byteOffset === 0 && secret.byteLength === secret.buffer.byteLength ? generated.get(secret.buffer) : undefined;
  return known ?? crypto.createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, secret]), format: 'der', type: 'pkcs8' });
}

/** X25519(k, u) of RFC 7748 §5: the shared secret of a raw 32-byte secret and public key. */
export function x25519(secret: Uint8Array, pub: Uint8Array): Uint8Array {
  if (secret.length !== 32 || pub.length !== 32) throw new Error('x25519: keys are 32 bytes');
  const publicKey = crypto.createPublicKey({
    key: { kty: 'OKP', crv: 'X25519', x: Buffer.from(pub.buffer, pub.byteOffset, 32).toString('base64url') },
    format: 'jwk',
  });
  return new Uint8Array(crypto.diffieHellman({ privateKey: privateKeyOf(secret), publicKey }));
}

/** A fresh key pair as raw 32-byte keys (tweetnacl's `box.keyPair` shape: each its own ArrayBuffer). */
export function x25519KeyPair(): { publicKey: Uint8Array; secretKey: Uint8Array } {
  const { privateKey } = crypto.generateKeyPairSync('x25519');
  const jwk = privateKey.export({ format: 'jwk' });
  const secretKey = new Uint8Array(Buffer.from(jwk.d!, 'base64url'));
  const publicKey = new Uint8Array(Buffer.from(jwk.x!, 'base64url'));
  generated.set(secretKey.buffer, privateKey);
  return { publicKey, secretKey };
}

let installed: boolean | null = null;

/**
 * Points the tweetnacl instance werift resolves (its own dependency, resolved from werift) at
 * the OpenSSL functions, once per thread. Returns false when that instance is not found or has
 * another shape (werift then keeps its pure-JS path).
 */
export function installNativeX25519(): boolean {
  if (installed !== null) return installed;
  installed = false;
  try {
    const fromWerift = createRequire(createRequire(import.meta.url).resolve('werift'));
    const nacl = fromWerift('tweetnacl') as Partial<NaclLike>;
    if (typeof nacl.scalarMult !== 'function' || typeof nacl.box?.keyPair !== 'function') return false;
    nacl.scalarMult = x25519;
    nacl.box.keyPair = x25519KeyPair;
    installed = true;
  } catch {
    // werift or tweetnacl not resolvable from here: leave werift as it is
  }
  return installed;
}
