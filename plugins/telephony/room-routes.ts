import { z } from 'zod';
import { AuthenticationError, policy, reply, type AuthService, type RouteRegistrar, type RouteRequest } from '../../server/sdk.ts';
import { renderRoomPage, ROOM_NOT_FOUND_PAGE, ROOM_PAGE_HEADERS, ROOM_SCRIPT } from './room-page.ts';
import type { RoomService } from './rooms.ts';

const V1 = '/api.ashx/v1';
const err = (d: string) => ({ description: d });
const numberRe = /^\+?[0-9]{2,20}$/;

const joinBody = z.object({
  number: z.string().regex(numberRe, 'a virtual number'),
  /** The visitor's SDP offer with its ICE candidates (no trickle). */
  sdp: z.string().min(10).max(20_000),
  type: z.literal('offer').optional(),
});
const joinAnswer = z.object({
  callId: z.string().describe('vnum + 12 hex'),
  sdp: z.string().describe("the appliance's SDP answer (ICE host candidates, DTLS-SRTP, PCMU or PCMA)"),
  codec: z.string(),
  leaveToken: z.string().describe('proves the leave request comes from this visitor; shown once'),
  maxDurationSec: z.number().int(),
});
const leaveBody = z.object({ callId: z.string().regex(/^vnum[0-9a-f]{12}$/), leaveToken: z.string().min(1).max(100) });

/** A signed-in room's visitor: an OIDC bearer of this tenant (any role); null for a public room. */
async function visitorOf(auth: AuthService, req: RouteRequest, visibility: string): Promise<string> {
  if (visibility !== 'signed-in') {
    return '';
  }
  if (!req.headers.authorization) throw new AuthenticationError('this room is for signed-in users: sign in with the appliance', 'login_required');
  const p = await auth.authenticate(policy.bearer(), {
    headers: req.headers as Record<string, string | string[] | undefined>,
    tenant: req.tenant,
    rawHost: req.hostHeader,
    bodyLen: req.rawBody.length,
  });
  return p?.userName ?? p?.subject ?? '';
}

export function roomRoutes(r: RouteRegistrar, rooms: RoomService, auth: AuthService, o: { joinsPerMinute: number; viewsPerMinute: number }): void {
  r.add({
    method: 'GET',
    path: '/room.ashx?number',
    area: 'rooms',
    auth: policy.public,
    summary: "A virtual number's room page (HTML): the visitor talks to the number's AI in the browser",
    description: "Public page for every room; a signed-in room's join needs an OIDC bearer. Script from /room.ashx?asset=room.js only (CSP script-src 'self').",
    query: z.object({ number: z.string().max(40) }),
    rateLimit: { name: 'room-page', perMinute: o.viewsPerMinute },
    responses: { 200: { description: 'the room page', contentType: 'text/html' }, 404: { description: 'no such room', contentType: 'text/html' } },
    handler: (req) => {
      const html = (status: number, body: string) => reply.text(status, body, 'text/html; charset=utf-8', { ...ROOM_PAGE_HEADERS });
      const n = numberRe.test(req.query.number) ? rooms.number(req.tenant, req.query.number) : null;
      if (!n) return html(404, ROOM_NOT_FOUND_PAGE);
      return html(200, renderRoomPage({ number: n.number, name: n.name, visibility: n.visibility, maxDurationSec: n.max_duration_sec }));
    },
  });
  r.add({
    method: 'GET',
    path: '/room.ashx?asset',
    area: 'rooms',
    auth: policy.public,
    summary: "The room page's script",
    query: z.object({ asset: z.literal('room.js') }),
    rateLimit: { name: 'room-page', perMinute: o.viewsPerMinute },
    responses: { 200: { description: 'JavaScript', contentType: 'text/javascript' } },
    handler: () => reply.text(200, ROOM_SCRIPT, 'text/javascript; charset=utf-8', { ...ROOM_PAGE_HEADERS, 'Cache-Control': 'no-cache' }),
  });
  r.add({
    method: 'POST',
    path: `${V1}/rooms/join`,
    area: 'rooms',
    auth: policy.public,
    summary: "Join a virtual number's room: the visitor's SDP offer in, the appliance's answer out (WebRTC signalling)",
    description:
      'Public rooms take anyone; signed-in rooms an OIDC bearer of the tenant (401 login_required without). Starts a vnum call: call.started once media flows, call.ended and transcript.saved with source vnum. Rate-limited per client IP.',
    body: joinBody,
    bodyLimit: 32 * 1024,
    rateLimit: { name: 'room-join', perMinute: o.joinsPerMinute },
    responses: {
      201: { description: 'the answer', schema: joinAnswer },
      400: err('invalid_request: bad number or SDP (the field is named)'),
      401: err('login_required: a signed-in room without a bearer; invalid_token'),
      404: err('not_found: no such room'),
      503: err('bridge_not_configured, room_unavailable (no engine key), no_capacity'),
    },
    handler: async (req) => {
      const n = rooms.number(req.tenant, req.body.number);
      if (!n) return reply(404, { error: 'not_found', error_description: 'no such room' });
      const visitor = await visitorOf(auth, req, n.visibility);
      return reply(201, await rooms.join(req.tenant, n, visitor, req.ip, req.body.sdp));
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/rooms/leave`,
    area: 'rooms',
    auth: policy.public,
    summary: 'The visitor leaves the room (their hang-up); idempotent',
    description: 'Needs the leaveToken of the join answer. Outcome far-hangup, or empty-room when the visitor never spoke.',
    body: leaveBody,
    bodyLimit: 4096,
    rateLimit: { name: 'room-join', perMinute: o.joinsPerMinute * 3 },
    responses: { 200: { description: 'left', schema: z.object({ ok: z.boolean(), callId: z.string(), ended: z.boolean() }) }, 404: err('not_found') },
    handler: (req) => rooms.leave(req.tenant, req.body.callId, req.body.leaveToken),
  });
}
