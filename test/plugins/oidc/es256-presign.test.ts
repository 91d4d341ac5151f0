import crypto from 'node:crypto';
import * as jose from 'jose';
import { describe, expect, it } from 'vitest';
import { finishSignature, invertAll, isP256PrivateKey, P256_N, presign, privateScalar } from '../../../plugins/oidc/es256-presign.ts';

/**
 * ES256 signatures finished from presignatures (es256-presign.ts) are ordinary ECDSA signatures:
 * node:crypto and jose verify each one with the public key alone, a changed input or a changed
 * key fails, and no two share a nonce.
 */
const es = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const b64 = (s: string) => Buffer.from(s).toString('base64url');

describe('ES256 presignatures', () => {
  it('knows which keys it can sign for: P-256 private keys only', () => {
    expect(isP256PrivateKey(es.privateKey)).toBe(true);
    expect(isP256PrivateKey(es.publicKey)).toBe(false);
    expect(isP256PrivateKey(crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey)).toBe(false);
    expect(isP256PrivateKey(crypto.generateKeyPairSync('ed25519').privateKey)).toBe(false);
  });

  it('reads the private scalar d: d·G is the public key', () => {
    const d = privateScalar(es.privateKey);
    const ecdh = crypto.createECDH('prime256v1');
    ecdh.setPrivateKey(Buffer.from(d.toString(16).padStart(64, '0'), 'hex'));
    const jwk = es.publicKey.export({ format: 'jwk' });
    expect(ecdh.getPublicKey().subarray(1, 33).toString('base64url')).toBe(jwk.x);
    expect(ecdh.getPublicKey().subarray(33).toString('base64url')).toBe(jwk.y);
  });

  it('inverts modulo n: x·x⁻¹ = 1 for every x, including 1 and n-1', () => {
    const xs = [1n, 2n, P256_N - 1n, ...Array.from({ length: 50 }, () => BigInt(`0x${crypto.randomBytes(32).toString('hex')}`) % P256_N)].filter(
      (x) => x !== 0n,
    );
    const inv = invertAll(xs);
    xs.forEach((x, i) => expect((x * inv[i]!) % P256_N).toBe(1n));
    expect(invertAll([])).toEqual([]);
  });

  it('signs 2,000 inputs that node:crypto verifies, each with its own nonce', () => {
    const pre = presign(privateScalar(es.privateKey), 2000);
    expect(new Set(pre.map((p) => p.r)).size).toBe(2000);
    for (let i = 0; i < pre.length; i++) {
      const input = `${b64('{"alg":"ES256"}')}.${b64(JSON.stringify({ i, ü: 'ünïcödé' }))}`;
      const sig = Buffer.from(finishSignature(input, pre[i]!)!, 'base64url');
      expect(sig.length).toBe(64);
      expect(crypto.verify('sha256', Buffer.from(input), { key: es.publicKey, dsaEncoding: 'ieee-p1363' }, sig)).toBe(true);
      // The signature binds the input: one changed character fails.
      if (i % 100 === 0) expect(crypto.verify('sha256', Buffer.from(`${input}x`), { key: es.publicKey, dsaEncoding: 'ieee-p1363' }, sig)).toBe(false);
    }
  });

  it('makes JWTs that jose verifies with the public key, and no other key verifies', async () => {
    const other = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const [p] = presign(privateScalar(es.privateKey), 1);
    const input = `${b64(JSON.stringify({ alg: 'ES256', typ: 'at+jwt' }))}.${b64(JSON.stringify({ sub: 'svc', exp: Math.floor(Date.now() / 1000) + 60 }))}`;
    const jwt = `${input}.${finishSignature(input, p!)!}`;
    const { payload, protectedHeader } = await jose.jwtVerify(jwt, es.publicKey, { algorithms: ['ES256'], typ: 'at+jwt' });
    expect(payload.sub).toBe('svc');
    expect(protectedHeader.alg).toBe('ES256');
    await expect(jose.jwtVerify(jwt, other.publicKey, { algorithms: ['ES256'] })).rejects.toThrow(/signature verification failed/);
  });

  it('a presignature made for one key does not sign for another', () => {
    const other = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const [p] = presign(privateScalar(other.privateKey), 1);
    const sig = Buffer.from(finishSignature('abc.def', p!)!, 'base64url');
    expect(crypto.verify('sha256', Buffer.from('abc.def'), { key: other.publicKey, dsaEncoding: 'ieee-p1363' }, sig)).toBe(true);
    expect(crypto.verify('sha256', Buffer.from('abc.def'), { key: es.publicKey, dsaEncoding: 'ieee-p1363' }, sig)).toBe(false);
  });
});
