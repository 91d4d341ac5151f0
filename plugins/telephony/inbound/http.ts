/**
 * Routes of inbound SIP: the bridge's two questions (internal, control token) and the
 * admin API of desk-phone logins (`/signal.ashx?phones=…`, the same as `sovcomms phone`).
 */
import { z } from 'zod';
import { policy, type RouteRegistrar, type RouteRequest } from '../../../server/sdk.ts';
import { InboundDecisionSchema, InboundQuerySchema, TransferDecisionSchema, TransferQuerySchema } from '../bridge/inbound/control.ts';
import { phoneAdd, phoneUser, phoneView } from './phones.ts';
import type { TelephonyServices } from '../schemas.ts';

const SIG = '/signal.ashx';

function audited<T>(svc: TelephonyServices, req: RouteRequest, event: string, extra: Record<string, string | number | boolean>, out: T): T {
  svc.audit.write(req.tenant, { event, user: req.principal?.userName ?? req.principal?.subject ?? '', ip: req.ip, ua: req.ua, extra });
  return out;
}

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

export function inboundRoutes(r: RouteRegistrar, svc: TelephonyServices): void {
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
      409: { description: 'conflict: the SIP user name is taken' },
    },
    handler: (req) => {
      const out = svc.phones.add(req.tenant, req.body.user, req.body.password);
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
