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
import { bridgeTrunkId, localTrunkId, type TelephonyAdmin } from '../trunks/admin.ts';
import type { BridgeLink } from '../bridge-link/link.ts';
import type { OutcomeMailer } from './mail.ts';
import type { CallRow, TelephonyRepo, TranscriptRow } from '../repo.ts';
import { pickTrunks } from '../routing.ts';
import type { BridgeEvent } from '../control.ts';
import type { CallCreate, CallRecord, CallStatus, FullTranscript, Outcome, TelephonyConfig } from '../schemas.ts';
import type { TranscriptStore } from '../transcripts/store.ts';

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
}

/**
 * Outbound AI calls: creation, dialing through the bridge, hangup, and the state machine the
 * bridge's events drive. Every state change and the events it causes commit in one transaction
 * (ARCHITECTURE.md "Storage": outbox); dialing, retries and mails are jobs with dedupe keys, so a
 * restart neither loses nor doubles a call.
 */
export class CallService {
  constructor(private readonly d: Deps) {}

  /** Set by the plugin: applies a bridge event of a room call, or null when the call is not one. */
  roomEvents: ((ev: BridgeEvent, mark: () => boolean) => { applied: boolean } | null) | null = null;

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
      system_prompt: body.systemPrompt,
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
      this.finish(claimed, { outcome: 'failed', errorDetail: 'no outbound route matches the number and no default trunk is set' });
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
      },
    };
    let ans;
    try {
      ans = await this.d.bridge.placeCall(place);
    } catch (e) {
      const msg = (e as Error).message;
      if (mode === 'job' && !lastTry) throw e; // the job queue tries again with backoff
      this.finish(claimed, { outcome: 'failed', errorDetail: msg });
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
    this.finish(claimed, {
      outcome: 'failed',
      errorDetail: `bridge refused the call: ${ans.status} ${ans.error.error} ${ans.error.error_description ?? ''}`.trim(),
    });
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

  // ---- bridge events (CONTROL-API.md "Bridge → core") -----------------------------------------

  /** Applies one callback. Duplicates (same instance and seq, or a state already past) are no-ops. */
  applyEvent(instance: string, ev: BridgeEvent): { applied: boolean } {
    const { repo } = this.d;
    // (instance, seq) is recorded in the same transaction as the change it causes: a failure
    // leaves it unrecorded, so the bridge's retry applies it then.
    const mark = () => repo.markBridgeEvent(instance, ev.seq, ev.callId, ev.type, this.nowIso());
    const c = repo.callAnyTenant(ev.callId);
    if (!c) {
      // A browser room's call (rooms.ts) has its own table and events.
      const room = this.roomEvents?.(ev, mark);
      if (room) return room;
      if (repo.tx(mark)) this.d.log.warn({ callId: ev.callId, type: ev.type }, 'bridge event for an unknown call');
      return { applied: false };
    }
    const tenant = this.d.tenants.byId(c.tenant_id);
    if (!tenant) return { applied: false };
    switch (ev.type) {
      case 'dialing':
        return {
          applied: repo.tx(() => {
            if (!mark()) return false;
            const cur = repo.callAnyTenant(c.call_id)!;
            if (cur.status !== 'dispatching' && cur.status !== 'in-flight') return false;
            repo.updateCall(c.call_id, { status: 'in-flight', trunk_id: localTrunkId(c.tenant_id, ev.trunkId) });
            return true;
          }),
        };
      case 'answered':
        return {
          applied: repo.tx(() => {
            if (!mark()) return false;
            const cur = repo.callAnyTenant(c.call_id)!;
            if (cur.answered_at || (cur.status !== 'dispatching' && cur.status !== 'in-flight' && cur.status !== 'cancelled') || cur.ended_at) return false;
            const trunkId = localTrunkId(c.tenant_id, ev.trunkId);
            const answeredAt = isoOr(ev.answeredAt, this.nowIso());
            repo.updateCall(c.call_id, { status: cur.status === 'cancelled' ? 'cancelled' : 'in-flight', answered_at: answeredAt, trunk_id: trunkId });
            // Spec "Event kinds": call answered arrives just before call.started.
            this.d.events.emit(c.tenant_id, 'call.answered', {
              callId: c.call_id,
              phone: c.phone,
              displayName: c.display_name,
              did: '',
              fromNumber: '',
              trunkId,
              direction: 'outbound',
              source: 'outbound-ai',
              answerMs: Math.round(ev.answerMs),
            });
            this.d.events.emit(c.tenant_id, 'call.started', {
              callId: c.call_id,
              number: '',
              did: '',
              phone: c.phone,
              displayName: c.display_name,
              room: '',
              direction: 'outbound',
              source: 'outbound-ai',
            });
            return true;
          }),
        };
      case 'transferred':
        return {
          applied: repo.tx(() => {
            if (!mark()) return false;
            this.d.events.emit(c.tenant_id, 'call.transferred', {
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
            });
            return true;
          }),
        };
      case 'ended':
        return { applied: this.finish(c, ev, mark) };
    }
  }

  /**
   * Ends the current attempt of a call: state, transcript, events and follow-up jobs. Used for the
   * bridge's `ended`, for calls lost with a dead bridge and for calls the bridge refused.
   */
  finish(
    c: CallRow,
    ev: {
      outcome: Outcome;
      errorDetail?: string;
      answered?: boolean;
      answeredAt?: string | null;
      endedAt?: string;
      talkSec?: number;
      trunkId?: string | null;
      transcript?: Extract<BridgeEvent, { type: 'ended' }>['transcript'];
    },
    mark?: () => boolean,
  ): boolean {
    const { repo } = this.d;
    const tenant = this.d.tenants.byId(c.tenant_id);
    if (!tenant) return false;
    const current = repo.callAnyTenant(c.call_id);
    if (!current || !this.endable(current)) return false;
    const endedAt = isoOr(ev.endedAt, this.nowIso());
    const answeredAt = ev.answeredAt ? isoOr(ev.answeredAt, '') : current.answered_at;
    const answered = ev.answered ?? answeredAt !== '';
    const trunkId = localTrunkId(c.tenant_id, ev.trunkId ?? null) || current.trunk_id;
    const durationSec = Math.max(0, Math.round(ev.talkSec ?? 0));
    const tr = ev.transcript ?? { turns: [], tokensTotal: 0, tokensPrompt: 0, inputTurns: 0, outputTurns: 0, model: '', voice: '', language: '' };
    const cancelled = current.status === 'cancelled';
    const outcome: Outcome = cancelled ? 'cancelled' : ev.outcome;
    let status: CallStatus;
    if (cancelled || outcome === 'cancelled') status = 'cancelled';
    else if (RETRYABLE.has(outcome) && current.retries_left > 0) status = 'ended-failed-retry-pending';
    else if (outcome === 'failed' || outcome === 'no-answer' || outcome === 'busy') status = 'ended-failed-final';
    else status = 'ended-success';

    // The file first (idempotent: a repeat writes the same content), then one transaction.
    let transcriptRow: TranscriptRow | undefined;
    let full: FullTranscript | null = null;
    if (answered || tr.turns.length) {
      full = {
        callId: c.call_id,
        callerSource: 'outbound-ai',
        tenant: tenant.host,
        requestedBy: c.requested_by,
        phone: c.phone,
        displayName: c.display_name,
        email: c.email,
        voice: tr.voice || c.voice,
        language: tr.language || c.language,
        model: tr.model || c.model,
        trunkId,
        startedUtc: current.dispatched_at || current.created_at,
        answeredUtc: answeredAt,
        endedUtc: endedAt,
        durationSec,
        answered,
        outcome,
        errorDetail: ev.errorDetail ?? '',
        inputTurns: tr.inputTurns,
        outputTurns: tr.outputTurns,
        tokensTotal: tr.tokensTotal,
        tokensPrompt: tr.tokensPrompt,
        turns: tr.turns,
      };
      transcriptRow = this.d.transcripts.write(tenant, full, `outbound ${trunkId || '-'}`.trim());
    }
    return repo.tx(() => {
      if (mark && !mark()) return false;
      const cur = repo.callAnyTenant(c.call_id);
      if (!cur || !this.endable(cur)) return false;
      const retry = status === 'ended-failed-retry-pending';
      repo.updateCall(c.call_id, {
        status,
        ended_at: endedAt,
        ended_reason: outcome,
        duration_sec: durationSec,
        trunk_id: trunkId,
        answered_at: answeredAt,
        error_detail: ev.errorDetail ?? '',
        retries_left: retry ? cur.retries_left - 1 : cur.retries_left,
        ...(transcriptRow ? { transcript_path: transcriptRow.file } : {}),
      });
      if (transcriptRow) repo.upsertTranscript(transcriptRow);
      const E = this.d.events;
      E.emit(c.tenant_id, 'call.ended', {
        callId: c.call_id,
        number: '',
        room: '',
        outcome,
        durationSec,
        tokens: tr.tokensTotal,
        source: 'sip',
      });
      E.emit(c.tenant_id, 'outbound-ai.finished', {
        callId: c.call_id,
        phone: c.phone,
        displayName: c.display_name,
        outcome,
        answered,
        talkSec: durationSec,
        trunk: trunkId,
        inputTurns: tr.inputTurns,
        outputTurns: tr.outputTurns,
        errorDetail: ev.errorDetail ?? '',
      });
      if (transcriptRow) {
        E.emit(c.tenant_id, 'transcript.saved', {
          callId: c.call_id,
          phone: c.phone,
          displayName: c.display_name,
          number: '',
          file: transcriptRow.file,
          outcome,
          source: 'outbound-ai',
        });
      }
      if (retry) {
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
      return true;
    });
  }

  /** A call whose current attempt can still end: at the bridge, or cancelled while there. */
  private endable(c: CallRow): boolean {
    return c.status === 'dispatching' || c.status === 'in-flight' || (c.status === 'cancelled' && c.ended_at === null);
  }

  /** The embedded bridge died: every call it carried ends as failed, never stuck in flight. */
  failCallsAtBridge(reason: string, statuses: CallStatus[] = ['in-flight']): number {
    let n = 0;
    for (const c of this.d.repo.callsAtBridge()) {
      if (!statuses.includes(c.status) && !(c.status === 'cancelled')) continue;
      if (this.finish(c, { outcome: 'failed', errorDetail: reason })) n++;
    }
    return n;
  }

  /**
   * A remote bridge came back or restarted (new X-Bridge-Instance): outbound calls we think are in
   * flight that `kept` does not spare (the bridge lists them, or reported on them since) are gone:
   * they end as failed. The supervisor asks the bridge (GET /calls) once for every kind of call.
   */
  reconcile(kept: (callId: string) => boolean): number {
    let n = 0;
    for (const c of this.d.repo.callsAtBridge()) {
      if (c.status !== 'in-flight' || kept(c.call_id)) continue;
      if (this.finish(c, { outcome: 'failed', errorDetail: 'bridge restarted' })) n++;
    }
    return n;
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
  stats(t: Tenant, since: string) {
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

function isoOr(s: string | null | undefined, fallback: string): string {
  if (!s) return fallback;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? fallback : new Date(ms).toISOString();
}
