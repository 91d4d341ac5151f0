import { type Grant, type GrantContext } from '../oauth.ts';

/**
 * client_credentials (RFC 6749 §4.4). Synchronous: nothing to wait for (no id_token, no refresh
 * token), so the token endpoint's hottest path makes no promise per step.
 */
export const clientCredentialsGrant: Grant = {
  type: 'client_credentials',
  parameters: ['scope'],
  clientAuth: 'required',
  handler: async (g) => issue(g),
  sync: issue,
};

function issue(g: GrantContext): Record<string, unknown> {
  const p = g.provider;
  const client = g.client!;
  // No user: identity scopes make no sense (OIDC Core §3.1.2.1 is about users).
  const scope = p.parseScope(g.form.scope, []).filter((s) => s !== 'openid' && s !== 'offline_access' && s !== 'profile' && s !== 'email');
  const at = p.tokens.accessToken(g.tenant, g.issuer, { client, scope });
  return { access_token: at.token, token_type: 'Bearer', expires_in: p.config.accessTokenTtl, scope: scope.join(' ') };
}
