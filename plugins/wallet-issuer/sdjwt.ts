import crypto from 'node:crypto';
import type { IssuerKey } from './keys.ts';
import type { ProvenKey } from './proof.ts';
import { randomBytes } from './random.ts';
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

/** The encoded JWS header per signing key: the same for every credential that key signs. */
const headers = new WeakMap<IssuerKey, string>();

function headerOf(key: IssuerKey): string {
  let h = headers.get(key);
  if (!h) {
    h = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'dc+sd-jwt', kid: key.kid, x5c: key.x5c })).toString('base64url');
    headers.set(key, h);
  }
  return h;
}

/**
 * An SD-JWT VC (draft-ietf-oauth-sd-jwt-vc, RFC 9901 SD-JWT) of the PID type `urn:eudi:pid:1`:
 * typ dc+sd-jwt, ES256 by the tenant's signing key with `kid` and `x5c` (document signer
 * certificate, which chains to the IACA), every subject claim selectively disclosable (one
 * disclosure `[salt, name, value]` each, 128-bit salt, `_sd` the sorted SHA-256 digests,
 * `_sd_alg` sha-256), `cnf.jwk` the holder key from the proof (key binding),
 * `status.status_list` its place in the tenant's Token Status List. Built here rather than with
 * @sd-jwt/sd-jwt-vc's `issue()`, whose generic frame walking cost ten signatures per credential;
 * tests verify the result with @sd-jwt/sd-jwt-vc.
 */
export async function issueSdJwt(i: SdJwtInput): Promise<string> {
  const c = i.claims as Record<string, unknown>;
  const names: string[] = [];
  for (const k in c) if (c[k] !== undefined) names.push(k);
  const salts = randomBytes(16 * names.length);
  const disclosures: string[] = new Array<string>(names.length);
  const sd: string[] = new Array<string>(names.length);
  for (let n = 0; n < names.length; n++) {
    const name = names[n]!;
    const d = b64url(JSON.stringify([salts.toString('base64url', 16 * n, 16 * n + 16), name, c[name]]));
    disclosures[n] = d;
    // crypto.hash: one call, a third of createHash's cost for inputs this small.
    sd[n] = crypto.hash('sha256', d, 'base64url');
  }
  sd.sort();
  const payload = {
    iss: i.issuer,
    iat: i.iat,
    exp: i.exp,
    vct: PID_VCT,
    cnf: { jwk: i.holder },
    status: { status_list: { idx: i.status.idx, uri: i.status.uri } },
    _sd: sd,
    _sd_alg: 'sha-256',
  };
  const input = `${headerOf(i.key)}.${b64url(JSON.stringify(payload))}`;
  // A buffer of its own for the signer (an HSM signs asynchronously; the scratch is reused).
  const sig = (await i.key.signer.sign(Buffer.from(input, 'latin1'))).toString('base64url');
  let out = `${input}.${sig}~`;
  for (const d of disclosures) out += `${d}~`;
  return out;
}

/**
 * base64url of the UTF-8 of `s` through one scratch buffer (synchronous use only): a Buffer per
 * disclosure and payload was most of the encoder's allocations.
 */
let scratch = Buffer.allocUnsafe(4096);
function b64url(s: string): string {
  if (s.length * 3 > scratch.length) scratch = Buffer.allocUnsafe(s.length * 3);
  const n = scratch.write(s, 0, 'utf8');
  return scratch.toString('base64url', 0, n);
}
