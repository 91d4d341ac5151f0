import crypto from 'node:crypto';
import { decode as cborDecode, encode as cborEncode } from 'cbor-x';
import * as jose from 'jose';
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

export function invalidProof(description: string): AppError {
  return new AppError(400, 'invalid_proof', description);
}

/**
 * A `jwt` proof (OpenID4VCI 1.0 Appendix F.1): typ openid4vci-proof+jwt, alg ES256, the holder key
 * as `jwk` in the header (no private parts), aud the credential issuer identifier, iat within
 * the skew, nonce present; the signature by that key. The nonce is checked by the caller.
 */
export async function verifyJwtProof(jwt: string, audience: string, nowSec: number): Promise<ProvenKey> {
  let header: jose.ProtectedHeaderParameters;
  try {
    header = jose.decodeProtectedHeader(jwt);
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

function checkClaims(c: { aud: unknown; iat: unknown; nonce: unknown; iss: unknown }, audience: string, nowSec: number): void {
  const auds = Array.isArray(c.aud) ? c.aud : [c.aud];
  if (!auds.includes(audience)) throw invalidProof(`the proof's aud must be the credential issuer ${audience}`);
  if (typeof c.iat !== 'number' || !Number.isFinite(c.iat)) throw invalidProof('the proof has no iat');
  if (Math.abs(nowSec - c.iat) > PROOF_MAX_SKEW_SEC) throw invalidProof(`the proof's iat is more than ${PROOF_MAX_SKEW_SEC} s from the issuer's clock`);
  if (typeof c.nonce !== 'string' || c.nonce === '')
    throw new AppError(400, 'invalid_nonce', 'the proof carries no nonce; get a c_nonce from the token response or the Nonce Endpoint');
  if (c.iss !== undefined && typeof c.iss !== 'string') throw invalidProof('the proof iss must be a string');
}

// COSE (RFC 9052) header labels and the CWT claim keys (RFC 8392 §4; nonce: RFC 9200 / OpenID4VCI draft 13 §7.2.1.3).
const H_ALG = 1;
const H_CONTENT_TYPE = 3;
const ALG_ES256 = -7;
const CWT_ISS = 1;
const CWT_AUD = 3;
const CWT_IAT = 6;
const CWT_NONCE = 10;

/**
 * A `cwt` proof (OpenID4VCI draft 13 §7.2.1.3, the seed's shape): base64url of a COSE_Sign1 (tag 18
 * optional) whose protected header has alg ES256, content type openid4vci-proof+cwt and the holder
 * key as `COSE_Key` (an EC2 P-256 key), and whose payload is a CWT claim set with aud (3),
 * iat (6) and nonce (10); iss (1) is the client id when present.
 */
export function verifyCwtProof(b64: string, audience: string, nowSec: number): ProvenKey {
  let sign1: unknown;
  try {
    const raw = Buffer.from(b64, 'base64url');
    sign1 = cborDecode(raw);
  } catch {
    throw invalidProof('the cwt proof is not base64url CBOR');
  }
  // cbor-x returns a Tag object for a tagged COSE_Sign1 (tag 18).
  if (sign1 && typeof sign1 === 'object' && 'tag' in sign1 && (sign1 as { tag: number }).tag === 18) sign1 = (sign1 as unknown as { value: unknown }).value;
  if (!Array.isArray(sign1) || sign1.length !== 4) throw invalidProof('the cwt proof must be a COSE_Sign1 (array of four)');
  const [protectedBytes, , payload, signature] = sign1 as [unknown, unknown, unknown, unknown];
  if (!(protectedBytes instanceof Uint8Array) || !(payload instanceof Uint8Array) || !(signature instanceof Uint8Array)) {
    throw invalidProof('the cwt proof COSE_Sign1 has malformed members');
  }
  const prot = toMap(safeDecode(protectedBytes));
  if (prot.get(H_ALG) !== ALG_ES256) throw invalidProof('the cwt proof must be signed with ES256 (-7)');
  if (prot.get(H_CONTENT_TYPE) !== PROOF_CWT_TYP) throw invalidProof(`the cwt proof must have content type ${PROOF_CWT_TYP}`);
  const coseKey = prot.get('COSE_Key');
  const jwk = coseKeyToJwk(coseKey instanceof Uint8Array ? safeDecode(coseKey) : coseKey);
  const toBeSigned = cborEncode(['Signature1', Buffer.from(protectedBytes), Buffer.alloc(0), Buffer.from(payload)]);
  const pub = crypto.createPublicKey({ key: { ...jwk }, format: 'jwk' });
  if (signature.length !== 64 || !crypto.verify('sha256', toBeSigned, { key: pub, dsaEncoding: 'ieee-p1363' }, signature)) {
    throw invalidProof('the cwt proof signature does not verify');
  }
  const claims = toMap(safeDecode(payload));
  checkClaims({ aud: claims.get(CWT_AUD), iat: claims.get(CWT_IAT), nonce: nonceText(claims.get(CWT_NONCE)), iss: claims.get(CWT_ISS) }, audience, nowSec);
  return { jwk, nonce: nonceText(claims.get(CWT_NONCE)) as string, clientId: claims.get(CWT_ISS) as string | undefined };
}

function nonceText(v: unknown): unknown {
  return v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v;
}

function safeDecode(b: Uint8Array): unknown {
  try {
    return cborDecode(Buffer.from(b));
  } catch {
    throw invalidProof('the cwt proof holds malformed CBOR');
  }
}

function toMap(v: unknown): Map<unknown, unknown> {
  if (v instanceof Map) return v;
  // cbor-x decodes maps with string keys as plain objects, integer keys stay in a Map only with mapsAsObjects off.
  if (v && typeof v === 'object') return new Map(Object.entries(v).map(([k, x]) => [/^-?\d+$/.test(k) ? Number(k) : k, x]));
  throw invalidProof('the cwt proof header or claim set is not a map');
}

/** RFC 9053 §7.1: EC2 key (kty 2), crv P-256 (1), x (-2), y (-3). */
function coseKeyToJwk(v: unknown): ProvenKey['jwk'] {
  const m = v === undefined ? undefined : toMap(v);
  const x = m?.get(-2);
  const y = m?.get(-3);
  if (!m || m.get(1) !== 2 || m.get(-1) !== 1 || !(x instanceof Uint8Array) || !(y instanceof Uint8Array) || x.length !== 32 || y.length !== 32 || m.has(-4)) {
    throw invalidProof('the cwt proof must carry the holder public key as an EC2 P-256 COSE_Key in its protected header');
  }
  return { kty: 'EC', crv: 'P-256', x: Buffer.from(x).toString('base64url'), y: Buffer.from(y).toString('base64url') };
}
