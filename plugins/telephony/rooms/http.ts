import { z } from 'zod';
import {
  AuthenticationError,
  cookies,
  policy,
  reply,
  type AuditWriter,
  type AuthService,
  type RouteRegistrar,
  type RouteRequest,
} from '../../../server/sdk.ts';
import { renderRoomPage, renderSignInFailedPage, ROOM_NOT_FOUND_PAGE, ROOM_PAGE_HEADERS, ROOM_SCRIPT, SIGN_IN_UNAVAILABLE_PAGE } from './page.ts';
import { cookieHeader, ROOM_CALLBACK_PATH, ROOM_LOGIN_COOKIE, ROOM_SESSION_COOKIE, type RoomSignIn, type RoomVisitor } from './sign-in.ts';
import type { RoomService } from './calls.ts';

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
  sdp: z.string().describe("the appliance's SDP answer (ICE host candidates, DTLS-SRTP, Opus when the browser offers it, else PCMU or PCMA)"),
  codec: z.string(),
  leaveToken: z.string().describe('proves the leave request comes from this visitor; shown once'),
  maxDurationSec: z.number().int(),
});
const leaveBody = z.object({ callId: z.string().regex(/^vnum[0-9a-f]{12}$/), leaveToken: z.string().min(1).max(100) });

/**
 * A signed-in room's visitor: the room session of this tenant (room-sign-in.ts), or an OIDC
 * bearer of the tenant (any role; API clients). A public room's visitor is anonymous ('').
 */
async function visitorOf(auth: AuthService, signIn: RoomSignIn, req: RouteRequest, visibility: string): Promise<string> {
  if (visibility !== 'signed-in') {
    return '';
  }
  if (req.headers.authorization) {
    const p = await auth.authenticate(policy.bearer(), {
      headers: req.headers as Record<string, string | string[] | undefined>,
      tenant: req.tenant,
      rawHost: req.hostHeader,
      bodyLen: req.rawBody.length,
    });
    return p?.userName ?? p?.subject ?? '';
  }
  const v = signIn.visitor(req.tenant, cookies.get(req.headers.cookie, ROOM_SESSION_COOKIE));
  // No session, an expired one, one of another tenant (it does not open here), or a deactivated account.
  if (!v) throw new AuthenticationError('this room is for signed-in users of this appliance: open the room page to sign in', 'login_required');
  return v.name;
}

const qs = (number: string) => `/room.ashx?number=${encodeURIComponent(number)}`;

export function roomRoutes(
  r: RouteRegistrar,
  rooms: RoomService,
  signIn: RoomSignIn,
  auth: AuthService,
  audit: AuditWriter,
  o: { joinsPerMinute: number; viewsPerMinute: number },
): void {
  const html = (status: number, body: string, headers: Record<string, string> = {}) =>
    reply.text(status, body, 'text/html; charset=utf-8', { ...ROOM_PAGE_HEADERS, ...headers });
  r.add({
    method: 'GET',
    path: '/room.ashx?number',
    area: 'rooms',
    auth: policy.public,
    summary: "A virtual number's room page (HTML): the visitor talks to the number's AI in the browser",
    description:
      "A signed-in room's page sends a visitor without a room session through the tenant's OpenID Provider (302 to /oauth2/v1/authorize, " +
      "client sovcomms-rooms, code + PKCE S256; it comes back to /room/callback), first to the tenant's own host name when addressed by another. " +
      "Script from /room.ashx?asset=room.js only (CSP script-src 'self').",
    query: z.object({ number: z.string().max(40) }),
    rateLimit: { name: 'room-page', perMinute: o.viewsPerMinute },
    responses: {
      200: { description: 'the room page', contentType: 'text/html' },
      302: { description: "signed-in room, no room session: to the tenant's sign-in (sets the pending sign-in cookie)" },
      404: { description: 'no such room', contentType: 'text/html' },
      503: { description: 'signed-in room while the OpenID Provider is not running', contentType: 'text/html' },
    },
    handler: (req) => {
      const n = numberRe.test(req.query.number) ? rooms.number(req.tenant, req.query.number) : null;
      if (!n) return html(404, ROOM_NOT_FOUND_PAGE);
      let visitor: RoomVisitor | null = null;
      if (n.visibility === 'signed-in') {
        if (!signIn.available) return html(503, SIGN_IN_UNAVAILABLE_PAGE);
        visitor = signIn.visitor(req.tenant, cookies.get(req.headers.cookie, ROOM_SESSION_COOKIE));
        if (!visitor) {
          // The sign-in's callback is registered for the tenant's own host names only (publicOrigin):
          // a visitor who came by another address (an IP) moves there first, so the cookies of the
          // sign-in and of the session belong to the host the room is used on.
          if (req.origin !== req.publicOrigin) return reply.redirect(`${req.publicOrigin}${qs(n.number)}`, 302);
          const out = signIn.start(req.tenant, req.publicOrigin, n.number);
          return reply.redirect(out.location, 302, { 'Set-Cookie': cookieHeader(out.cookie, req.publicOrigin), 'Referrer-Policy': 'no-referrer' });
        }
      }
      return html(
        200,
        renderRoomPage({ number: n.number, name: n.name, visibility: n.visibility, maxDurationSec: n.max_duration_sec, visitor: visitor?.name }),
      );
    },
  });
  r.add({
    method: 'GET',
    path: '/room.ashx?signed-in',
    aliases: [ROOM_CALLBACK_PATH],
    area: 'rooms',
    auth: policy.public,
    summary: "Where the OpenID Provider returns after a room's sign-in: sets the room session and goes back to the room",
    description:
      'Needs the pending sign-in cookie of the same browser (set when the room page sent it to sign in). The code is exchanged in process ' +
      '(PKCE verifier from that cookie), the ID token nonce checked, the tokens revoked; the room session is a cookie sov_room ' +
      '(HttpOnly, SameSite=Lax, Secure on TLS, sealed for this tenant, plugins.telephony.rooms.sessionTtlSec).',
    query: z.object({
      code: z.string().max(2000).optional(),
      state: z.string().max(2000).optional(),
      error: z.string().max(200).optional(),
      error_description: z.string().max(2000).optional(),
      iss: z.string().max(2000).optional(),
    }),
    rateLimit: { name: 'room-sign-in', perMinute: o.joinsPerMinute * 3 },
    responses: {
      302: { description: 'signed in: back to the room page, with the room session cookie' },
      400: { description: 'the sign-in failed (not started in this browser, expired, declined, not confirmed)', contentType: 'text/html' },
    },
    handler: async (req) => {
      const out = await signIn.finish(req.tenant, req.publicOrigin, req.query, cookies.get(req.headers.cookie, ROOM_LOGIN_COOKIE), {
        ip: req.ip,
        ua: req.ua,
        headers: req.headers as Record<string, string | string[] | undefined>,
      });
      if (!out.ok) {
        audit.write(req.tenant, {
          event: 'room-sign-in-fail',
          ip: req.ip,
          ua: req.ua,
          extra: { error: out.error, ...(out.number ? { number: out.number } : {}) },
        });
        return html(400, renderSignInFailedPage(out.error, out.number ? qs(out.number) : null));
      }
      audit.write(req.tenant, { event: 'room-sign-in', user: out.user.name, ip: req.ip, ua: req.ua, extra: { number: out.number } });
      return reply.redirect(qs(out.number), 302, { 'Set-Cookie': cookieHeader(out.session, req.origin), 'Cache-Control': 'no-store' });
    },
  });
  r.add({
    method: 'POST',
    path: `${V1}/rooms/sign-out`,
    area: 'rooms',
    auth: policy.public,
    summary: 'Ends the room session of this browser (removes its cookie); idempotent',
    body: z.object({}).optional(),
    bodyLimit: 1024,
    rateLimit: { name: 'room-sign-in', perMinute: o.joinsPerMinute * 3 },
    responses: { 200: { description: 'signed out', schema: z.object({ ok: z.boolean() }) } },
    handler: (req) => reply(200, { ok: true }, { 'Set-Cookie': cookieHeader({ name: ROOM_SESSION_COOKIE, value: '', maxAgeSec: 0, path: '/' }, req.origin) }),
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
      "Public rooms take anyone; signed-in rooms the room session cookie of this tenant (from the room page's sign-in) or an OIDC bearer of the tenant, " +
      "else 401 login_required (a session of another tenant does not open here). The signed-in user is the call's visitor and the transcript's requestedBy. " +
      'Starts a vnum call: call.started once media flows, call.ended and transcript.saved with source vnum. Rate-limited per client IP.',
    body: joinBody,
    bodyLimit: 32 * 1024,
    rateLimit: { name: 'room-join', perMinute: o.joinsPerMinute },
    responses: {
      201: { description: 'the answer', schema: joinAnswer },
      400: err('invalid_request: bad number or SDP (the field is named)'),
      401: err('login_required: a signed-in room without a room session of this tenant or a bearer; invalid_token: a bad bearer'),
      404: err('not_found: no such room'),
      503: err('bridge_not_configured, room_unavailable (no engine key), no_capacity'),
    },
    handler: async (req) => {
      const n = rooms.number(req.tenant, req.body.number);
      if (!n) return reply(404, { error: 'not_found', error_description: 'no such room' });
      const visitor = await visitorOf(auth, signIn, req, n.visibility);
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
