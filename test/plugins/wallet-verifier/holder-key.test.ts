import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { importEcPoint, importPublicJwk } from '../../../plugins/wallet-verifier/holder-key.ts';
import { type Anchor, sha256Hex, validateChain } from '../../../plugins/wallet-verifier/x509.ts';
import { makeIssuerCa } from './wallet.ts';

const data = Buffer.from('holder key binding');

describe('wallet verifier: holder keys (holder-key.ts)', () => {
  it('imports EC points of P-256, P-384 and P-521 through the raw import; the key verifies its holder’s signatures', async () => {
    for (const [crv, hash] of [
      ['P-256', 'sha256'],
      ['P-384', 'sha384'],
      ['P-521', 'sha512'],
    ] as const) {
      const pair = crypto.generateKeyPairSync('ec', { namedCurve: crv });
      const jwk = pair.publicKey.export({ format: 'jwk' });
      const key = await importPublicJwk({ ...jwk, d: 'ignored' });
      expect(key.asymmetricKeyType).toBe('ec');
      expect(key.export({ format: 'jwk' })).toEqual(jwk);
      expect(crypto.verify(hash, data, key, crypto.sign(hash, data, pair.privateKey))).toBe(true);
      expect(crypto.verify(hash, data, key, crypto.sign(hash, data, crypto.generateKeyPairSync('ec', { namedCurve: crv }).privateKey))).toBe(false);
    }
  });

  it('refuses a point off the curve, the zero point, wrong lengths and text that is not base64url', async () => {
    const jwk = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    const y = Buffer.from(jwk.y!, 'base64url');
    y[31]! ^= 1;
    await expect(importPublicJwk({ ...jwk, y: y.toString('base64url') })).rejects.toThrow();
    await expect(importEcPoint('P-256', new Uint8Array(32), new Uint8Array(32))).rejects.toThrow();
    await expect(importPublicJwk({ ...jwk, x: jwk.x!.slice(1) })).rejects.toThrow(/not a P-256 public key/);
    await expect(importPublicJwk({ ...jwk, x: `${jwk.x!.slice(1)}=` })).rejects.toThrow(/not a P-256 public key/);
    await expect(importPublicJwk({ ...jwk, x: `${jwk.x!.slice(1)}+` })).rejects.toThrow(/not a P-256 public key/);
    await expect(importPublicJwk({ kty: 'EC', crv: 'P-256' })).rejects.toThrow(/not a P-256 public key/);
    await expect(importEcPoint('secp256k1', new Uint8Array(32), new Uint8Array(32))).rejects.toThrow(/not a point/);
  });

  it('imports other key types from their JWK (Ed25519, RSA)', async () => {
    for (const pair of [crypto.generateKeyPairSync('ed25519'), crypto.generateKeyPairSync('rsa', { modulusLength: 2048 })]) {
      const key = await importPublicJwk(pair.publicKey.export({ format: 'jwk' }));
      expect(key.asymmetricKeyType).toBe(pair.publicKey.asymmetricKeyType);
    }
  });
});

describe('wallet verifier: the chain key kept with an issuer header', () => {
  it('is reused only with the same anchor array: another tenant’s anchors check the chain afresh', async () => {
    const a = await makeIssuerCa('Memo A');
    const b = await makeIssuerCa('Memo B');
    const anchor = (der: Buffer): Anchor => ({ sha256: sha256Hex(der), cert: new crypto.X509Certificate(der), source: 'tenant' });
    const leaf = Buffer.from(a.x5c[0]!, 'base64');
    const memo: { anchors?: Anchor[]; key?: string } = {};
    const tenant1 = [anchor(a.rootDer)];
    const tenant2 = [anchor(b.rootDer)];
    expect(validateChain([leaf], tenant1, Date.now(), a.x5c, memo).anchor.sha256).toBe(tenant1[0]!.sha256);
    expect(memo.anchors).toBe(tenant1);
    expect(validateChain([leaf], tenant1, Date.now(), a.x5c, memo).anchor.sha256).toBe(tenant1[0]!.sha256);
    expect(() => validateChain([leaf], tenant2, Date.now(), a.x5c, memo)).toThrow(/does not lead to a trust anchor/);
  });
});
