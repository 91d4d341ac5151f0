/**
 * Inbound SIP calls at the core: the bridge asks where an INVITE from a trunk goes
 * (inbound routes, first match by Did and FromNumber, the matching rows after it as fallbacks),
 * and where the AI may transfer a call; its `answered` / `transferred` / `ended` events for
 * `vnum…` calls become the spec's inbound events, the call row and the transcript.
 */
import crypto from 'node:crypto';
import { type Clock, type EventBus, type KeyService, type Logger, NotFoundError, type Tenant, type TenantService } from '../../../server/sdk.ts';
import { bridgeTrunkId, localTrunkId, type TelephonyAdmin } from '../trunks/admin.ts';
import type { BridgeEvent } from '../control.ts';
import type { InboundDecision, InboundQuery, Target, TransferDecision, TransferQuery } from '../bridge/inbound/control.ts';
import type { NumberRow, TelephonyRepo, TranscriptRow } from '../repo.ts';
import { pickInbound, pickTrunks } from '../routing.ts';
import type { FullTranscript, TelephonyConfig } from '../schemas.ts';
import type { TranscriptStore } from '../transcripts/store.ts';

export interface InboundCallRow {
  call_id: string;
  tenant_id: string;
  trunk_id: string;
  did: string;
  from_number: string;
  from_name: string;
  target: string;
  number: string;
  caller_source: string;
  status: string;
  started_at: string;
  answered_at: string;
  ended_at: string | null;
  outcome: string;
  duration_sec: number;
  error_detail: string;
  transcript_path: string;
  save_transcript: number;
}

interface Deps {
  repo: TelephonyRepo;
  admin: TelephonyAdmin;
  keys: KeyService;
  events: EventBus;
  clock: Clock;
  log: Logger;
  tenants: TenantService;
  transcripts: TranscriptStore;
  config: TelephonyConfig;
}

const E164 = /^\+[1-9]\d{1,14}$/;

export function newInboundCallId(): string {
  return 'vnum' + crypto.randomBytes(6).toString('hex');
}

export class InboundCalls {
  constructor(private readonly d: Deps) {}

  private nowIso(): string {
    return new Date(this.d.clock.now()).toISOString();
  }

  row(callId: string): InboundCallRow | undefined {
    return this.d.repo.db.prepare('SELECT * FROM tel_inbound_calls WHERE call_id = ?').get(callId) as InboundCallRow | undefined;
  }

  get(t: Tenant, callId: string): InboundCallRow {
    const r = this.row(callId);
    if (!r || r.tenant_id !== t.id) throw new NotFoundError(`no inbound call ${callId}`);
    return r;
  }

  private update(callId: string, patch: Partial<InboundCallRow>): void {
    const keys = Object.keys(patch);
    if (!keys.length) return;
    this.d.repo.db
      .prepare(`UPDATE tel_inbound_calls SET ${keys.map((k) => `${k} = @${k}`).join(', ')} WHERE call_id = @call_id`)
      .run({ ...patch, call_id: callId });
  }

  // ---- the bridge's questions -------------------------------------------------------------------

  /** The tenant owning a trunk as the bridge names it (`<tenant-id>.<trunk-id>`). */
  private trunkTenant(bridgeId: string): Tenant | undefined {
    const r = this.d.repo.allTrunksForBridge().find((x) => bridgeTrunkId(x.tenant_id, x.id) === bridgeId);
    return r ? this.d.tenants.byId(r.tenant_id) : undefined;
  }

  private vnumTarget(t: Tenant, n: NumberRow): Target | null {
    const key = n.engine_api_key_sealed
      ? this.d.keys.openString(n.engine_api_key_sealed, `telephony-number:${t.id}:${n.number}`)
      : this.d.admin.tenantEngineKey(t);
    if (!key) {
      this.d.log.warn({ number: n.number }, 'virtual number without an engine key (and none for the tenant): skipped');
      return null;
    }
    const model = this.d.repo.settings(t).model || this.d.config.engine.model;
    return {
      kind: 'vnum',
      number: n.number,
      maxSeconds: n.max_duration_sec,
      engine: {
        ...(this.d.config.engine.url ? { url: this.d.config.engine.url } : {}),
        apiKey: key,
        model,
        voice: n.voice,
        language: n.language,
        systemPrompt: n.system_prompt,
      },
    };
  }

  /** A PSTN number through the outbound routes, only when it is on the tenant's whitelist. */
  private pstnTarget(t: Tenant, phone: string): Target | string {
    if (!this.d.repo.whitelist(t).some((w) => w.number === phone)) return `${phone} is not on the PSTN whitelist`;
    const { routes, defaultTrunkId } = this.d.admin.outbound(t);
    const trunks = pickTrunks(routes, defaultTrunkId, phone);
    if (!trunks.length) return `no outbound route matches ${phone} and no default trunk is set`;
    return { kind: 'pstn', phone, trunkIds: trunks.map((id) => bridgeTrunkId(t.id, id)), ringTimeoutSec: this.d.config.ringTimeoutSec };
  }

  /** What a route's `user` (or a transfer's name) points at: a virtual number, a PSTN number, or an office user. */
  private targetOf(t: Tenant, name: string): Target | string {
    const n = this.d.repo.number(t, name);
    if (n) return this.vnumTarget(t, n) ?? `virtual number ${name} has no engine key`;
    if (E164.test(name)) return this.pstnTarget(t, name);
    return { kind: 'user', user: name, ringTimeoutSec: this.d.config.ringTimeoutSec };
  }

  decide(q: InboundQuery): InboundDecision {
    const tenant = this.trunkTenant(q.trunkId);
    if (!tenant) return { accept: false, status: 404, reason: 'Not Found' };
    const from = q.from ?? '';
    // First match wins; the rows after it that match too are its fallbacks, in order (README).
    const rows = this.d.admin.inbound(tenant).filter((r) => pickInbound([r], q.did, from) !== undefined);
    const targets: Target[] = [];
    const seen = new Set<string>();
    for (const r of rows) {
      if (!r.user || seen.has(r.user)) continue;
      seen.add(r.user);
      const tg = this.targetOf(tenant, r.user);
      if (typeof tg === 'string') this.d.log.warn({ did: q.did, user: r.user, why: tg }, 'inbound route target skipped');
      else targets.push(tg);
      if (targets.length === 10) break;
    }
    if (!targets.length) return { accept: false, status: 404, reason: 'Not Found' };
    const first = targets[0]!;
    const callId = newInboundCallId();
    const number = first.kind === 'vnum' ? this.d.repo.number(tenant, first.number) : undefined;
    this.d.repo.tx(() =>
      this.d.repo.db
        .prepare(
          `INSERT INTO tel_inbound_calls (call_id, tenant_id, trunk_id, did, from_number, from_name, target, number, caller_source, status, started_at, save_transcript)
           VALUES (@call_id, @tenant_id, @trunk_id, @did, @from_number, @from_name, @target, @number, @caller_source, 'ringing', @started_at, @save_transcript)`,
        )
        .run({
          call_id: callId,
          tenant_id: tenant.id,
          trunk_id: localTrunkId(tenant.id, q.trunkId),
          did: q.did,
          from_number: from,
          from_name: q.fromName ?? '',
          target: first.kind === 'vnum' ? first.number : first.kind === 'user' ? first.user : first.phone,
          number: first.kind === 'vnum' ? first.number : '',
          caller_source: first.kind === 'vnum' ? 'vnum' : 'office-tab',
          started_at: this.nowIso(),
          save_transcript: number ? number.save_transcripts : 1,
        }),
    );
    return { accept: true, callId, tenantId: tenant.id, targets };
  }

  /**
   * Where an AI hands its caller on: another virtual number of the tenant, an office user, or a
   * whitelisted PSTN number through the outbound routes. The same for an inbound SIP call and a
   * browser room's visitor (their calls live in different tables).
   */
  transfer(q: TransferQuery): TransferDecision {
    const tenantId =
      this.row(q.callId)?.tenant_id ??
      (this.d.repo.db.prepare('SELECT tenant_id FROM tel_room_calls WHERE call_id = ? AND ended_at IS NULL').get(q.callId) as { tenant_id: string } | undefined)
        ?.tenant_id;
    const tenant = tenantId ? this.d.tenants.byId(tenantId) : undefined;
    if (!tenant) return { ok: false, error: 'no such call' };
    const name = q.phone || q.user || '';
    if (!name) return { ok: false, error: 'give a user or a phone number' };
    const tg = this.targetOf(tenant, name);
    if (typeof tg === 'string') return { ok: false, error: tg };
    const transferType = tg.kind === 'vnum' ? 'vnum-to-vnum' : tg.kind === 'pstn' ? 'vnum-to-pstn' : 'vnum-to-officetab';
    return { ok: true, transferType, target: tg };
  }

  // ---- events -----------------------------------------------------------------------------------

  applyEvent(instance: string, ev: BridgeEvent): { applied: boolean } {
    const { repo } = this.d;
    const mark = () => repo.markBridgeEvent(instance, ev.seq, ev.callId, ev.type, this.nowIso());
    const c = this.row(ev.callId);
    if (!c) {
      if (repo.tx(mark)) this.d.log.warn({ callId: ev.callId, type: ev.type }, 'bridge event for an unknown inbound call');
      return { applied: false };
    }
    const E = this.d.events;
    switch (ev.type) {
      case 'dialing':
        return { applied: repo.tx(mark) };
      case 'answered':
        return {
          applied: repo.tx(() => {
            if (!mark()) return false;
            const cur = this.row(c.call_id)!;
            if (cur.answered_at || cur.ended_at) return false;
            this.update(c.call_id, { answered_at: isoOr(ev.answeredAt, this.nowIso()), status: 'answered' });
            // Spec "Event kinds": call answered arrives just before call.started.
            E.emit(c.tenant_id, 'call.answered', {
              callId: c.call_id,
              phone: c.from_number,
              displayName: c.from_name,
              did: c.did,
              fromNumber: c.from_number,
              trunkId: c.trunk_id,
              direction: 'inbound',
              source: 'vnum',
              answerMs: Math.round(ev.answerMs),
            });
            E.emit(c.tenant_id, 'call.started', {
              callId: c.call_id,
              number: c.number,
              did: c.did,
              phone: '',
              displayName: '',
              room: '',
              direction: 'inbound',
              source: 'vnum',
            });
            return true;
          }),
        };
      case 'transferred':
        return {
          applied: repo.tx(() => {
            if (!mark()) return false;
            E.emit(c.tenant_id, 'call.transferred', {
              callId: c.call_id,
              fromVnum: c.number,
              fromOutbound: '',
              fromPhone: c.from_number,
              toUser: ev.toUser,
              toPhone: ev.toPhone,
              transferType: ev.transferType,
              trunkId: c.trunk_id,
              room: '',
              source: 'vnum',
            });
            return true;
          }),
        };
      case 'ended':
        return { applied: this.finish(c, ev, mark) };
    }
  }

  private finish(c: InboundCallRow, ev: Extract<BridgeEvent, { type: 'ended' }>, mark: () => boolean): boolean {
    const { repo } = this.d;
    const tenant = this.d.tenants.byId(c.tenant_id);
    if (!tenant || c.ended_at) return repo.tx(mark) && false;
    const endedAt = isoOr(ev.endedAt, this.nowIso());
    const answeredAt = ev.answeredAt ? isoOr(ev.answeredAt, '') : c.answered_at;
    const durationSec = Math.max(0, Math.round(ev.talkSec));
    const tr = ev.transcript;
    let file = '';
    let row: TranscriptRow | undefined;
    if (c.save_transcript && (ev.answered || tr.turns.length)) {
      const full: FullTranscript = {
        callId: c.call_id,
        callerSource: c.caller_source,
        tenant: tenant.host,
        requestedBy: '',
        phone: c.from_number,
        displayName: c.from_name,
        email: '',
        voice: tr.voice,
        language: tr.language,
        model: tr.model,
        trunkId: c.trunk_id,
        startedUtc: c.started_at,
        answeredUtc: answeredAt,
        endedUtc: endedAt,
        durationSec,
        answered: ev.answered,
        outcome: ev.outcome,
        errorDetail: ev.errorDetail,
        inputTurns: tr.inputTurns,
        outputTurns: tr.outputTurns,
        tokensTotal: tr.tokensTotal,
        tokensPrompt: tr.tokensPrompt,
        turns: tr.turns,
      };
      row = { ...this.d.transcripts.write(tenant, full, `inbound ${c.did || '-'} → ${c.target}`), number: c.number || c.did, phone: c.from_number };
      file = row.file;
    }
    return repo.tx(() => {
      if (!mark()) return false;
      const cur = this.row(c.call_id);
      if (!cur || cur.ended_at) return false;
      this.update(c.call_id, {
        status: 'ended',
        ended_at: endedAt,
        answered_at: answeredAt,
        outcome: ev.outcome,
        duration_sec: durationSec,
        error_detail: ev.errorDetail,
        transcript_path: file,
      });
      if (row) repo.upsertTranscript(row);
      const E = this.d.events;
      E.emit(c.tenant_id, 'call.ended', {
        callId: c.call_id,
        number: c.number,
        room: '',
        outcome: ev.outcome,
        durationSec,
        tokens: tr.tokensTotal,
        source: 'sip',
      });
      if (row) {
        E.emit(c.tenant_id, 'transcript.saved', { callId: c.call_id, phone: '', displayName: '', number: c.number, file, outcome: ev.outcome, source: 'vnum' });
      }
      return true;
    });
  }

  /**
   * The bridge restarted (or a new core started a new one): the inbound calls it carried are over,
   * their caller's dialog died with it. Each ends as a normal end would (row, `call.ended` with
   * source `sip`, in one transaction), as `failed` with `reason`; `keep` spares the calls a
   * remote bridge still lists or has reported on since it came back.
   */
  failOpen(reason: string, keep: (callId: string) => boolean = () => false): number {
    const open = this.d.repo.db.prepare('SELECT * FROM tel_inbound_calls WHERE ended_at IS NULL').all() as InboundCallRow[];
    const now = this.nowIso();
    let n = 0;
    for (const c of open) {
      if (keep(c.call_id)) continue;
      const talkSec = c.answered_at ? Math.max(0, (Date.parse(now) - Date.parse(c.answered_at)) / 1000) : 0;
      const ended: Extract<BridgeEvent, { type: 'ended' }> = {
        type: 'ended',
        seq: 0,
        callId: c.call_id,
        outcome: 'failed',
        // Nothing of the conversation reached us: no transcript is written for it.
        answered: false,
        answeredAt: c.answered_at || null,
        endedAt: now,
        talkSec: Number.isFinite(talkSec) ? talkSec : 0,
        trunkId: c.trunk_id,
        errorDetail: reason,
        sipStatus: null,
        transcript: { turns: [], tokensTotal: 0, tokensPrompt: 0, inputTurns: 0, outputTurns: 0, model: '', voice: '', language: '' },
      };
      if (this.finish(c, ended, () => true)) n++;
    }
    return n;
  }
}

function isoOr(s: string | null | undefined, fallback: string): string {
  if (!s) return fallback;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? fallback : new Date(ms).toISOString();
}
