import { envelope, envelopeSchema, pageOf, policy, type RouteRegistrar } from '../../server/sdk.ts';
import { auditEntry, auditQuery } from './schemas.ts';
import type { AuditService } from './service.ts';

export function auditRoutes(r: RouteRegistrar, service: AuditService): void {
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
      const { rows, total } = service.list(req.tenant, { ...page, event: req.query.event, user: req.query.user, since: req.query.since });
      return envelope(
        rows.map((r) => ({ ts: r.ts, event: r.event, tenant: req.tenant.host, user: r.user, ip: r.ip, ua: r.ua, extra: r.extra })),
        total,
        page,
        req.raw.originalUrl,
      );
    },
  });
}
