// @peculiar/x509 resolves its algorithm registry through tsyringe, which needs the Reflect
// metadata polyfill loaded before the library itself.
import 'reflect-metadata';
import crypto, { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { Signer } from './signer.ts';

export { x509 };

const ECDSA_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALG = { name: 'ECDSA', hash: 'SHA-256' } as const;
/** ISO/IEC 18013-5 Annex B.1.4: extended key usage of an mdoc document signer certificate. */
export const MDOC_DS_EKU = '1.0.18013.5.1.2';

// The library's parameter types name DOM `Crypto`/`CryptoKey`; our facade is structurally that.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the DOM types are not in this Node project's lib
type LibCrypto = any;

/**
 * A WebCrypto facade whose `sign` routes an opaque key handle to our Signer (software or PKCS#11),
 * so the library builds and DER-encodes the TBS structures and a key in an HSM never has to be a
 * real CryptoKey (the same idea as the RP CA's x509.ts).
 */
function provider(signer: Signer): { crypto: LibCrypto; key: LibCrypto } {
  const real = webcrypto.subtle;
  const key = Object.freeze({ type: 'private', extractable: false, algorithm: ECDSA_P256, usages: ['sign'] });
  const subtle = {
    digest: real.digest.bind(real),
    exportKey: real.exportKey.bind(real),
    importKey: real.importKey.bind(real),
    verify: real.verify.bind(real),
    generateKey: real.generateKey.bind(real),
    async sign(alg: unknown, k: unknown, data: ArrayBuffer | ArrayBufferView): Promise<ArrayBuffer> {
      if (k !== key) return real.sign(alg as webcrypto.EcdsaParams, k as webcrypto.CryptoKey, data);
      const buf = ArrayBuffer.isView(data) ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : Buffer.from(data);
      const sig = await signer.sign(buf);
      return sig.buffer.slice(sig.byteOffset, sig.byteOffset + sig.byteLength) as ArrayBuffer;
    },
  };
  return { crypto: { subtle, getRandomValues: webcrypto.getRandomValues.bind(webcrypto) }, key };
}

/** A positive 16-byte serial (RFC 5280 §4.1.2.2). */
function serial(): string {
  const b = crypto.randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x01;
  return b.toString('hex');
}

/**
 * The tenant's IACA (ISO/IEC 18013-5 Annex B.1.2): self-signed, basicConstraints cA pathLen 0,
 * keyUsage keyCertSign + cRLSign, SKI. Its country comes from the issuer settings.
 */
export async function createIaca(signer: Signer, p: { commonName: string; country: string; notBefore: Date; notAfter: Date }): Promise<Buffer> {
  // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- @peculiar/x509 takes its own crypto types; LibCrypto is any on purpose (see its declaration)
  const { crypto: c, key } = provider(signer);
  const publicKey = new x509.PublicKey(signer.spki);
  const name = `C=${p.country}, CN=${escapeDn(p.commonName)}`;
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: serial(),
      subject: name,
      issuer: name,
      notBefore: p.notBefore,
      notAfter: p.notAfter,
      publicKey,
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- @peculiar/x509 takes its own crypto types; LibCrypto is any on purpose (see its declaration)
      signingKey: key,
      signingAlgorithm: SIGNING_ALG,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(publicKey, false, c),
      ],
    },
    c,
  );
  return Buffer.from(cert.rawData);
}

/**
 * A document signer certificate for a credential signing key (ISO/IEC 18013-5 Annex B.1.4):
 * issued by the IACA, keyUsage digitalSignature, extended key usage mdoc DS, AKI and SKI.
 */
export async function createSignerCertificate(
  iacaSigner: Signer,
  iacaDer: Buffer,
  p: { spki: Buffer; commonName: string; country: string; notBefore: Date; notAfter: Date },
): Promise<Buffer> {
  // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- @peculiar/x509 takes its own crypto types; LibCrypto is any on purpose (see its declaration)
  const { crypto: c, key } = provider(iacaSigner);
  const ca = new x509.X509Certificate(iacaDer);
  const publicKey = new x509.PublicKey(p.spki);
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: serial(),
      subject: `C=${p.country}, CN=${escapeDn(p.commonName)}`,
      issuer: ca.subject,
      notBefore: p.notBefore,
      notAfter: p.notAfter,
      publicKey,
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- @peculiar/x509 takes its own crypto types; LibCrypto is any on purpose (see its declaration)
      signingKey: key,
      signingAlgorithm: SIGNING_ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([MDOC_DS_EKU], true),
        await x509.SubjectKeyIdentifierExtension.create(publicKey, false, c),
        await x509.AuthorityKeyIdentifierExtension.create(ca, false, c),
      ],
    },
    c,
  );
  return Buffer.from(cert.rawData);
}

/** RFC 4514 §2.4: a host name is plain, but a comma or plus in a configured name must not split the DN. */
function escapeDn(v: string): string {
  return v.replace(/([,+"\\<>;=])/g, '\\$1');
}

export function pem(der: Buffer, label = 'CERTIFICATE'): string {
  const b64 = der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}
