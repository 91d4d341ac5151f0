import crypto from 'node:crypto';
import { AppError } from '../../server/sdk.ts';

/** An OAuth 2.0 error (RFC 6749 §5.2): 401 for invalid_client, else 400. */
export function oauth(
  code: 'invalid_grant' | 'invalid_client' | 'invalid_request' | 'unsupported_grant_type' | 'access_denied',
  description: string,
): AppError {
  return new AppError(code === 'invalid_client' ? 401 : 400, code, description);
}

/** Constant-time string equality (over SHA-256, so any lengths compare in the same time). */
export function safeEq(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a).digest();
  const hb = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(ha, hb) && a.length === b.length;
}
