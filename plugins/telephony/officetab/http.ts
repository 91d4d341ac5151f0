import { z } from 'zod';
import { policy, type RouteRegistrar } from '../../../server/sdk.ts';
import { OfficeTabNoticeSchema } from '../bridge/inbound/officetab-control.ts';
import type { OfficeTabService } from './service.ts';

const V1 = '/api.ashx/v1';
const err = (d: string) => ({ description: d });
const ringId = z.string().regex(/^[A-Za-z0-9_-]{8,64}$/, 'the ringId of a ring frame');

const acceptBody = z.object({
  ringId,
  /** The tab's SDP offer with its ICE candidates (no trickle). */
  sdp: z.string().min(10).max(20_000),
});
const acceptAnswer = z.object({
  ringId: z.string(),
  callId: z.string().describe('the call the tab now carries (vnum + 12 hex for inbound calls, oac-… for an outbound call transferred to the user)'),
  sdp: z.string().describe("the appliance's SDP answer (ICE host candidates, DTLS-SRTP, Opus when the browser offers it, else PCMU or PCMA)"),
  codec: z.string(),
});
const ringBody = z.object({ ringId });
const okAnswer = z.object({ ok: z.boolean(), ringId: z.string() });

/** The office tab (officetab.ts): the console tab as the signed-in user's phone. */
export function officeTabRoutes(r: RouteRegistrar, tabs: OfficeTabService): void {
  r.add({
    method: 'GET',
    path: `${V1}/phone/register`,
    area: 'phone',
    auth: policy.bearer(),
    summary: "Registers this browser tab as the signed-in user's phone for as long as the connection stays open (text/event-stream)",
    description:
      'Any role; a person\'s OIDC bearer (not an API key). Frames: `event: registered` + `data: {"user","bridge"}` once the ' +
      'bridge knows the tab (from then on calls ring it), `event: ring` + `data: {"ringId","callId","callerNumber","callerName",' +
      '"ringTimeoutSec"}` when an inbound route or a transfer rings the user, `event: stop` + `data: {"ringId","reason"}` when ' +
      'it stops ringing (answered elsewhere, the caller hung up, rang out) or an accepted call ends, and a `: ping` comment every 15 s. ' +
      `At most 8 tabs per user (409 conflict); 503 bridge_not_configured without a bridge.`,
    rateLimit: 'sensitive',
    responses: {
      200: { description: 'text/event-stream' },
      403: err('insufficient_scope: not a user’s own sign-in'),
      409: err('conflict: too many tabs'),
      503: err('bridge_not_configured'),
    },
    handler: (req, res) => tabs.open(res, req.tenant, req.principal),
  });
  r.add({
    method: 'POST',
    path: `${V1}/phone/accept`,
    area: 'phone',
    auth: policy.bearer(),
    summary: 'Accept a ringing call in this tab: the tab’s WebRTC offer in, the appliance’s answer out',
    description:
      'Only the signed-in user the call rings for, in their own tenant (404 otherwise). The first endpoint of the user to answer ' +
      '(this tab, another tab, a desk phone) takes the call; a later accept answers 409 conflict.',
    body: acceptBody,
    bodyLimit: 32 * 1024,
    responses: {
      200: { description: 'the answer', schema: acceptAnswer },
      400: err('invalid_request: bad ringId or SDP'),
      404: err('not_found: no such call is ringing for you'),
      409: err('conflict: answered elsewhere, or over'),
    },
    handler: (req) => tabs.accept(req.tenant, req.principal, req.body.ringId, req.body.sdp),
  });
  for (const what of ['decline', 'hangup'] as const) {
    r.add({
      method: 'POST',
      path: `${V1}/phone/${what}`,
      area: 'phone',
      auth: policy.bearer(),
      summary: what === 'decline' ? 'Decline a call ringing in this tab (the user’s other endpoints ring on)' : 'Hang up the call this tab carries',
      description:
        what === 'decline'
          ? 'When no endpoint of the user answers, the route’s fallback takes the call (README "Office tab"). Idempotent.'
          : 'Ends the call for the caller too (outcome finished, or transferred-to-vnum after a transfer). Idempotent.',
      body: ringBody,
      bodyLimit: 4096,
      responses: { 200: { description: 'done', schema: okAnswer }, 400: err('invalid_request') },
      handler: (req) => tabs.release(req.tenant, req.principal, req.body.ringId, what),
    });
  }
  r.add({
    method: 'POST',
    path: '/internal/bridge/officetab',
    area: 'internal',
    auth: policy.custom('telephony-bridge', 'telephony bridge control token'),
    summary: 'Internal: the bridge rings an office tab or stops ringing it (loopback, control token)',
    rateLimit: false,
    bodyLimit: 16 * 1024,
    body: OfficeTabNoticeSchema,
    responses: { 200: { description: '{ok} or {ok:false, error} when the tab is gone' } },
    handler: (req) => tabs.notice(req.body),
  });
}
