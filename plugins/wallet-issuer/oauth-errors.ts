import { AppError } from '../../server/sdk.ts';

/** An OAuth 2.0 error (RFC 6749 §5.2): 401 for invalid_client, else 400. */
export function oauth(
  code: 'invalid_grant' | 'invalid_client' | 'invalid_request' | 'unsupported_grant_type' | 'access_denied',
  description: string,
): AppError {
  return new AppError(code === 'invalid_client' ? 401 : 400, code, description);
}
