/**
 * The control contract between the core and the telephony bridge (CONTROL-API.md), in one place
 * both sides import: the bridge validates what the core sends with these schemas, the core
 * validates what the bridge answers and posts back. It imports only zod, because the bridge is
 * its own process and never loads the core or the plugin SDK (a boundary test enforces it).
 * The wire format is stable across versions (a remote bridge may be older or newer): fields are
 * added, never renamed, and answers are read loosely (unknown fields pass).
 */
import { z } from 'zod';

// ---- outcomes ------------------------------------------------------------------------------------

/**
 * How a call ended (spec "Outcome values", plus busy and failed, see notes/telephony.md).
 * `empty-room` and `transferred-to-vnum` belong to virtual-number calls.
 */
export const OUTCOMES = [
  'finished',
  'far-hangup',
  'voicemail',
  'not-now',
  'no-answer',
  'busy',
  'failed',
  'max-duration',
  'cancelled',
  'transferred-to-vnum',
  'empty-room',
] as const;
export type Outcome = (typeof OUTCOMES)[number];
const OUTCOME_SET: ReadonlySet<string> = new Set(OUTCOMES);
export function isOutcome(s: string): s is Outcome {
  return OUTCOME_SET.has(s);
}

// ---- core → bridge: requests ----------------------------------------------------------------------

/**
 * RFC 3261 §25.1: no control characters in anything that is copied into a SIP header. Exported so
 * the core's own input (a call's displayName) holds the same rule where it is entered.
 */
export const headerSafe = (max: number) =>
  z
    .string()
    .max(max)
    // eslint-disable-next-line no-control-regex -- the control characters are exactly what is refused
    .regex(/^[^\u0000-\u001f\u007f]*$/, 'control characters are not allowed');

/**
 * G.722 (RFC 3551 §4.5.2, wideband; offered first, taken when the far end has it) and G.711
 * (§4.5.14: PCMU and PCMA).
 */
export const CODECS = ['G722', 'PCMU', 'PCMA'] as const;
export type Codec = (typeof CODECS)[number];

/**
 * SRTP keyed by SDES (RFC 4568) on a SIP leg (bridge/media/sdp.ts): `required` (RTP/SAVP, no
 * call without it), `optional` (crypto offered with RTP/AVP, used when the far end takes it),
 * `off` (plain RTP; the default).
 */
export const SRTP_POLICIES = ['required', 'optional', 'off'] as const;
export type SrtpPolicy = (typeof SRTP_POLICIES)[number];
/** SIP transports of a trunk: `tls` is SIP over TLS (RFC 3261 §26, port 5061 by default). */
export const TRANSPORTS = ['udp', 'tcp', 'tls'] as const;

/**
 * The CA (PEM, one or more certificates) a TLS trunk's server certificate must chain to, instead
 * of the system store. Public data, not a secret; bounded so a full trunk set stays one request.
 */
export const TlsCaPemSchema = z
  .string()
  .max(16_000)
  .regex(/^\s*(-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----\s*)+$/, 'a PEM certificate (or several)');

export const TrunkSchema = z.object({
  id: z.string().min(1).max(100),
  host: z.string().min(1).max(253),
  port: z.number().int().min(1).max(65535),
  transport: z.enum(TRANSPORTS),
  username: headerSafe(200).optional(),
  password: z.string().max(500).optional(),
  register: z.boolean(),
  fromDomain: headerSafe(253).optional(),
  callerId: headerSafe(64).optional(),
  maxConcurrentCalls: z.number().int().min(1).max(10_000),
  /**
   * At most both laws. A repeated one is not refused here (an older core may send it, and a
   * refused trunk is out of service); the core's own input refuses it.
   */
  codecs: z.array(z.enum(CODECS)).max(CODECS.length),
  /** Locate the server through DNS SRV `_sip._<transport>.<host>` (RFC 3263 §4.2); port is the fallback. */
  dnsSrv: z.boolean().optional(),
  /**
   * How the trunk's inbound INVITEs are recognised (bridge/inbound/): `address` (default) by the
   * source address being the trunk's host (or one of its SRV targets), `digest` by digest
   * credentials (username/password of the trunk) the carrier presents after a 407.
   */
  inboundAuth: z.enum(['address', 'digest']).optional(),
  /** SRTP on the trunk's calls, both ways (SRTP_POLICIES); absent = off. */
  srtp: z.enum(SRTP_POLICIES).optional(),
  /** TLS: the CA its server certificate must chain to; absent, the system store (bridge/sip/tls.ts). */
  tlsCaPem: TlsCaPemSchema.optional(),
});
export type Trunk = z.infer<typeof TrunkSchema>;

/**
 * PUT /trunks: the full set (replaces). Each trunk is checked on its own (`TrunkSchema`): one bad
 * trunk (another tenant's, or saved by an older version) is refused alone, the rest apply.
 */
export const TrunksBodySchema = z.object({ trunks: z.array(z.unknown()).max(1000) });

/**
 * PUT /tenants/:tenantId/trunks takes the same body: one tenant's set, replacing that tenant's
 * trunks only (the core pushes one per tenant, so no tenant's volume refuses another's). A trunk
 * id is `<tenant-id>.<trunk-id>` and the trunk part has no dot: the tenant precedes the last one.
 */
export function trunkTenant(id: string): string {
  const dot = id.lastIndexOf('.');
  return dot < 0 ? '' : id.slice(0, dot);
}

/** POST /calls. */
export const PlaceCallSchema = z.object({
  callId: z.string().min(1).max(100),
  tenantId: z.string().min(1).max(200),
  // E.164 (ITU-T E.164: '+' and up to 15 digits); the core validates too.
  phone: z.string().regex(/^\+[1-9]\d{1,14}$/),
  displayName: headerSafe(200),
  trunkIds: z.array(z.string().min(1)).min(1).max(20),
  ringTimeoutSec: z.number().int().min(1).max(600),
  maxSeconds: z.number().int().min(1).max(86_400),
  /** Hang up after this long without RTP or RTCP from the far end (0 = never); default from the bridge. */
  mediaTimeoutSec: z.number().int().min(0).max(3600).optional(),
  engine: z.object({
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- zod 4 keeps the chained form with the same check; moving to the top-level form is a schema change with its generated docs, not a lint fix
    url: z.string().url().optional(),
    apiKey: z.string().max(500),
    model: z.string().min(1).max(200),
    voice: z.string().min(1).max(100),
    language: z.string().min(1).max(35),
    systemPrompt: z.string().max(100_000),
    leaveVoicemailMessage: z.boolean().optional(),
    /** The message the AI leaves at a voicemail box (with leaveVoicemailMessage); without it, the AI's own words. */
    voicemailMessage: z.string().max(1000).optional(),
  }),
});
export type PlaceCall = z.infer<typeof PlaceCallSchema>;

/**
 * POST /rooms: a browser visitor joins a virtual number's room (WebRTC, terminated in the bridge).
 * `offerSdp` carries every candidate (no trickle); the answer carries the bridge's.
 */
export const OpenRoomSchema = z.object({
  callId: z.string().regex(/^vnum[0-9a-f]{12}$/),
  tenantId: z.string().min(1).max(200),
  number: z.string().min(1).max(40),
  room: z.string().min(1).max(200),
  offerSdp: z.string().min(10).max(20_000),
  maxSeconds: z.number().int().min(1).max(86_400),
  /** ICE and DTLS not up within this long → outcome empty-room. */
  connectTimeoutSec: z.number().int().min(1).max(600),
  /** Connected, but no voice from the visitor within this long → outcome empty-room. */
  silenceTimeoutSec: z.number().int().min(1).max(3600),
  engine: PlaceCallSchema.shape.engine,
});
export type OpenRoom = z.infer<typeof OpenRoomSchema>;

/** POST /calls/:callId/hangup. */
/**
 * PUT /tls: the certificate the bridge serves SIP over TLS with (desk phones), the appliance's own
 * (`serve --tls auto`'s, naming the SIP host) and its key, in plaintext only on this loopback hop.
 * Pushed at every bridge start and after each renewal; the bridge swaps it without a restart.
 */
export const TlsBodySchema = z.object({
  cert: z.string().min(1).max(64_000),
  key: z.string().min(1).max(16_000),
});
export type TlsBody = z.infer<typeof TlsBodySchema>;
/** `port`: the TLS listener's (null: the bridge has TLS off); `fingerprint`: SHA-256 of the leaf. */
export const TlsAnswerSchema = z.looseObject({ ok: z.literal(true), port: z.number().int().nullable(), fingerprint: z.string() });
export type TlsAnswer = z.infer<typeof TlsAnswerSchema>;

export const HangupSchema = z.object({ reason: z.string().max(200).optional() });

// ---- bridge → core: answers -----------------------------------------------------------------------

/** Every error answer: `{error, error_description}`. */
export const ControlErrorSchema = z.looseObject({ error: z.string(), error_description: z.string().optional() });
export type ControlError = z.infer<typeof ControlErrorSchema>;

/**
 * RTP received on a trunk, over the calls that ended on it since the bridge started (RFC 3550
 * A.3 loss from sequence gaps, A.8 interarrival jitter at each call's end). Absent until a call
 * with media ended on the trunk.
 */
export const TrunkMediaSchema = z.looseObject({
  calls: z.number().int().min(0),
  packetsReceived: z.number().int().min(0),
  packetsLost: z.number().int().min(0),
  /** The last ended call's jitter (ms). */
  jitterMs: z.number().min(0),
  jitterMaxMs: z.number().min(0),
});
export type TrunkMedia = z.infer<typeof TrunkMediaSchema>;
export const TrunkHealthSchema = z.looseObject({
  id: z.string(),
  registered: z.boolean().nullable(),
  lastError: z.string().nullable(),
  media: TrunkMediaSchema.optional(),
});
export const HealthAnswerSchema = z.looseObject({
  status: z.string(),
  version: z.string().optional(),
  /** `tlsPort`: where desk phones reach SIP over TLS (null until the core pushed a certificate). */
  sip: z.looseObject({ host: z.string(), port: z.number().int(), tlsPort: z.number().int().nullable().optional() }).optional(),
  activeCalls: z.number().int().min(0).optional(),
  trunks: z.array(TrunkHealthSchema).default([]),
});
export type HealthAnswer = z.infer<typeof HealthAnswerSchema>;

export const PutTrunksAnswerSchema = z.looseObject({
  ok: z.literal(true),
  /** Trunks applied. */
  count: z.number().int().min(0),
  /** Trunks refused, each with the first reason (id as sent, or its index when it had none). */
  rejected: z.array(z.looseObject({ id: z.string(), error: z.string() })).default([]),
});
export type PutTrunksAnswer = z.infer<typeof PutTrunksAnswerSchema>;
export const PlaceCallAnswerSchema = z.looseObject({ accepted: z.literal(true), callId: z.string() });
export type PlaceCallAnswer = z.infer<typeof PlaceCallAnswerSchema>;
export const OpenRoomAnswerSchema = z.looseObject({ accepted: z.literal(true), callId: z.string(), answerSdp: z.string(), codec: z.string().optional() });
export type OpenRoomAnswer = z.infer<typeof OpenRoomAnswerSchema>;
export const HangupAnswerSchema = z.looseObject({ ok: z.literal(true), state: z.string().optional() });
export type HangupAnswer = z.infer<typeof HangupAnswerSchema>;

/** The states a bridge call passes through (GET /calls, and the state a hangup found). */
export const BRIDGE_CALL_STATES = ['dialing', 'ringing', 'answered', 'ending'] as const;
export type BridgeCallState = (typeof BRIDGE_CALL_STATES)[number];

/**
 * GET /calls. `state` is read as any string: the core only needs the call ids, and a newer bridge
 * with a state of its own must not make reconciliation fail.
 */
export const ListCallsAnswerSchema = z.looseObject({
  calls: z.array(
    z.looseObject({ callId: z.string(), state: z.string().optional(), trunkId: z.string().nullable().optional(), startedAt: z.string().optional() }),
  ),
});
export type ListCallsAnswer = z.infer<typeof ListCallsAnswerSchema>;

// ---- bridge → core: callback events (POST /internal/bridge/events) --------------------------------

const transcriptIn = z.object({
  turns: z
    .array(z.object({ speaker: z.enum(['AI', 'Caller']), text: z.string().max(100_000), ts: z.string() }))
    .max(10_000)
    .default([]),
  tokensTotal: z.number().int().min(0).default(0),
  tokensPrompt: z.number().int().min(0).default(0),
  inputTurns: z.number().int().min(0).default(0),
  outputTurns: z.number().int().min(0).default(0),
  model: z.string().default(''),
  voice: z.string().default(''),
  language: z.string().default(''),
});

const evBase = { seq: z.number().int().min(0), callId: z.string().min(1).max(64), ts: z.string().optional() };
export const BridgeEventSchema = z.discriminatedUnion('type', [
  z.object({ ...evBase, type: z.literal('dialing'), trunkId: z.string() }),
  z.object({ ...evBase, type: z.literal('answered'), trunkId: z.string(), answeredAt: z.string(), answerMs: z.number().int().min(0) }),
  z.object({
    ...evBase,
    type: z.literal('transferred'),
    toUser: z.string().default(''),
    toPhone: z.string().default(''),
    transferType: z.string().default('outbound-to-user'),
    trunkId: z.string().nullable().default(null),
  }),
  z.object({
    ...evBase,
    type: z.literal('ended'),
    outcome: z.enum(OUTCOMES),
    answered: z.boolean().default(false),
    answeredAt: z.string().nullable().default(null),
    endedAt: z.string(),
    talkSec: z.number().min(0).default(0),
    trunkId: z.string().nullable().default(null),
    errorDetail: z.string().default(''),
    sipStatus: z.number().int().nullable().default(null),
    transcript: transcriptIn.prefault({}),
  }),
]);
/** An event as the core reads it (defaults applied). */
export type BridgeEvent = z.infer<typeof BridgeEventSchema>;
/** An event as the bridge writes it (defaulted fields may be left out). */
export type BridgeEventInput = z.input<typeof BridgeEventSchema>;
export type BridgeEventType = BridgeEvent['type'];

/** The kinds of event this version knows (the core acknowledges others unread, for newer bridges). */
export const BRIDGE_EVENT_TYPES: readonly BridgeEventType[] = BridgeEventSchema.options.map((o) => o.shape.type.value);
export function isBridgeEventType(s: string): s is BridgeEventType {
  return (BRIDGE_EVENT_TYPES as readonly string[]).includes(s);
}

/**
 * The fields of one kind of event as the bridge writes them: everything but the envelope
 * (`seq`, `type`, `callId`, `ts`), which the bridge's sender adds.
 */
export type BridgeEventFields<T extends BridgeEventType> = Omit<Extract<BridgeEventInput, { type: T }>, 'seq' | 'type' | 'callId' | 'ts'>;
