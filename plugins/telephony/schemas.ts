import { z } from 'zod';
import { AppError, describeEvents, pageQuery } from '../../server/sdk.ts';
import { headerSafe } from './control.ts';
import { TRUNK_ID_RE } from './trunks/trunk.ts';
/** E.164: `+`, a non-zero country code digit, at most 15 digits in all (ITU-T E.164 §6). */
export const E164_RE = /^\+[1-9]\d{4,14}$/;
export const e164 = z.string().regex(E164_RE, 'must be an E.164 number like +4930123456');

/** The spec's voice list ("POST /calls body"): a subset of the engine's prebuilt voices. */
export const VOICES = [
  'Achird',
  'Aoede',
  'Autonoe',
  'Charon',
  'Erinome',
  'Fenrir',
  'Kore',
  'Laomedeia',
  'Orus',
  'Puck',
  'Sadachbia',
  'Schedar',
  'Umbriel',
  'Zephyr',
] as const;

/** Call states (spec "States and transitions: Outbound call status"). */
export const CALL_STATES = ['scheduled', 'dispatching', 'in-flight', 'ended-success', 'ended-failed-retry-pending', 'ended-failed-final', 'cancelled'] as const;
export type CallStatus = (typeof CALL_STATES)[number];

/** Outcomes: one list, the control contract's (control.ts), shared with the bridge. */
export { OUTCOMES, type Outcome } from './control.ts';

// ---- plugin settings ---------------------------------------------------------------------------

export const telephonyConfig = z
  .object({
    bridge: z
      .object({
        /**
         * embedded: the core spawns and supervises the bridge process; remote: a bridge at `url`
         * with `token`; off: no bridge (calls answer 503 bridge_not_configured).
         */
        mode: z.enum(['embedded', 'remote', 'off']).default('embedded'),
        url: z.url().optional(),
        token: z.string().min(16).optional(),
        /** Entry of the embedded bridge, relative to the project root. */
        entry: z.string().min(1).default('plugins/telephony/bridge/main.ts'),
        /** Where the bridge posts events; default: this server's own URL + /internal/bridge/events. */
        callbackUrl: z.url().optional(),
        /**
         * PEM file of the CA that signed this server's certificate, for an https callback URL
         * (handed to the bridge as NODE_EXTRA_CA_CERTS; TLS verification stays on).
         */
        callbackCaFile: z.string().min(1).optional(),
        sipHost: z.string().default('127.0.0.1'),
        sipPort: z.number().int().min(0).max(65535).default(5060),
        rtpPorts: z
          .string()
          .regex(/^\d+-\d+$/)
          .default('20000-20999'),
        aiEngineUrl: z.string().optional(),
        readyTimeoutMs: z.number().int().min(100).default(20_000),
        restartMinMs: z.number().int().min(10).default(500),
        restartMaxMs: z.number().int().min(10).default(30_000),
        /** How often the core checks the bridge's /health (remote: up/down, trunk set). */
        healthPollMs: z.number().int().min(50).default(5000),
        /** Control requests give up after this long (502 bridge_unreachable). */
        requestTimeoutMs: z.number().int().min(100).default(5000),
      })
      .strict()
      // A remote bridge needs its address and the token both sides share (CONTROL-API.md).
      .refine((b) => b.mode !== 'remote' || (b.url !== undefined && b.token !== undefined), { message: 'mode remote needs url and token', path: ['url'] })
      .prefault({}),
    /**
     * Per-tenant caps (SECURITY.md): one tenant's volume must never crowd out another's, on the
     * bridge (one trunk set per tenant, each within the bridge's bounds) or in the store. The save
     * past a cap answers 409 `tenant_limit` naming the cap and its limit; rows already stored stay.
     */
    limits: z
      .object({
        trunks: z.number().int().min(1).max(1000).default(50),
        numbers: z.number().int().min(1).default(500),
        /** Desk-phone logins. */
        phones: z.number().int().min(1).default(200),
        /** Each of inbound and outbound routes (the inbound `*` catchall not counted). */
        routes: z.number().int().min(1).default(1000),
        /** Prompts kept for calls' systemPrompt slugs (README "Prompts"). */
        prompts: z.number().int().min(1).default(500),
      })
      .strict()
      .prefault({}),
    /** SMTP relay for outcome mails; no mail is sent without it. */
    mail: z
      .object({
        host: z.string().min(1),
        port: z.number().int().min(1).max(65535).default(25),
        secure: z.boolean().default(false),
        user: z.string().optional(),
        pass: z.string().optional(),
        from: z.string().min(3).default('sovcomms@localhost'),
        /**
         * Accept a relay certificate that does not verify (a self-signed relay on the LAN). Off by
         * default: STARTTLS or TLS to the relay checks its certificate like any other client.
         */
        allowUnverifiedTls: z.boolean().default(false),
      })
      .strict()
      .optional(),
    engine: z
      .object({
        model: z.string().min(1).default('gemini-live-2.5-flash-preview'),
        url: z.string().optional(),
      })
      .strict()
      .prefault({}),
    /** CANCEL after this many seconds of ringing (outcome no-answer). */
    ringTimeoutSec: z.number().int().min(5).max(300).default(45),
    /** Transcript share links (README "Transcript sharing"). */
    shares: z
      .object({
        /**
         * Views of the public share page per client IP and minute, found or not: the page is public,
         * so this bounds both scraping of a link and guessing of tokens.
         */
        viewsPerMinutePerIp: z.number().int().min(1).default(30),
      })
      .strict()
      .prefault({}),
    /** Virtual-number rooms in the browser (README "Virtual-number rooms"). */
    rooms: z
      .object({
        /** ICE and DTLS not up this long after the join → outcome empty-room. */
        connectTimeoutSec: z.number().int().min(1).max(600).default(30),
        /** Connected, but no voice from the visitor this long → outcome empty-room. */
        silenceTimeoutSec: z.number().int().min(1).max(3600).default(60),
        /** Joins per client IP and minute (each one costs an AI session). */
        joinsPerMinutePerIp: z.number().int().min(1).default(10),
        /** Lifetime of a room session (a signed-in room's sign-in through the OpenID Provider). */
        sessionTtlSec: z.number().int().min(60).max(86_400).default(3600),
      })
      .strict()
      .prefault({}),
  })
  .strict();
export type TelephonyConfig = z.infer<typeof telephonyConfig>;

// ---- routes ------------------------------------------------------------------------------------

/** Dial-prefix pattern: digits with optional leading +, optional trailing `*`, or `global`. */
export const outboundMatch = z
  .string()
  .regex(/^(global|\+?[0-9]*\*?)$/, 'a dial prefix with an optional trailing *, or global')
  .min(1)
  .max(40);
export const trunkIds = z.array(z.string().regex(TRUNK_ID_RE)).min(1).max(20);
export const outboundRoute = z.object({ match: z.string(), trunkIds: z.array(z.string()) });
export const outboundCreate = z.object({ match: outboundMatch, trunkIds });
export const outboundUpdate = z.object({ trunkIds });
export const matchParam = z.object({ match: z.string().min(1).max(40) });

/** Did: a number, an extension, `anonymous`, `*`, or a prefix with a trailing `*`. */
export const didPattern = z.string().regex(/^(\*|anonymous|\+?[0-9A-Za-z_.-]{1,40}\*?)$/, 'a number, an extension, anonymous, * or a prefix with a trailing *');
export const fromPattern = z.string().regex(/^(|anonymous|\+?[0-9]{0,20}\*?)$/, 'a caller number or a prefix with a trailing *');
export const inboundRoute = z.object({ did: z.string(), fromNumber: z.string(), user: z.string() });
export const inboundCreate = z.object({ did: didPattern, fromNumber: fromPattern.default(''), user: z.string().min(1).max(200) });
export const inboundUpdate = z.object({ user: z.string().min(1).max(200) });
export const didParam = z.object({ did: z.string().min(1).max(41) });
/** `fromNumber` (or `FromNumber`, as request keys may be PascalCase) addresses one of a Did's rows. */
export const fromQuery = z
  .object({ fromNumber: z.string().max(21).optional(), FromNumber: z.string().max(21).optional() })
  .transform((q) => ({ fromNumber: q.fromNumber ?? q.FromNumber }));

// ---- whitelist ---------------------------------------------------------------------------------

export const whitelistAdd = z.object({ number: e164, comment: z.string().max(500).default('') });
export const whitelistEntry = z.object({ number: z.string(), comment: z.string(), addedAtUtc: z.string(), addedBy: z.string() });

// ---- calls -------------------------------------------------------------------------------------

/**
 * POST /calls body (spec "POST /calls body"). email and apiKey are marked required in the table,
 * but the walk-through omits them: email is optional here (no outcome mail without it) and apiKey
 * falls back to the tenant's stored engine key (400 naming apiKey when there is none).
 */
export const callCreate = z.object({
  phone: e164,
  // Goes into the SIP From header (control.ts PlaceCall): no control characters.
  displayName: headerSafe(100).optional(),
  email: z.email().max(320).optional(),
  systemPrompt: z.string().min(1).max(20_000).describe("the prompt text, or the slug of one of the tenant's prompts (GET /prompts): 1-64 of a-z, 0-9, - and _"),
  apiKey: z.string().min(1).max(500).optional(),
  model: z
    .string()
    .min(1)
    .max(100)
    .regex(/^[A-Za-z0-9._/-]+$/)
    .optional(),
  voice: z.enum(VOICES).default('Aoede'),
  language: z
    .string()
    // 35: the bridge's limit (control.ts PlaceCall), the length RFC 5646 §4.4.1 asks every implementation to take.
    .max(35)
    .regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, 'a BCP 47 tag like en-US')
    .default('en-US'),
  maxSeconds: z.number().int().min(10).max(3600).default(300),
  retries: z.number().int().min(0).max(10).default(0),
  retryDelayMinutes: z.number().int().min(1).max(1440).default(5),
  voicemail: z
    .discriminatedUnion('action', [z.object({ action: z.literal('hangup') }), z.object({ action: z.literal('message'), text: z.string().min(1).max(1000) })])
    .optional()
    .describe('what the AI does at a voicemail box: hang up (the default), or leave the message `text` and then hang up'),
  // ISO 8601 with Z or an offset (Python's isoformat() writes +00:00); stored as UTC.
  scheduleAtUtc: z.iso
    .datetime({ offset: true, local: false })
    .transform((v) => new Date(v).toISOString())
    .optional()
    .describe('ISO 8601 date-time, Z or an offset such as +00:00; stored as UTC'),
});
export type CallCreate = z.infer<typeof callCreate>;

export const callRecord = z.object({
  callId: z.string(),
  tenant: z.string(),
  requestedBy: z.string(),
  phone: z.string(),
  displayName: z.string(),
  email: z.string(),
  voice: z.string(),
  language: z.string(),
  model: z.string(),
  status: z.enum(CALL_STATES),
  createdAtUtc: z.string(),
  scheduledForUtc: z.string().nullable(),
  dispatchedAtUtc: z.string(),
  answeredAtUtc: z.string(),
  endedAtUtc: z.string().nullable(),
  endedReason: z.string(),
  durationSec: z.number().int(),
  trunkId: z.string(),
  transcriptPath: z.string(),
  errorDetail: z.string(),
  attempt: z.number().int(),
  retriesLeft: z.number().int(),
  retryDelayMinutes: z.number().int(),
  maxSeconds: z.number().int(),
});
export type CallRecord = z.infer<typeof callRecord>;

export const callCreated = z.object({
  ok: z.boolean(),
  callId: z.string(),
  tenant: z.string(),
  whitelistAdded: z.boolean(),
  whitelistError: z.string().nullable(),
  bridgeReply: z.string(),
  status: z.enum(CALL_STATES),
});

const isoInstant = z.iso.datetime({ offset: true }).transform((v) => new Date(v).toISOString());
export const callListQuery = pageQuery.extend({
  status: z.string().max(300).optional().describe('comma-separated call states'),
  since: isoInstant.optional().describe('ISO 8601; only calls created at or after it'),
  until: isoInstant.optional().describe('ISO 8601; only calls created before it'),
  phone: z
    .string()
    .regex(/^\+?[0-9]{1,20}$/, 'digits, optionally with a leading +')
    .optional()
    .describe('calls to numbers starting with these digits'),
});
export const callStatsQuery = z.object({
  since: isoInstant.optional().describe('ISO 8601; default 24 hours ago'),
});
export const callStats = z.object({
  since: z.string(),
  inFlight: z.number().int(),
  scheduled: z.number().int(),
  total: z.number().int(),
  byStatus: z.record(z.string(), z.number().int()),
  hours: z.array(z.object({ hour: z.string(), counts: z.record(z.string(), z.number().int()) })),
});
export const callIdParam = z.object({ id: z.string().regex(/^oac-[0-9a-f]{12}$/, 'a call id like oac-0123456789ab') });

// ---- transcripts -------------------------------------------------------------------------------

export const transcriptQuery = pageQuery.extend({
  source: z.enum(['vnum', 'outbound-ai', 'both']).optional().describe('vnum, outbound-ai, or both (the default)'),
  q: z.string().max(200).optional(),
  since: z.string().max(40).optional().describe('ISO 8601 UTC; only startedUtc >= since'),
});
export const transcriptParam = z.object({ callId: z.string().regex(/^(oac-|vnum)[0-9a-f]{12}$/, 'a call id') });
export const transcriptSummary = z.object({
  callId: z.string(),
  callerSource: z.string(),
  startedUtc: z.string(),
  endedUtc: z.string(),
  mtimeUtc: z.string(),
  durationSec: z.number().int(),
  rule: z.string(),
  phone: z.string(),
  displayName: z.string(),
  number: z.string(),
  outcome: z.string(),
  voice: z.string(),
  language: z.string(),
  model: z.string(),
  tokensTotal: z.number().int(),
  tokensPrompt: z.number().int(),
  turnCount: z.number().int(),
  size: z.number().int(),
  source: z.string(),
  file: z.string(),
});
export const turn = z.object({ speaker: z.enum(['AI', 'Caller']), text: z.string(), ts: z.string() });
export const fullTranscript = z.object({
  callId: z.string(),
  callerSource: z.string(),
  tenant: z.string(),
  requestedBy: z.string(),
  phone: z.string(),
  displayName: z.string(),
  email: z.string(),
  voice: z.string(),
  language: z.string(),
  model: z.string(),
  trunkId: z.string(),
  startedUtc: z.string(),
  answeredUtc: z.string(),
  endedUtc: z.string(),
  durationSec: z.number().int(),
  answered: z.boolean(),
  outcome: z.string(),
  errorDetail: z.string(),
  inputTurns: z.number().int(),
  outputTurns: z.number().int(),
  tokensTotal: z.number().int(),
  tokensPrompt: z.number().int(),
  turns: z.array(turn),
});
export type FullTranscript = z.infer<typeof fullTranscript>;

// ---- transcript shares -------------------------------------------------------------------------

/** A year: a link living longer than that should be a new decision, not a forgotten default. */
export const SHARE_MAX_TTL_HOURS = 8760;
export const shareCreate = z.object({
  ttlHours: z
    .number()
    .int()
    .min(0)
    .max(SHARE_MAX_TTL_HOURS)
    .default(24)
    .describe(`hours until the link expires, 0 = never (at most ${SHARE_MAX_TTL_HOURS}; default 24)`),
});
export const shareParams = z.object({ callId: z.string().max(64), shareId: z.string().max(64) });
export const shareView = z.object({
  id: z.string(),
  callId: z.string(),
  file: z.string(),
  tokenTail: z.string().describe('last 8 characters of the token: recognises a link, cannot open it'),
  ttlHours: z.number().int(),
  createdBy: z.string(),
  createdUtc: z.string(),
  expiresUtc: z.string().nullable(),
  status: z.enum(['active', 'expired', 'revoked']),
  revokedUtc: z.string().nullable(),
  revokedBy: z.string().nullable(),
  views: z.number().int(),
  lastViewedUtc: z.string().nullable(),
});
export type ShareView = z.infer<typeof shareView>;
export const shareCreated = shareView.extend({
  token: z.string().describe('the share token: shown in this response only (stored as SHA-256)'),
  url: z.string().describe('the public page: /transcript.ashx?share=<token> on the host the request addressed'),
});

// ---- virtual numbers ---------------------------------------------------------------------------

export const numberInput = z.object({
  number: z.string().regex(/^\+?[0-9]{2,20}$/, 'a phone number or extension'),
  name: z.string().max(100).default(''),
  mode: z.enum(['live-voice-ai']).default('live-voice-ai'),
  voice: z.enum(VOICES).default('Aoede'),
  language: z
    .string()
    .regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/)
    .default('en-US'),
  saveTranscripts: z.boolean().default(true),
  maxDurationSec: z
    .number()
    .int()
    .min(10)
    .max(3600 * 4)
    .default(3500),
  visibility: z.enum(['public', 'signed-in']).default('signed-in'),
  systemPrompt: z.string().max(20_000).default(''),
  /** The engine key of this number: write-only, sealed at rest, never returned or logged. */
  geminiApiKey: z.string().max(500).optional(),
});
export const numberView = z.object({
  name: z.string(),
  number: z.string(),
  mode: z.string(),
  voice: z.string(),
  language: z.string(),
  saveTranscripts: z.boolean(),
  maxDurationSec: z.number().int(),
  visibility: z.string(),
  systemPrompt: z.string(),
  hasEngineKey: z.boolean(),
});

export const settingsInput = z.object({
  defaultTrunkId: z
    .string()
    .regex(/^([a-z0-9][a-z0-9_-]{0,39})?$/)
    .optional(),
  engineApiKey: z.string().max(500).optional(),
  model: z.string().max(100).optional(),
});

// ---- events this plugin emits (spec "Event kinds and data payloads") -------------------------

/** One line per event (the console's picker, /openapi.json `webhooks`): an event without one does not compile. */
const eventText = {
  'call.answered': 'An outbound AI or SIP-inbound AI call was answered (200 OK); arrives just before call.started (not for browser calls)',
  'call.started': 'The AI conversation of a call started: outbound AI, SIP inbound or a virtual-number room',
  'call.transferred': 'The AI handed the call over to a person or a number (the transfer_to_user tool)',
  'call.ended': 'A SIP-inbound or virtual-number call ended',
  'outbound-ai.finished': 'An outbound AI call attempt finished, answered or not (errorDetail on a technical failure)',
  'transcript.saved': 'A call transcript was saved (GET /api.ashx/v1/transcripts/{callId} has it)',
  'transcript.share.created': 'A transcript share link was created (token: its last 8 characters only)',
  'transcript.share.viewed': 'A transcript share link was opened',
  'transcript.share.revoked': 'A transcript share link was revoked',
};

export const eventSchemas = describeEvents(eventText, {
  'call.answered': z.object({
    callId: z.string(),
    phone: z.string(),
    displayName: z.string(),
    did: z.string(),
    fromNumber: z.string(),
    trunkId: z.string(),
    direction: z.enum(['inbound', 'outbound']),
    source: z.string(),
    answerMs: z.number().int(),
  }),
  'call.started': z.object({
    callId: z.string(),
    number: z.string(),
    did: z.string(),
    phone: z.string(),
    displayName: z.string(),
    room: z.string(),
    direction: z.enum(['inbound', 'outbound']),
    source: z.string(),
  }),
  'call.transferred': z.object({
    callId: z.string(),
    fromVnum: z.string(),
    fromOutbound: z.string(),
    fromPhone: z.string(),
    toUser: z.string(),
    toPhone: z.string(),
    transferType: z.string(),
    trunkId: z.string(),
    room: z.string(),
    source: z.enum(['vnum', 'outbound-ai']),
  }),
  'call.ended': z.object({
    callId: z.string(),
    number: z.string(),
    room: z.string(),
    outcome: z.string(),
    durationSec: z.number().int(),
    tokens: z.number().int(),
    source: z.enum(['vnum', 'sip']),
  }),
  'outbound-ai.finished': z.object({
    callId: z.string(),
    phone: z.string(),
    displayName: z.string(),
    outcome: z.string(),
    answered: z.boolean(),
    talkSec: z.number().int(),
    trunk: z.string(),
    inputTurns: z.number().int(),
    outputTurns: z.number().int(),
    errorDetail: z.string(),
  }),
  'transcript.saved': z.object({
    callId: z.string(),
    phone: z.string(),
    displayName: z.string(),
    number: z.string(),
    file: z.string(),
    outcome: z.string(),
    source: z.enum(['outbound-ai', 'vnum']),
  }),
  // Transcript share events (spec "Event kinds": names not shown there, chosen here). `token` is
  // always the last 8 characters: a webhook receiver must not get the power to open the link.
  // callId and shareId are added to the spec's fields so a receiver can correlate the three.
  'transcript.share.created': z.object({
    token: z.string().length(8),
    file: z.string(),
    ttlHours: z.number().int().min(0),
    createdBy: z.string(),
    expiresUtc: z.string().nullable(),
    callId: z.string(),
    shareId: z.string(),
  }),
  'transcript.share.viewed': z.object({ token: z.string().length(8), file: z.string(), viewerIp: z.string(), callId: z.string(), shareId: z.string() }),
  'transcript.share.revoked': z.object({ token: z.string().length(8), file: z.string(), revokedBy: z.string(), callId: z.string(), shareId: z.string() }),
});

export type TelephonyLimits = z.infer<typeof telephonyConfig>['limits'];
/** The defaults, for services built without the plugin's settings (tests, tools). */
export const DEFAULT_LIMITS: TelephonyLimits = telephonyConfig.shape.limits.parse(undefined);

/** 409 `tenant_limit`: the tenant holds `limit` of `cap` already (the body names both). */
export function checkTenantLimit(cap: keyof TelephonyLimits, limit: number, count: number): void {
  if (count >= limit)
    throw new AppError(409, 'tenant_limit', `a tenant has at most ${limit} ${cap} (the telephony limits.${cap} setting)`, { extra: { cap, limit } });
}
