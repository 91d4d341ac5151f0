/**
 * HTTP Digest for SIP (RFC 3261 §22.4, RFC 2617, RFC 7616 for SHA-256; RFC 8760 for SIP use).
 * Pure: builds the Authorization / Proxy-Authorization value answering one challenge.
 */
import { createHash, randomBytes } from 'node:crypto';
import { parseParams } from './message.ts';

export interface DigestChallenge {
  realm: string;
  nonce: string;
  opaque?: string;
  algorithm: 'MD5' | 'SHA-256' | 'MD5-sess' | 'SHA-256-sess';
  qop?: string[];
  stale: boolean;
}

export function parseChallenge(header: string): DigestChallenge | null {
  const m = /^\s*Digest\s+(.*)$/is.exec(header);
  if (!m) return null;
  // Challenge params are comma separated; reuse the ';' param parser after swapping separators
  // outside quotes.
  let swapped = '';
  let q = false;
  for (const ch of m[1]) {
    if (ch === '"') q = !q;
    swapped += ch === ',' && !q ? ';' : ch;
  }
  const p = parseParams(swapped);
  if (!p.realm || !p.nonce) return null;
  const alg = (p.algorithm ?? 'MD5').toUpperCase();
  const algorithm = alg === 'MD5' ? 'MD5' : alg === 'SHA-256' ? 'SHA-256' : alg === 'MD5-SESS' ? 'MD5-sess' : alg === 'SHA-256-SESS' ? 'SHA-256-sess' : null;
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

export function digestAuthorization(ch: DigestChallenge, input: DigestInput): string {
  const hashName = ch.algorithm.startsWith('SHA-256') ? 'sha256' : 'md5';
  const H = (s: string) => createHash(hashName).update(s, 'utf8').digest('hex');
  const cnonce = input.cnonce ?? randomBytes(8).toString('hex');
  let ha1 = H(`${input.username}:${ch.realm}:${input.password}`);
  if (ch.algorithm.endsWith('-sess')) ha1 = H(`${ha1}:${ch.nonce}:${cnonce}`);
  // RFC 2617 §3.2.2.3: we only implement qop=auth (auth-int is rarely offered by trunks).
  const useQop = ch.qop?.includes('auth') ? 'auth' : undefined;
  const ha2 = H(`${input.method}:${input.uri}`);
  const nc = input.nc.toString(16).padStart(8, '0');
  const response = useQop ? H(`${ha1}:${ch.nonce}:${nc}:${cnonce}:${useQop}:${ha2}`) : H(`${ha1}:${ch.nonce}:${ha2}`);
  const q = (s: string) => `"${s.replace(/(["\\])/g, '\\$1')}"`;
  const parts = [
    `username=${q(input.username)}`,
    `realm=${q(ch.realm)}`,
    `nonce=${q(ch.nonce)}`,
    `uri=${q(input.uri)}`,
    `response=${q(response)}`,
    `algorithm=${ch.algorithm}`,
  ];
  if (ch.opaque !== undefined) parts.push(`opaque=${q(ch.opaque)}`);
  if (useQop) parts.push(`qop=${useQop}`, `nc=${nc}`, `cnonce=${q(cnonce)}`);
  return `Digest ${parts.join(', ')}`;
}
