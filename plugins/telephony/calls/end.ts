import type { z } from 'zod';
import type { Clock, EventBus, TenantService } from '../../../server/sdk.ts';
import type { BridgeEvent, Outcome } from '../control.ts';
import type { TelephonyRepo } from '../repo.ts';
import type { eventSchemas, FullTranscript } from '../schemas.ts';
import type { TranscriptStore } from '../transcripts/store.ts';

type Payload<E extends keyof typeof eventSchemas> = z.infer<(typeof eventSchemas)[E]>;
export type CallAnswered = Payload<'call.answered'>;
export type CallStarted = Payload<'call.started'>;
export type CallTransferred = Payload<'call.transferred'>;

/** What the bridge reports of a conversation at its end (CONTROL-API.md `ended`). */
export type EndTranscript = Extract<BridgeEvent, { type: 'ended' }>['transcript'];
const NO_TRANSCRIPT: EndTranscript = { turns: [], tokensTotal: 0, tokensPrompt: 0, inputTurns: 0, outputTurns: 0, model: '', voice: '', language: '' };

/**
 * How a call ends: the bridge's `ended` event, or an end the core decides (the bridge refused the
 * call, or restarted without it). Only `outcome` is certain; each kind fills in the rest its way.
 */
export interface CallEnd {
  outcome: Outcome;
  errorDetail?: string;
  answered?: boolean;
  answeredAt?: string | null;
  /** ISO 8601; endCall passes the kind the instant it settled on (this, or now). */
  endedAt?: string;
  talkSec?: number;
  trunkId?: string | null;
  transcript?: EndTranscript;
}

/** The transcript fields a kind knows of its call; endCall adds the conversation and the end. */
export type TranscriptHead = Pick<
  FullTranscript,
  'callerSource' | 'requestedBy' | 'phone' | 'displayName' | 'email' | 'voice' | 'language' | 'model' | 'trunkId' | 'startedUtc' | 'answeredUtc' | 'answered'
>;

/** A kind's answer to "this call ends so": what to store, write and announce. */
export interface Ending {
  outcome: Outcome;
  durationSec: number;
  /** The transcript to save (`voice`, `language`, `model`: fallbacks for the engine's), or null. */
  transcript: TranscriptHead | null;
  /** The transcript index's `rule` and `number`. */
  rule: string;
  number: string;
  /** call.ended's fields that tell the kinds apart. */
  ended: Pick<Payload<'call.ended'>, 'number' | 'room' | 'source'>;
  /** transcript.saved's fields that tell the kinds apart. */
  saved: Pick<Payload<'transcript.saved'>, 'phone' | 'displayName' | 'number' | 'source'>;
  /** Writes the end into the kind's table (inside the transaction); false when it ended meanwhile. */
  store(transcriptFile: string): boolean;
  /** The kind's own events and jobs, in the same transaction, after call.ended. */
  after?(): void;
}

/**
 * One kind of call the bridge carries (outbound, inbound SIP, browser room): its rows and what
 * the bridge's events mean for it. The pipeline (deduplication, transactions, events, transcript,
 * bridge restarts) is CallKinds and endCall, once for every kind; a new kind is a new entry.
 */
export interface CallKind<Row extends { call_id: string; tenant_id: string } = { call_id: string; tenant_id: string }> {
  readonly kind: string;
  /** Its row by call id; undefined when the call is not of this kind. */
  row(callId: string): Row | undefined;
  /** Its calls the bridge carries now: a bridge restart ends them. */
  atBridge(): Row[];
  /** The bridge tries a trunk (inside the transaction); false when that changes nothing. */
  onDialing(c: Row, ev: Extract<BridgeEvent, { type: 'dialing' }>): boolean;
  /** Stores the answer (inside the transaction) and names its events; null when answered or over already. */
  onAnswered(c: Row, ev: Extract<BridgeEvent, { type: 'answered' }>): { answered?: CallAnswered; started: CallStarted } | null;
  /** call.transferred of a transfer the bridge reports. */
  onTransferred(c: Row, ev: Extract<BridgeEvent, { type: 'transferred' }>): CallTransferred;
  /** How the call ends (`end.endedAt` set), or null when it cannot end (any more). */
  ending(c: Row, end: CallEnd & { endedAt: string }): Ending | null;
}

export interface EndDeps {
  repo: TelephonyRepo;
  events: EventBus;
  tenants: TenantService;
  transcripts: TranscriptStore;
  clock: Clock;
}

/**
 * Ends a call of any kind: the transcript file first (idempotent: a repeat writes the same
 * content), then in one transaction (ARCHITECTURE.md "Storage": outbox) the (instance, seq) mark,
 * the kind's row, the transcript's index row, call.ended, the kind's own events and
 * transcript.saved. False when the call had ended already (or the event was seen before).
 */
export function endCall<Row extends { call_id: string; tenant_id: string }>(
  d: EndDeps,
  kind: CallKind<Row>,
  c: Row,
  end: CallEnd,
  mark?: () => boolean,
): boolean {
  const tenant = d.tenants.byId(c.tenant_id);
  if (!tenant) return false;
  const endedAt = isoOr(end.endedAt, new Date(d.clock.now()).toISOString());
  const e = kind.ending(c, { ...end, endedAt });
  // Over already: the event is still recorded, so its retry is not applied either.
  if (!e) return mark ? d.repo.tx(mark) && false : false;
  const tr = end.transcript ?? NO_TRANSCRIPT;
  const head = e.transcript;
  const row = head
    ? d.transcripts.write(
        tenant,
        {
          callId: c.call_id,
          callerSource: head.callerSource,
          tenant: tenant.host,
          requestedBy: head.requestedBy,
          phone: head.phone,
          displayName: head.displayName,
          email: head.email,
          voice: tr.voice || head.voice,
          language: tr.language || head.language,
          model: tr.model || head.model,
          trunkId: head.trunkId,
          startedUtc: head.startedUtc,
          answeredUtc: head.answeredUtc,
          endedUtc: endedAt,
          durationSec: e.durationSec,
          answered: head.answered,
          outcome: e.outcome,
          errorDetail: end.errorDetail ?? '',
          inputTurns: tr.inputTurns,
          outputTurns: tr.outputTurns,
          tokensTotal: tr.tokensTotal,
          tokensPrompt: tr.tokensPrompt,
          turns: tr.turns,
        },
        e.rule,
        e.number,
      )
    : undefined;
  return d.repo.tx(() => {
    if (mark && !mark()) return false;
    if (!e.store(row?.file ?? '')) return false;
    if (row) d.repo.upsertTranscript(row);
    d.events.emit(c.tenant_id, 'call.ended', { callId: c.call_id, ...e.ended, outcome: e.outcome, durationSec: e.durationSec, tokens: tr.tokensTotal });
    e.after?.();
    if (row) d.events.emit(c.tenant_id, 'transcript.saved', { callId: c.call_id, ...e.saved, file: row.file, outcome: e.outcome });
    return true;
  });
}

/** An ISO 8601 instant normalised, or `fallback` when absent or unreadable. */
export function isoOr(s: string | null | undefined, fallback: string): string {
  if (!s) return fallback;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? fallback : new Date(ms).toISOString();
}
