import type { Statement } from 'better-sqlite3';
import type { DB, Tenant } from '../../server/sdk.ts';
import type { CallStatus } from './schemas.ts';
import type { TrunkColumns, TrunkRow } from './trunks/trunk.ts';
import type { InboundRouteRow, OutboundRouteRow } from './routing.ts';

/** Filters of the calls list: states, a created_at range (ISO 8601 UTC), a phone-number prefix. */
export interface CallFilter {
  statuses?: string[];
  since?: string;
  until?: string;
  phone?: string;
}

export interface CallRow {
  call_id: string;
  tenant_id: string;
  requested_by: string;
  phone: string;
  display_name: string;
  email: string;
  system_prompt: string;
  api_key_sealed: string;
  model: string;
  voice: string;
  language: string;
  max_seconds: number;
  status: CallStatus;
  created_at: string;
  scheduled_for: string | null;
  dispatched_at: string;
  answered_at: string;
  ended_at: string | null;
  ended_reason: string;
  duration_sec: number;
  trunk_id: string;
  transcript_path: string;
  error_detail: string;
  attempt: number;
  retries_left: number;
  retry_delay_minutes: number;
  /** The voicemail policy: null hangs up at a voicemail box, else the message the AI leaves (migration 0008). */
  voicemail_message: string | null;
}

export interface TranscriptRow {
  tenant_id: string;
  call_id: string;
  caller_source: string;
  started_utc: string;
  ended_utc: string;
  mtime_utc: string;
  duration_sec: number;
  rule: string;
  phone: string;
  display_name: string;
  number: string;
  outcome: string;
  voice: string;
  language: string;
  model: string;
  tokens_total: number;
  tokens_prompt: number;
  turn_count: number;
  size: number;
  file: string;
}

export interface NumberRow {
  tenant_id: string;
  number: string;
  name: string;
  mode: string;
  voice: string;
  language: string;
  save_transcripts: number;
  max_duration_sec: number;
  visibility: string;
  system_prompt: string;
  engine_api_key_sealed: string;
  created_at: string;
}

/** A transcript share link (migration 0003); the token itself is never stored. */
export interface ShareRow {
  id: string;
  tenant_id: string;
  call_id: string;
  token_hash: string;
  token_tail: string;
  ttl_hours: number;
  created_at: string;
  created_by: string;
  expires_at: string | null;
  revoked_at: string | null;
  revoked_by: string | null;
  views: number;
  last_viewed_at: string | null;
}

export interface WhitelistRow {
  number: string;
  comment: string;
  added_at: string;
  added_by: string;
}

export interface SettingsRow {
  tenant_id: string;
  default_trunk_id: string;
  engine_api_key_sealed: string;
  model: string;
}

function likeArg(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** All SQL of the telephony plugin. Every method that reads tenant data takes the Tenant first. */
export class TelephonyRepo {
  // Prepared statements by SQL text: preparing is a large share of a callback's cost (profiled).
  readonly #stmts = new Map<string, Statement>();

  constructor(
    readonly db: DB,
    /** Told of every new call and every change of one (the console's live `call.state` notice). */
    private readonly callChanged?: (tenantId: string, callId: string, status: string) => void,
  ) {}

  private q(sql: string): Statement {
    let st = this.#stmts.get(sql);
    if (!st) {
      if (this.#stmts.size > 500) this.#stmts.clear();
      st = this.db.prepare(sql);
      this.#stmts.set(sql, st);
    }
    return st;
  }

  tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  // ---- trunks ----------------------------------------------------------------------------------

  trunks(t: Tenant): TrunkRow[] {
    return this.q('SELECT * FROM tel_trunks WHERE tenant_id = ? ORDER BY id').all(t.id) as TrunkRow[];
  }

  trunk(t: Tenant, id: string): TrunkRow | undefined {
    return this.q('SELECT * FROM tel_trunks WHERE tenant_id = ? AND id = ?').get(t.id, id) as TrunkRow | undefined;
  }

  /** Every tenant's trunks: only for the bridge push (PUT /trunks carries the full set). */
  allTrunksForBridge(): TrunkRow[] {
    return this.q('SELECT * FROM tel_trunks ORDER BY tenant_id, id').all() as TrunkRow[];
  }

  /** Inserts or replaces a trunk's columns (trunks/trunk.ts `toRow`); created_at stays the first save's. */
  upsertTrunk(t: Tenant, r: TrunkColumns, now: string): void {
    const cols = Object.keys(r);
    this.q(
      `INSERT INTO tel_trunks (tenant_id, ${cols.join(', ')}, created_at, updated_at) VALUES (@tenant_id, ${cols.map((c) => '@' + c).join(', ')}, @now, @now)
         ON CONFLICT(tenant_id, id) DO UPDATE SET ${cols.map((c) => `${c} = excluded.${c}`).join(', ')}, updated_at = excluded.updated_at`,
    ).run({ ...r, tenant_id: t.id, now });
  }

  deleteTrunk(t: Tenant, id: string): boolean {
    return this.q('DELETE FROM tel_trunks WHERE tenant_id = ? AND id = ?').run(t.id, id).changes > 0;
  }

  // ---- settings --------------------------------------------------------------------------------

  settings(t: Tenant): SettingsRow {
    return (
      (this.q('SELECT * FROM tel_settings WHERE tenant_id = ?').get(t.id) as SettingsRow | undefined) ?? {
        tenant_id: t.id,
        default_trunk_id: '',
        engine_api_key_sealed: '',
        model: '',
      }
    );
  }

  saveSettings(t: Tenant, s: Omit<SettingsRow, 'tenant_id'>): void {
    this.db
      .prepare(
        `INSERT INTO tel_settings (tenant_id, default_trunk_id, engine_api_key_sealed, model) VALUES (?, ?, ?, ?)
                ON CONFLICT(tenant_id) DO UPDATE SET default_trunk_id = excluded.default_trunk_id,
                  engine_api_key_sealed = excluded.engine_api_key_sealed, model = excluded.model`,
      )
      .run(t.id, s.default_trunk_id, s.engine_api_key_sealed, s.model);
  }

  // ---- outbound routes -------------------------------------------------------------------------

  outboundRoutes(t: Tenant): OutboundRouteRow[] {
    return (
      this.q('SELECT match, trunk_ids FROM tel_outbound_routes WHERE tenant_id = ? ORDER BY position').all(t.id) as { match: string; trunk_ids: string }[]
    ).map((r) => ({ match: r.match, trunkIds: JSON.parse(r.trunk_ids) as string[] }));
  }

  outboundRoute(t: Tenant, match: string): OutboundRouteRow | undefined {
    return this.outboundRoutes(t).find((r) => r.match === match);
  }

  appendOutbound(t: Tenant, r: OutboundRouteRow): void {
    const pos = (this.q('SELECT COALESCE(MAX(position), 0) + 1 AS p FROM tel_outbound_routes WHERE tenant_id = ?').get(t.id) as { p: number }).p;
    this.q('INSERT INTO tel_outbound_routes (tenant_id, position, match, trunk_ids) VALUES (?, ?, ?, ?)').run(t.id, pos, r.match, JSON.stringify(r.trunkIds));
  }

  updateOutbound(t: Tenant, match: string, trunkIds: string[]): boolean {
    return this.q('UPDATE tel_outbound_routes SET trunk_ids = ? WHERE tenant_id = ? AND match = ?').run(JSON.stringify(trunkIds), t.id, match).changes > 0;
  }

  deleteOutbound(t: Tenant, match: string): boolean {
    return this.q('DELETE FROM tel_outbound_routes WHERE tenant_id = ? AND match = ?').run(t.id, match).changes > 0;
  }

  // ---- inbound routes --------------------------------------------------------------------------

  inboundRoutes(t: Tenant): (InboundRouteRow & { id: number; position: number })[] {
    return (
      this.q('SELECT id, position, did, from_number, user FROM tel_inbound_routes WHERE tenant_id = ? ORDER BY position, id').all(t.id) as {
        id: number;
        position: number;
        did: string;
        from_number: string;
        user: string;
      }[]
    ).map((r) => ({ id: r.id, position: r.position, did: r.did, fromNumber: r.from_number, user: r.user }));
  }

  insertInbound(t: Tenant, position: number, r: InboundRouteRow): void {
    this.q('INSERT INTO tel_inbound_routes (tenant_id, position, did, from_number, user) VALUES (?, ?, ?, ?, ?)').run(
      t.id,
      position,
      r.did,
      r.fromNumber,
      r.user,
    );
  }

  setInboundPosition(t: Tenant, id: number, position: number): void {
    this.q('UPDATE tel_inbound_routes SET position = ? WHERE tenant_id = ? AND id = ?').run(position, t.id, id);
  }

  updateInboundUser(t: Tenant, id: number, user: string): void {
    this.q('UPDATE tel_inbound_routes SET user = ? WHERE tenant_id = ? AND id = ?').run(user, t.id, id);
  }

  deleteInbound(t: Tenant, id: number): void {
    this.q('DELETE FROM tel_inbound_routes WHERE tenant_id = ? AND id = ?').run(t.id, id);
  }

  // ---- whitelist -------------------------------------------------------------------------------

  whitelist(t: Tenant): WhitelistRow[] {
    return this.q('SELECT number, comment, added_at, added_by FROM tel_whitelist WHERE tenant_id = ? ORDER BY added_at, number').all(t.id) as WhitelistRow[];
  }

  /** True when the number was added now, false when it was already listed. */
  whitelistAdd(t: Tenant, number: string, comment: string, by: string, now: string): boolean {
    return (
      this.q('INSERT OR IGNORE INTO tel_whitelist (tenant_id, number, comment, added_at, added_by) VALUES (?, ?, ?, ?, ?)').run(t.id, number, comment, now, by)
        .changes > 0
    );
  }

  /** True when the comment changed. */
  whitelistComment(t: Tenant, number: string, comment: string): boolean {
    return this.q('UPDATE tel_whitelist SET comment = ? WHERE tenant_id = ? AND number = ? AND comment <> ?').run(comment, t.id, number, comment).changes > 0;
  }

  whitelistRemove(t: Tenant, number: string): boolean {
    return this.q('DELETE FROM tel_whitelist WHERE tenant_id = ? AND number = ?').run(t.id, number).changes > 0;
  }

  // ---- calls -----------------------------------------------------------------------------------

  insertCall(r: CallRow): void {
    const cols = Object.keys(r);
    this.q(`INSERT INTO tel_calls (${cols.join(', ')}) VALUES (${cols.map((c) => '@' + c).join(', ')})`).run(r);
    this.callChanged?.(r.tenant_id, r.call_id, r.status);
  }

  call(t: Tenant, callId: string): CallRow | undefined {
    return this.q('SELECT * FROM tel_calls WHERE tenant_id = ? AND call_id = ?').get(t.id, callId) as CallRow | undefined;
  }

  /** By id alone: bridge callbacks and jobs, which carry the call id and then check the tenant. */
  callAnyTenant(callId: string): CallRow | undefined {
    return this.q('SELECT * FROM tel_calls WHERE call_id = ?').get(callId) as CallRow | undefined;
  }

  listCalls(t: Tenant, f: CallFilter, limit: number, offset: number): { rows: CallRow[]; total: number } {
    const where = ['tenant_id = ?'];
    const args: unknown[] = [t.id];
    if (f.statuses?.length) {
      where.push(`status IN (${f.statuses.map(() => '?').join(', ')})`);
      args.push(...f.statuses);
    }
    if (f.since) {
      where.push('created_at >= ?');
      args.push(f.since);
    }
    if (f.until) {
      where.push('created_at < ?');
      args.push(f.until);
    }
    if (f.phone) {
      // A prefix match on the dialled number: the index on (tenant_id, created_at) still bounds the scan.
      where.push("phone LIKE ? ESCAPE '\\'");
      args.push(f.phone.replace(/[\\%_]/g, (c) => '\\' + c) + '%');
    }
    const w = where.join(' AND ');
    const total = (this.q(`SELECT COUNT(*) AS n FROM tel_calls WHERE ${w}`).get(...args) as { n: number }).n;
    const rows = this.q(`SELECT * FROM tel_calls WHERE ${w} ORDER BY created_at DESC, call_id LIMIT ? OFFSET ?`).all(...args, limit, offset) as CallRow[];
    return { rows, total };
  }

  /** Counts per hour bucket and final state since an instant (the console's dashboard chart). */
  callStats(t: Tenant, since: string): { hour: string; status: string; n: number }[] {
    return this.q(
      `SELECT substr(created_at, 1, 13) || ':00:00Z' AS hour, status, COUNT(*) AS n FROM tel_calls
        WHERE tenant_id = ? AND created_at >= ? GROUP BY hour, status ORDER BY hour`,
    ).all(t.id, since) as { hour: string; status: string; n: number }[];
  }

  /** Calls the bridge holds (dispatching or in-flight), across tenants: the supervisor's sweep. */
  callsAtBridge(): CallRow[] {
    return this.q("SELECT * FROM tel_calls WHERE status IN ('dispatching', 'in-flight')").all() as CallRow[];
  }

  updateCall(callId: string, patch: Partial<CallRow>): void {
    const cols = Object.keys(patch);
    if (!cols.length) return;
    const sql = `UPDATE tel_calls SET ${cols.map((c) => `${c} = @${c}`).join(', ')} WHERE call_id = @call_id`;
    if (!this.callChanged) {
      this.q(sql).run({ ...patch, call_id: callId });
      return;
    }
    const row = this.q(`${sql} RETURNING tenant_id, status`).get({ ...patch, call_id: callId }) as { tenant_id: string; status: string } | undefined;
    if (row) this.callChanged(row.tenant_id, callId, row.status);
  }

  /** Records a bridge callback; false when this (instance, seq) was seen before. */
  markBridgeEvent(instance: string, seq: number, callId: string, type: string, now: string): boolean {
    return (
      this.q('INSERT OR IGNORE INTO tel_bridge_events (instance, seq, call_id, type, received) VALUES (?, ?, ?, ?, ?)').run(instance, seq, callId, type, now)
        .changes > 0
    );
  }

  // ---- transcripts -----------------------------------------------------------------------------

  upsertTranscript(r: TranscriptRow): void {
    const cols = Object.keys(r);
    this.q(`INSERT OR REPLACE INTO tel_transcripts (${cols.join(', ')}) VALUES (${cols.map((c) => '@' + c).join(', ')})`).run(r);
  }

  transcript(t: Tenant, callId: string): TranscriptRow | undefined {
    return this.q('SELECT * FROM tel_transcripts WHERE tenant_id = ? AND call_id = ?').get(t.id, callId) as TranscriptRow | undefined;
  }

  listTranscripts(t: Tenant, f: { sources?: string[]; q?: string; since?: string; limit: number; offset: number }): { rows: TranscriptRow[]; total: number } {
    const where = ['tenant_id = ?'];
    const args: unknown[] = [t.id];
    if (f.sources) {
      where.push(`caller_source IN (${f.sources.map(() => '?').join(', ')})`);
      args.push(...f.sources);
    }
    if (f.q) {
      // Spec: substring filter on caller, number, displayName, rule.
      where.push("(phone LIKE ? ESCAPE '\\' OR number LIKE ? ESCAPE '\\' OR display_name LIKE ? ESCAPE '\\' OR rule LIKE ? ESCAPE '\\')");
      const a = likeArg(f.q);
      args.push(a, a, a, a);
    }
    if (f.since) {
      where.push('started_utc >= ?');
      args.push(f.since);
    }
    const w = where.join(' AND ');
    const total = (this.q(`SELECT COUNT(*) AS n FROM tel_transcripts WHERE ${w}`).get(...args) as { n: number }).n;
    const rows = this.q(`SELECT * FROM tel_transcripts WHERE ${w} ORDER BY started_utc DESC, call_id DESC LIMIT ? OFFSET ?`).all(
      ...args,
      f.limit,
      f.offset,
    ) as TranscriptRow[];
    return { rows, total };
  }

  // ---- transcript shares ---------------------------------------------------------------------

  insertShare(r: ShareRow): void {
    const cols = Object.keys(r);
    this.q(`INSERT INTO tel_transcript_shares (${cols.join(', ')}) VALUES (${cols.map((c) => '@' + c).join(', ')})`).run(r);
  }

  share(t: Tenant, callId: string, id: string): ShareRow | undefined {
    return this.q('SELECT * FROM tel_transcript_shares WHERE tenant_id = ? AND call_id = ? AND id = ?').get(t.id, callId, id) as ShareRow | undefined;
  }

  /** The page's lookup: by the token's hash (the unique index) and the tenant of the Host. */
  shareByHash(t: Tenant, tokenHash: string): ShareRow | undefined {
    return this.q('SELECT * FROM tel_transcript_shares WHERE token_hash = ? AND tenant_id = ?').get(tokenHash, t.id) as ShareRow | undefined;
  }

  listShares(t: Tenant, callId: string, limit: number, offset: number): { rows: ShareRow[]; total: number } {
    const total = (this.q('SELECT COUNT(*) AS n FROM tel_transcript_shares WHERE tenant_id = ? AND call_id = ?').get(t.id, callId) as { n: number }).n;
    const rows = this.q('SELECT * FROM tel_transcript_shares WHERE tenant_id = ? AND call_id = ? ORDER BY created_at DESC, id LIMIT ? OFFSET ?').all(
      t.id,
      callId,
      limit,
      offset,
    ) as ShareRow[];
    return { rows, total };
  }

  /** True when this call revoked it; false when it was revoked already (the first revocation stands). */
  revokeShare(t: Tenant, id: string, at: string, by: string): boolean {
    return (
      this.q('UPDATE tel_transcript_shares SET revoked_at = ?, revoked_by = ? WHERE tenant_id = ? AND id = ? AND revoked_at IS NULL').run(at, by, t.id, id)
        .changes > 0
    );
  }

  recordShareView(t: Tenant, id: string, at: string): void {
    this.q('UPDATE tel_transcript_shares SET views = views + 1, last_viewed_at = ? WHERE tenant_id = ? AND id = ?').run(at, t.id, id);
  }

  // ---- virtual numbers -------------------------------------------------------------------------

  numbers(t: Tenant, limit = 10_000, offset = 0): { rows: NumberRow[]; total: number } {
    const total = (this.q('SELECT COUNT(*) AS n FROM tel_numbers WHERE tenant_id = ?').get(t.id) as { n: number }).n;
    const rows = this.q('SELECT * FROM tel_numbers WHERE tenant_id = ? ORDER BY number LIMIT ? OFFSET ?').all(t.id, limit, offset) as NumberRow[];
    return { rows, total };
  }

  number(t: Tenant, number: string): NumberRow | undefined {
    return this.q('SELECT * FROM tel_numbers WHERE tenant_id = ? AND number = ?').get(t.id, number) as NumberRow | undefined;
  }

  upsertNumber(t: Tenant, r: Omit<NumberRow, 'tenant_id'>): void {
    this.db
      .prepare(
        `INSERT INTO tel_numbers (tenant_id, number, name, mode, voice, language, save_transcripts, max_duration_sec, visibility,
                  system_prompt, engine_api_key_sealed, created_at)
                VALUES (@tenant_id, @number, @name, @mode, @voice, @language, @save_transcripts, @max_duration_sec, @visibility,
                  @system_prompt, @engine_api_key_sealed, @created_at)
                ON CONFLICT(tenant_id, number) DO UPDATE SET name = excluded.name, mode = excluded.mode, voice = excluded.voice,
                  language = excluded.language, save_transcripts = excluded.save_transcripts, max_duration_sec = excluded.max_duration_sec,
                  visibility = excluded.visibility, system_prompt = excluded.system_prompt, engine_api_key_sealed = excluded.engine_api_key_sealed`,
      )
      .run({ ...r, tenant_id: t.id });
  }

  deleteNumber(t: Tenant, number: string): boolean {
    return this.q('DELETE FROM tel_numbers WHERE tenant_id = ? AND number = ?').run(t.id, number).changes > 0;
  }
}
