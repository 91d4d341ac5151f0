/**
 * mdoc issuance (ISO/IEC 18013-5 IssuerSigned) with @animo-id/mdoc 0.5.2. The issue names
 * @owf/mdoc, which is not installable here; @animo-id/mdoc is its predecessor (the same code
 * before it moved to the OpenWallet Foundation), so the calls map one to one when it can be swapped.
 */
import crypto from 'node:crypto';
import { cborEncode, DateOnly, Document, type MdocContext } from '@animo-id/mdoc';
import type { IssuerKey } from './keys.ts';
import type { ProvenKey } from './proof.ts';
import { PID_DOCTYPE, type SubjectClaims } from './schemas.ts';

export interface MdocInput {
  key: IssuerKey;
  holder: ProvenKey['jwk'];
  claims: SubjectClaims;
  country: string;
  authority: string;
  signed: Date;
  validUntil: Date;
}

/** The crypto and COSE callbacks the library asks for, signing with our Signer (software or HSM). */
function context(key: IssuerKey): { crypto: MdocContext['crypto']; cose: MdocContext['cose'] } {
  return {
    crypto: {
      random: (n) => new Uint8Array(crypto.randomBytes(n)),
      digest: ({ digestAlgorithm, bytes }) => new Uint8Array(crypto.createHash(digestAlgorithm.replace('-', '').toLowerCase()).update(bytes).digest()),
      calculateEphemeralMacKeyJwk: () => {
        throw new Error('the issuer does not compute device MAC keys');
      },
    },
    cose: {
      sign1: {
        // RFC 9052 §4.4: the library builds Sig_structure; we sign it with the issuer key (ES256, r || s).
        sign: async ({ sign1 }) => new Uint8Array(await key.signer.sign(Buffer.from(sign1.getRawSigningData().data))),
        verify: () => {
          throw new Error('the issuer does not verify');
        },
      },
      mac0: {
        sign: () => {
          throw new Error('the issuer does not MAC');
        },
        verify: () => {
          throw new Error('the issuer does not MAC');
        },
      },
    },
  };
}

/** PID claim names of the SD-JWT VC (PID Rulebook) mapped to the mdoc data elements of eu.europa.ec.eudi.pid.1. */
function elements(c: SubjectClaims, i: MdocInput): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(c)) {
    if (k === 'birthdate' && typeof v === 'string') out.birth_date = new DateOnly(v);
    else if (k === 'nationalities') out.nationality = v;
    else if (k === 'place_of_birth' && v && typeof v === 'object') out.place_of_birth = v;
    else if (k === 'email') out.email_address = v;
    else out[k] = v;
  }
  out.issuing_country ??= i.country;
  out.issuing_authority ??= i.authority;
  out.issuance_date = new DateOnly(i.signed.toISOString().slice(0, 10));
  out.expiry_date = new DateOnly(i.validUntil.toISOString().slice(0, 10));
  return out;
}

/**
 * Returns the CBOR IssuerSigned structure (nameSpaces + issuerAuth), which OpenID4VCI 1.0
 * Appendix A.2.4 puts base64url-encoded in the credential response. issuerAuth is a COSE_Sign1
 * (ES256) over the MSO with the document signer certificate in x5chain; the MSO's deviceKeyInfo
 * holds the holder key from the proof.
 */
export async function issueMdoc(i: MdocInput): Promise<Buffer> {
  const ctx = context(i.key);
  const doc = await new Document(PID_DOCTYPE, ctx)
    .addIssuerNameSpace(PID_DOCTYPE, elements(i.claims, i))
    .useDigestAlgorithm('SHA-256')
    .addValidityInfo({ signed: i.signed, validFrom: i.signed, validUntil: i.validUntil })
    .addDeviceKeyInfo({ deviceKey: i.holder })
    // The library reads only `kid` of this JWK here; signing goes through ctx.cose.sign1.sign.
    .sign({ issuerPrivateKey: { ...i.key.jwk, kid: i.key.kid }, issuerCertificate: new Uint8Array(i.key.certDer), alg: 'ES256' }, ctx);
  return Buffer.from(cborEncode(doc.prepare().get('issuerSigned')));
}
