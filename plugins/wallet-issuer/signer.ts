import crypto from 'node:crypto';

// Issuer keys sign with the core's P-256 signers (software, or PKCS#11 shared with the RP CA).
export { SoftwareSigner, type Signer } from '../../server/sdk.ts';

/** The public JWK (RFC 7517) of a P-256 SubjectPublicKeyInfo. */
export function publicJwk(spki: Buffer): { kty: 'EC'; crv: 'P-256'; x: string; y: string } {
  const jwk = crypto.createPublicKey({ key: spki, format: 'der', type: 'spki' }).export({ format: 'jwk' });
  return { kty: 'EC', crv: 'P-256', x: String(jwk.x), y: String(jwk.y) };
}

/** RFC 7638 JWK thumbprint (SHA-256, base64url) of a P-256 key: the key id. */
export function jwkThumbprint(jwk: { crv: string; kty: string; x: string; y: string }): string {
  const canonical = `{"crv":"${jwk.crv}","kty":"${jwk.kty}","x":"${jwk.x}","y":"${jwk.y}"}`;
  return crypto.createHash('sha256').update(canonical).digest('base64url');
}
