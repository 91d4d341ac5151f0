import crypto from 'node:crypto';
import { sha256Hex } from '../../../server/sdk.ts';
import { oauthError, type Grant, type GrantContext } from '../oauth.ts';

function b64urlSha256(s: string): string {
  return crypto.createHash('sha256').update(s).digest('base64url');
}

/** authorization_code (RFC 6749 §4.1.3) with PKCE (RFC 7636) and the RFC 9700 downgrade check. */
export const authorizationCodeGrant: Grant = {
  type: 'authorization_code',
  parameters: ['code', 'redirect_uri', 'code_verifier'],
  clientAuth: 'required',
  handler: exchange,
};

async function exchange(g: GrantContext): Promise<Record<string, unknown>> {
  const { tenant, form, provider: p } = g;
  const client = g.client!;
  if (!form.code) throw oauthError('invalid_request', 'code is required');
  // Single use, consumed even when the exchange fails (spec "Issuer authorization code").
  const row = p.repo.takeCode(tenant, sha256Hex(form.code), p.now());
  if (!row) throw oauthError('invalid_grant', 'unknown or expired code');
  if (row.used_at !== null) {
    // RFC 6749 §4.1.2: a code used twice revokes the tokens issued from it.
    p.revokeGrant(row.grant_id);
    throw oauthError('invalid_grant', 'code already used; the tokens issued from it are revoked');
  }
  if (row.client_id !== client.clientId) throw oauthError('invalid_grant', 'code was issued to another client');
  if (row.expires_at < p.now()) throw oauthError('invalid_grant', 'code expired');
  if (form.redirect_uri !== row.redirect_uri) throw oauthError('invalid_grant', 'redirect_uri differs from the authorization request');
  if (row.code_challenge) {
    const v = form.code_verifier;
    if (!v) throw oauthError('invalid_grant', 'code_verifier is required (PKCE)');
    // RFC 7636 §4.1: 43 to 128 unreserved characters.
    if (!/^[A-Za-z0-9._~-]{43,128}$/.test(v)) throw oauthError('invalid_grant', 'code_verifier must be 43 to 128 unreserved characters');
    const ok = row.code_challenge_method === 'plain' ? v === row.code_challenge : b64urlSha256(v) === row.code_challenge;
    if (!ok) throw oauthError('invalid_grant', 'code_verifier does not match the code_challenge');
  } else if (form.code_verifier !== undefined) {
    // RFC 9700 §2.1.1 (PKCE downgrade): a verifier without a challenge in the request is refused.
    throw oauthError('invalid_grant', 'code_verifier sent but no code_challenge was in the authorization request');
  }
  const user = p.activeUser(tenant, row.user_id);
  if (!user) throw oauthError('invalid_grant', 'the account is no longer active');
  const scope = row.scope.split(' ');
  return p.tokens.issue(tenant, g.issuer, {
    client,
    user,
    scope,
    grantId: row.grant_id,
    authTime: row.auth_time,
    nonce: row.nonce ?? undefined,
    sid: row.sid ?? undefined,
    amr: row.amr ? (JSON.parse(row.amr) as string[]) : undefined,
    withIdToken: scope.includes('openid'),
    withRefresh: scope.includes('offline_access') && client.grantTypes.includes('refresh_token'),
  });
}
