import { digest, generateSalt } from '@sd-jwt/crypto-nodejs';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import type { IssuerKey } from './keys.ts';
import type { ProvenKey } from './proof.ts';
import { PID_VCT, type SubjectClaims } from './schemas.ts';

export interface SdJwtInput {
  issuer: string;
  key: IssuerKey;
  holder: ProvenKey['jwk'];
  claims: SubjectClaims;
  iat: number;
  exp: number;
  status: { idx: number; uri: string };
}

/**
 * An SD-JWT VC (draft-ietf-oauth-sd-jwt-vc) of the PID type `urn:eudi:pid:1`: typ dc+sd-jwt,
 * ES256 by the tenant's signing key with `kid` and `x5c` (document signer certificate, which
 * chains to the IACA), every subject claim selectively disclosable, `cnf.jwk` the holder key from
 * the proof (key binding), `status.status_list` its place in the tenant's Token Status List.
 */
export async function issueSdJwt(i: SdJwtInput): Promise<string> {
  const sdjwt = new SDJwtVcInstance({
    hasher: digest,
    hashAlg: 'sha-256',
    saltGenerator: generateSalt,
    signAlg: 'ES256',
    signer: async (data: string) => (await i.key.signer.sign(Buffer.from(data, 'utf8'))).toString('base64url'),
  });
  const claims: Record<string, unknown> = { ...i.claims };
  const payload = {
    iss: i.issuer,
    iat: i.iat,
    exp: i.exp,
    vct: PID_VCT,
    cnf: { jwk: i.holder },
    status: { status_list: { idx: i.status.idx, uri: i.status.uri } },
    ...claims,
  };
  // Every subject claim is disclosable on its own (the PID Rulebook's selective disclosure).
  const frame = { _sd: Object.keys(claims) } as never;
  return sdjwt.issue(payload, frame, { header: { kid: i.key.kid, x5c: i.key.x5c } });
}
