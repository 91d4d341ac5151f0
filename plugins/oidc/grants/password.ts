import { oauthError, type Grant, type GrantContext } from '../oauth.ts';

/** password (RFC 6749 §4.3): the same per-IP and per-account limits and audit as the sign-in page. */
export const passwordGrant: Grant = { type: 'password', parameters: ['username', 'password', 'scope'], clientAuth: 'required', handler: signIn };

async function signIn(g: GrantContext): Promise<Record<string, unknown>> {
  const { tenant, form, req, provider: p } = g;
  const client = g.client!;
  if (!form.username || form.password === undefined) throw oauthError('invalid_request', 'username and password are required');
  const user = await p.checkPassword(tenant, form.username, form.password, req, { via: 'password-grant', client: client.clientId });
  if (!user) throw oauthError('invalid_grant', 'wrong username or password');
  const scope = p.parseScope(form.scope, ['openid']);
  const grantId = p.newGrant(tenant, client.clientId, user.id, scope);
  return p.tokens.issue(tenant, g.issuer, {
    client,
    user,
    scope,
    grantId,
    authTime: p.now(),
    withIdToken: scope.includes('openid'),
    withRefresh: scope.includes('offline_access') && client.grantTypes.includes('refresh_token'),
    amr: ['pwd'],
  });
}
