import crypto from 'node:crypto';

/**
 * Random bytes for salts and ids from a 4 KiB pool refilled with the CSPRNG: one
 * `randomFillSync` per 4 KiB instead of one per 16-byte salt (a call costs far more than its
 * bytes). Each byte is handed out once.
 */
const POOL = Buffer.alloc(4096);
let at = POOL.length;

export function randomBytes(n: number): Buffer {
  if (n > POOL.length) return crypto.randomBytes(n);
  if (at + n > POOL.length) {
    crypto.randomFillSync(POOL);
    at = 0;
  }
  // A copy: the pool's bytes are overwritten at the next refill.
  const out = Buffer.from(POOL.subarray(at, at + n));
  at += n;
  return out;
}

/** `n` random bytes as base64url text, read straight from the pool (no Buffer in between). */
export function randomBase64url(n: number): string {
  if (n > POOL.length) return crypto.randomBytes(n).toString('base64url');
  if (at + n > POOL.length) {
    crypto.randomFillSync(POOL);
    at = 0;
  }
  const s = POOL.toString('base64url', at, at + n);
  at += n;
  return s;
}
