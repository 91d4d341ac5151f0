import type * as jose from 'jose';
import { loadJose } from '../jose.ts';
import { JWT_BEARER } from '../clients.ts';
import { CLIENT_ALGS, oauthError, type Grant, type GrantContext } from '../oauth.ts';

/** RFC 7523 §2.1: an assertion signed by a registered client, whose sub names a user of the tenant. */
export const jwtBearerGrant: Grant = { type: JWT_BEARER, parameters: ['assertion', 'scope'], clientAuth: 'optional', handler: exchange };

async function exchange(g: GrantContext): Promise<Record<string, unknown>> {
  const { tenant, form, provider: p } = g;
  if (!form.assertion) throw oauthError('invalid_request', 'assertion is required');
  const J = await loadJose();
  let iss: unknown;
  try {
    iss = J.decodeJwt(form.assertion).iss;
  } catch {
    throw oauthError('invalid_grant', 'assertion is not a JWT');
  }
  const client = g.client ?? (typeof iss === 'string' ? p.clients.get(tenant, iss) : undefined);
  if (!client) throw oauthError('invalid_grant', 'assertion issuer is not a registered client');
  if (!client.grantTypes.includes(JWT_BEARER)) throw oauthError('unauthorized_client', `client ${client.clientId} may not use the jwt-bearer grant`);
  if (g.client && iss !== g.client.clientId) throw oauthError('invalid_grant', 'assertion issuer differs from the authenticated client');
  let claims: jose.JWTPayload;
  try {
    const set = J.createLocalJWKSet(client.jwks as jose.JSONWebKeySet);
    ({ payload: claims } = await J.jwtVerify(form.assertion, set, {
      algorithms: CLIENT_ALGS,
      issuer: client.clientId,
      audience: [g.issuer, `${g.issuer}/oauth2/v1/token`, `${g.issuer}/oidc.ashx/token`],
      requiredClaims: ['exp', 'sub', 'jti'],
      clockTolerance: 30,
      currentDate: new Date(p.clock.now()),
    }));
    // RFC 7523 §3 item 4: exp bounds the window; refuse assertions living longer than an hour.
    if (claims.exp! - p.now() > 3600) throw new Error('exp too far in the future');
    p.rememberJti(tenant, client.clientId, claims.jti!, claims.exp!);
  } catch (e) {
    throw oauthError('invalid_grant', `assertion rejected: ${(e as Error).message}`);
  }
  const user = p.users.get(tenant, String(claims.sub)) ?? p.users.byName(tenant, String(claims.sub));
  if (!user || user.status !== 'active') throw oauthError('invalid_grant', 'assertion subject is not an active user of this tenant');
  const scope = p.parseScope(form.scope, ['openid']).filter((s) => s !== 'offline_access');
  const grantId = p.newGrant(tenant, client.clientId, user.id, scope);
  return p.tokens.issue(tenant, g.issuer, { client, user, scope, grantId, authTime: p.now(), withIdToken: false, withRefresh: false });
}
