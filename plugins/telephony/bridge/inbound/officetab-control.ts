/**
 * The office tab's part of the control contract (CONTROL-API.md "Office tab"): a signed-in user's
 * console tab is one of their phones. The core knows the tabs (their live connections) and pushes
 * the full set (PUT /officetabs); the bridge rings them as user endpoints and tells the core what
 * to show (POST /internal/bridge/officetab); the core forwards the user's accept (with the tab's
 * WebRTC offer), decline and hang-up (POST /officetabs/answer|decline|hangup). Both sides import
 * it; it imports only zod, like control.ts.
 */
import { z } from 'zod';

const id = z.string().regex(/^[A-Za-z0-9_-]{8,64}$/, 'an id of 8 to 64 letters, digits, _ or -');

/** One registered tab: which tenant's user it rings for. */
export const OfficeTabSchema = z.object({
  tabId: id,
  tenantId: z.string().min(1).max(200),
  user: z.string().min(1).max(200),
});
export type OfficeTab = z.infer<typeof OfficeTabSchema>;

/** Core → bridge: the full set of tabs open now (replaces), at most 10000. */
export const OfficeTabsBodySchema = z.object({ tabs: z.array(OfficeTabSchema).max(10_000) });
export const OfficeTabsAnswerSchema = z.looseObject({ ok: z.literal(true), count: z.number().int().min(0) });

/** Core → bridge: the user took the call in that tab; its offer with every ICE candidate (no trickle). */
export const OfficeTabAnswerBodySchema = z.object({ ringId: id, tabId: id, offerSdp: z.string().min(10).max(20_000) });
export const OfficeTabAnswerAnswerSchema = z.looseObject({
  ok: z.literal(true),
  answerSdp: z.string().min(10),
  codec: z.string(),
});
export type OfficeTabAnswerAnswer = z.infer<typeof OfficeTabAnswerAnswerSchema>;

/** Core → bridge: the user declined the ringing call, or hung up the call in that tab. */
export const OfficeTabRingBodySchema = z.object({ ringId: id, tabId: id });
export const OfficeTabOkSchema = z.looseObject({ ok: z.literal(true) });

/**
 * Bridge → core (`…/internal/bridge/officetab`): what the tab should show.
 * - `ring`: start ringing (caller, the call it belongs to, how long at most);
 * - `stop`: stop ringing (another endpoint answered, the caller hung up, ring timeout) or, for an
 *   answered tab, the call is over. `reason` in words for the tab.
 */
export const OfficeTabNoticeSchema = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('ring'),
    ringId: id,
    tabId: id,
    tenantId: z.string().min(1).max(200),
    user: z.string().min(1).max(200),
    callId: z.string().min(1).max(64),
    callerNumber: z.string().max(64),
    callerName: z.string().max(200),
    ringTimeoutSec: z.number().int().min(1).max(600),
  }),
  z.object({ op: z.literal('stop'), ringId: id, tabId: id, reason: z.string().max(200) }),
]);
export type OfficeTabNotice = z.infer<typeof OfficeTabNoticeSchema>;
/** The core's answer: `ok:false` when that tab is gone (the bridge stops ringing it). */
export const OfficeTabNoticeAnswerSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true) }),
  z.object({ ok: z.literal(false), error: z.string().max(500) }),
]);
export type OfficeTabNoticeAnswer = z.infer<typeof OfficeTabNoticeAnswerSchema>;
