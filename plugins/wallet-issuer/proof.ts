import crypto from 'node:crypto';
import type * as jose from 'jose';
import { AppError } from '../../server/sdk.ts';

/** The holder key a proof binds the credential to, and the nonce it carried. */
export interface ProvenKey {
  jwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string };
  nonce: string;
  clientId?: string;
}

export const PROOF_JWT_TYP = 'openid4vci-proof+jwt';
export const PROOF_CWT_TYP = 'openid4vci-proof+cwt';
/** How far a proof's iat may be from the server's clock (OpenID4VCI 1.0 Appendix F.4: the issuer decides). */
export const PROOF_MAX_SKEW_SEC = 300;

let joseModule: Promise<typeof jose> | undefined;

export function invalidProof(description: string): AppError {
  return new AppError(400, 'invalid_proof', description);
}

/**
 * A `jwt` proof (OpenID4VCI 1.0 Appendix F.1): typ openid4vci-proof+jwt, alg ES256, the holder key
 * as `jwk` in the header (no private parts), aud the credential issuer identifier, iat within
 * the skew, nonce present; the signature by that key. The nonce is checked by the caller.
 */
export async function verifyJwtProof(jwt: string, audience: string, nowSec: number): Promise<ProvenKey> {
  // jose on first use (start-up time); after that the settled import costs a microtask.
  const J = (joseModule ??= import('jose'));
  let header: jose.ProtectedHeaderParameters;
  try {
    header = (await J).decodeProtectedHeader(jwt);
  } catch {
    throw invalidProof('the jwt proof is not a JWS');
  }
  if (header.typ !== PROOF_JWT_TYP) throw invalidProof(`the jwt proof must have typ ${PROOF_JWT_TYP}`);
  if (header.alg !== 'ES256') throw invalidProof('the jwt proof must be signed with ES256');
  const jwk = header.jwk;
  if (!jwk || jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.x !== 'string' || typeof jwk.y !== 'string' || 'd' in jwk) {
    throw invalidProof('the jwt proof must carry the holder public key (EC P-256) as jwk in its header');
  }
  if (header.crit !== undefined) throw invalidProof('the jwt proof must not have critical header parameters');
  // Verified with node:crypto at once: WebCrypto (jose) runs each verification as a thread-pool
  // job, a round trip that cost more than the ECDSA verification itself.
  const parts = jwt.split('.');
  if (parts.length !== 3 || !/^[A-Za-z0-9_-]{86}$/.test(parts[2]!)) throw invalidProof('the jwt proof signature does not verify: not an ES256 JWS');
  let ok: boolean;
  try {
    const key = crypto.createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y }, format: 'jwk' });
    ok = crypto.verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(parts[2]!, 'base64url'));
  } catch (e) {
    throw invalidProof(`the jwt proof key is not a P-256 public key: ${(e as Error).message}`);
  }
  if (!ok) throw invalidProof('the jwt proof signature does not verify');
  let payload: jose.JWTPayload;
  try {
    payload = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as jose.JWTPayload;
  } catch {
    throw invalidProof('the jwt proof payload is not JSON');
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw invalidProof('the jwt proof payload is not a JSON object');
  if (payload.exp !== undefined && (typeof payload.exp !== 'number' || payload.exp <= nowSec)) throw invalidProof('the jwt proof has expired');
  if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > nowSec)) throw invalidProof('the jwt proof is not yet valid');
  checkClaims({ aud: payload.aud, iat: payload.iat, nonce: payload.nonce, iss: payload.iss }, audience, nowSec);
  return {
    jwk: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y },
    nonce: payload.nonce as string,
    clientId: typeof payload.iss === 'string' ? payload.iss : undefined,
  };
}

/** The claims both proof types carry (OpenID4VCI 1.0 Appendix F); the nonce's value is checked by the caller. */
export function checkClaims(c: { aud: unknown; iat: unknown; nonce: unknown; iss: unknown }, audience: string, nowSec: number): void {
  const auds = Array.isArray(c.aud) ? c.aud : [c.aud];
  if (!auds.includes(audience)) throw invalidProof(`the proof's aud must be the credential issuer ${audience}`);
  if (typeof c.iat !== 'number' || !Number.isFinite(c.iat)) throw invalidProof('the proof has no iat');
  if (Math.abs(nowSec - c.iat) > PROOF_MAX_SKEW_SEC) throw invalidProof(`the proof's iat is more than ${PROOF_MAX_SKEW_SEC} s from the issuer's clock`);
  if (typeof c.nonce !== 'string' || c.nonce === '')
    throw new AppError(400, 'invalid_nonce', 'the proof carries no nonce; get a c_nonce from the token response or the Nonce Endpoint');
  if (c.iss !== undefined && typeof c.iss !== 'string') throw invalidProof('the proof iss must be a string');
}
