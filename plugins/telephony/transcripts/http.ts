import { z } from 'zod';
import {
  CSV_MAX_ROWS,
  csvHeaders,
  envelope,
  envelopeSchema,
  pageOf,
  pageQuery,
  policy,
  reply,
  requireBodyless,
  toCsv,
  type RouteRegistrar,
} from '../../../server/sdk.ts';
import { actor, audited, err, V1 } from '../http-common.ts';
import * as S from '../schemas.ts';
import type { TelephonyServices } from '../services.ts';
import { NOT_FOUND_PAGE, renderSharePage, SHARE_PAGE_HEADERS } from './page.ts';

/** Transcripts (v1), their share links, and the public page of a shared one. */
export function transcriptHttp(r: RouteRegistrar, svc: TelephonyServices, opts: { shareViewsPerMinute: number }): void {
  r.add({
    method: 'GET',
    path: `${V1}/transcripts`,
    area: 'transcripts',
    auth: policy.v1Admin,
    summary: 'Transcript summaries, newest first',
    query: S.transcriptQuery,
    responses: { 200: { description: 'list envelope of transcript summaries', schema: envelopeSchema(S.transcriptSummary) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const { data, total } = svc.transcripts.list(req.tenant, { source: req.query.source, q: req.query.q, since: req.query.since, ...page });
      return envelope(data, total, page, req.raw.originalUrl);
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/transcripts/export`,
    area: 'transcripts',
    auth: policy.v1Admin,
    summary: 'The transcript summaries of a filter (as GET /transcripts: source, q, since) as CSV, newest first, at most 50000 rows',
    description: "RFC 4180 with a UTF-8 BOM; a cell starting with = + - @ gets a leading ' (no formula runs when it is opened in a spreadsheet).",
    query: S.transcriptQuery.omit({ limit: true, offset: true }),
    responses: { 200: { description: 'CSV', contentType: 'text/csv' } },
    handler: (req) => {
      const { data } = svc.transcripts.list(req.tenant, { source: req.query.source, q: req.query.q, since: req.query.since, limit: CSV_MAX_ROWS, offset: 0 });
      const cols = [
        'callId',
        'callerSource',
        'startedUtc',
        'endedUtc',
        'durationSec',
        'phone',
        'displayName',
        'number',
        'outcome',
        'rule',
        'language',
        'turnCount',
        'tokensTotal',
      ] as const;
      return reply.text(
        200,
        toCsv(
          cols,
          data.map((t) => cols.map((k) => t[k])),
        ),
        'text/csv; charset=utf-8',
        csvHeaders('transcripts.csv'),
      );
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/transcripts/:callId`,
    area: 'transcripts',
    auth: policy.v1Admin,
    summary: 'One full transcript',
    params: z.object({ callId: z.string().max(64) }),
    responses: { 200: { description: 'full transcript', schema: S.fullTranscript }, 404: err('not_found') },
    handler: (req) => svc.transcripts.read(req.tenant, req.params.callId),
  });

  // ---- transcript share links (README "Transcript sharing") ------------------------------------
  r.add({
    method: 'POST',
    path: `${V1}/transcripts/:callId/shares`,
    area: 'transcripts',
    auth: policy.v1Admin,
    summary: 'Create a share link of a transcript: a public read-only page; the token is in this response only',
    description:
      'ttlHours 0 = never expires (default 24, at most 8760). Stored as SHA-256; lists show only its last 8 characters. Emits transcript.share.created.',
    params: z.object({ callId: z.string().max(64) }),
    body: S.shareCreate,
    responses: { 201: { description: 'the share with its token and URL (once)', schema: S.shareCreated }, 404: err('not_found: no such transcript') },
    handler: (req) => {
      const { share, token } = svc.shares.create(req.tenant, req.params.callId, req.body.ttlHours, actor(req));
      const out = { ...share, token, url: `${req.publicOrigin}/transcript.ashx?share=${token}` };
      return audited(
        svc,
        req,
        'transcript-share-create',
        { call: share.callId, share: share.id, tail: share.tokenTail, ttlHours: share.ttlHours },
        reply(201, out),
      );
    },
  });
  r.add({
    method: 'GET',
    path: `${V1}/transcripts/:callId/shares`,
    area: 'transcripts',
    auth: policy.v1Admin,
    summary: 'Share links of one transcript, newest first (tokens never shown: only their last 8 characters)',
    params: z.object({ callId: z.string().max(64) }),
    query: pageQuery,
    responses: { 200: { description: 'list envelope of shares', schema: envelopeSchema(S.shareView) }, 404: err('not_found: no such transcript') },
    handler: (req) => {
      const page = pageOf(req.query);
      const { data, total } = svc.shares.list(req.tenant, req.params.callId, page.limit, page.offset);
      return envelope(data, total, page, req.raw.originalUrl);
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/transcripts/:callId/shares/:shareId/revoke`,
    area: 'transcripts',
    auth: policy.v1Admin,
    summary: 'Revoke a share link at once (idempotent: revoking again changes nothing)',
    params: S.shareParams,
    responses: { 200: { description: 'the share, status revoked', schema: S.shareView }, 404: err('not_found: no such transcript or share') },
    handler: (req) => {
      requireBodyless(req.rawBody);
      const { share, changed } = svc.shares.revoke(req.tenant, req.params.callId, req.params.shareId, actor(req));
      return changed ? audited(svc, req, 'transcript-share-revoke', { call: share.callId, share: share.id, tail: share.tokenTail }, share) : share;
    },
  });
  r.add({
    // Query verb, not a path segment: the access log records paths only, so the token stays out of it.
    method: 'GET',
    path: '/transcript.ashx?share',
    area: 'transcripts',
    auth: policy.public,
    summary: 'Public read-only page of a shared transcript (HTML); unknown, expired and revoked links get the same 404 page',
    description: "No script (CSP default-src 'none'), noindex, no Referer, no-store; rate-limited per IP, found or not. Emits transcript.share.viewed.",
    query: z.object({ share: z.string().max(200) }),
    rateLimit: { name: 'transcript-share-view', perMinute: opts.shareViewsPerMinute },
    responses: {
      200: { description: 'the transcript page', contentType: 'text/html' },
      404: { description: 'the one page for every link that does not open', contentType: 'text/html' },
    },
    handler: (req) => {
      const html = (status: number, body: string) => reply.text(status, body, 'text/html; charset=utf-8', { ...SHARE_PAGE_HEADERS });
      const opened = svc.shares.open(req.tenant, req.query.share, req.ip);
      if (!opened) return html(404, NOT_FOUND_PAGE);
      svc.audit.write(req.tenant, {
        event: 'transcript-share-view',
        ip: req.ip,
        ua: req.ua,
        extra: { call: opened.share.callId, share: opened.share.id, tail: opened.share.tokenTail },
      });
      return html(200, renderSharePage(opened.transcript));
    },
  });
}
