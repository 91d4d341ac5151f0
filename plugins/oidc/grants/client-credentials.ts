import { type Grant, type GrantContext } from '../oauth.ts';

/** client_credentials (RFC 6749 §4.4): an access token for the client itself, no id_token, no refresh token. */
export const clientCredentialsGrant: Grant = {
  type: 'client_credentials',
  parameters: ['scope'],
  clientAuth: 'required',
  handler: issue,
};

async function issue(g: GrantContext): Promise<Record<string, unknown>> {
  const p = g.provider;
  const client = g.client!;
  // No user: identity scopes make no sense (OIDC Core §3.1.2.1 is about users).
  const scope = p.parseScope(g.form.scope, []).filter((s) => s !== 'openid' && s !== 'offline_access' && s !== 'profile' && s !== 'email');
  const at = await p.tokens.accessToken(g.tenant, g.issuer, { client, scope });
  return { access_token: at.token, token_type: 'Bearer', expires_in: p.config.accessTokenTtl, scope: scope.join(' ') };
}
