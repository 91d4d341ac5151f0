import { CSV_MAX_ROWS, csvHeaders, envelope, envelopeSchema, pageOf, policy, reply, toCsv, type RouteRegistrar } from '../../server/sdk.ts';
import { auditEntry, auditQuery } from './schemas.ts';
import type { AuditService } from './service.ts';

export function auditRoutes(r: RouteRegistrar, service: AuditService): void {
  r.add({
    method: 'GET',
    path: '/api.ashx/v1/auditlog/export',
    summary: 'The audit entries of a filter (as GET /auditlog: event, user, since) as CSV, newest first, at most 50000 rows',
    description: "RFC 4180 with a UTF-8 BOM; a cell starting with = + - @ gets a leading ' (no formula runs when it is opened in a spreadsheet).",
    area: 'audit',
    auth: policy.v1Admin,
    query: auditQuery.omit({ limit: true, offset: true }),
    responses: { 200: { description: 'CSV', contentType: 'text/csv' } },
    handler: (req) => {
      const { rows } = service.list(req.tenant, { limit: CSV_MAX_ROWS, offset: 0, event: req.query.event, user: req.query.user, since: req.query.since });
      const csv = toCsv(
        ['ts', 'event', 'user', 'ip', 'ua', 'extra'],
        rows.map((x) => [x.ts, x.event, x.user, x.ip, x.ua, x.extra]),
      );
      return reply.text(200, csv, 'text/csv; charset=utf-8', csvHeaders('audit.csv'));
    },
  });
  r.add({
    method: 'GET',
    path: '/api.ashx/v1/auditlog',
    summary: 'Audit log of identity and authentication events, newest first',
    area: 'audit',
    auth: policy.v1Admin,
    query: auditQuery,
    responses: { 200: { description: 'list envelope of audit entries', schema: envelopeSchema(auditEntry) } },
    handler: (req) => {
      const page = pageOf(req.query);
      // The entries come from the store in the answer's shape (with the tenant's host): no copy per row.
      const { rows, total } = service.entries(req.tenant, { ...page, event: req.query.event, user: req.query.user, since: req.query.since });
      return envelope(rows, total, page, req.raw.originalUrl);
    },
  });
}
