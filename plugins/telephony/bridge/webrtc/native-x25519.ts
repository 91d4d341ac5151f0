/**
 * X25519 for werift's DTLS handshakes from OpenSSL instead of tweetnacl.
 *
 * werift's DTLS takes its ECDHE key pair and shared secret (RFC 8422 §5.10, RFC 7748 §6.1) from
 * tweetnacl, pure JavaScript: about 4 ms for the key pair and 5 ms for the shared secret on this
 * VM, synchronous, on the thread that also paces every room's 20 ms frames. Each join stalled all
 * the other rooms' senders that long (the send-jitter p99 of the rooms benchmark was that stall).
 * node:crypto computes the same function in about 0.05 ms. werift imports tweetnacl's module
 * object and calls `nacl.box.keyPair()` and `nacl.scalarMult(secret, public)` on it at call time,
 * so replacing those two members in the thread that runs werift is enough; the results are the
 * same bytes (RFC 7748 clamps the scalar in both; test/plugins/telephony/native-x25519.test.ts).
 * x25519 is the curve negotiated with browsers and werift peers (both list it first); werift's
 * P-256 path uses @noble/curves, whose exported object is frozen, and stays as it is.
 */
import crypto from 'node:crypto';
import { createRequire } from 'node:module';

/** PKCS#8 and SubjectPublicKeyInfo DER prefixes of a raw X25519 key (RFC 8410 §7 and §4). */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');

interface NaclLike {
  scalarMult: (n: Uint8Array, p: Uint8Array) => Uint8Array;
  box: { keyPair: () => { publicKey: Uint8Array; secretKey: Uint8Array } };
}

/** X25519(k, u) of RFC 7748 §5: the shared secret of a raw 32-byte secret and public key. */
export function x25519(secret: Uint8Array, pub: Uint8Array): Uint8Array {
  if (secret.length !== 32 || pub.length !== 32) throw new Error('x25519: keys are 32 bytes');
  const privateKey = crypto.createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, secret]), format: 'der', type: 'pkcs8' });
  const publicKey = crypto.createPublicKey({ key: Buffer.concat([SPKI_PREFIX, pub]), format: 'der', type: 'spki' });
  return new Uint8Array(crypto.diffieHellman({ privateKey, publicKey }));
}

/** A fresh key pair as raw 32-byte keys (tweetnacl's `box.keyPair` shape). */
export function x25519KeyPair(): { publicKey: Uint8Array; secretKey: Uint8Array } {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('x25519');
  const secretKey = new Uint8Array(32);
  secretKey.set(privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length));
  const pub = new Uint8Array(32);
  pub.set(publicKey.export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length));
  return { publicKey: pub, secretKey };
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
