/** Control API bodies (CONTROL-API.md), validated at the bridge's edge. */
import { z } from 'zod';

export const TrunkSchema = z.object({
  id: z.string().min(1).max(100),
  host: z.string().min(1).max(253),
  port: z.number().int().min(1).max(65535),
  transport: z.enum(['udp', 'tcp']),
  username: z.string().max(200).optional(),
  password: z.string().max(500).optional(),
  register: z.boolean(),
  fromDomain: z.string().max(253).optional(),
  callerId: z.string().max(64).optional(),
  maxConcurrentCalls: z.number().int().min(1).max(10_000),
  codecs: z.array(z.enum(['PCMU', 'PCMA'])).max(2),
  /** Locate the server through DNS SRV `_sip._<transport>.<host>` (RFC 3263 §4.2); port is the fallback. */
  dnsSrv: z.boolean().optional(),
});
export type Trunk = z.infer<typeof TrunkSchema>;
/** A trunk as the bridge holds it: with the addresses DNS SRV gave (`addrs` in try order). */
export type LocatedTrunk = Trunk & { addr?: { host: string; port: number }; addrs?: Array<{ host: string; port: number }> };

export const TrunksBodySchema = z.object({ trunks: z.array(TrunkSchema).max(1000) });

export const PlaceCallSchema = z.object({
  callId: z.string().min(1).max(100),
  tenantId: z.string().min(1).max(200),
  // E.164 (ITU-T E.164: '+' and up to 15 digits); the core validates too.
  phone: z.string().regex(/^\+[1-9]\d{1,14}$/),
  displayName: z.string().max(200),
  trunkIds: z.array(z.string().min(1)).min(1).max(20),
  ringTimeoutSec: z.number().int().min(1).max(600),
  maxSeconds: z.number().int().min(1).max(86_400),
  /** Hang up after this long without RTP or RTCP from the far end (0 = never); default from the bridge. */
  mediaTimeoutSec: z.number().int().min(0).max(3600).optional(),
  engine: z.object({
    url: z.string().url().optional(),
    apiKey: z.string().max(500),
    model: z.string().min(1).max(200),
    voice: z.string().min(1).max(100),
    language: z.string().min(1).max(35),
    systemPrompt: z.string().max(100_000),
    leaveVoicemailMessage: z.boolean().optional(),
  }),
});
export type PlaceCall = z.infer<typeof PlaceCallSchema>;

export const HangupSchema = z.object({ reason: z.string().max(200).optional() });
