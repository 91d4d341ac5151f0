/**
 * The other party, built from code no one here wrote: a test CA and PID issuer (@peculiar/x509,
 * @sd-jwt/sd-jwt-vc 0.19) and a wallet (@openid4vc/openid4vp resolves our request, checks its
 * signature and x5c, builds and encrypts the response).
 */
import 'reflect-metadata';
import crypto, { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { ES256, digest, generateSalt } from '@sd-jwt/crypto-nodejs';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import { Openid4vpClient } from '@openid4vc/openid4vp';
import { HashAlgorithm, type Jwk, setGlobalConfig } from '@openid4vc/oauth2';
import * as jose from 'jose';
import { httpFetch } from '../../support/server.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
// The appliance under test listens on plain HTTP on loopback; a real wallet insists on https.
setGlobalConfig({ allowInsecureUrls: true });
const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };

export interface TestCa {
  rootPem: string;
  rootDer: Buffer;
  issuerKey: webcrypto.CryptoKeyPair;
  issuerJwk: jose.JWK;
  x5c: string[];
}

/** A root CA and a PID issuer certificate under it (the issuer's x5c leaves the root out). */
export async function makeIssuerCa(name = 'Test PID Provider', opts: { leafNotAfter?: Date } = {}): Promise<TestCa> {
  const rootKeys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: `CN=${name} Root`,
    notBefore: new Date(Date.now() - 86_400_000),
    notAfter: new Date(Date.now() + 365 * 86_400_000),
    keys: rootKeys,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(true, 1, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  const issuerKey = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: `CN=${name} Signer`,
    issuer: root.subject,
    notBefore: new Date(Date.now() - 86_400_000),
    notAfter: opts.leafNotAfter ?? new Date(Date.now() + 180 * 86_400_000),
    publicKey: issuerKey.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: alg,
    extensions: [new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true)],
  });
  const issuerJwk = (await webcrypto.subtle.exportKey('jwk', issuerKey.privateKey)) as jose.JWK;
  return {
    rootPem: root.toString('pem'),
    rootDer: Buffer.from(root.rawData),
    issuerKey,
    issuerJwk,
    x5c: [Buffer.from(leaf.rawData).toString('base64')],
  };
}

export interface Holder {
  publicJwk: jose.JWK;
  privateJwk: jose.JWK;
}

export async function makeHolder(): Promise<Holder> {
  const { publicKey, privateKey } = await ES256.generateKeyPair();
  return { publicJwk: publicKey as jose.JWK, privateJwk: privateKey as jose.JWK };
}

export const PID_CLAIMS = { family_name: 'Mustermann', given_name: 'Erika', birthdate: '1964-08-12', nationalities: ['DE'], age_equal_or_over: { '18': true } };

/** Issues a PID SD-JWT VC with @sd-jwt/sd-jwt-vc (every claim selectively disclosable). */
export async function issuePid(
  ca: TestCa,
  holder: Holder,
  opts: { vct?: string; exp?: number; extraPayload?: Record<string, unknown>; header?: Record<string, unknown> } = {},
): Promise<string> {
  const sdjwt = new SDJwtVcInstance({
    signer: await ES256.getSigner(ca.issuerJwk),
    signAlg: 'ES256',
    hasher: digest,
    hashAlg: 'sha-256',
    saltGenerator: generateSalt,
  });
  const now = Math.floor(Date.now() / 1000);
  return sdjwt.issue(
    {
      iss: 'https://pid-provider.example',
      iat: now,
      exp: opts.exp ?? now + 30 * 86_400,
      vct: opts.vct ?? 'urn:eudi:pid:1',
      cnf: { jwk: holder.publicJwk },
      ...PID_CLAIMS,
      ...opts.extraPayload,
    },
    { _sd: ['family_name', 'given_name', 'birthdate', 'nationalities', 'age_equal_or_over'] },
    { header: { typ: 'dc+sd-jwt', x5c: ca.x5c, ...opts.header } },
  );
}

/** Presents with a KB-JWT (@sd-jwt present): the disclosures in `frame`, bound to aud and nonce. */
export async function presentPid(
  credential: string,
  holder: Holder,
  kb: { aud: string; nonce: string; iat?: number },
  frame: Record<string, boolean> = { family_name: true, given_name: true, birthdate: true },
): Promise<string> {
  const sdjwt = new SDJwtVcInstance({ hasher: digest, hashAlg: 'sha-256', kbSigner: await ES256.getSigner(holder.privateJwk), kbSignAlg: 'ES256' });
  return sdjwt.present(credential, frame, { kb: { payload: { aud: kb.aud, nonce: kb.nonce, iat: kb.iat ?? Math.floor(Date.now() / 1000) } } });
}

const fetcher = (async (input: string | URL | Request, init?: RequestInit) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  return httpFetch(url, { method: init?.method, headers: init?.headers as Record<string, string>, body: init?.body as string | undefined });
}) as typeof fetch;

/** The wallet: @openid4vc/openid4vp with jose behind its callbacks. `caDer` is the RP CA it pins. */
export function walletClient(caDer: Buffer): Openid4vpClient {
  return new Openid4vpClient({
    callbacks: {
      fetch: fetcher,
      hash: (data, a) =>
        crypto
          .createHash(a === HashAlgorithm.Sha384 ? 'sha384' : a === HashAlgorithm.Sha512 ? 'sha512' : 'sha256')
          .update(data)
          .digest(),
      getX509CertificateMetadata: (cert) => {
        const c = new x509.X509Certificate(Buffer.from(cert, 'base64'));
        const san = c.getExtension(x509.SubjectAlternativeNameExtension);
        const names = san?.names.items ?? [];
        return {
          sanDnsNames: names.filter((n) => n.type === 'dns').map((n) => n.value),
          sanUriNames: names.filter((n) => n.type === 'url').map((n) => n.value),
        };
      },
      async verifyJwt(signer, jwt) {
        if (signer.method !== 'x5c') return { verified: false };
        // The wallet's own trust decision: the leaf must be issued by the RP CA it pins.
        const leaf = new crypto.X509Certificate(Buffer.from(signer.x5c[0]!, 'base64'));
        const ca = new crypto.X509Certificate(caDer);
        if (!leaf.checkIssued(ca) || !leaf.verify(ca.publicKey)) return { verified: false };
        try {
          await jose.compactVerify(jwt.compact, leaf.publicKey);
        } catch {
          return { verified: false };
        }
        return { verified: true, signerJwk: leaf.publicKey.export({ format: 'jwk' }) as Jwk };
      },
      async encryptJwe(encryptor, data) {
        const key = await jose.importJWK(encryptor.publicJwk as jose.JWK, 'ECDH-ES');
        const jwe = await new jose.CompactEncrypt(new TextEncoder().encode(data))
          .setProtectedHeader({
            alg: 'ECDH-ES',
            enc: encryptor.enc,
            kid: encryptor.publicJwk.kid,
            ...(encryptor.apu ? { apu: encryptor.apu } : {}),
            ...(encryptor.apv ? { apv: encryptor.apv } : {}),
          })
          .encrypt(key);
        return { jwe, encryptionJwk: encryptor.publicJwk };
      },
      decryptJwe: () => {
        throw new Error('the wallet decrypts nothing');
      },
      signJwt: () => {
        throw new Error('the wallet signs no JWT response here');
      },
    },
  });
}
