import path from 'node:path';
import { z } from 'zod';
import { type AuditWriter, InputError, NotFoundError, policy, reply, type RouteRegistrar } from '../../server/sdk.ts';
import type { LotlServices } from './schemas.ts';
import { anchorItem, anchorQuery, anchorsQuery, manifest, runReport } from './schemas.ts';
import { isoCountry, type Candidate } from './service.ts';
import { readTar, TarError } from './tar.ts';

const XML_TYPES = ['application/xml', 'text/xml', 'application/vnd.etsi.tsl+xml'];
const TAR_TYPES = ['application/x-tar', 'application/tar', 'application/gzip', 'application/x-gzip', 'application/octet-stream'];
export const IMPORT_BUCKET = 'lotl-import';
export const REFRESH_BUCKET = 'lotl-refresh';
/** An import's body, and also what a gzip archive may unpack to. */
const IMPORT_BODY_LIMIT = 128 * 1024 * 1024;
export function lotlRoutes(r: RouteRegistrar, s: LotlServices, audit: AuditWriter): void {
  const { service, schedule, config } = s;
  r.add({
    method: 'GET',
    path: '/lotl.ashx?status',
    summary: 'Trusted-list cache: LotlManifest plus each list (sequence, issued, next update, signature result, stale)',
    auth: policy.public,
    query: z.object({ status: z.string().optional() }),
    responses: { 200: { description: 'LotlManifest with per-list detail', schema: manifest } },
    handler: (_req, res) => {
      res.setHeader('Cache-Control', 'no-cache');
      return service.manifest(schedule.nextRefreshAt(), schedule.failures());
    },
  });

  r.add({
    method: 'GET',
    path: '/lotl.ashx?anchors',
    summary: 'Trust anchors in service (certificates of the verified, current national lists), optionally of one country',
    auth: policy.public,
    query: anchorsQuery,
    responses: { 200: { description: 'JSON list of trust-anchor fingerprints with their service', schema: z.array(anchorItem) } },
    handler: (req, res) => {
      res.setHeader('Cache-Control', 'no-cache');
      return service.anchors(req.query.country).map((a) => ({
        sha256: a.sha256,
        country: isoCountry(a.territory),
        territory: a.territory,
        tsp_name: a.tsp_name,
        service_name: a.service_name,
        service_type: a.service_type,
        status: a.status,
        status_since: a.status_since,
      }));
    },
  });

  r.add({
    method: 'GET',
    path: '/lotl.ashx?anchor',
    summary: 'One trust-anchor certificate as PEM, by the SHA-256 of its DER',
    auth: policy.public,
    query: anchorQuery,
    responses: {
      200: { description: 'PEM certificate', contentType: 'application/x-pem-file' },
      404: { description: 'no anchor in service with that fingerprint' },
    },
    handler: (req) => {
      const pem = service.anchorPem(req.query.anchor);
      if (!pem) throw new NotFoundError(`no trust anchor ${req.query.anchor.toLowerCase()} in service`);
      return reply.text(200, pem, 'application/x-pem-file', { 'Cache-Control': 'public, max-age=300' });
    },
  });

  r.add({
    method: 'POST',
    path: '/lotl.ashx?refresh',
    summary: 'Fetch the LOTL and the national lists from upstream now (blocks; bounded total time) and report per list',
    description: `Admin bearer or the admin HMAC header for bucket \`${REFRESH_BUCKET}\`.`,
    auth: policy.adminOrHmac(REFRESH_BUCKET),
    rateLimit: 'sensitive',
    bodyType: 'none',
    query: z.object({ refresh: z.string().optional() }),
    responses: { 200: { description: 'what happened to each list', schema: runReport } },
    handler: async (req) => {
      const report = await service.refresh();
      req.log.info({ by: req.principal?.subject, accepted: report.accepted, rejected: report.rejected }, 'trusted-list refresh');
      audit.write(req.tenant, {
        event: 'lotl-refresh',
        user: req.principal?.userName,
        ip: req.ip,
        ua: req.ua,
        extra: { accepted: report.accepted, rejected: report.rejected, anchors: report.anchor_count },
      });
      return report;
    },
  });

  r.add({
    method: 'POST',
    path: '/lotl.ashx?import',
    summary: 'Air-gapped import: one trusted-list XML, or a tar (optionally gzip) of the LOTL and national lists',
    description: `Super-admin (an admin of the primary tenant: the anchors are appliance-wide) by bearer, or the admin HMAC header for bucket \`${IMPORT_BUCKET}\` on the primary host. Same checks as a refresh.`,
    auth: policy.superAdmin(IMPORT_BUCKET),
    rateLimit: 'sensitive',
    bodyType: 'raw',
    contentTypes: [...XML_TYPES, ...TAR_TYPES],
    bodyLimit: IMPORT_BODY_LIMIT,
    query: z.object({ import: z.string().optional(), name: z.string().max(200).optional() }),
    responses: { 200: { description: 'what happened to each list', schema: runReport } },
    handler: async (req) => {
      const body = req.body as Buffer;
      if (!body.length) throw new InputError('an XML document or a tar archive is required', 'invalid_request');
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      let files: Candidate[];
      if (XML_TYPES.includes(type) || (!type && body.subarray(0, 5).toString() === '<?xml')) {
        const name = path.basename(req.query.name ?? 'upload.xml');
        files = [{ name, source: `import:${name}`, bytes: body }];
      } else {
        try {
          // Unpacked, an archive may be no larger than the plain tar this route takes; each list
          // is bounded as it arrives, so a gzip bomb is refused early with bounded memory.
          const entries = await readTar(body, {
            maxFiles: 500,
            maxBytes: IMPORT_BODY_LIMIT,
            maxEntryBytes: config.maxListBytes,
            keep: (name) => /\.xml$/i.test(name),
          });
          files = entries.map((e) => ({ name: path.posix.basename(e.name), source: `import:${path.posix.basename(e.name)}`, bytes: e.bytes }));
        } catch (e) {
          if (e instanceof TarError) throw new InputError(e.message, 'invalid_request');
          throw e;
        }
        if (!files.length) throw new InputError('the archive holds no .xml file', 'invalid_request');
      }
      for (const f of files) {
        if (f.bytes.length > config.maxListBytes) throw new InputError(`${f.name} is larger than ${config.maxListBytes} bytes`, 'invalid_request');
      }
      const report = await service.import(files);
      req.log.info({ by: req.principal?.subject, files: files.length, accepted: report.accepted, rejected: report.rejected }, 'trusted-list import');
      audit.write(req.tenant, {
        event: 'lotl-import',
        user: req.principal?.userName,
        ip: req.ip,
        ua: req.ua,
        extra: { files: files.length, accepted: report.accepted, rejected: report.rejected, anchors: report.anchor_count },
      });
      return report;
    },
  });
}
