/**
 * mdoc issuance checked with @owf/mdoc 0.6 (the library the issue names) and with
 * @animo-id/mdoc's verifier. The verifiers' X.509 and COSE callbacks are Node's crypto; the
 * trust anchor is the IACA the issuer publishes. The MSO's status reference is read and
 * followed to the Token Status List before and after a revocation.
 */
import 'reflect-metadata';
import crypto from 'node:crypto';
import { decode as cborDecode } from 'cbor-x';
import { CoseKey, IssuerSigned, type MdocContext as OwfContext } from '@owf/mdoc';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import * as x509 from '@peculiar/x509';
import { type IssuerSignedDocument, parseIssuerSigned, Verifier, type MdocContext, type VerificationAssessment, type X509Context } from '@animo-id/mdoc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { CLAIMS, credentialRequest, preAuthToken } from './support.ts';
import { newHolder, walletClient } from './wallet.ts';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ publicOrigin: true });
});
afterAll(async () => {
  await srv.stop();
});

const x509Ctx: X509Context = {
  getIssuerNameField: ({ certificate, field }) => new x509.X509Certificate(certificate).issuerName.getField(field),
  getPublicKey: async ({ certificate }) => new crypto.X509Certificate(certificate).publicKey.export({ format: 'jwk' }) as never,
  validateCertificateChain: async ({ trustedCertificates, x5chain }) => {
    const leaf = new crypto.X509Certificate(x5chain[0]);
    const ok = trustedCertificates.some((t) => {
      const root = new crypto.X509Certificate(t);
      return leaf.checkIssued(root) && leaf.verify(root.publicKey);
    });
    if (!ok) throw new Error('x5chain does not lead to a trusted IACA');
  },
  getCertificateData: async ({ certificate }) => {
    const c = new x509.X509Certificate(certificate);
    return {
      issuerName: c.issuer,
      subjectName: c.subject,
      serialNumber: c.serialNumber,
      thumbprint: '',
      notBefore: c.notBefore,
      notAfter: c.notAfter,
      pem: c.toString('pem'),
    };
  },
};

const cose: MdocContext['cose'] = {
  sign1: {
    sign: () => {
      throw new Error('verifier only');
    },
    verify: async ({ sign1, jwk }) => {
      const { data, signature } = sign1.getRawVerificationData();
      return crypto.verify(
        'sha256',
        data,
        { key: crypto.createPublicKey({ key: jwk as crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
        signature,
      );
    },
  },
  mac0: {
    sign: () => {
      throw new Error('unused');
    },
    verify: () => {
      throw new Error('unused');
    },
  },
};

const cryptoCtx: MdocContext['crypto'] = {
  random: (n) => new Uint8Array(crypto.randomBytes(n)),
  digest: ({ digestAlgorithm, bytes }) => new Uint8Array(crypto.createHash(digestAlgorithm.replace('-', '').toLowerCase()).update(bytes).digest()),
  calculateEphemeralMacKeyJwk: () => {
    throw new Error('unused');
  },
};

async function verifyMdoc(doc: IssuerSignedDocument, trusted: Uint8Array[]): Promise<VerificationAssessment[]> {
  const checks: VerificationAssessment[] = [];
  const v = new Verifier();
  await v.verifyIssuerSignature(
    { trustedCertificates: trusted, issuerAuth: doc.issuerSigned.issuerAuth, disableCertificateChainValidation: false, onCheckG: (c) => checks.push(c) },
    { x509: x509Ctx, cose },
  );
  await v.verifyData({ mdoc: doc, onCheckG: (c) => checks.push(c) }, { x509: x509Ctx, crypto: cryptoCtx });
  return checks;
}

/** @owf/mdoc 0.6's callbacks, on Node's crypto. */
const owf: Pick<OwfContext, 'x509' | 'crypto' | 'cose'> = {
  crypto: {
    random: (n) => new Uint8Array(crypto.randomBytes(n)),
    digest: ({ digestAlgorithm, bytes }) => new Uint8Array(crypto.createHash(digestAlgorithm.replace('-', '').toLowerCase()).update(bytes).digest()),
    calculateEphemeralMacKey: () => {
      throw new Error('unused');
    },
  },
  cose: {
    sign1: {
      sign: () => {
        throw new Error('verifier only');
      },
      verify: ({ key, sign1 }) =>
        crypto.verify(
          'sha256',
          sign1.toBeSigned,
          { key: crypto.createPublicKey({ key: key.jwk as crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
          sign1.signature,
        ),
    },
    mac0: {
      sign: () => {
        throw new Error('unused');
      },
      verify: () => {
        throw new Error('unused');
      },
    },
  },
  x509: {
    getIssuerNameField: ({ certificate, field }) => new x509.X509Certificate(certificate).issuerName.getField(field),
    getPublicKey: ({ certificate }) => CoseKey.fromJwk(new crypto.X509Certificate(certificate).publicKey.export({ format: 'jwk' }) as Record<string, unknown>),
    verifyCertificateChain: ({ trustedCertificates, x5chain }) => {
      const leaf = new crypto.X509Certificate(x5chain[0]!);
      const ok = trustedCertificates.some((t) => {
        const root = new crypto.X509Certificate(t);
        return leaf.checkIssued(root) && leaf.verify(root.publicKey);
      });
      if (!ok) throw new Error('x5chain does not lead to a trusted IACA');
    },
    getCertificateData: ({ certificate }) => {
      const c = new x509.X509Certificate(certificate);
      return {
        issuerName: c.issuer,
        subjectName: c.subject,
        serialNumber: c.serialNumber,
        thumbprint: '',
        notBefore: c.notBefore,
        notAfter: c.notAfter,
        pem: c.toString('pem'),
      };
    },
  },
};

/** The MSO as CBOR says it (issuerAuth payload → tag 24 → map), to read what the libraries do not model. */
function rawMso(credential: string): Map<string, unknown> {
  const issuerSigned = cborDecode(Buffer.from(credential, 'base64url')) as Map<string, unknown> | Record<string, unknown>;
  const issuerAuth = (issuerSigned instanceof Map ? issuerSigned.get('issuerAuth') : issuerSigned.issuerAuth) as unknown[];
  // #6.24(bstr): read by hand, since @owf/mdoc registers its own tag-24 decoder with cbor-x.
  const p = Buffer.from(issuerAuth[2] as Uint8Array);
  expect(p.subarray(0, 2).toString('hex')).toBe('d818');
  const head = p[2]!;
  const [len, at] = head === 0x59 ? [p.readUInt16BE(3), 5] : head === 0x5a ? [p.readUInt32BE(3), 7] : head === 0x58 ? [p[3]!, 4] : [head - 0x40, 3];
  const mso = cborDecode(p.subarray(at, at + len)) as Map<string, unknown> | Record<string, unknown>;
  return mso instanceof Map ? mso : new Map(Object.entries(mso));
}

const get = (m: unknown, k: string): unknown => (m instanceof Map ? m.get(k) : (m as Record<string, unknown>)[k]);

describe('wallet issuer: mdoc (eu.europa.ec.eudi.pid.1)', () => {
  it('verifies with @owf/mdoc 0.6 to the tenant IACA; the MSO carries status.status_list {idx, uri}, and a revocation shows in that list', async () => {
    const t = await preAuthToken(srv, { claims: CLAIMS, format: 'mso_mdoc' });
    const holder = newHolder();
    const { jwtProof } = await import('./wallet.ts');
    const res = await credentialRequest(srv, t.access_token, {
      credential_configuration_id: 'eu.europa.ec.eudi.pid.1.mdoc',
      proofs: { jwt: [await jwtProof(holder, { aud: srv.url, nonce: t.c_nonce })] },
    });
    expect(res.status).toBe(200);
    const credential = ((await res.json()) as { credential: string }).credential;
    const iaca = new crypto.X509Certificate(await (await srv.fetch('/vci.ashx?iaca')).text());

    const issuerSigned = IssuerSigned.fromEncodedForOid4Vci(credential);
    await issuerSigned.verify({ trustedCertificates: [new Uint8Array(iaca.raw)] }, owf);
    const claims = issuerSigned.getPrettyClaims('eu.europa.ec.eudi.pid.1') as Record<string, unknown>;
    expect(claims).toMatchObject({ given_name: 'Erika', family_name: 'Mustermann', nationality: ['DE'], email_address: 'erika@example.org' });
    const mso = issuerSigned.issuerAuth.mobileSecurityObject;
    expect(mso.docType).toBe('eu.europa.ec.eudi.pid.1');
    expect(Buffer.from(mso.deviceKeyInfo.deviceKey.x!).toString('base64url')).toBe(holder.jwk.x);
    // Another tenant's IACA fails @owf/mdoc's chain check.
    await srv.addTenant('third.example');
    const third = new crypto.X509Certificate(await (await srv.fetch('/vci.ashx?iaca', { host: 'third.example' })).text());
    await expect(issuerSigned.verify({ trustedCertificates: [new Uint8Array(third.raw)] }, owf)).rejects.toThrow();

    const status = get(rawMso(credential).get('status'), 'status_list') as unknown;
    const idx = get(status, 'idx') as number;
    const uri = get(status, 'uri') as string;
    expect(Number.isInteger(idx)).toBe(true);
    expect(uri).toMatch(/\/vci\.ashx\?status-list=\d+$/);
    const listOf = async () => {
      const u = new URL(uri);
      return getListFromStatusListJWT(await (await srv.fetch(u.pathname + u.search)).text());
    };
    expect((await listOf()).getStatus(idx)).toBe(0);
    const revoke = await srv.fetch('/vci.ashx?revoke', {
      method: 'POST',
      json: { offer_id: t.offer_id },
      headers: { 'X-Service-Admin-Signature': srv.hmac('vci-revoke', undefined, Buffer.byteLength(JSON.stringify({ offer_id: t.offer_id }))) },
    });
    expect(revoke.status).toBe(200);
    expect((await listOf()).getStatus(idx)).toBe(1);
  });

  it('issues an mdoc to @openid4vc/openid4vci whose issuerAuth verifies to the tenant IACA and whose device key is the proof key', async () => {
    const t = await preAuthToken(srv, { claims: CLAIMS, format: 'mso_mdoc' });
    const holder = newHolder();
    const wallet = walletClient(holder);
    const issuerMetadata = await wallet.resolveIssuerMetadata(srv.url);
    const proof = await wallet.createCredentialRequestJwtProof({
      issuerMetadata,
      credentialConfigurationId: 'eu.europa.ec.eudi.pid.1.mdoc',
      nonce: t.c_nonce,
      signer: { method: 'jwk', alg: 'ES256', publicJwk: holder.jwk },
    });
    const res = await wallet.retrieveCredentials({
      issuerMetadata,
      accessToken: t.access_token,
      credentialConfigurationId: 'eu.europa.ec.eudi.pid.1.mdoc',
      proofs: { jwt: [proof.jwt] },
    });
    const body = res.credentialResponse as { credential: string; format: string };
    expect(body.format).toBe('mso_mdoc');
    const bytes = Buffer.from(body.credential, 'base64url');
    // A CBOR map (IssuerSigned), as the verifier's auto-detection expects.
    expect(bytes[0]! >= 0xa0 && bytes[0]! <= 0xbb).toBe(true);
    const doc = parseIssuerSigned(new Uint8Array(bytes), 'eu.europa.ec.eudi.pid.1');

    const iaca = new crypto.X509Certificate(await (await srv.fetch('/vci.ashx?iaca')).text());
    const checks = await verifyMdoc(doc, [new Uint8Array(iaca.raw)]);
    expect(checks.filter((c) => c.status === 'FAILED')).toEqual([]);
    expect(checks.some((c) => c.check === 'Issuer certificate must be valid' && c.status === 'PASSED')).toBe(true);

    const ns = doc.getIssuerNameSpace('eu.europa.ec.eudi.pid.1')!;
    expect(ns.get('given_name')).toBe('Erika');
    expect(ns.get('family_name')).toBe('Mustermann');
    expect(String(ns.get('birth_date'))).toContain('1984-01-26');
    const mso = doc.issuerSigned.issuerAuth.decodedPayload;
    expect(mso.docType).toBe('eu.europa.ec.eudi.pid.1');
    // deviceKeyInfo.deviceKey is the holder's key (COSE_Key EC2: -2 x, -3 y).
    const dk = mso.deviceKeyInfo!.deviceKey as unknown as Map<number, Uint8Array>;
    expect(Buffer.from(dk.get(-2)!).toString('base64url')).toBe(holder.jwk.x);
    expect(Buffer.from(dk.get(-3)!).toString('base64url')).toBe(holder.jwk.y);
  });

  it('another tenant’s IACA does not verify it (the x5chain leads to this tenant’s IACA only)', async () => {
    const { tenant } = await srv.addTenant('other.example');
    // eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator -- the value is deliberately unused
    void tenant;
    const otherIaca = new crypto.X509Certificate(await (await srv.fetch('/vci.ashx?iaca', { host: 'other.example' })).text());
    const t = await preAuthToken(srv, { claims: CLAIMS, format: 'mso_mdoc' });
    const { jwtProof } = await import('./wallet.ts');
    const jwt = await jwtProof(newHolder(), { aud: srv.url, nonce: t.c_nonce });
    const res = await credentialRequest(srv, t.access_token, { format: 'mso_mdoc', doctype: 'eu.europa.ec.eudi.pid.1', proof: { proof_type: 'jwt', jwt } });
    expect(res.status).toBe(200);
    const doc = parseIssuerSigned(
      new Uint8Array(Buffer.from(((await res.json()) as { credential: string }).credential, 'base64url')),
      'eu.europa.ec.eudi.pid.1',
    );
    const checks = await verifyMdoc(doc, [new Uint8Array(otherIaca.raw)]);
    expect(checks.some((c) => c.check === 'Issuer certificate must be valid' && c.status === 'FAILED')).toBe(true);
  });
});
