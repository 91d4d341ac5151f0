/**
 * HTTP Digest for SIP (RFC 3261 §22.4, RFC 2617, RFC 7616 for SHA-256; RFC 8760 for SIP use), both
 * roles in one place: the parser of the `Digest k=v, ...` form both sides read, the response
 * computation both sides run, the UAC's answer to a trunk's challenge (`digestAuthorization`) and
 * the UAS's challenge and check (`DigestServer`, for desk phones' REGISTERs and trunks' INVITEs).
 * No I/O; the server keeps its nonces in memory.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { parseParams } from './message.ts';

export type DigestAlgorithm = 'MD5' | 'SHA-256' | 'MD5-sess' | 'SHA-256-sess';

const ALGORITHMS: Record<string, DigestAlgorithm> = { MD5: 'MD5', 'SHA-256': 'SHA-256', 'MD5-SESS': 'MD5-sess', 'SHA-256-SESS': 'SHA-256-sess' };

/** The parameters of a `Digest ...` challenge or credentials value (keys lowercased), or null. */
function parseDigest(header: string | undefined): Record<string, string> | null {
  if (!header) return null;
  const m = /^\s*Digest\s+(.*)$/is.exec(header);
  if (!m) return null;
  // RFC 7616 §3.3/§3.4: comma-separated parameters, commas inside quoted strings kept.
  return parseParams(m[1], ',');
}

// ---- the computation both sides share (RFC 7616 §3.4.1-§3.4.3) ----------------------------------

interface ResponseInput {
  algorithm: DigestAlgorithm;
  realm: string;
  nonce: string;
  username: string;
  password: string;
  method: string;
  uri: string;
  /** Only `auth` is implemented (auth-int is rarely offered by trunks, and we never offer it). */
  qop?: 'auth';
  /** 8 hex digits, with qop. */
  nc?: string;
  cnonce?: string;
}

function digestResponse(i: ResponseInput): string {
  const H = (s: string) =>
    createHash(i.algorithm.startsWith('SHA-256') ? 'sha256' : 'md5')
      .update(s, 'utf8')
      .digest('hex');
  let ha1 = H(`${i.username}:${i.realm}:${i.password}`);
  if (i.algorithm.endsWith('-sess')) ha1 = H(`${ha1}:${i.nonce}:${i.cnonce ?? ''}`);
  const ha2 = H(`${i.method}:${i.uri}`);
  return i.qop ? H(`${ha1}:${i.nonce}:${i.nc ?? ''}:${i.cnonce ?? ''}:${i.qop}:${ha2}`) : H(`${ha1}:${i.nonce}:${ha2}`);
}

const quote = (s: string) => `"${s.replace(/(["\\])/g, '\\$1')}"`;

// ---- UAC: answering a trunk's challenge --------------------------------------------------------

export interface DigestChallenge {
  realm: string;
  nonce: string;
  opaque?: string;
  algorithm: DigestAlgorithm;
  qop?: string[];
  stale: boolean;
}

export function parseChallenge(header: string): DigestChallenge | null {
  const p = parseDigest(header);
  if (!p?.realm || !p.nonce) return null;
  const algorithm = ALGORITHMS[(p.algorithm ?? 'MD5').toUpperCase()];
  if (!algorithm) return null;
  return {
    realm: p.realm,
    nonce: p.nonce,
    opaque: p.opaque,
    algorithm,
    qop: p.qop ? p.qop.split(',').map((s) => s.trim().toLowerCase()) : undefined,
    stale: (p.stale ?? '').toLowerCase() === 'true',
  };
}

/** Picks the strongest challenge we support (RFC 7616 §3.7: prefer SHA-256 over MD5). */
export function pickChallenge(headers: string[]): DigestChallenge | null {
  const parsed = headers.map(parseChallenge).filter((c): c is DigestChallenge => c !== null);
  return parsed.find((c) => c.algorithm.startsWith('SHA-256')) ?? parsed[0] ?? null;
}

export interface DigestInput {
  method: string;
  uri: string;
  username: string;
  password: string;
  nc: number;
  cnonce?: string;
  body?: Buffer;
}

/** The Authorization / Proxy-Authorization value answering one challenge. */
export function digestAuthorization(ch: DigestChallenge, input: DigestInput): string {
  const cnonce = input.cnonce ?? randomBytes(8).toString('hex');
  const qop = ch.qop?.includes('auth') ? ('auth' as const) : undefined;
  const nc = input.nc.toString(16).padStart(8, '0');
  const response = digestResponse({ ...ch, ...input, qop, nc, cnonce });
  const parts = [
    `username=${quote(input.username)}`,
    `realm=${quote(ch.realm)}`,
    `nonce=${quote(ch.nonce)}`,
    `uri=${quote(input.uri)}`,
    `response=${quote(response)}`,
    `algorithm=${ch.algorithm}`,
  ];
  if (ch.opaque !== undefined) parts.push(`opaque=${quote(ch.opaque)}`);
  if (qop) parts.push(`qop=${qop}`, `nc=${nc}`, `cnonce=${quote(cnonce)}`);
  return `Digest ${parts.join(', ')}`;
}

// ---- UAS: challenging and checking ---------------------------------------------------------------

/** What a client sent in Authorization / Proxy-Authorization. */
export interface DigestAnswer {
  username: string;
  realm: string;
  nonce: string;
  uri: string;
  response: string;
  algorithm: string;
  qop?: string;
  nc?: string;
  cnonce?: string;
}

export function parseDigestAnswer(header: string | undefined): DigestAnswer | null {
  const p = parseDigest(header);
  if (!p?.username || !p.nonce || !p.response || p.uri === undefined) return null;
  return {
    username: p.username,
    realm: p.realm ?? '',
    nonce: p.nonce,
    uri: p.uri,
    response: p.response.toLowerCase(),
    algorithm: (p.algorithm ?? 'MD5').toUpperCase(),
    qop: p.qop?.toLowerCase(),
    nc: p.nc,
    cnonce: p.cnonce,
  };
}

/**
 * - `ok`: the password is right and the nonce is fresh, issued to this address and not replayed;
 * - `stale`: the password is right but the nonce expired (challenge again with stale=true, §3.3);
 * - `unknown`: the nonce is not one this address may use now (another address's, already used,
 *   its nonce-count not above the last one, or forgotten): challenge again, the password was not
 *   checked, so it is no guess;
 * - `bad`: a wrong password (or username, or a malformed answer) against a valid nonce: a guess,
 *   and the nonce is spent.
 */
export type DigestVerdict = 'ok' | 'stale' | 'unknown' | 'bad';

interface NonceState {
  /** The source address the nonce was issued to. */
  addr: string;
  issuedAt: number;
  /** The highest nonce-count accepted (RFC 7616 §3.4.5 / RFC 2617 §3.2.2: replays are refused). */
  nc: number;
  /** Used once without qop (RFC 2069 form): then it is spent. */
  spent: boolean;
}

const NONCE_TTL_MS = 5 * 60_000;
/** Nonces kept at once; beyond it the oldest are forgotten (their clients are challenged again). */
const MAX_NONCES = 10_000;

/**
 * The UAS side. Nonces are random, carry their issue time and an HMAC over it, the realm and the
 * source address they were issued to (RFC 7616 §3.3 suggests the client's address in the nonce),
 * and are remembered until they expire: an Authorization is accepted once per nonce-count from
 * that address only, so one captured on the wire is worth nothing replayed, from there or
 * elsewhere. A wrong answer spends its nonce: every guess costs a round trip for a new one.
 */
export class DigestServer {
  private readonly secret = randomBytes(32);
  private readonly nonces = new Map<string, NonceState>();

  constructor(
    readonly realm: string,
    private readonly now: () => number = Date.now,
  ) {}

  private sign(ts: string, rand: string, addr: string): string {
    return createHmac('sha256', this.secret).update(`${ts}:${rand}:${this.realm}:${addr}`).digest('hex').slice(0, 32);
  }

  /** A fresh challenge value for WWW-Authenticate / Proxy-Authenticate, for a client at `addr`. */
  challenge(addr: string, stale = false): string {
    const at = this.now();
    const ts = at.toString(16);
    const rand = randomBytes(9).toString('base64url');
    const nonce = `${ts}.${rand}.${this.sign(ts, rand, addr)}`;
    this.forgetExpired(at);
    this.nonces.set(nonce, { addr, issuedAt: at, nc: 0, spent: false });
    if (this.nonces.size > MAX_NONCES) this.nonces.delete(this.nonces.keys().next().value as string);
    return `Digest realm=${quote(this.realm)}, nonce=${quote(nonce)}, algorithm=MD5, qop="auth"${stale ? ', stale=true' : ''}`;
  }

  private forgetExpired(now: number): void {
    // Map order is issue order: the expired ones are at the front.
    for (const [k, v] of this.nonces) {
      if (now - v.issuedAt <= NONCE_TTL_MS) break;
      this.nonces.delete(k);
    }
  }

  /** Checks an answer from `addr` to a request with `method`, against the account's password. */
  verify(a: DigestAnswer, method: string, password: string, addr: string): DigestVerdict {
    const [ts, rand, sig, extra] = a.nonce.split('.');
    if (!ts || !rand || !sig || extra !== undefined || !safeEq(sig, this.sign(ts, rand, addr))) return 'unknown';
    const algorithm = a.algorithm === 'MD5' || a.algorithm === 'SHA-256' ? a.algorithm : null;
    const qop = a.qop === undefined ? undefined : a.qop === 'auth' ? ('auth' as const) : null;
    const nc = a.nc !== undefined && /^[0-9a-f]{8}$/i.test(a.nc) ? Number.parseInt(a.nc, 16) : null;
    const state = this.nonces.get(a.nonce);
    const expired = this.now() - Number.parseInt(ts, 16) > NONCE_TTL_MS;
    if (!expired) {
      if (!state || state.spent) return 'unknown';
      if (qop && (nc === null || nc <= state.nc)) return 'unknown';
    }
    const right =
      algorithm !== null &&
      qop !== null &&
      a.realm === this.realm &&
      safeEq(
        a.response,
        digestResponse({ algorithm, realm: this.realm, nonce: a.nonce, username: a.username, password, method, uri: a.uri, qop, nc: a.nc, cnonce: a.cnonce }),
      );
    // An expired nonce still tells a right password from a wrong one: a wrong one is a guess.
    if (expired) return right ? 'stale' : 'bad';
    if (!right) {
      this.nonces.delete(a.nonce);
      return 'bad';
    }
    if (qop) state!.nc = nc!;
    else state!.spent = true;
    return 'ok';
  }
}

function safeEq(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
