import { z } from 'zod';
import {
  envelope,
  envelopeSchema,
  InputError,
  pageOf,
  pageQuery,
  pascalizeKeys,
  policy,
  reply,
  requireBodyless,
  type RouteRegistrar,
  type RouteRequest,
} from '../../../server/sdk.ts';
import { numberView, trunkView } from './admin.ts';
import { NOT_FOUND_PAGE, renderSharePage, SHARE_PAGE_HEADERS } from '../transcripts/page.ts';
import type { BridgeLink } from '../bridge-link/link.ts';
import { toRecord } from '../calls/outbound.ts';
import { BridgeEventSchema, isBridgeEventType } from '../control.ts';
import * as S from '../schemas.ts';
import { inboundRoutes } from '../inbound/http.ts';
import type { TelephonyServices } from '../schemas.ts';

/** One audit entry for an admin change (never a secret in `extra`: the audit writer drops those keys anyway). */
function audited<T>(svc: TelephonyServices, req: RouteRequest, event: string, extra: Record<string, string | number | boolean>, out: T): T {
  svc.audit.write(req.tenant, { event, user: req.principal?.userName ?? req.principal?.subject ?? '', ip: req.ip, ua: req.ua, extra });
  return out;
}

const okBody = z.object({ ok: z.boolean() }).loose();
const err = (d: string) => ({ description: d });

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

export function telephonyRoutes(r: RouteRegistrar, svc: TelephonyServices, opts: { shareViewsPerMinute: number }): void {
  const V1 = '/api.ashx/v1';
  inboundRoutes(r, svc);

  // ---- calls -----------------------------------------------------------------------------------
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
      400: err('bad input, naming the field'),
      502: err('bridge_unreachable'),
      503: err('bridge_not_configured'),
    },
    handler: async (req) => svc.calls.create(req.tenant, req.principal!, req.body),
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
    path: `${V1}/calls/stats`,
    area: 'calls',
    auth: policy.v1Admin,
    summary: 'Call figures since an instant (default 24 hours): totals by state, at the bridge now, per-hour counts',
    query: S.callStatsQuery,
    responses: { 200: { description: 'figures', schema: S.callStats } },
    handler: (req) => svc.calls.stats(req.tenant, req.query.since ?? new Date(Date.now() - 24 * 3600_000).toISOString()),
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

  // ---- numbers and transcripts -----------------------------------------------------------------
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
    path: `${V1}/transcripts/:callId`,
    area: 'transcripts',
    auth: policy.v1Admin,
    summary: 'One full transcript',
    params: z.object({ callId: z.string().max(64) }),
    responses: { 200: { description: 'full transcript', schema: S.fullTranscript }, 404: err('not_found') },
    handler: (req) => svc.transcripts.read(req.tenant, req.params.callId),
  });

  // ---- transcript share links (README "Transcript sharing") ------------------------------------
  const actor = (req: RouteRequest) => req.principal?.userName ?? req.principal?.subject ?? '';
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
      const out = { ...share, token, url: `${req.linkOrigin}/transcript.ashx?share=${token}` };
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

  // ---- outbound routes (spec "Route rules") ----------------------------------------------------
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
    responses: { 201: { description: 'created row', schema: S.outboundRoute }, 409: err('duplicate_route') },
    handler: (req) => reply(201, svc.admin.addOutbound(req.tenant, req.body)),
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
    handler: (req) => svc.admin.updateOutbound(req.tenant, req.params.match, req.body.trunkIds),
  });
  r.add({
    method: 'DELETE',
    path: `${V1}/outbound-routes/:match`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Delete an outbound route (the default trunk is a setting, not a row)',
    params: S.matchParam,
    responses: { 200: { description: '{deleted: row}', schema: z.object({ deleted: S.outboundRoute }) }, 404: err('not_found') },
    handler: (req) => ({ deleted: svc.admin.deleteOutbound(req.tenant, req.params.match) }),
  });

  // ---- inbound routes --------------------------------------------------------------------------
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
      const rows = svc.admin.inbound(req.tenant).map((x) => ({ did: x.did, fromNumber: x.fromNumber, user: x.user }));
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
    handler: (req) => svc.admin.inboundOne(req.tenant, req.params.did, req.query.fromNumber),
  });
  r.add({
    method: 'POST',
    path: `${V1}/inbound-routes`,
    area: 'routes',
    auth: policy.v1Admin,
    summary: 'Insert an inbound route just before the catchall; 409 duplicate_route on an existing (Did, FromNumber)',
    body: S.inboundCreate,
    responses: { 201: { description: 'created row (PascalCase echo)', schema: pascalRow }, 409: err('duplicate_route') },
    handler: (req) => reply(201, pascalizeKeys({ ...svc.admin.addInbound(req.tenant, req.body) })),
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
    handler: (req) => pascalizeKeys({ ...svc.admin.updateInbound(req.tenant, req.params.did, req.query.fromNumber, req.body.user) }),
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
    handler: (req) => ({ deleted: pascalizeKeys({ ...svc.admin.deleteInbound(req.tenant, req.params.did, req.query.fromNumber) }) }),
  });

  // ---- tenant admin (/signal.ashx) -------------------------------------------------------------
  const SIG = '/signal.ashx';
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
    responses: { 200: { description: '{trunks}', schema: z.object({ trunks: z.array(S.trunkView), bridge: z.string() }) } },
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
    body: S.trunkInput,
    responses: { 200: { description: 'the saved trunk', schema: S.trunkView } },
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
    responses: { 200: { description: 'the saved number', schema: S.numberView } },
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
  r.add({
    method: 'GET',
    path: `${SIG}?bridge=status`,
    area: 'admin',
    auth: policy.superAdmin('bridge-status'),
    summary: 'Telephony bridge status (mode, state, its /health)',
    responses: { 200: { description: 'status', schema: okBody } },
    handler: async () => {
      const b = svc.bridge;
      let health: unknown = null;
      if (b.configured) {
        try {
          health = await b.health();
        } catch (e) {
          health = { error: (e as Error).message };
        }
      }
      return { ok: b.state === 'ready', mode: b.mode, state: b.state, pid: b.pid ?? null, controlUrl: b.controlUrl ?? null, lastExit: b.lastExit, health };
    },
  });

  // ---- bridge callbacks (CONTROL-API.md "Bridge → core") --------------------------------------
  r.add({
    method: 'POST',
    path: '/internal/bridge/events',
    area: 'internal',
    auth: policy.custom('telephony-bridge', 'telephony bridge control token'),
    summary: 'Internal: call events from the telephony bridge (loopback, control token)',
    rateLimit: false,
    bodyLimit: 8 * 1024 * 1024,
    body: z.object({ seq: z.number().int().min(0), type: z.string().max(40), callId: z.string().max(64) }).loose(),
    responses: { 200: { description: '{ok, applied}', schema: okBody } },
    handler: (req) => {
      const instance = String(req.headers['x-bridge-instance'] ?? '');
      if (!/^[A-Za-z0-9._-]{1,100}$/.test(instance)) throw new InputError('missing or malformed X-Bridge-Instance header');
      if (!isBridgeEventType(req.body.type)) {
        // Forward compatibility: the bridge retries until a 2xx, so unknown kinds are acknowledged.
        return { ok: true, applied: false, ignored: req.body.type };
      }
      const parsed = BridgeEventSchema.safeParse(req.body);
      if (!parsed.success) {
        // The bridge delivers events in order and retries until a 2xx: a 4xx here would hold
        // back every later event. A malformed one is logged and acknowledged as rejected.
        const i = parsed.error.issues[0]!;
        const rejected = `invalid field ${i.path.join('.')}: ${i.message}`;
        req.log.warn({ type: req.body.type, callId: req.body.callId, rejected }, 'malformed bridge event');
        return { ok: true, applied: false, rejected };
      }
      // Inbound SIP calls (vnum…, rows in inbound.ts) and browser rooms (also vnum…, rows in
      // rooms.ts, reached through CallService's unknown-call hook) share the id prefix: the row decides.
      const id = parsed.data.callId;
      const out = id.startsWith('vnum') && svc.inbound.row(id) ? svc.inbound.applyEvent(instance, parsed.data) : svc.calls.applyEvent(instance, parsed.data);
      svc.instanceSeen?.(instance);
      return { ok: true, ...out };
    },
  });
}
