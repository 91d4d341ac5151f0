import { z } from 'zod';
import { envelope, envelopeSchema, pageOf, policy, reply, requireBodyless, type RouteRegistrar, type RouteRequest } from '../../server/sdk.ts';
import * as S from './schemas.ts';
import { type Actor, type AdminService, userView } from './service.ts';

const V1 = '/api.ashx/v1';
const err = (description: string) => ({ description });

/**
 * Users and ak_ keys over HTTP for the console (v1 conventions: envelope, camelCase, typed errors).
 * Admin OIDC bearer only, never an ak_ key: a key that could add an admin or set a password could
 * mint itself a bearer and from it new keys, which the spec forbids ("an ak_ key cannot create
 * another ak_ key"). The admin HMAC is not accepted either: these changes need a person's name.
 */
const auth = policy.adminBearerOnly;

function actor(req: RouteRequest): Actor {
  return { principal: req.principal!, tenant: req.tenant, ip: req.ip, ua: req.ua };
}

export function adminRoutes(r: RouteRegistrar, svc: AdminService): void {
  // ---- users -----------------------------------------------------------------------------------
  r.add({
    method: 'GET',
    path: `${V1}/users`,
    area: 'users',
    auth,
    summary: 'Users of the tenant (?tenant=HOST or * for a super-admin), by name; never a password hash',
    query: S.userListQuery,
    responses: {
      200: { description: 'list envelope of users', schema: envelopeSchema(S.userView) },
      403: err('another tenant without super-admin'),
      404: err('not_found: no such tenant'),
    },
    handler: (req) => {
      const page = pageOf(req.query);
      const { data, total } = svc.listUsers(svc.scope(actor(req), req.query.tenant, true), { status: req.query.status, role: req.query.role, ...page });
      return envelope(data, total, page, req.raw.originalUrl);
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/users`,
    area: 'users',
    auth,
    rateLimit: 'sensitive',
    summary: 'Add a user: with a password (policy-checked), a generated one (returned once), or none (an invitation to claim)',
    query: S.tenantQuery,
    body: S.userCreate,
    responses: {
      201: { description: 'the user; `password` only when generated', schema: S.userWithPassword },
      400: err('bad input or weak_password'),
      409: err('duplicate_user'),
    },
    handler: async (req) => {
      const t = svc.target(actor(req), req.query.tenant);
      const { user, password } = await svc.addUser(t, actor(req), req.body);
      return reply(201, { ...userView(user, t), ...(password ? { password } : {}) });
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/users/:id`,
    area: 'users',
    auth,
    summary: 'One user',
    params: S.idParam,
    query: S.tenantQuery,
    responses: { 200: { description: 'the user', schema: S.userView }, 404: err('not_found') },
    handler: (req) => {
      const t = svc.target(actor(req), req.query.tenant);
      return userView(svc.user(t, req.params.id), t);
    },
  });
  r.add({
    method: 'PATCH',
    path: `${V1}/users/:id`,
    area: 'users',
    auth,
    summary: "Change a user's role (admin or user); the last active admin of a tenant cannot be demoted",
    params: S.idParam,
    query: S.tenantQuery,
    body: S.userPatch,
    responses: { 200: { description: 'the user', schema: S.userView }, 404: err('not_found'), 409: err('last_admin') },
    handler: (req) => {
      const t = svc.target(actor(req), req.query.tenant);
      if (req.body.language !== undefined) svc.setLanguage(t, actor(req), req.params.id, req.body.language);
      if (req.body.role !== undefined) svc.setRole(t, actor(req), req.params.id, req.body.role);
      return userView(svc.user(t, req.params.id), t);
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/users/:id/password`,
    area: 'users',
    auth,
    rateLimit: 'sensitive',
    summary: "Reset a user's password: the one given (policy-checked) or a generated one, returned once",
    params: S.idParam,
    query: S.tenantQuery,
    body: S.passwordReset,
    responses: {
      200: { description: 'the user; `password` only when generated', schema: S.userWithPassword },
      400: err('weak_password'),
      404: err('not_found'),
    },
    handler: async (req) => {
      const t = svc.target(actor(req), req.query.tenant);
      const { user, password } = await svc.resetPassword(t, actor(req), req.params.id, req.body.password);
      return { ...userView(user, t), ...(password ? { password } : {}) };
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/users/:id/disable`,
    area: 'users',
    auth,
    summary: 'Disable a user: no sign-in, and their access tokens, refresh tokens and ak_ keys are refused (idempotent)',
    params: S.idParam,
    query: S.tenantQuery,
    responses: { 200: { description: 'the user, status disabled', schema: S.userView }, 404: err('not_found'), 409: err('last_admin or cannot_disable_self') },
    handler: (req) => {
      requireBodyless(req.rawBody);
      const t = svc.target(actor(req), req.query.tenant);
      return userView(svc.disable(t, actor(req), req.params.id), t);
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/users/:id/enable`,
    area: 'users',
    auth,
    summary: 'Enable a disabled user again (active, or invited when the account never had a password; idempotent)',
    params: S.idParam,
    query: S.tenantQuery,
    responses: { 200: { description: 'the user', schema: S.userView }, 404: err('not_found') },
    handler: (req) => {
      requireBodyless(req.rawBody);
      const t = svc.target(actor(req), req.query.tenant);
      return userView(svc.enable(t, actor(req), req.params.id), t);
    },
  });

  // ---- ak_ keys --------------------------------------------------------------------------------
  r.add({
    method: 'GET',
    path: `${V1}/apikeys`,
    area: 'apikeys',
    auth,
    summary: 'ak_ API keys of the tenant (?tenant=HOST or * for a super-admin): prefix and metadata, never the key or its hash',
    query: S.keyListQuery,
    responses: {
      200: { description: 'list envelope of keys', schema: envelopeSchema(S.keyView) },
      403: err('another tenant without super-admin'),
      404: err('not_found: no such tenant'),
    },
    handler: (req) => {
      const page = pageOf(req.query);
      const { data, total } = svc.listKeys(svc.scope(actor(req), req.query.tenant, true), { user: req.query.user, status: req.query.status, ...page });
      return envelope(data, total, page, req.raw.originalUrl);
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/apikeys/:id/revoke`,
    area: 'apikeys',
    auth,
    summary: 'Revoke an ak_ API key at once (idempotent: revoking again keeps the first time)',
    params: z.object({ id: z.string().min(1).max(64) }),
    query: S.tenantQuery,
    responses: { 200: { description: 'the key, status revoked', schema: S.keyView }, 404: err('not_found') },
    handler: (req) => {
      requireBodyless(req.rawBody);
      return svc.revokeKey(svc.target(actor(req), req.query.tenant), actor(req), req.params.id);
    },
  });
}
