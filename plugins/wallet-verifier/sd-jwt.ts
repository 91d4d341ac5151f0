/**
 * SD-JWT VC verification (IETF SD-JWT RFC 9901, SD-JWT VC draft, OpenID4VP 1.0 §B.3), written
 * out check by check so that each failure names its check. @sd-jwt 0.19 accepts a disclosure no
 * digest refers to; RFC 9901 §7.1 step 3.4 rejects it, and so do we.
 */
import crypto from 'node:crypto';
import { verifyCompactJws } from './jws.ts';
import { type Anchor, CheckFailed, leafKey, validateChain } from './x509.ts';
import { has, own } from './own.ts';
import { importPublicJwk } from './holder-key.ts';

/** Signature algorithms accepted from issuers and holders: asymmetric only, never `none`. */
export const SD_JWT_ALGS = ['ES256', 'ES384', 'ES512', 'EdDSA', 'PS256'];

export interface SdJwtExpectations {
  vctValues: string[];
  /** The client id the KB-JWT `aud` must equal. */
  audience: string;
  nonce: string;
  now: number;
  /** Allowed distance of the KB-JWT `iat` from now, seconds. */
  iatWindowSeconds: number;
  anchors: Anchor[];
  /** Resolves a referenced status list entry; returns the status value (0 = valid, -1 = unknown and accepted). */
  status?: (ref: { uri: string; idx: number }) => Promise<number>;
}

export interface VerifiedSdJwt {
  vct: string;
  issuer: string | undefined;
  claims: Record<string, unknown>;
  anchor: string;
  /** Set when the credential names a status list whose status could not be known and the tenant accepts that. */
  statusUnknown?: true;
}

/** base64url → UTF-8 text through one reused buffer (synchronous use only): no Buffer per JWT part or disclosure. */
let textScratch = Buffer.allocUnsafe(8192);
function b64text(part: string): string {
  if (part.length > textScratch.length) textScratch = Buffer.allocUnsafe(Math.max(part.length, 2 * textScratch.length));
  const n = textScratch.write(part, 0, 'base64url');
  return textScratch.toString('utf8', 0, n);
}

function b64json(part: string, check: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(b64text(part));
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    /* falls through */
  }
  throw new CheckFailed(check, 'not a JSON object in base64url');
}

// crypto.hash: one call, a third of createHash's cost for inputs this small.
const digestOf = (s: string) => crypto.hash('sha256', s, 'base64url');

/** What the verifier takes from an issuer-signed JWT header: the same for every credential of one issuer key. */
interface IssuerHeader {
  alg: string;
  /** The x5c certificates as sent (base64) and decoded. */
  x5c: string[];
  ders: Buffer[];
  /** The chain cache key for the anchor set last used with this header (x509.ts validateChain). */
  chain: { anchors?: Anchor[]; key?: string };
}

/**
 * The issuer JWT header, checked (alg accepted, typ dc+sd-jwt) and decoded. Every credential an
 * issuer key signs carries the same header segment (alg, typ, kid, x5c), so the checked result is
 * kept by the segment's text (at most 256, oldest dropped): a per-issuer cache like the chain
 * cache, never per presentation. A header that fails its checks is not kept.
 */
const HEADERS = new Map<string, IssuerHeader>();
function issuerHeader(seg: string): IssuerHeader {
  const hit = HEADERS.get(seg);
  if (hit) return hit;
  const header = b64json(seg, 'issuer_signature');
  if (typeof header.alg !== 'string' || !SD_JWT_ALGS.includes(header.alg))
    throw new CheckFailed('issuer_signature', `algorithm ${String(header.alg)} is not accepted`);
  if (header.typ !== 'dc+sd-jwt' && header.typ !== 'vc+sd-jwt') throw new CheckFailed('issuer_signature', `typ ${String(header.typ)} is not dc+sd-jwt`);
  const x5c = Array.isArray(header.x5c) ? header.x5c.filter((c): c is string => typeof c === 'string') : [];
  const out: IssuerHeader = { alg: header.alg, x5c, ders: x5c.map((c) => Buffer.from(c, 'base64')), chain: {} };
  if (HEADERS.size >= 256) HEADERS.delete(HEADERS.keys().next().value!);
  HEADERS.set(seg, out);
  return out;
}

/** Replaces digests by disclosed claims; every digest at most once, every disclosure exactly once (RFC 9901 §7.1). */
function reveal(payload: Record<string, unknown>, disclosures: string[]): Record<string, unknown> {
  const byDigest = new Map<string, unknown[]>();
  for (const d of disclosures) {
    let arr: unknown;
    try {
      arr = JSON.parse(b64text(d));
    } catch {
      throw new CheckFailed('disclosure', 'a disclosure is not base64url JSON');
    }
    if (!Array.isArray(arr) || (arr.length !== 2 && arr.length !== 3) || typeof arr[0] !== 'string')
      throw new CheckFailed('disclosure', 'a disclosure is not [salt, (name,) value]');
    if (arr.length === 3 && (typeof arr[1] !== 'string' || arr[1] === '_sd' || arr[1] === '...'))
      throw new CheckFailed('disclosure', 'a disclosure has an invalid claim name');
    const h = digestOf(d);
    if (byDigest.has(h)) throw new CheckFailed('disclosure', 'the same disclosure appears twice');
    byDigest.set(h, arr);
  }
  const used = new Set<string>();
  const take = (h: unknown): unknown[] | undefined => {
    if (typeof h !== 'string') throw new CheckFailed('disclosure', 'a digest is not a string');
    if (used.has(h)) throw new CheckFailed('disclosure', 'a digest is referenced twice');
    used.add(h);
    return byDigest.get(h);
  };
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) {
      const out: unknown[] = [];
      for (const el of v as unknown[]) {
        if (el && typeof el === 'object' && !Array.isArray(el) && Object.keys(el).length === 1 && '...' in el) {
          const d = take((el as Record<string, unknown>)['...']);
          if (!d) continue; // undisclosed array element
          if (d.length !== 2) throw new CheckFailed('disclosure', 'an array-element digest points at an object-property disclosure');
          out.push(walk(d[1]));
        } else out.push(walk(el));
      }
      return out;
    }
    if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const k in o) if (k !== '_sd' && k !== '_sd_alg' && Object.hasOwn(o, k)) own(out, k, walk(o[k]));
      if (o._sd !== undefined) {
        if (!Array.isArray(o._sd)) throw new CheckFailed('disclosure', '_sd is not an array');
        for (const h of o._sd) {
          const d = take(h);
          if (!d) continue;
          if (d.length !== 3) throw new CheckFailed('disclosure', 'an object digest points at an array-element disclosure');
          const name = d[1] as string;
          // Own properties only: a claim named toString is not "already there", and one named
          // __proto__ is a claim like any other, never the object's prototype.
          if (has(out, name)) throw new CheckFailed('disclosure', `claim ${name} is both disclosed and plain`);
          own(out, name, walk(d[2]));
        }
      }
      return out;
    }
    return v;
  };
  const claims = walk(payload) as Record<string, unknown>;
  for (const h of byDigest.keys()) if (!used.has(h)) throw new CheckFailed('disclosure', 'a disclosure is not referenced by any digest of the credential');
  return claims;
}

/** Verifies a presented SD-JWT VC (with KB-JWT) and returns the disclosed claims. */
export async function verifySdJwtVc(presentation: string, x: SdJwtExpectations): Promise<VerifiedSdJwt> {
  const parts = presentation.split('~');
  if (parts.length < 2) throw new CheckFailed('format', 'not an SD-JWT (no ~ separator)');
  const issuerJwt = parts[0]!;
  const kbJwt = parts[parts.length - 1]!;
  const disclosures = parts.slice(1, -1);
  if (!kbJwt) throw new CheckFailed('kb_jwt', 'the presentation has no key binding JWT');
  if (disclosures.some((d) => d === '')) throw new CheckFailed('format', 'an empty disclosure');

  // Issuer signature (x5c chain to an anchor) and the credential's own header.
  const segs = issuerJwt.split('.');
  if (segs.length !== 3) throw new CheckFailed('format', 'the issuer-signed JWT is not a compact JWS');
  const header = issuerHeader(segs[0]!);
  const { leaf, anchor } = validateChain(header.ders, x.anchors, x.now, header.x5c, header.chain);
  if (!verifyCompactJws(issuerJwt, header.alg, leafKey(leaf)))
    throw new CheckFailed('issuer_signature', 'the issuer signature does not verify with the x5c certificate');
  const payload = b64json(segs[1]!, 'issuer_signature');
  const nowS = Math.floor(x.now / 1000);
  if (typeof payload.exp === 'number' && payload.exp <= nowS) throw new CheckFailed('exp', 'the credential has expired');
  if (typeof payload.nbf === 'number' && payload.nbf > nowS + 60) throw new CheckFailed('nbf', 'the credential is not yet valid');
  if (typeof payload.vct !== 'string' || !x.vctValues.includes(payload.vct))
    throw new CheckFailed('vct', `vct ${String(payload.vct)} is not requested by this preset`);
  if (payload._sd_alg !== undefined && payload._sd_alg !== 'sha-256')
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the wallet's claim, echoed in the refusal whatever its type
    throw new CheckFailed('disclosure', `_sd_alg ${String(payload._sd_alg)} is not supported`);

  const claims = reveal(payload, disclosures);

  // Key binding (RFC 9901 §4.3 and §7.3): the holder key from cnf, this verifier, this session.
  const kbSegs = kbJwt.split('.');
  if (kbSegs.length !== 3) throw new CheckFailed('kb_jwt', 'the key binding JWT is not a compact JWS');
  const kbHeader = b64json(kbSegs[0]!, 'kb_jwt');
  if (kbHeader.typ !== 'kb+jwt') throw new CheckFailed('kb_jwt', 'the key binding JWT typ is not kb+jwt');
  if (typeof kbHeader.alg !== 'string' || !SD_JWT_ALGS.includes(kbHeader.alg))
    throw new CheckFailed('kb_jwt', `key binding algorithm ${String(kbHeader.alg)} is not accepted`);
  const cnf = payload.cnf as { jwk?: crypto.JsonWebKey } | undefined;
  if (!cnf?.jwk || typeof cnf.jwk !== 'object' || Array.isArray(cnf.jwk)) throw new CheckFailed('cnf', 'the credential has no cnf.jwk holder key');
  // An EC point through the raw import (holder-key.ts): a fifth of a presentation's time less.
  let holderKey: crypto.KeyObject;
  try {
    holderKey = await importPublicJwk(cnf.jwk);
  } catch {
    throw new CheckFailed('cnf', 'cnf.jwk is not a usable public key');
  }
  if (!verifyCompactJws(kbJwt, kbHeader.alg, holderKey)) throw new CheckFailed('kb_jwt', 'the key binding JWT is not signed by the cnf key');
  const kb = b64json(kbSegs[1]!, 'kb_jwt');
  if (kb.aud !== x.audience) throw new CheckFailed('aud', 'the key binding JWT aud is not this verifier');
  if (typeof kb.nonce !== 'string' || !safeEq(kb.nonce, x.nonce)) throw new CheckFailed('nonce', 'the key binding JWT nonce is not the session nonce');
  if (typeof kb.iat !== 'number' || Math.abs(kb.iat - nowS) > x.iatWindowSeconds)
    throw new CheckFailed('iat', 'the key binding JWT iat is outside the accepted window');
  // RFC 9901 §4.3.1: sd_hash is over the presentation up to and including the last '~'.
  const sdHash = digestOf(presentation.slice(0, presentation.length - kbJwt.length));
  if (typeof kb.sd_hash !== 'string' || !safeEq(kb.sd_hash, sdHash))
    throw new CheckFailed('sd_hash', 'the key binding JWT sd_hash does not match the presentation');

  // Token Status List (draft-ietf-oauth-status-list §6): only when the credential names one.
  const st = (payload.status as { status_list?: { idx?: unknown; uri?: unknown } } | undefined)?.status_list;
  let statusUnknown = false;
  if (st) {
    if (typeof st.idx !== 'number' || typeof st.uri !== 'string') throw new CheckFailed('status', 'status.status_list needs idx and uri');
    if (!x.status) throw new CheckFailed('status', 'status lists are not available');
    const v = await x.status({ uri: st.uri, idx: st.idx });
    statusUnknown = v === -1;
    if (v !== 0 && !statusUnknown) throw new CheckFailed('status', v === 1 ? 'the credential is revoked' : `the credential status is ${v}`);
  }

  // What the holder disclosed about the person; the credential's own mechanics stay out.
  const disclosed: Record<string, unknown> = {};
  for (const k in claims) if (Object.hasOwn(claims, k) && !MECHANICS.has(k)) own(disclosed, k, claims[k]);
  return {
    vct: payload.vct,
    issuer: typeof payload.iss === 'string' ? payload.iss : undefined,
    claims: disclosed,
    anchor: anchor.sha256,
    ...(statusUnknown ? { statusUnknown: true as const } : {}),
  };
}

/** Claims of the credential's own mechanics, left out of what the holder disclosed. */
const MECHANICS = new Set(['cnf', 'status', 'iat', 'exp', 'nbf', 'iss', 'vct']);

/** Constant-time string equality (for texts of one length class: nonces, digests). */
function safeEq(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return d === 0;
}
