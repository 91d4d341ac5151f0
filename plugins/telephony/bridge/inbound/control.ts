/**
 * The inbound half of the control contract (CONTROL-API.md "Inbound"): desk-phone accounts the
 * core pushes (PUT /phones), and the two questions the bridge asks the core while a call is up:
 * where an inbound INVITE goes (POST /internal/bridge/inbound) and where the AI may transfer a
 * call (POST /internal/bridge/transfer). Both sides import it; it imports only zod and the
 * shared contract, like control.ts.
 */
import { z } from 'zod';
import { PlaceCallSchema, headerSafe } from '../../control.ts';

/** One desk phone account (an office user's SIP login at the registrar); plaintext only on loopback. */
export const PhoneAccountSchema = z.object({
  tenantId: z.string().min(1).max(200),
  user: z.string().min(1).max(200),
  username: headerSafe(100).min(1),
  password: z.string().min(1).max(500),
});
export type PhoneAccount = z.infer<typeof PhoneAccountSchema>;
export const PhonesBodySchema = z.object({ phones: z.array(PhoneAccountSchema).max(10_000) });
export const PhonesAnswerSchema = z.looseObject({
  ok: z.literal(true),
  count: z.number().int().min(0),
});
export const PhonesStatusSchema = z.looseObject({
  phones: z.array(z.looseObject({ tenantId: z.string(), user: z.string(), username: z.string(), registered: z.number().int().min(0) })),
});

/** Where a call goes: a virtual number's AI, an office user's endpoints, or a PSTN number. */
export const TargetSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('vnum'),
    number: z.string().min(1).max(64),
    maxSeconds: z.number().int().min(1).max(86_400),
    engine: PlaceCallSchema.shape.engine,
  }),
  z.object({ kind: z.literal('user'), user: z.string().min(1).max(200), ringTimeoutSec: z.number().int().min(1).max(600) }),
  z.object({
    kind: z.literal('pstn'),
    phone: z.string().regex(/^\+[1-9]\d{1,14}$/),
    trunkIds: z.array(z.string().min(1)).min(1).max(20),
    ringTimeoutSec: z.number().int().min(1).max(600),
  }),
]);
export type Target = z.infer<typeof TargetSchema>;

/** Bridge → core: an INVITE from a trunk that passed its address or digest check. */
export const InboundQuerySchema = z.object({
  trunkId: z.string().min(1).max(200),
  /** The dialled number (Request-URI user, else To user). */
  did: headerSafe(64),
  /** The caller (From user, its RFC 3261 §19.1.2 escapes decoded), '' or `anonymous` without caller ID. */
  from: headerSafe(64),
  fromName: headerSafe(200).default(''),
});
export type InboundQuery = z.input<typeof InboundQuerySchema>;

/**
 * Core → bridge: accept with a call id (`vnum` + 12 hex) and the targets to try in order (the
 * first matching inbound route, then the routes after it that match too: the fallbacks), or refuse
 * with the SIP status to answer.
 */
export const InboundDecisionSchema = z.discriminatedUnion('accept', [
  z.object({
    accept: z.literal(true),
    callId: z.string().regex(/^vnum[0-9a-f]{12}$/),
    tenantId: z.string().min(1),
    targets: z.array(TargetSchema).min(1).max(10),
  }),
  z.object({ accept: z.literal(false), status: z.number().int().min(400).max(699), reason: z.string().max(200) }),
]);
export type InboundDecision = z.infer<typeof InboundDecisionSchema>;

/** Bridge → core: the AI of `callId` asked to transfer (tool transfer_to_user). */
export const TransferQuerySchema = z.object({
  callId: z.string().min(1).max(64),
  user: z.string().max(200).default(''),
  phone: z.string().max(64).default(''),
});
export type TransferQuery = z.input<typeof TransferQuerySchema>;

export const TRANSFER_TYPES = ['vnum-to-vnum', 'vnum-to-officetab', 'vnum-to-pstn', 'outbound-to-user'] as const;
export const TransferDecisionSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), transferType: z.enum(TRANSFER_TYPES), target: TargetSchema }),
  z.object({ ok: z.literal(false), error: z.string().max(500) }),
]);
export type TransferDecision = z.infer<typeof TransferDecisionSchema>;
