/**
 * Routes of inbound SIP: the bridge's two questions (internal, control token), the admin API of
 * desk-phone logins (`/signal.ashx?phones=…`, the same as `sovcomms phone`), and the spec's inbound
 * routes (v1 `/inbound-routes`).
 */
import { z } from 'zod';
import { envelope, envelopeSchema, pageOf, pageQuery, pascalizeKeys, policy, reply, type RouteRegistrar } from '../../../server/sdk.ts';
import { InboundDecisionSchema, InboundQuerySchema, TransferDecisionSchema, TransferQuerySchema } from '../bridge/inbound/control.ts';
import { audited, err, SIG, V1 } from '../http-common.ts';
import * as S from '../schemas.ts';
import type { TelephonyServices } from '../services.ts';
import { phoneAdd, phoneUser, phoneView } from './phones.ts';
import { sipTlsView } from './sip-tls.ts';

/** How many phones are registered per (tenant, user) now; empty when the bridge does not answer. */
async function registered(svc: TelephonyServices): Promise<Map<string, number>> {
  const m = new Map<string, number>();
  if (!svc.bridge.configured) return m;
  try {
    for (const p of (await svc.bridge.phones()).phones) m.set(`${p.tenantId}\u0000${p.user}`, p.registered);
  } catch {
    // unknown: null in the list
  }
  return m;
}

export function inboundHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  r.add({
    method: 'POST',
    path: '/internal/bridge/inbound',
    area: 'internal',
    auth: policy.custom('telephony-bridge', 'telephony bridge control token'),
    summary: 'Internal: where an inbound INVITE goes (inbound routes; the bridge asks, CONTROL-API.md "Inbound")',
    rateLimit: false,
    bodyLimit: 16 * 1024,
    body: InboundQuerySchema,
    responses: { 200: { description: 'the decision', schema: InboundDecisionSchema } },
    handler: (req) => svc.inbound.decide(req.body),
  });
  r.add({
    method: 'POST',
    path: '/internal/bridge/transfer',
    area: 'internal',
    auth: policy.custom('telephony-bridge', 'telephony bridge control token'),
    summary: "Internal: where the AI of an inbound call may transfer it (the bridge asks on the AI's transfer_to_user)",
    rateLimit: false,
    bodyLimit: 16 * 1024,
    body: TransferQuerySchema,
    responses: { 200: { description: 'the decision', schema: TransferDecisionSchema } },
    handler: (req) => svc.inbound.transfer(req.body),
  });

  r.add({
    method: 'GET',
    path: `${SIG}?phones=list`,
    area: 'admin',
    auth: policy.adminOrHmac('phones-list'),
    summary: 'Desk-phone logins of office users, with how many phones are registered now (passwords never shown)',
    responses: { 200: { description: '{phones}', schema: z.object({ phones: z.array(phoneView) }) } },
    handler: async (req) => {
      const st = await registered(svc);
      return { phones: svc.phones.list(req.tenant).map((p) => ({ ...p, registered: st.get(`${req.tenant.id}\u0000${p.user}`) ?? null })) };
    },
  });
  r.add({
    method: 'GET',
    path: `${SIG}?phones=tls`,
    area: 'admin',
    auth: policy.adminOrHmac('phones-tls'),
    summary: 'SIP over TLS for desk phones: where it listens, and the CA (PEM and SHA-256 fingerprint) a phone must trust',
    responses: { 200: { description: 'the TLS listener and its CA', schema: sipTlsView } },
    handler: () => svc.sipTls.view(),
  });
  r.add({
    method: 'POST',
    path: `${SIG}?phones=add`,
    area: 'admin',
    auth: policy.adminOrHmac('phones-add'),
    summary: "Create or replace an office user's desk-phone login (password sealed at rest; a generated one is returned once)",
    body: phoneAdd,
    responses: {
      200: {
        description: '{ok, user, username, generatedPassword?}',
        schema: z.object({ ok: z.boolean(), user: z.string(), username: z.string(), generatedPassword: z.string().optional() }),
      },
      409: { description: 'conflict: the SIP user name is taken; tenant_limit: a new login past limits.phones' },
    },
    handler: (req) => {
      const out = svc.phones.add(req.tenant, req.body.user, req.body.password, req.body.srtp);
      return audited(svc, req, 'phone-add', { phoneUser: out.user, credentialChanged: true }, { ok: true, ...out });
    },
  });
  r.add({
    method: 'POST',
    path: `${SIG}?phones=remove`,
    area: 'admin',
    auth: policy.adminOrHmac('phones-remove'),
    summary: "Remove an office user's desk-phone login (its phones can no longer register)",
    body: z.object({ user: phoneUser }),
    responses: { 200: { description: '{ok, removed}', schema: z.object({ ok: z.boolean(), removed: z.string() }) }, 404: { description: 'not_found' } },
    handler: (req) => {
      svc.phones.remove(req.tenant, req.body.user);
      return audited(svc, req, 'phone-remove', { phoneUser: req.body.user }, { ok: true, removed: req.body.user });
    },
  });
}

/** The spec's inbound routes (spec "Route rules"): first match by Did and FromNumber, `*` catchall last. */
export function inboundRouteHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  const pascalRow = z.object({ Did: z.string(), FromNumber: z.string(), User: z.string() });
  r.add({
    method: 'GET',
    path: `${V1}/inbound-routes`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Inbound routes in evaluation order (first match; * catchall last)',
    query: pageQuery,
    responses: { 200: { description: 'list envelope of inbound routes', schema: envelopeSchema(S.inboundRoute) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const rows = svc.inboundRoutes.rows(req.tenant).map((x) => ({ did: x.did, fromNumber: x.fromNumber, user: x.user }));
      return envelope(rows.slice(page.offset, page.offset + page.limit), rows.length, page, req.raw.originalUrl);
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/inbound-routes/:did`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'One inbound route by Did (optional fromNumber query)',
    params: S.didParam,
    query: S.fromQuery,
    responses: { 200: { description: 'route', schema: S.inboundRoute }, 404: err('not_found') },
    handler: (req) => svc.inboundRoutes.one(req.tenant, req.params.did, req.query.fromNumber),
  });
  r.add({
    method: 'POST',
    path: `${V1}/inbound-routes`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Insert an inbound route just before the catchall; 409 duplicate_route on an existing (Did, FromNumber)',
    body: S.inboundCreate,
    responses: { 201: { description: 'created row (PascalCase echo)', schema: pascalRow }, 409: err('duplicate_route; tenant_limit (limits.routes)') },
    handler: (req) => reply(201, pascalizeKeys({ ...svc.inboundRoutes.add(req.tenant, req.body) })),
  });
  r.add({
    method: 'PUT',
    path: `${V1}/inbound-routes/:did`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Change the User of the first row with this (Did, FromNumber)',
    params: S.didParam,
    query: S.fromQuery,
    body: S.inboundUpdate,
    responses: { 200: { description: 'updated row (PascalCase echo)', schema: pascalRow }, 404: err('not_found') },
    handler: (req) => pascalizeKeys({ ...svc.inboundRoutes.update(req.tenant, req.params.did, req.query.fromNumber, req.body.user) }),
  });
  r.add({
    method: 'DELETE',
    path: `${V1}/inbound-routes/:did`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Delete the first row with this (Did, FromNumber); the * catchall cannot be deleted',
    params: S.didParam,
    query: S.fromQuery,
    responses: {
      200: { description: '{deleted: row} (PascalCase echo)', schema: z.object({ deleted: pascalRow }) },
      400: err('cannot_delete_catchall'),
      404: err('not_found'),
    },
    handler: (req) => ({ deleted: pascalizeKeys({ ...svc.inboundRoutes.remove(req.tenant, req.params.did, req.query.fromNumber) }) }),
  });
}
