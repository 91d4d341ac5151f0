/**
 * The server side of SIP digest (RFC 3261 §22.4, RFC 2617 / RFC 7616): challenges with nonces the
 * bridge can check without storing them (an HMAC of the time they were made), and the check of an
 * Authorization / Proxy-Authorization answer in constant time. Used by the registrar (desk phones)
 * and by trunks that authenticate their inbound INVITEs with digest.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { parseParams } from '../sip/message.ts';

const NONCE_TTL_MS = 5 * 60_000;

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
  if (!header) return null;
  const m = /^\s*Digest\s+(.*)$/is.exec(header);
  if (!m) return null;
  let swapped = '';
  let q = false;
  for (const ch of m[1]) {
    if (ch === '"') q = !q;
    swapped += ch === ',' && !q ? ';' : ch;
  }
  const p = parseParams(swapped);
  if (!p.username || !p.nonce || !p.response || p.uri === undefined) return null;
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

export class DigestVerifier {
  private readonly secret = randomBytes(32);

  constructor(readonly realm: string) {}

  private sign(ts: string): string {
    return createHmac('sha256', this.secret).update(ts).digest('hex').slice(0, 32);
  }

  /** A fresh challenge value for WWW-Authenticate / Proxy-Authenticate. */
  challenge(stale = false): string {
    const ts = Date.now().toString(16);
    const nonce = `${ts}.${this.sign(ts)}`;
    return `Digest realm="${this.realm}", nonce="${nonce}", algorithm=MD5, qop="auth"${stale ? ', stale=true' : ''}`;
  }

  /** 'ok', 'stale' (right password, expired nonce: challenge again) or 'bad'. */
  verify(a: DigestAnswer, method: string, password: string): 'ok' | 'stale' | 'bad' {
    const [ts, sig] = a.nonce.split('.');
    if (!ts || !sig || !safeEq(sig, this.sign(ts))) return 'bad';
    if (a.realm !== this.realm) return 'bad';
    const hashName = a.algorithm === 'SHA-256' ? 'sha256' : a.algorithm === 'MD5' ? 'md5' : null;
    if (!hashName) return 'bad';
    const H = (s: string) => createHash(hashName).update(s, 'utf8').digest('hex');
    const ha1 = H(`${a.username}:${a.realm}:${password}`);
    const ha2 = H(`${method}:${a.uri}`);
    const expected = a.qop === 'auth' ? H(`${ha1}:${a.nonce}:${a.nc ?? ''}:${a.cnonce ?? ''}:auth:${ha2}`) : H(`${ha1}:${a.nonce}:${ha2}`);
    if (!safeEq(a.response, expected)) return 'bad';
    return Date.now() - Number.parseInt(ts, 16) > NONCE_TTL_MS ? 'stale' : 'ok';
  }
}

function safeEq(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
