/**
 * mdoc issuance checked with @animo-id/mdoc's own verifier (the issue names @owf/mdoc, which is
 * not installable here; @animo-id/mdoc 0.5.2 is its predecessor). The verifier's X.509 and COSE
 * callbacks are Node's crypto; the trust anchor is the IACA the issuer publishes.
 */
import 'reflect-metadata';
import crypto from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { type IssuerSignedDocument, parseIssuerSigned, Verifier, type MdocContext, type VerificationAssessment, type X509Context } from '@animo-id/mdoc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { CLAIMS, credentialRequest, preAuthToken } from './support.ts';
import { newHolder, walletClient } from './wallet.ts';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
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

describe('wallet issuer: mdoc (eu.europa.ec.eudi.pid.1)', () => {
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
