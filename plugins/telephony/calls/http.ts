import { z } from 'zod';
import { CSV_MAX_ROWS, csvHeaders, envelope, envelopeSchema, pageOf, policy, reply, requireBodyless, toCsv, type RouteRegistrar } from '../../../server/sdk.ts';
import { audited, err, okBody, V1 } from '../http-common.ts';
import * as S from '../schemas.ts';
import type { TelephonyServices } from '../services.ts';
import { toRecord } from './outbound.ts';

/** The v1 calls API (outbound AI calls). */
export function callHttp(r: RouteRegistrar, svc: TelephonyServices): void {
  r.add({
    // The authenticated limit, not the sign-in one: a dialer places many calls a minute.
    method: 'POST',
    path: `${V1}/calls`,
    area: 'calls',
    auth: policy.v1Admin,
    summary: 'Place an outbound AI call: whitelist the number, pick a trunk by the outbound routes, dial now or at scheduleAtUtc',
    description: "email is optional (no outcome mail without it); apiKey falls back to the tenant's stored engine key.",
    body: S.callCreate,
    responses: {
      200: { description: 'call accepted', schema: S.callCreated },
      400: err('bad input, naming the field; schedule_in_past: scheduleAtUtc more than 60 s before now'),
      502: err('bridge_unreachable'),
      503: err('bridge_not_configured'),
    },
    handler: async (req) => {
      const out = await svc.calls.create(req.tenant, req.principal!, req.body);
      const scheduled = out.status === 'scheduled' && req.body.scheduleAtUtc;
      return audited(
        svc,
        req,
        scheduled ? 'call-schedule' : 'call-place',
        { call: out.callId, phone: req.body.phone, ...(scheduled ? { at: scheduled } : {}) },
        out,
      );
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/calls`,
    area: 'calls',
    auth: policy.v1Admin,
    summary: 'List outbound calls, newest first',
    query: S.callListQuery,
    responses: { 200: { description: 'list envelope of call records', schema: envelopeSchema(S.callRecord) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const { rows, total } = svc.calls.list(req.tenant, req.query, page.limit, page.offset);
      return envelope(
        rows.map((c) => toRecord(c, req.tenant.host)),
        total,
        page,
        req.raw.originalUrl,
      );
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/calls/export`,
    area: 'calls',
    auth: policy.v1Admin,
    summary: 'The calls of a filter (as GET /calls: status, phone, since, until) as CSV, newest first, at most 50000 rows',
    description: "RFC 4180 with a UTF-8 BOM; a cell starting with = + - @ gets a leading ' (no formula runs when it is opened in a spreadsheet).",
    query: S.callExportQuery,
    responses: { 200: { description: 'CSV', contentType: 'text/csv' }, 400: err('bad filter') },
    handler: (req) => {
      const { rows } = svc.calls.list(req.tenant, req.query, CSV_MAX_ROWS, 0);
      const cols = [
        'callId',
        'status',
        'phone',
        'displayName',
        'requestedBy',
        'createdAtUtc',
        'scheduledForUtc',
        'answeredAtUtc',
        'endedAtUtc',
        'durationSec',
        'endedReason',
        'errorDetail',
        'trunkId',
        'attempt',
      ] as const;
      const csv = toCsv(
        cols,
        rows.map((c) => {
          const r = toRecord(c, req.tenant.host);
          return cols.map((k) => r[k]);
        }),
      );
      return reply.text(200, csv, 'text/csv; charset=utf-8', csvHeaders('calls.csv'));
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/calls/stats`,
    area: 'calls',
    auth: policy.v1Admin,
    summary: 'Call figures since an instant (default 24 hours): totals by state, at the bridge now, per-hour counts',
    query: S.callStatsQuery,
    responses: { 200: { description: 'figures', schema: S.callStats } },
    handler: (req) => svc.calls.stats(req.tenant, req.query.since),
  });
  r.add({
    method: 'GET',
    path: `${V1}/calls/:id`,
    area: 'calls',
    auth: policy.v1Admin,
    summary: 'One call record',
    params: z.object({ id: z.string().max(64) }),
    responses: { 200: { description: 'call record', schema: S.callRecord }, 404: err('not_found') },
    handler: (req) => toRecord(svc.calls.get(req.tenant, req.params.id), req.tenant.host),
  });
  r.add({
    method: 'POST',
    path: `${V1}/calls/:id/hangup`,
    area: 'calls',
    auth: policy.v1Admin,
    summary:
      'Hang up: scheduled → cancelled; in flight → cancelled and the bridge sends BYE; already ended (retry pending included) → wasNoop; extension ?cancelRetry=true stops a pending retry',
    description:
      'Extension: `?cancelRetry=true` on a call in ended-failed-retry-pending cancels the pending retry (→ cancelled) instead of the no-op the spec describes.',
    params: z.object({ id: z.string().max(64) }),
    query: z.object({ cancelRetry: z.enum(['true', 'false']).optional().describe('true: stop the pending retry of an ended-failed-retry-pending call') }),
    responses: {
      200: { description: '{ok, callId, newStatus, actor} or {ok, wasNoop}', schema: okBody },
      404: err('not_found'),
      502: err('bridge_unreachable'),
    },
    handler: async (req) => {
      requireBodyless(req.rawBody);
      const out = await svc.calls.hangup(req.tenant, req.principal!, req.params.id, { cancelRetry: req.query.cancelRetry === 'true' });
      return 'wasNoop' in out ? out : audited(svc, req, 'call-hangup', { call: req.params.id }, out);
    },
  });
}
