import crypto from 'node:crypto';
import { z } from 'zod';
import {
  AppError,
  BadGatewayError,
  type Clock,
  type EventBus,
  InputError,
  type JobQueue,
  type KeyService,
  type Logger,
  NotFoundError,
  type Principal,
  type Tenant,
  type TenantService,
} from '../../../server/sdk.ts';
import type { TelephonyAdmin } from '../trunks/admin.ts';
import { bridgeTrunkId, localTrunkId } from '../trunks/trunk.ts';
import type { BridgeLink } from '../bridge-link/link.ts';
import type { OutcomeMailer } from './mail.ts';
import type { CallRow, TelephonyRepo } from '../repo.ts';
import { pickTrunks } from '../routing.ts';
import type { BridgeEvent } from '../control.ts';
import type { CallCreate, CallRecord, CallStatus, FullTranscript, Outcome, TelephonyConfig } from '../schemas.ts';
import { type CallAnswered, type CallEnd, type CallKind, type CallStarted, type CallTransferred, endCall, type Ending, isoOr } from './end.ts';
import type { TranscriptStore } from '../transcripts/store.ts';
import type { Prompts } from '../prompts/prompts.ts';

/**
 * The call's voicemail policy as the bridge takes it (control.ts PlaceCall `engine`): without a
 * message the AI's report_voicemail hangs up at once; with one, the bridge hands the AI the
 * message in the tool's answer and hangs up once it has been spoken.
 */
export function voicemailPolicy(message: string | null): { leaveVoicemailMessage?: true; voicemailMessage?: string } {
  return message ? { leaveVoicemailMessage: true, voicemailMessage: message } : {};
}

export const DIAL_QUEUE = 'telephony.dial';
export const MAIL_QUEUE = 'telephony.mail';

export type HangupResult =
  { ok: true; wasNoop: true; callId: string; status: CallStatus } | { ok: true; callId: string; newStatus: 'cancelled'; actor: string };

/** Payload of a dial job (first try, retry, or scheduled call). */
export const dialJob = z.object({ callId: z.string().min(1).max(64), attempt: z.number().int().min(1) });
export type DialJob = z.infer<typeof dialJob>;
/** Payload of an outcome-mail job. */
export const mailJob = dialJob;
export type MailJob = z.infer<typeof mailJob>;

/** How far in the past scheduleAtUtc may be (client clock skew) before it is refused as schedule_in_past. */
export const SCHEDULE_GRACE_MS = 60_000;

/** Spec "Outbound call status": states a call is over in (hangup on them is a no-op). */
const ENDED: ReadonlySet<CallStatus> = new Set(['ended-success', 'ended-failed-final', 'cancelled']);
/** Outcomes that are retried after retryDelayMinutes while retries are left (spec "Observed rules"). */
const RETRYABLE: ReadonlySet<Outcome> = new Set(['no-answer', 'busy']);

export function newCallId(): string {
  return 'oac-' + crypto.randomBytes(6).toString('hex');
}

export function toRecord(c: CallRow, tenantHost: string): CallRecord {
  return {
    callId: c.call_id,
    tenant: tenantHost,
    requestedBy: c.requested_by,
    phone: c.phone,
    displayName: c.display_name,
    email: c.email,
    voice: c.voice,
    language: c.language,
    model: c.model,
    status: c.status,
    createdAtUtc: c.created_at,
    scheduledForUtc: c.scheduled_for,
    dispatchedAtUtc: c.dispatched_at,
    answeredAtUtc: c.answered_at,
    endedAtUtc: c.ended_at,
    endedReason: c.ended_reason,
    durationSec: c.duration_sec,
    trunkId: c.trunk_id,
    transcriptPath: c.transcript_path,
    errorDetail: c.error_detail,
    attempt: c.attempt,
    retriesLeft: c.retries_left,
    retryDelayMinutes: c.retry_delay_minutes,
    maxSeconds: c.max_seconds,
  };
}

interface Deps {
  repo: TelephonyRepo;
  admin: TelephonyAdmin;
  bridge: BridgeLink;
  jobs: JobQueue;
  events: EventBus;
  keys: KeyService;
  clock: Clock;
  log: Logger;
  tenants: TenantService;
  transcripts: TranscriptStore;
  mailer: OutcomeMailer;
  config: TelephonyConfig;
  prompts: Prompts;
}

/**
 * Outbound AI calls: creation, dialing through the bridge, hangup, and the state machine the
 * bridge's events drive. Every state change and the events it causes commit in one transaction
 * (ARCHITECTURE.md "Storage": outbox); dialing, retries and mails are jobs with dedupe keys, so a
 * restart neither loses nor doubles a call.
 */
export class CallService implements CallKind<CallRow> {
  constructor(private readonly d: Deps) {}

  private nowIso(): string {
    return new Date(this.d.clock.now()).toISOString();
  }

  private keyAad(callId: string): string {
    return `telephony-call:${callId}`;
  }

  // ---- create ----------------------------------------------------------------------------------

  async create(t: Tenant, who: Principal, body: CallCreate) {
    const { repo, admin, bridge } = this.d;
    // 503 before anything is stored: without a bridge no call can ever be placed.
    if (!bridge.configured) {
      throw new AppError(503, 'bridge_not_configured', 'no telephony bridge is configured (plugins.telephony.bridge.mode is off)');
    }
    const apiKey = body.apiKey ?? admin.tenantEngineKey(t);
    if (!apiKey) {
      throw new InputError('invalid field apiKey: required (no engine API key is stored for this tenant)', 'invalid_request', { field: 'apiKey' });
    }
    const now = this.d.clock.now();
    const at = body.scheduleAtUtc ? Date.parse(body.scheduleAtUtc) : undefined;
    if (at !== undefined && Number.isNaN(at)) throw new InputError('invalid field scheduleAtUtc: not a date', 'invalid_request', { field: 'scheduleAtUtc' });
    // A time already past would dial at once, which is not what whoever picked it meant; a
    // minute's grace absorbs a client clock slightly behind ours (and "now" typed into a form).
    if (at !== undefined && at < now - SCHEDULE_GRACE_MS) {
      throw new InputError(`invalid field scheduleAtUtc: ${new Date(at).toISOString()} is in the past`, 'schedule_in_past', { field: 'scheduleAtUtc' });
    }
    const scheduled = at !== undefined && at > now;
    const callId = newCallId();
    let whitelistAdded = false;
    let whitelistError: string | null = null;
    try {
      whitelistAdded = admin.whitelistAdd(t, body.phone, `outbound call ${callId}`, who.userName ?? who.subject);
    } catch (e) {
      whitelistError = (e as Error).message;
    }
    const settings = repo.settings(t);
    const row: CallRow = {
      call_id: callId,
      tenant_id: t.id,
      requested_by: who.userName ?? who.subject,
      phone: body.phone,
      display_name: body.displayName ?? body.phone,
      email: body.email ?? '',
      // A slug is the prompt's text as it is now: a later change of the prompt leaves this call alone.
      system_prompt: this.d.prompts.resolve(t, body.systemPrompt),
      voicemail_message: body.voicemail?.action === 'message' ? body.voicemail.text : null,
      api_key_sealed: this.d.keys.seal(apiKey, this.keyAad(callId)),
      model: body.model ?? (settings.model || this.d.config.engine.model),
      voice: body.voice,
      language: body.language,
      max_seconds: body.maxSeconds,
      status: 'scheduled',
      created_at: new Date(now).toISOString(),
      scheduled_for: body.scheduleAtUtc ? new Date(at!).toISOString() : null,
      dispatched_at: '',
      answered_at: '',
      ended_at: null,
      ended_reason: '',
      duration_sec: 0,
      trunk_id: '',
      transcript_path: '',
      error_detail: '',
      attempt: 0,
      retries_left: body.retries,
      retry_delay_minutes: body.retryDelayMinutes,
    };
    repo.tx(() => {
      repo.insertCall(row);
      // Immediate calls are dialed inline below; this job is the safety net if we crash first
      // (it finds the call in flight and does nothing otherwise).
      const runAt = scheduled ? at! : now + this.d.config.bridge.requestTimeoutMs * 2 + 5000;
      this.d.jobs.enqueue(DIAL_QUEUE, { callId, attempt: 1 } satisfies DialJob, { tenantId: t.id, runAt, dedupeKey: `dial:${callId}:1`, maxAttempts: 6 });
    });
    const base = { ok: true, callId, tenant: t.host, whitelistAdded, whitelistError };
    if (scheduled) return { ...base, bridgeReply: `scheduled for ${row.scheduled_for}`, status: 'scheduled' as CallStatus };
    const r = await this.dial({ callId, attempt: 1 }, 'inline');
    return { ...base, ok: r.ok, bridgeReply: r.reply, status: repo.callAnyTenant(callId)!.status };
  }

  // ---- dialing ---------------------------------------------------------------------------------

  /**
   * Claims the call for `attempt` and hands it to the bridge. Idempotent: a call already past
   * this attempt is left alone; a second POST of the same call id gets 409 duplicate_call from
   * the bridge, which counts as accepted.
   */
  async dial(job: DialJob, mode: 'inline' | 'job', lastTry = true): Promise<{ ok: boolean; reply: string }> {
    const { repo } = this.d;
    const claimed = repo.tx(() => {
      const c = repo.callAnyTenant(job.callId);
      if (!c) return undefined;
      if (c.status === 'dispatching' && c.attempt === job.attempt) return c;
      if ((c.status === 'scheduled' || c.status === 'ended-failed-retry-pending') && c.attempt === job.attempt - 1) {
        repo.updateCall(c.call_id, {
          status: 'dispatching',
          attempt: job.attempt,
          dispatched_at: this.nowIso(),
          answered_at: '',
          ended_at: null,
          ended_reason: '',
          duration_sec: 0,
          error_detail: '',
          trunk_id: '',
        });
        return repo.callAnyTenant(job.callId);
      }
      return undefined;
    });
    if (!claimed) return { ok: true, reply: 'nothing to do' };
    const tenant = this.d.tenants.byId(claimed.tenant_id);
    if (!tenant) return { ok: false, reply: 'tenant gone' };
    const { routes, defaultTrunkId } = this.d.admin.outbound(tenant);
    const trunks = pickTrunks(routes, defaultTrunkId, claimed.phone);
    if (!trunks.length) {
      this.fail(claimed, 'no outbound route matches the number and no default trunk is set');
      return { ok: false, reply: 'no trunk: no outbound route matches and no default trunk is set' };
    }
    const place = {
      callId: claimed.call_id,
      tenantId: claimed.tenant_id,
      phone: claimed.phone,
      displayName: claimed.display_name,
      trunkIds: trunks.map((id) => bridgeTrunkId(claimed.tenant_id, id)),
      ringTimeoutSec: this.d.config.ringTimeoutSec,
      maxSeconds: claimed.max_seconds,
      engine: {
        ...(this.d.config.engine.url ? { url: this.d.config.engine.url } : {}),
        apiKey: this.d.keys.openString(claimed.api_key_sealed, this.keyAad(claimed.call_id)),
        model: claimed.model,
        voice: claimed.voice,
        language: claimed.language,
        systemPrompt: claimed.system_prompt,
        ...voicemailPolicy(claimed.voicemail_message),
      },
    };
    let ans;
    try {
      ans = await this.d.bridge.placeCall(place);
    } catch (e) {
      const msg = (e as Error).message;
      if (mode === 'job' && !lastTry) throw e; // the job queue tries again with backoff
      this.fail(claimed, msg);
      if (e instanceof AppError) throw new AppError(e.status, e.code, e.message, { extra: { callId: claimed.call_id } });
      throw e;
    }
    if (ans.ok || (ans.status === 409 && ans.error.error === 'duplicate_call')) {
      const now = repo.tx(() => {
        const c = repo.callAnyTenant(claimed.call_id);
        if (c?.status === 'dispatching' && c.attempt === job.attempt) repo.updateCall(c.call_id, { status: 'in-flight' });
        return c?.status;
      });
      // Hung up while the bridge was taking it: tell the bridge now, so the callee is not called.
      if (now === 'cancelled') {
        await this.d.bridge.hangup(claimed.call_id, 'cancelled').catch(() => undefined);
      }
      return { ok: true, reply: ans.text };
    }
    this.fail(claimed, `bridge refused the call: ${ans.status} ${ans.error.error} ${ans.error.error_description ?? ''}`.trim());
    return { ok: false, reply: ans.text };
  }

  // ---- hangup (spec "Outbound call status" table) ---------------------------------------------

  /**
   * Spec "Outbound call status": `ended-failed-retry-pending` is an ended state, so hanging it up
   * is a no-op like the others; `cancelRetry` (our extension) stops the pending retry instead.
   */
  async hangup(t: Tenant, who: Principal, callId: string, opts: { cancelRetry?: boolean } = {}): Promise<HangupResult> {
    const { repo } = this.d;
    const c = repo.call(t, callId);
    if (!c) throw new NotFoundError(`no call ${callId}`);
    const actor = who.userName ?? who.subject;
    if (ENDED.has(c.status) || (c.status === 'ended-failed-retry-pending' && !opts.cancelRetry)) return { ok: true, wasNoop: true, callId, status: c.status };
    if (c.status === 'scheduled' || c.status === 'ended-failed-retry-pending') {
      // Never dialed (or waiting for its retry): cancel the pending dial job with the state.
      const changed = repo.tx(() => {
        const cur = repo.call(t, callId)!;
        if (cur.status !== c.status) return false;
        repo.updateCall(callId, { status: 'cancelled', ended_at: this.nowIso(), ended_reason: 'cancelled' });
        this.d.jobs.cancel(DIAL_QUEUE, `dial:${callId}:${cur.attempt + 1}`);
        return true;
      });
      if (!changed) return this.hangup(t, who, callId, opts);
      return { ok: true, callId, newStatus: 'cancelled' as const, actor };
    }
    // dispatching / in-flight: the bridge must end it (BYE, or CANCEL while ringing).
    if (c.status === 'in-flight') {
      const ans = await this.d.bridge.hangup(callId, `hangup by ${actor}`);
      repo.tx(() => {
        const cur = repo.call(t, callId)!;
        if (ENDED.has(cur.status)) return;
        // 404: the bridge no longer has it (its ended event is on the way or was lost): end it here.
        repo.updateCall(callId, { status: 'cancelled', ...(ans.status === 404 ? { ended_at: this.nowIso(), ended_reason: 'cancelled' } : {}) });
      });
    } else {
      repo.tx(() => repo.updateCall(callId, { status: 'cancelled' }));
      try {
        const ans = await this.d.bridge.hangup(callId, `hangup by ${actor}`);
        if (ans.status === 404) repo.tx(() => repo.updateCall(callId, { ended_at: this.nowIso(), ended_reason: 'cancelled' }));
      } catch (e) {
        if (!(e instanceof BadGatewayError)) throw e;
        repo.tx(() => repo.updateCall(callId, { ended_at: this.nowIso(), ended_reason: 'cancelled' }));
      }
    }
    return { ok: true, callId, newStatus: 'cancelled' as const, actor };
  }

  // ---- the outbound kind of call (calls/kinds.ts; CONTROL-API.md "Bridge → core") -------------

  readonly kind = 'outbound';

  row(callId: string): CallRow | undefined {
    return this.d.repo.callAnyTenant(callId);
  }

  /** In flight: a dispatching call is still being handed over, and its dial ends it if that fails. */
  atBridge(): CallRow[] {
    return this.d.repo.callsAtBridge().filter((c) => c.status === 'in-flight');
  }

  onDialing(c: CallRow, ev: Extract<BridgeEvent, { type: 'dialing' }>): boolean {
    const cur = this.d.repo.callAnyTenant(c.call_id)!;
    if (cur.status !== 'dispatching' && cur.status !== 'in-flight') return false;
    this.d.repo.updateCall(c.call_id, { status: 'in-flight', trunk_id: localTrunkId(c.tenant_id, ev.trunkId) });
    return true;
  }

  onAnswered(c: CallRow, ev: Extract<BridgeEvent, { type: 'answered' }>): { answered: CallAnswered; started: CallStarted } | null {
    const cur = this.d.repo.callAnyTenant(c.call_id)!;
    if (cur.answered_at || (cur.status !== 'dispatching' && cur.status !== 'in-flight' && cur.status !== 'cancelled') || cur.ended_at) return null;
    const trunkId = localTrunkId(c.tenant_id, ev.trunkId);
    this.d.repo.updateCall(c.call_id, {
      status: cur.status === 'cancelled' ? 'cancelled' : 'in-flight',
      answered_at: isoOr(ev.answeredAt, this.nowIso()),
      trunk_id: trunkId,
    });
    const party = { callId: c.call_id, phone: c.phone, displayName: c.display_name, direction: 'outbound', source: 'outbound-ai' } as const;
    return {
      answered: { ...party, did: '', fromNumber: '', trunkId, answerMs: Math.round(ev.answerMs) },
      started: { ...party, number: '', did: '', room: '' },
    };
  }

  onTransferred(c: CallRow, ev: Extract<BridgeEvent, { type: 'transferred' }>): CallTransferred {
    return {
      callId: c.call_id,
      fromVnum: '',
      fromOutbound: c.call_id,
      fromPhone: c.phone,
      toUser: ev.toUser,
      toPhone: ev.toPhone,
      transferType: ev.transferType,
      trunkId: localTrunkId(c.tenant_id, ev.trunkId) || c.trunk_id,
      room: '',
      source: 'outbound-ai',
    };
  }

  /**
   * The end of the current attempt: its state (spec "Outbound call status": a hung-up call stays
   * cancelled, no-answer and busy are retried while retries are left), outbound-ai.finished, and
   * the retry or the outcome mail as jobs.
   */
  ending(c: CallRow, end: CallEnd & { endedAt: string }): Ending | null {
    const { repo } = this.d;
    const current = repo.callAnyTenant(c.call_id);
    if (!current || !this.endable(current)) return null;
    const answeredAt = end.answeredAt ? isoOr(end.answeredAt, '') : current.answered_at;
    const answered = end.answered ?? answeredAt !== '';
    const trunkId = localTrunkId(c.tenant_id, end.trunkId ?? null) || current.trunk_id;
    const durationSec = Math.max(0, Math.round(end.talkSec ?? 0));
    const cancelled = current.status === 'cancelled';
    const outcome: Outcome = cancelled ? 'cancelled' : end.outcome;
    let status: CallStatus;
    if (cancelled || outcome === 'cancelled') status = 'cancelled';
    else if (RETRYABLE.has(outcome) && current.retries_left > 0) status = 'ended-failed-retry-pending';
    else if (outcome === 'failed' || outcome === 'no-answer' || outcome === 'busy') status = 'ended-failed-final';
    else status = 'ended-success';
    const errorDetail = end.errorDetail ?? '';
    let cur: CallRow;
    return {
      outcome,
      durationSec,
      transcript:
        answered || end.transcript?.turns.length
          ? {
              callerSource: 'outbound-ai',
              requestedBy: c.requested_by,
              phone: c.phone,
              displayName: c.display_name,
              email: c.email,
              voice: c.voice,
              language: c.language,
              model: c.model,
              trunkId,
              startedUtc: current.dispatched_at || current.created_at,
              answeredUtc: answeredAt,
              answered,
            }
          : null,
      rule: `outbound ${trunkId || '-'}`,
      number: '',
      ended: { number: '', room: '', source: 'sip' },
      saved: { phone: c.phone, displayName: c.display_name, number: '', source: 'outbound-ai' },
      store: (file) => {
        const now = repo.callAnyTenant(c.call_id);
        if (!now || !this.endable(now)) return false;
        cur = now;
        repo.updateCall(c.call_id, {
          status,
          ended_at: end.endedAt,
          ended_reason: outcome,
          duration_sec: durationSec,
          trunk_id: trunkId,
          answered_at: answeredAt,
          error_detail: errorDetail,
          retries_left: status === 'ended-failed-retry-pending' ? cur.retries_left - 1 : cur.retries_left,
          ...(file ? { transcript_path: file } : {}),
        });
        return true;
      },
      after: () => {
        const tr = end.transcript;
        this.d.events.emit(c.tenant_id, 'outbound-ai.finished', {
          callId: c.call_id,
          phone: c.phone,
          displayName: c.display_name,
          outcome,
          answered,
          talkSec: durationSec,
          trunk: trunkId,
          inputTurns: tr?.inputTurns ?? 0,
          outputTurns: tr?.outputTurns ?? 0,
          errorDetail,
        });
        if (status === 'ended-failed-retry-pending') {
          const next = cur.attempt + 1;
          this.d.jobs.enqueue(DIAL_QUEUE, { callId: c.call_id, attempt: next } satisfies DialJob, {
            tenantId: c.tenant_id,
            runAt: this.d.clock.now() + cur.retry_delay_minutes * 60_000,
            dedupeKey: `dial:${c.call_id}:${next}`,
            maxAttempts: 6,
          });
        } else if (cur.email) {
          this.d.jobs.enqueue(MAIL_QUEUE, { callId: c.call_id, attempt: cur.attempt } satisfies MailJob, {
            tenantId: c.tenant_id,
            dedupeKey: `mail:${c.call_id}:${cur.attempt}`,
            maxAttempts: 8,
          });
        }
      },
    };
  }

  /** Ends the current attempt here: a dial that found no trunk, a call the bridge refused or never took. */
  private fail(c: CallRow, errorDetail: string): void {
    endCall(this.d, this, c, { outcome: 'failed', errorDetail });
  }

  /** A call whose current attempt can still end: at the bridge, or cancelled while there. */
  private endable(c: CallRow): boolean {
    return c.status === 'dispatching' || c.status === 'in-flight' || (c.status === 'cancelled' && c.ended_at === null);
  }

  async sendMail(job: MailJob): Promise<void> {
    const c = this.d.repo.callAnyTenant(job.callId);
    if (!c || !c.email) return;
    if (!this.d.mailer.configured) {
      this.d.log.info({ callId: c.call_id }, 'no SMTP relay configured; outcome mail skipped');
      return;
    }
    const tenant = this.d.tenants.byId(c.tenant_id);
    if (!tenant) return;
    let t: FullTranscript | null = null;
    if (c.transcript_path) {
      try {
        t = this.d.transcripts.read(tenant, c.call_id);
      } catch {
        t = null;
      }
    }
    await this.d.mailer.send(
      c.email,
      {
        callId: c.call_id,
        phone: c.phone,
        displayName: c.display_name,
        outcome: c.ended_reason,
        status: c.status,
        errorDetail: c.error_detail,
        durationSec: c.duration_sec,
      },
      t,
    );
  }

  list(t: Tenant, q: { status?: string; since?: string; until?: string; phone?: string }, limit: number, offset: number) {
    const { status } = q;
    const statuses = status
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const known = new Set<string>(['scheduled', 'dispatching', 'in-flight', 'ended-success', 'ended-failed-retry-pending', 'ended-failed-final', 'cancelled']);
    const bad = statuses?.find((s) => !known.has(s));
    if (bad)
      throw new InputError(`invalid query parameter status: unknown state ${bad}; one or more of ${[...known].join(', ')}`, 'invalid_request', {
        field: 'status',
      });
    return this.d.repo.listCalls(t, { statuses, since: q.since, until: q.until, phone: q.phone }, limit, offset);
  }

  /** Today's figures for the console: totals by state, calls at the bridge, and per-hour counts by state. */
  stats(t: Tenant, since = new Date(this.d.clock.now() - 24 * 3600_000).toISOString()) {
    const byStatus: Record<string, number> = {};
    const hours = new Map<string, Record<string, number>>();
    let total = 0;
    for (const r of this.d.repo.callStats(t, since)) {
      byStatus[r.status] = (byStatus[r.status] ?? 0) + r.n;
      const h = hours.get(r.hour) ?? {};
      h[r.status] = r.n;
      hours.set(r.hour, h);
      total += r.n;
    }
    const atBridge = (byStatus['dispatching'] ?? 0) + (byStatus['in-flight'] ?? 0);
    return { since, inFlight: atBridge, scheduled: byStatus['scheduled'] ?? 0, total, byStatus, hours: [...hours].map(([hour, counts]) => ({ hour, counts })) };
  }

  get(t: Tenant, callId: string): CallRow {
    const c = this.d.repo.call(t, callId);
    if (!c) throw new NotFoundError(`no call ${callId}`);
    return c;
  }
}
