import crypto from 'node:crypto';

/**
 * Where an issuer key lives and how it signs: ECDSA P-256 over SHA-256, the signature in the
 * IEEE P1363 form r || s (64 bytes), which is what JWS ES256 (RFC 7518 §3.4) and COSE ES256
 * (RFC 9053 §2.1) both carry. The X.509 layer re-encodes it as DER itself.
 */
export interface Signer {
  readonly kind: 'software' | 'pkcs11';
  /** SubjectPublicKeyInfo (DER). */
  readonly spki: Buffer;
  sign(data: Buffer): Promise<Buffer>;
  describe(): string;
  close(): void;
}

/** A software P-256 key; the caller seals its PKCS#8 DER with the master key at rest. */
export class SoftwareSigner implements Signer {
  readonly kind = 'software' as const;
  readonly spki: Buffer;
  readonly #key: crypto.KeyObject;

  constructor(pkcs8Der: Buffer) {
    this.#key = crypto.createPrivateKey({ key: pkcs8Der, format: 'der', type: 'pkcs8' });
    if (this.#key.asymmetricKeyType !== 'ec' || this.#key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') throw new Error('issuer keys are EC P-256');
    this.spki = crypto.createPublicKey(this.#key).export({ format: 'der', type: 'spki' });
  }

  static generate(): { signer: SoftwareSigner; pkcs8: Buffer } {
    const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pkcs8 = privateKey.export({ format: 'der', type: 'pkcs8' });
    return { signer: new SoftwareSigner(pkcs8), pkcs8 };
  }

  async sign(data: Buffer): Promise<Buffer> {
    return crypto.sign('sha256', data, { key: this.#key, dsaEncoding: 'ieee-p1363' });
  }

  describe(): string {
    return 'software (P-256, sealed with the master key)';
  }

  close(): void {
    // Nothing to release: the key is only memory.
  }
}

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
