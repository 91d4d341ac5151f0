/**
 * Inbound SIP calls at the core: the bridge asks where an INVITE from a trunk goes
 * (inbound routes, first match by Did and FromNumber, the matching rows after it as fallbacks),
 * and where the AI may transfer a call; its `answered` / `transferred` / `ended` events for
 * `vnum…` calls become the spec's inbound events, the call row and the transcript.
 */
import crypto from 'node:crypto';
import { type Clock, type KeyService, type Logger, NotFoundError, type Tenant, type TenantService } from '../../../server/sdk.ts';
import type { TelephonyAdmin } from '../trunks/admin.ts';
import { bridgeTrunkId, localTrunkId } from '../trunks/trunk.ts';
import type { BridgeEvent } from '../control.ts';
import type { InboundDecision, InboundQuery, Target, TransferDecision, TransferQuery } from '../bridge/inbound/control.ts';
import type { NumberRow, TelephonyRepo } from '../repo.ts';
import { pickInbound, pickTrunks } from '../routing.ts';
import type { InboundRoutes } from './routes.ts';
import type { TelephonyConfig } from '../schemas.ts';
import { type CallAnswered, type CallEnd, type CallKind, type CallStarted, type CallTransferred, type Ending, isoOr } from '../calls/end.ts';

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
  routes: InboundRoutes;
  keys: KeyService;
  clock: Clock;
  log: Logger;
  tenants: TenantService;
  config: TelephonyConfig;
}

const E164 = /^\+[1-9]\d{1,14}$/;

export function newInboundCallId(): string {
  return 'vnum' + crypto.randomBytes(6).toString('hex');
}

export class InboundCalls implements CallKind<InboundCallRow> {
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
    // Without a key the number cannot answer: `decide` logs the route it skips, a save is refused.
    if (!key) return null;
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

  /**
   * Why a route's User cannot take a call (a non-whitelisted E.164 number, a virtual number
   * without an engine key, a number no outbound route reaches), or null: a route is refused when
   * it is saved so, rather than found out by a caller.
   */
  unusable(t: Tenant, user: string): string | null {
    if (!user) return null; // the catchall without a User: no route
    const tg = this.targetOf(t, user);
    return typeof tg === 'string' ? tg : null;
  }

  decide(q: InboundQuery): InboundDecision {
    const tenant = this.trunkTenant(q.trunkId);
    if (!tenant) return { accept: false, status: 404, reason: 'Not Found' };
    const from = q.from ?? '';
    // First match wins; the rows after it that match too are its fallbacks, in order (README).
    const rows = this.d.routes.rows(tenant).filter((r) => pickInbound([r], q.did, from) !== undefined);
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
    // Routes matched, but none of their targets can take a call now (the whitelist or a key changed
    // since they were saved): 480, as when nobody answers (README "Inbound SIP"), never a 404.
    if (!targets.length && seen.size) return { accept: false, status: 480, reason: 'Temporarily Unavailable' };
    if (!targets.length) {
      this.d.log.info({ did: q.did }, 'inbound call without a route (no row with a User matches): 404');
      return { accept: false, status: 404, reason: 'Not Found' };
    }
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

  // ---- the inbound kind of call (calls/kinds.ts) ------------------------------------------------

  readonly kind = 'inbound';

  /** Every open call: the caller's dialog is at the bridge from the INVITE on. */
  atBridge(): InboundCallRow[] {
    return this.d.repo.db.prepare('SELECT * FROM tel_inbound_calls WHERE ended_at IS NULL').all() as InboundCallRow[];
  }

  onDialing(): boolean {
    return true;
  }

  onAnswered(c: InboundCallRow, ev: Extract<BridgeEvent, { type: 'answered' }>): { answered: CallAnswered; started: CallStarted } | null {
    const cur = this.row(c.call_id)!;
    if (cur.answered_at || cur.ended_at) return null;
    this.update(c.call_id, { answered_at: isoOr(ev.answeredAt, this.nowIso()), status: 'answered' });
    // The caller and the number called in every event of the call: the virtual number whose AI
    // answered, else (a route to a user or a PSTN number) the Did.
    const call = { callId: c.call_id, did: c.did, phone: c.from_number, displayName: c.from_name, direction: 'inbound', source: 'vnum' } as const;
    return {
      answered: { ...call, fromNumber: c.from_number, trunkId: c.trunk_id, answerMs: Math.round(ev.answerMs) },
      started: { ...call, number: c.number || c.did, room: '' },
    };
  }

  onTransferred(c: InboundCallRow, ev: Extract<BridgeEvent, { type: 'transferred' }>): CallTransferred {
    return {
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
    };
  }

  /**
   * The transcript holds the turns of every AI the call passed through (the engine's voice, model
   * and language: the last one's). A call the core ends (a bridge restart) has no transcript:
   * nothing of its conversation reached us; its time counts from the answer to the end.
   */
  ending(c: InboundCallRow, end: CallEnd & { endedAt: string }): Ending | null {
    const cur = this.row(c.call_id);
    if (!cur || cur.ended_at) return null;
    const answeredAt = end.answeredAt ? isoOr(end.answeredAt, '') : cur.answered_at;
    const talkSec = end.talkSec ?? (cur.answered_at ? (Date.parse(end.endedAt) - Date.parse(cur.answered_at)) / 1000 : 0);
    const durationSec = Math.max(0, Math.round(Number.isFinite(talkSec) ? talkSec : 0));
    const answered = end.answered ?? false;
    return {
      outcome: end.outcome,
      durationSec,
      transcript:
        cur.save_transcript && (answered || end.transcript?.turns.length)
          ? {
              callerSource: cur.caller_source,
              requestedBy: '',
              phone: cur.from_number,
              displayName: cur.from_name,
              email: '',
              voice: '',
              language: '',
              model: '',
              trunkId: cur.trunk_id,
              startedUtc: cur.started_at,
              answeredUtc: answeredAt,
              answered,
            }
          : null,
      rule: `inbound ${cur.did || '-'} → ${cur.target}`,
      number: cur.number || cur.did,
      ended: { number: cur.number || cur.did, room: '', source: 'sip' },
      saved: { phone: cur.from_number, displayName: cur.from_name, number: cur.number || cur.did, source: 'vnum' },
      store: (file) => {
        const now = this.row(c.call_id);
        if (!now || now.ended_at) return false;
        this.update(c.call_id, {
          status: 'ended',
          ended_at: end.endedAt,
          answered_at: answeredAt,
          outcome: end.outcome,
          duration_sec: durationSec,
          error_detail: end.errorDetail ?? '',
          transcript_path: file,
        });
        return true;
      },
    };
  }
}
