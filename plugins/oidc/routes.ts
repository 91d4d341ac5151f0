import { z } from 'zod';
import { InputError, NotAllowedError, NotFoundError, type PluginContext, policy, reply, type RouteRegistrar, type RouteRequest } from '../../server/sdk.ts';
import { AUTH_METHODS, clientInputSchema, clientView, snakeKeys } from './clients.ts';
import { CLIENT_ALGS, SCOPES, oauthError } from './oauth.ts';
import type { OidcProvider } from './provider.ts';
import { discoverySchema, introspection, jwksSchema, oauthError as oauthErrorSchema, tokenOnlyForm, tokenResponse, type OidcConfig } from './schemas.ts';
import type { OidcServices } from './services.ts';
import { issuerOf, reqInfo } from './issuer.ts';

export function discovery(issuer: string, p: OidcProvider, allowPlain: boolean): Record<string, unknown> {
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth2/v1/authorize`,
    token_endpoint: `${issuer}/oauth2/v1/token`,
    userinfo_endpoint: `${issuer}/oauth2/v1/userinfo`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    end_session_endpoint: `${issuer}/oauth2/v1/logout`,
    revocation_endpoint: `${issuer}/oauth2/v1/revoke`,
    introspection_endpoint: `${issuer}/oauth2/v1/introspect`,
    scopes_supported: [...SCOPES],
    response_types_supported: ['code', 'id_token', 'code id_token'],
    response_modes_supported: ['query', 'fragment', 'form_post'],
    grant_types_supported: [...p.grantTypes(), 'implicit'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256', 'ES256'],
    request_parameter_supported: true,
    request_uri_parameter_supported: false,
    request_object_signing_alg_values_supported: CLIENT_ALGS,
    token_endpoint_auth_methods_supported: [...AUTH_METHODS],
    token_endpoint_auth_signing_alg_values_supported: CLIENT_ALGS,
    revocation_endpoint_auth_methods_supported: [...AUTH_METHODS],
    introspection_endpoint_auth_methods_supported: AUTH_METHODS.filter((m) => m !== 'none'),
    code_challenge_methods_supported: allowPlain ? ['plain', 'S256'] : ['S256'],
    prompt_values_supported: ['none', 'login', 'consent', 'select_account'],
    claims_supported: [
      'sub',
      'iss',
      'aud',
      'exp',
      'iat',
      'auth_time',
      'nonce',
      'amr',
      'azp',
      'at_hash',
      'c_hash',
      'sid',
      'name',
      'preferred_username',
      'email',
      'email_verified',
      'roles',
      'tenant',
    ],
    claims_parameter_supported: false,
    authorization_response_iss_parameter_supported: true,
    backchannel_logout_supported: false,
    frontchannel_logout_supported: false,
  };
}

export function protocolRoutes(r: RouteRegistrar, ctx: PluginContext<OidcConfig>, s: OidcServices): void {
  const { provider: p, settings } = s;
  const area = 'oidc';
  r.add({
    method: 'GET',
    path: '/.well-known/openid-configuration',
    aliases: ['/oauth2/v1/.well-known/openid-configuration', '/oidc.ashx?action=discovery'],
    summary: 'OpenID Provider metadata (OIDC Discovery 1.0 §3); issuer = this origin',
    area,
    auth: policy.public,
    responses: { 200: { description: 'discovery document', schema: discoverySchema } },
    handler: (req) => reply(200, discovery(issuerOf(req), p, settings.allowPlainPkce(req.tenant)), { 'Cache-Control': 'public, max-age=300' }),
  });
  r.add({
    method: 'GET',
    path: '/.well-known/jwks.json',
    aliases: ['/oauth2/v1/keys', '/oidc.ashx?action=jwks'],
    summary: "The tenant's public signing keys (active and still-published retiring keys)",
    area,
    auth: policy.public,
    responses: { 200: { description: 'JWK set', schema: jwksSchema } },
    handler: async (req) => reply(200, await p.keys.jwks(req.tenant), { 'Cache-Control': 'public, max-age=300' }),
  });
  r.add({
    method: 'GET',
    path: '/.well-known/openid-federation',
    aliases: ['/oidc.ashx?action=federation-entity'],
    summary: 'OpenID Federation entity configuration (self-signed ES256 entity statement)',
    area,
    auth: policy.public,
    responses: { 200: { description: 'entity statement JWT', contentType: 'application/entity-statement+jwt' } },
    handler: async (req) => {
      const issuer = issuerOf(req);
      const now = p.now();
      // OpenID Federation 1.0 §3: iss = sub for an entity configuration; jwks are the federation
      // keys (here the tenant's keys); metadata carries the OP metadata.
      const jwt = await p.keys.sign(
        req.tenant,
        {
          iss: issuer,
          sub: issuer,
          iat: now,
          exp: now + 86_400,
          jwks: await p.keys.jwks(req.tenant),
          metadata: { openid_provider: discovery(issuer, p, settings.allowPlainPkce(req.tenant)) },
        },
        { alg: 'ES256', typ: 'entity-statement+jwt' },
      );
      return reply.text(200, jwt, 'application/entity-statement+jwt', { 'Cache-Control': 'public, max-age=3600' });
    },
  });

  r.add({
    method: 'POST',
    path: '/oauth2/v1/token',
    aliases: ['/oidc.ashx?action=token', '/oidc.ashx/token'],
    summary: 'Token endpoint: authorization_code, refresh_token, client_credentials, password, jwt-bearer and plugged-in grants',
    description:
      'Form-encoded (RFC 6749 §3.2). Client authentication: none (public, PKCE), client_secret_basic, client_secret_post, private_key_jwt. ' +
      `Grants and their parameters: ${p.grantsDescription()}.`,
    area,
    auth: policy.public,
    bodyType: 'form',
    body: p.tokenForm(),
    responses: {
      200: { description: 'tokens', schema: tokenResponse },
      400: { description: 'OAuth error', schema: oauthErrorSchema },
      401: { description: 'invalid_client', schema: oauthErrorSchema },
    },
    handler: async (req) => reply(200, await p.token(req.tenant, issuerOf(req), req.body, reqInfo(req)), { Pragma: 'no-cache' }),
  });

  const userinfo = async (req: RouteRequest) => {
    const pr = req.principal!;
    if (pr.kind !== 'user' || !pr.scopes.includes('openid'))
      throw new NotAllowedError('userinfo needs a user access token with scope openid', 'insufficient_scope');
    const user = p.activeUser(req.tenant, pr.subject);
    if (!user) throw new NotFoundError('no such user');
    return { sub: user.id, ...p.userClaims(req.tenant, user, pr.scopes) };
  };
  for (const method of ['GET', 'POST'] as const) {
    r.add({
      method,
      path: '/oauth2/v1/userinfo',
      aliases: ['/oidc.ashx?action=userinfo'],
      summary: 'Claims about the signed-in user (OIDC Core §5.3)',
      area,
      auth: policy.bearer(),
      bodyType: method === 'POST' ? 'form' : 'none',
      responses: { 200: { description: 'claims', schema: z.object({ sub: z.string() }).loose() } },
      handler: userinfo,
    });
  }

  r.add({
    method: 'POST',
    path: '/oauth2/v1/revoke',
    aliases: ['/oidc.ashx?action=revoke'],
    summary: 'Token revocation (RFC 7009); always 200',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: tokenOnlyForm,
    responses: { 200: { description: 'revoked or unknown (indistinguishable)' } },
    handler: async (req) => {
      const prov = p;
      const auth = await prov.authenticateClient(req.tenant, issuerOf(req), req.body, reqInfo(req));
      let what = 'unknown';
      if (auth) what = await prov.revoke(req.tenant, auth.client, req.body.token);
      else {
        // Without client identification, possession of the token is enough to revoke it: it
        // only takes rights away (the holder could as well discard it).
        const claims = await prov.verifyAccessToken(req.tenant, req.body.token);
        const c = claims ? prov.clients.get(req.tenant, String(claims.client_id)) : undefined;
        if (c) what = await prov.revoke(req.tenant, c, req.body.token);
      }
      ctx.audit.write(req.tenant, {
        event: 'revoke',
        user: auth?.client.clientId ?? '',
        ip: req.ip,
        ua: req.ua,
        extra: { client: auth?.client.clientId, hint: req.body.token_type_hint, result: what },
      });
      return reply(200, {});
    },
  });

  r.add({
    method: 'POST',
    path: '/oauth2/v1/introspect',
    aliases: ['/oidc.ashx?action=introspect'],
    summary: 'Token introspection (RFC 7662); client authentication required',
    area,
    auth: policy.public,
    bodyType: 'form',
    body: tokenOnlyForm,
    responses: { 200: { description: '{active, ...}', schema: introspection }, 401: { description: 'invalid_client', schema: oauthErrorSchema } },
    handler: async (req) => {
      const auth = await p.authenticateClient(req.tenant, issuerOf(req), req.body, reqInfo(req));
      if (!auth || auth.method === 'none') throw oauthError('invalid_client', 'introspection requires an authenticated (confidential) client', 401);
      const out = await p.introspect(req.tenant, req.body.token);
      ctx.audit.write(req.tenant, {
        event: 'introspect',
        // eslint-disable-next-line @typescript-eslint/no-base-to-string -- introspection claims are strings; printed as they are
        user: String(out.username ?? out.sub ?? ''),
        ip: req.ip,
        ua: req.ua,
        extra: { client: auth.client.clientId, active: Boolean(out.active) },
      });
      return out;
    },
  });
}

const genkeyBody = z.object({ client_id: z.string().max(128).optional(), clientId: z.string().max(128).optional() });
const apikeyBody = z.object({ user: z.string().max(128).optional(), name: z.string().max(100).optional() }).strict();

export function adminRoutes(r: RouteRegistrar, ctx: PluginContext<OidcConfig>, s: OidcServices): void {
  const { provider: p, settings } = s;
  const area = 'admin';
  r.add({
    method: 'GET',
    path: '/signal.ashx?oidc-clients=1',
    summary: 'Registered OIDC clients of this tenant (secrets never shown)',
    area,
    auth: policy.adminOrHmac('oidc-clients'),
    responses: { 200: { description: 'array of clients (RFC 7591 metadata names)', schema: z.array(z.object({ client_id: z.string() }).loose()) } },
    handler: (req) => p.clients.list(req.tenant).map(clientView),
  });
  r.add({
    method: 'POST',
    path: '/signal.ashx?oidc-clients-save=1',
    summary: 'Create or update an OIDC client (upsert, validated)',
    area,
    description: 'RFC 7591 client metadata (snake_case or camelCase). A new client with client_secret_basic/post gets a secret, returned once.',
    auth: policy.adminOrHmac('oidc-clients-save'),
    bodyType: 'json',
    camelize: false,
    body: z.preprocess(snakeKeys, clientInputSchema(p.clientGrantTypes())),
    responses: {
      200: {
        description: 'the client; client_secret only when just created',
        schema: z.object({ client: z.object({}).loose(), created: z.boolean(), client_secret: z.string().optional() }),
      },
    },
    handler: (req) => {
      const { client, created, secret } = p.clients.upsert(req.tenant, req.body);
      ctx.audit.write(req.tenant, {
        event: 'oidc-client-save',
        user: req.principal?.userName ?? '',
        ip: req.ip,
        ua: req.ua,
        extra: { client: client.clientId, created },
      });
      return { client: clientView(client), created, ...(secret ? { client_secret: secret } : {}) };
    },
  });
  r.add({
    method: 'POST',
    path: '/signal.ashx?oidc-clients-genkey=1',
    summary: 'New client secret for a confidential client (client_id optional when the tenant has exactly one); shown once, stored hashed',
    area,
    auth: policy.adminOrHmac('oidc-clients-genkey'),
    bodyType: 'json-or-form',
    body: genkeyBody,
    query: z.object({ 'oidc-clients-genkey': z.string(), client_id: z.string().max(128).optional() }),
    responses: { 200: { description: '{client_id, client_secret}', schema: z.object({ client_id: z.string(), client_secret: z.string() }) } },
    handler: (req) => {
      let id = req.body.client_id ?? req.body.clientId ?? req.query.client_id;
      if (!id) {
        // The spec's call names no client: it means the tenant's one secret-based client.
        const withSecret = p.clients.list(req.tenant).filter((c) => c.authMethod === 'client_secret_basic' || c.authMethod === 'client_secret_post');
        if (withSecret.length !== 1) {
          throw new InputError(
            withSecret.length
              ? `client_id is required: the tenant has ${withSecret.length} clients with a secret (${withSecret.map((c) => c.clientId).join(', ')})`
              : 'client_id is required: the tenant has no client with a secret',
            'invalid_request',
            { field: 'client_id' },
          );
        }
        id = withSecret[0]!.clientId;
      }
      const secret = p.clients.newSecret(req.tenant, id);
      ctx.audit.write(req.tenant, { event: 'oidc-client-genkey', user: req.principal?.userName ?? '', ip: req.ip, ua: req.ua, extra: { client: id } });
      return { client_id: id, client_secret: secret };
    },
  });
  r.add({
    method: 'POST',
    path: '/signal.ashx?oidc-keys-rotate=1',
    summary: "Rotate the tenant's OIDC signing keys (old keys stay published for the overlap)",
    area,
    auth: policy.adminOrHmac('oidc-keys-rotate'),
    responses: {
      200: { description: 'new key ids', schema: z.object({ kids: z.array(z.string()) }) },
      429: { description: 'more rotations than keyRotationsPerMinute for this tenant (Retry-After)' },
    },
    handler: (req) => {
      // Per tenant, not per IP: one tenant's admin must not spend the appliance on key generation.
      p.limiter.check('oidc-keys-rotate', req.tenant.id, ctx.config.keyRotationsPerMinute);
      return p.keys.rotate(req.tenant, ctx.config.keyOverlapSeconds);
    },
  });
  r.add({
    method: 'POST',
    path: '/signal.ashx?oidc-settings=1',
    summary: 'Per-tenant OIDC switches (allowPlainPkce)',
    area,
    auth: policy.adminOrHmac('oidc-settings'),
    body: z.object({ allowPlainPkce: z.boolean().optional() }).strict(),
    responses: { 200: { description: 'the settings now in force', schema: z.object({ allowPlainPkce: z.boolean() }) } },
    handler: (req) => settings.update(req.tenant, req.body),
  });
  r.add({
    method: 'POST',
    path: '/signal.ashx?apikey-create=1',
    summary: 'Mint an ak_ personal API key (value shown once); needs an admin OIDC bearer',
    description: 'Spec "Authentication" 2: an ak_ key cannot create another ak_ key, nor can the admin HMAC. `user` defaults to the caller.',
    area,
    auth: policy.adminBearerOnly,
    body: apikeyBody,
    rateLimit: 'sensitive',
    responses: { 200: { description: 'the key (once) and its record', schema: z.object({ key: z.string(), id: z.string() }).loose() } },
    handler: (req) => {
      const pr = req.principal!;
      if (pr.kind !== 'user') throw new NotAllowedError('minting API keys needs a user bearer token');
      const name = req.body.user ?? pr.userName!;
      const user = ctx.users.byName(req.tenant, name);
      if (!user) throw new NotFoundError(`no user ${name}`);
      const { key, info } = ctx.auth.createApiKey(req.tenant, user, { name: req.body.name, createdBy: pr.userName ?? pr.subject });
      ctx.audit.write(req.tenant, {
        event: 'apikey-create',
        user: pr.userName ?? pr.subject,
        ip: req.ip,
        ua: req.ua,
        extra: { id: info.id, name: info.name, for: user.name },
      });
      return { key, id: info.id, prefix: info.prefix, user: user.name, name: info.name, createdAt: info.createdAt };
    },
  });
}
