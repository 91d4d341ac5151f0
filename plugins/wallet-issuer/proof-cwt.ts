import crypto from 'node:crypto';
import { decode as cborDecode, encode as cborEncode } from 'cbor-x';
import { checkClaims, invalidProof, PROOF_CWT_TYP, type ProvenKey } from './proof.ts';

/*
 * The `cwt` proof type, in a module of its own: cbor-x costs 17-32 ms of CPU to load, which every
 * start of the appliance paid for a proof type few wallets send (credential.ts loads this on the
 * first one).
 */

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
