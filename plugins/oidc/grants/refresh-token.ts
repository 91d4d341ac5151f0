import { sha256Hex } from '../../../server/sdk.ts';
import { oauthError, type Grant, type GrantContext } from '../oauth.ts';

/** refresh_token (RFC 6749 §6) with rotation and reuse detection (RFC 9700 §4.14.2). */
export const refreshTokenGrant: Grant = { type: 'refresh_token', parameters: ['refresh_token', 'scope'], clientAuth: 'required', handler: refresh };

async function refresh(g: GrantContext): Promise<Record<string, unknown>> {
  const { tenant, form, provider: p } = g;
  const client = g.client!;
  if (!form.refresh_token) throw oauthError('invalid_request', 'refresh_token is required');
  const row = p.repo.takeRefresh(tenant, sha256Hex(form.refresh_token), p.now());
  if (!row) throw oauthError('invalid_grant', 'unknown refresh token');
  if (row.client_id !== client.clientId) throw oauthError('invalid_grant', 'refresh token was issued to another client');
  if (row.used_at !== null) {
    // A rotated-out refresh token presented again means it leaked; revoke the family.
    p.revokeGrant(row.grant_id);
    throw oauthError('invalid_grant', 'refresh token already used; the grant is revoked');
  }
  if (p.repo.grantRevoked(row.grant_id)) throw oauthError('invalid_grant', 'the grant was revoked');
  if (row.expires_at < p.now()) throw oauthError('invalid_grant', 'refresh token expired');
  const granted = row.scope.split(' ');
  const scope = p.parseScope(form.scope, granted);
  // RFC 6749 §6: the scope may only narrow.
  if (scope.some((s) => !granted.includes(s))) throw oauthError('invalid_scope', 'scope exceeds the original grant');
  const user = p.activeUser(tenant, row.user_id);
  if (!user) throw oauthError('invalid_grant', 'the account is no longer active');
  return p.tokens.issue(tenant, g.issuer, {
    client,
    user,
    scope,
    grantId: row.grant_id,
    authTime: row.auth_time,
    withIdToken: scope.includes('openid'),
    withRefresh: true,
    refreshScope: granted,
  });
}
