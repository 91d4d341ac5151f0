import { z } from 'zod';
import { envelope, envelopeSchema, pageOf, pageQuery, policy, reply, type RouteRegistrar } from '../../../server/sdk.ts';
import type { BridgeLink } from '../bridge-link/link.ts';
import { audited, err, okBody, SIG, V1 } from '../http-common.ts';
import * as S from '../schemas.ts';
import type { TelephonyServices } from '../services.ts';
import { numberView } from './admin.ts';
import { trunkInput, trunkView, trunkViewSchema } from './trunk.ts';

/** Registration status per trunk from the bridge's /health; empty when it does not answer. */
export async function trunkStatus(bridge: BridgeLink): Promise<Map<string, { registered: boolean | null; lastError: string | null }>> {
  const m = new Map<string, { registered: boolean | null; lastError: string | null }>();
  if (!bridge.configured) return m;
  try {
    for (const t of (await bridge.health()).trunks) m.set(t.id, t);
  } catch {
    // Unknown status is shown as null; the list itself still answers.
  }
  return m;
}

/** The v1 list of virtual numbers. */
export function numberHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  r.add({
    method: 'GET',
    path: `${V1}/numbers`,
    area: 'numbers',
    auth: policy.v1Admin,
    summary: 'Virtual numbers of the tenant (engine keys never included)',
    query: pageQuery,
    responses: { 200: { description: 'list envelope plus tenant', schema: envelopeSchema(S.numberView, { tenant: z.string() }) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const { rows, total } = svc.admin.numbers(req.tenant, page.limit, page.offset);
      return envelope(rows.map(numberView), total, page, req.raw.originalUrl, { tenant: req.tenant.host });
    },
  });
}

/** The v1 outbound routes (spec "Route rules"): which trunks a dialled number goes out through. */
export function outboundRouteHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  r.add({
    method: 'GET',
    path: `${V1}/outbound-routes`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Outbound routes in evaluation order, plus defaultTrunkId',
    query: pageQuery,
    responses: { 200: { description: 'list envelope plus defaultTrunkId', schema: envelopeSchema(S.outboundRoute, { defaultTrunkId: z.string() }) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const { routes, defaultTrunkId } = svc.admin.outbound(req.tenant);
      return envelope(routes.slice(page.offset, page.offset + page.limit), routes.length, page, req.raw.originalUrl, { defaultTrunkId });
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/outbound-routes/:match`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'One outbound route (match URL-encoded: * as %2A, + as %2B)',
    params: S.matchParam,
    responses: { 200: { description: 'route', schema: S.outboundRoute }, 404: err('not_found') },
    handler: (req) => svc.admin.outboundOne(req.tenant, req.params.match),
  });
  r.add({
    method: 'POST',
    path: `${V1}/outbound-routes`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Append an outbound route at the end; 409 duplicate_route when the match exists',
    body: S.outboundCreate,
    responses: { 201: { description: 'created row', schema: S.outboundRoute }, 409: err('duplicate_route; tenant_limit (limits.routes)') },
    handler: (req) => {
      const row = svc.admin.addOutbound(req.tenant, req.body);
      return audited(svc, req, 'outbound-route-add', { match: row.match, trunks: row.trunkIds.join(',') }, reply(201, row));
    },
  });
  r.add({
    method: 'PUT',
    path: `${V1}/outbound-routes/:match`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Replace the trunkIds of an outbound route (the match is not editable)',
    params: S.matchParam,
    body: S.outboundUpdate,
    responses: { 200: { description: 'updated row', schema: S.outboundRoute }, 404: err('not_found') },
    handler: (req) => {
      const row = svc.admin.updateOutbound(req.tenant, req.params.match, req.body.trunkIds);
      return audited(svc, req, 'outbound-route-update', { match: row.match, trunks: row.trunkIds.join(',') }, row);
    },
  });
  r.add({
    method: 'DELETE',
    path: `${V1}/outbound-routes/:match`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Delete an outbound route (the default trunk is a setting, not a row)',
    params: S.matchParam,
    responses: { 200: { description: '{deleted: row}', schema: z.object({ deleted: S.outboundRoute }) }, 404: err('not_found') },
    handler: (req) => {
      const deleted = svc.admin.deleteOutbound(req.tenant, req.params.match);
      return audited(svc, req, 'outbound-route-remove', { match: deleted.match }, { deleted });
    },
  });
}

/** The tenant admin (/signal.ashx): whitelist, trunks, settings, virtual numbers. */
export function trunkAdminHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  r.add({
    method: 'GET',
    path: `${SIG}?whitelist=list`,
    area: 'admin',
    auth: policy.adminOrHmac('whitelist-list'),
    summary: 'PSTN whitelist entries',
    responses: { 200: { description: 'JSON list of whitelist entries', schema: z.array(S.whitelistEntry) } },
    handler: (req) => svc.admin.whitelist(req.tenant),
  });
  r.add({
    method: 'POST',
    path: `${SIG}?whitelist=add`,
    area: 'admin',
    auth: policy.adminOrHmac('whitelist-add'),
    summary: 'Add a number to the PSTN whitelist (HMAC bucket whitelist-add|Host|bodyLen)',
    body: S.whitelistAdd,
    responses: { 200: { description: '{ok, number, added}', schema: okBody } },
    handler: (req) => {
      const added = svc.admin.whitelistAdd(req.tenant, req.body.number, req.body.comment, req.principal!.userName ?? req.principal!.subject);
      return audited(svc, req, 'whitelist-add', { number: req.body.number, added }, { ok: true, number: req.body.number, added });
    },
  });
  r.add({
    method: 'GET',
    path: `${SIG}?trunks=list`,
    area: 'admin',
    auth: policy.adminOrHmac('trunks-list'),
    summary: 'SIP trunks with registration status from the bridge (passwords never shown)',
    responses: { 200: { description: '{trunks}', schema: z.object({ trunks: z.array(trunkViewSchema), bridge: z.string() }) } },
    handler: async (req) => {
      const st = await trunkStatus(svc.bridge);
      return {
        bridge: svc.bridge.state,
        trunks: svc.admin.trunks(req.tenant).map((t) => trunkView(t, st.get(`${req.tenant.id}.${t.id}`))),
      };
    },
  });
  r.add({
    method: 'POST',
    path: `${SIG}?trunks=save`,
    area: 'admin',
    auth: policy.adminOrHmac('trunks-save'),
    summary: 'Create or update a SIP trunk (password sealed at rest; omit it to keep the stored one)',
    body: trunkInput,
    responses: { 200: { description: 'the saved trunk', schema: trunkViewSchema }, 409: err('tenant_limit: a new trunk past limits.trunks') },
    handler: (req) => {
      const t = trunkView(svc.admin.saveTrunk(req.tenant, req.body));
      return audited(svc, req, 'trunk-save', { trunk: t.id, host: t.host, credentialChanged: req.body.password !== undefined }, t);
    },
  });
  r.add({
    method: 'POST',
    path: `${SIG}?trunks=remove`,
    area: 'admin',
    auth: policy.adminOrHmac('trunks-remove'),
    summary: 'Remove a SIP trunk',
    body: z.object({ id: z.string().max(40) }),
    responses: { 200: { description: '{ok, removed}', schema: okBody }, 404: err('not_found') },
    handler: (req) =>
      audited(svc, req, 'trunk-remove', { trunk: req.body.id }, { ok: true, removed: trunkView(svc.admin.removeTrunk(req.tenant, req.body.id)) }),
  });
  r.add({
    method: 'GET',
    path: `${SIG}?telephony=settings`,
    area: 'admin',
    auth: policy.adminOrHmac('telephony-settings'),
    summary: 'Telephony settings of the tenant (default trunk, model; the engine key only as a flag)',
    responses: { 200: { description: 'settings', schema: z.object({ defaultTrunkId: z.string(), hasEngineApiKey: z.boolean(), model: z.string() }) } },
    handler: (req) => svc.admin.settings(req.tenant),
  });
  r.add({
    method: 'POST',
    path: `${SIG}?telephony=settings-save`,
    area: 'admin',
    auth: policy.adminOrHmac('telephony-settings-save'),
    summary: 'Set the default trunk, the engine API key (sealed) or the model',
    body: S.settingsInput,
    responses: { 200: { description: 'settings', schema: okBody } },
    handler: (req) => {
      svc.admin.saveSettings(req.tenant, req.body);
      const extra: Record<string, string | boolean> = { engineCredentialChanged: req.body.engineApiKey !== undefined };
      if (req.body.defaultTrunkId !== undefined) extra.defaultTrunk = req.body.defaultTrunkId;
      return audited(svc, req, 'telephony-settings-save', extra, { ok: true, ...svc.admin.settings(req.tenant) });
    },
  });
  r.add({
    method: 'GET',
    path: `${SIG}?numbers=list`,
    area: 'admin',
    auth: policy.adminOrHmac('numbers-list'),
    summary: 'Virtual numbers (engine keys never shown)',
    responses: { 200: { description: '{numbers}', schema: z.object({ numbers: z.array(S.numberView) }) } },
    handler: (req) => ({ numbers: svc.admin.numbers(req.tenant).rows.map(numberView) }),
  });
  r.add({
    method: 'POST',
    path: `${SIG}?numbers=save`,
    area: 'admin',
    auth: policy.adminOrHmac('numbers-save'),
    summary: 'Create or update a virtual number (engine key write-only, sealed)',
    body: S.numberInput,
    responses: { 200: { description: 'the saved number', schema: S.numberView }, 409: err('tenant_limit: a new number past limits.numbers') },
    handler: (req) =>
      audited(
        svc,
        req,
        'number-save',
        { number: req.body.number, engineCredentialChanged: req.body.geminiApiKey !== undefined },
        numberView(svc.admin.saveNumber(req.tenant, req.body)),
      ),
  });
  r.add({
    method: 'POST',
    path: `${SIG}?numbers=remove`,
    area: 'admin',
    auth: policy.adminOrHmac('numbers-remove'),
    summary: 'Remove a virtual number',
    body: z.object({ number: z.string().max(21) }),
    responses: { 200: { description: '{ok, removed}', schema: okBody }, 404: err('not_found') },
    handler: (req) =>
      audited(svc, req, 'number-remove', { number: req.body.number }, { ok: true, removed: numberView(svc.admin.removeNumber(req.tenant, req.body.number)) }),
  });
}
