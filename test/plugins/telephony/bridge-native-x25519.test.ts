import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { installNativeX25519, x25519, x25519KeyPair } from '../../../plugins/telephony/bridge/webrtc/native-x25519.ts';

// The instance werift resolves, before the switch: the reference the native functions must match.
const fromWerift = createRequire(createRequire(import.meta.url).resolve('werift'));
const nacl = fromWerift('tweetnacl') as {
  scalarMult: (n: Uint8Array, p: Uint8Array) => Uint8Array;
  box: { keyPair: () => { publicKey: Uint8Array; secretKey: Uint8Array } };
};
const jsScalarMult = nacl.scalarMult;
const jsKeyPair = nacl.box.keyPair;
/** u = 9, the base point (RFC 7748 §4.1). */
const BASE = new Uint8Array(32);
BASE[0] = 9;

describe("X25519 from OpenSSL for werift's DTLS", () => {
  it('gives the RFC 7748 §6.1 test vector', () => {
    const h = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));
    const alicePriv = h('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
    const bobPub = h('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f');
    expect(Buffer.from(x25519(alicePriv, bobPub)).toString('hex')).toBe('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742');
  });

  it('agrees with tweetnacl on random keys, both ways', () => {
    for (let i = 0; i < 20; i++) {
      const a = x25519KeyPair();
      const b = jsKeyPair();
      expect(a.secretKey.buffer.byteLength).toBe(32); // werift copies `.buffer`
      expect(Buffer.from(jsScalarMult(a.secretKey, BASE))).toEqual(Buffer.from(a.publicKey));
      expect(Buffer.from(x25519(a.secretKey, b.publicKey))).toEqual(Buffer.from(jsScalarMult(b.secretKey, a.publicKey)));
      expect(Buffer.from(x25519(b.secretKey, a.publicKey))).toEqual(Buffer.from(jsScalarMult(a.secretKey, b.publicKey)));
    }
  });

  it("replaces the two members of werift's tweetnacl, once", () => {
    expect(installNativeX25519()).toBe(true);
    expect(nacl.scalarMult).toBe(x25519);
    expect(nacl.box.keyPair).toBe(x25519KeyPair);
    expect(installNativeX25519()).toBe(true);
  });
});
