// @peculiar/x509 resolves its algorithm registry through tsyringe, which needs the Reflect
// metadata polyfill loaded before the library itself.
import 'reflect-metadata';
import crypto, { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { Signer } from '../../server/sdk.ts';

export { x509 };

/**
 * How the CA signs through @peculiar/x509. The library builds the TBSCertificate / TBSCertList,
 * asks WebCrypto's `subtle.sign(alg, key, tbs)` for a signature in P1363 form and re-encodes it
 * as DER (its AsnEcSignatureFormatter). We hand it a WebCrypto facade whose `sign` routes our
 * opaque key handle to the Signer (software or PKCS#11) and whose every other method is Node's
 * own WebCrypto. That keeps all ASN.1 in the library (no hand-built TBS) and the signer a single
 * primitive; a key in an HSM never has to become a real CryptoKey.
 */
export interface SigningProvider {
  crypto: webcrypto.Crypto;
  key: webcrypto.CryptoKey;
}

const ECDSA_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
export const SIGNING_ALG = { name: 'ECDSA', hash: 'SHA-256' } as const;

export function signingProvider(signer: Signer): SigningProvider {
  const real = webcrypto.subtle;
  // A handle, not a key: the facade recognises it by identity. The library reads only `algorithm`.
  const key = Object.freeze({ type: 'private', extractable: false, algorithm: ECDSA_P256, usages: ['sign'] }) as unknown as webcrypto.CryptoKey;
  const subtle = {
    digest: real.digest.bind(real),
    exportKey: real.exportKey.bind(real),
    importKey: real.importKey.bind(real),
    verify: real.verify.bind(real),
    generateKey: real.generateKey.bind(real),
    async sign(alg: unknown, k: webcrypto.CryptoKey, data: BufferSource): Promise<ArrayBuffer> {
      if (k !== key) return real.sign(alg as webcrypto.EcdsaParams, k, data);
      const sig = await signer.sign(toBuffer(data));
      return sig.buffer.slice(sig.byteOffset, sig.byteOffset + sig.byteLength) as ArrayBuffer;
    },
  };
  const facade = {
    subtle,
    getRandomValues: webcrypto.getRandomValues.bind(webcrypto),
    randomUUID: webcrypto.randomUUID.bind(webcrypto),
  } as unknown as webcrypto.Crypto;
  return { crypto: facade, key };
}

type BufferSource = ArrayBuffer | ArrayBufferView;

function toBuffer(d: BufferSource): Buffer {
  return ArrayBuffer.isView(d) ? Buffer.from(d.buffer, d.byteOffset, d.byteLength) : Buffer.from(d);
}

// The library's parameter types name DOM `Crypto`/`CryptoKey`; our facade is structurally that.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see the line above: the DOM types are not in this Node project's lib
type LibCrypto = any;

/**
 * A positive serial of 16 random bytes (RFC 5280 §4.1.2.2: positive, at most 20 octets; CA/B
 * Forum BR §7.1: at least 64 bits from a CSPRNG). The top bit is cleared so the INTEGER stays
 * positive without a pad byte, and the first byte is non-zero so the encoding is minimal.
 */
export function randomSerialHex(): string {
  const b = crypto.randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x01;
  return b.toString('hex');
}

/** base64url(SHA-256(DER)) without padding: the OpenID4VP `x509_hash` client identifier value. */
export function x509Hash(der: Buffer): string {
  return crypto.createHash('sha256').update(der).digest('base64url');
}

export function fingerprint(der: Buffer): string {
  return crypto.createHash('sha256').update(der).digest('hex').toUpperCase().match(/../g)!.join(':');
}

export function pem(der: Buffer, label = 'CERTIFICATE'): string {
  const b64 = der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

// --- tiny DER encoder for the two structures @peculiar/x509 has no builder for -------------------

function derLen(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), derLen(body.length), body]);
}

function derOid(oid: string): Buffer {
  const parts = oid.split('.').map((p) => BigInt(p));
  const out: number[] = [Number(parts[0]! * 40n + parts[1]!)];
  for (const p of parts.slice(2)) {
    const chunk: number[] = [];
    let v = p;
    do {
      chunk.unshift(Number(v & 0x7fn) | (chunk.length ? 0x80 : 0));
      v >>= 7n;
    } while (v > 0n);
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

const ID_QT_CPS = '1.3.6.1.5.5.7.2.1';

/**
 * certificatePolicies (RFC 5280 §4.2.1.4) with one policy and a CPS pointer qualifier, the shape
 * ETSI TS 119 411-8 / EN 319 411-1 certificates use: the policy OID plus the URI of the CPS.
 */
export function certificatePoliciesExtension(policyOid: string, cpsUri: string): x509.Extension {
  const qualifier = tlv(0x30, Buffer.concat([derOid(ID_QT_CPS), tlv(0x16, Buffer.from(cpsUri, 'ascii'))]));
  const info = tlv(0x30, Buffer.concat([derOid(policyOid), tlv(0x30, qualifier)]));
  return new x509.Extension('2.5.29.32', false, tlv(0x30, info));
}

/** cRLNumber (RFC 5280 §5.2.3): a monotonically increasing INTEGER, required in conforming CRLs. */
export function crlNumberExtension(n: number): x509.Extension {
  let hex = n.toString(16);
  if (hex.length % 2) hex = '0' + hex;
  let body = Buffer.from(hex, 'hex');
  if (body[0]! & 0x80) body = Buffer.concat([Buffer.from([0]), body]);
  return new x509.Extension('2.5.29.20', false, tlv(0x02, body));
}

// --- certificates and CRLs ------------------------------------------------------------------------

export interface CaCertParams {
  subject: string;
  notBefore: Date;
  notAfter: Date;
}

/**
 * The tenant's self-signed root: basicConstraints cA (critical, pathLen 0: it issues end
 * entities only), keyUsage keyCertSign + cRLSign (critical), SKI (RFC 5280 §4.2.1.2 method 1).
 */
export async function createCaCertificate(signer: Signer, p: CaCertParams): Promise<x509.X509Certificate> {
  const { crypto: c, key } = signingProvider(signer);
  const publicKey = new x509.PublicKey(signer.spki);
  return x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialHex(),
      subject: p.subject,
      issuer: p.subject,
      notBefore: p.notBefore,
      notAfter: p.notAfter,
      publicKey,
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- @peculiar/x509 takes its own crypto types; LibCrypto is any on purpose (see its declaration)
      signingKey: key as LibCrypto,
      signingAlgorithm: SIGNING_ALG,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(publicKey, false, c as LibCrypto),
      ],
    },
    c as LibCrypto,
  );
}

export interface LeafParams {
  ca: x509.X509Certificate;
  serialHex: string;
  subject: string;
  spki: Buffer;
  notBefore: Date;
  notAfter: Date;
  dnsNames: string[];
  ipAddresses?: string[];
  policyOid: string;
  cpsUri: string;
  crlUri?: string;
  /** Extended key usages (serverAuth for the appliance's HTTPS certificate). */
  eku?: string[];
}

export async function createLeafCertificate(signer: Signer, p: LeafParams): Promise<x509.X509Certificate> {
  const { crypto: c, key } = signingProvider(signer);
  const publicKey = new x509.PublicKey(p.spki);
  const names: x509.JsonGeneralName[] = [
    ...p.dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...(p.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    await x509.SubjectKeyIdentifierExtension.create(publicKey, false, c as LibCrypto),
    await x509.AuthorityKeyIdentifierExtension.create(p.ca, false, c as LibCrypto),
    // RFC 5280 §4.2.1.6: with an empty subject the SAN must be critical; ours has a CN, so not.
    new x509.SubjectAlternativeNameExtension(names, false),
    certificatePoliciesExtension(p.policyOid, p.cpsUri),
  ];
  if (p.crlUri) extensions.push(new x509.CRLDistributionPointsExtension([p.crlUri], false));
  if (p.eku?.length) extensions.push(new x509.ExtendedKeyUsageExtension(p.eku, false));
  return x509.X509CertificateGenerator.create(
    {
      serialNumber: p.serialHex,
      subject: p.subject,
      issuer: p.ca.subjectName,
      notBefore: p.notBefore,
      notAfter: p.notAfter,
      publicKey,
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- @peculiar/x509 takes its own crypto types; LibCrypto is any on purpose (see its declaration)
      signingKey: key as LibCrypto,
      signingAlgorithm: SIGNING_ALG,
      extensions,
    },
    c as LibCrypto,
  );
}

export interface CrlEntry {
  serialHex: string;
  revokedAt: Date;
  reason: number;
}

/** An X.509 v2 CRL (RFC 5280 §5) with AKI and cRLNumber; entries carry their reasonCode. */
export async function createCrl(
  signer: Signer,
  ca: x509.X509Certificate,
  p: { thisUpdate: Date; nextUpdate: Date; number: number; entries: CrlEntry[] },
): Promise<x509.X509Crl> {
  const { crypto: c, key } = signingProvider(signer);
  return x509.X509CrlGenerator.create(
    {
      issuer: ca.subjectName,
      thisUpdate: p.thisUpdate,
      nextUpdate: p.nextUpdate,
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- @peculiar/x509 takes its own crypto types; LibCrypto is any on purpose (see its declaration)
      signingKey: key as LibCrypto,
      signingAlgorithm: SIGNING_ALG,
      extensions: [await x509.AuthorityKeyIdentifierExtension.create(ca, false, c as LibCrypto), crlNumberExtension(p.number)],
      // reason 0 (unspecified) is left out: RFC 5280 §5.3.1 says SHOULD be absent rather than 0.
      entries: p.entries.map((e) => ({ serialNumber: e.serialHex, revocationDate: e.revokedAt, ...(e.reason ? { reason: e.reason } : {}) })),
    },
    c as LibCrypto,
  );
}
