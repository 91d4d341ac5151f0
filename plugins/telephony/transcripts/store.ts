import fs from 'node:fs';
import path from 'node:path';
import { InputError, NotFoundError, type Paths, type Tenant } from '../../../server/sdk.ts';
import type { TelephonyRepo, TranscriptRow } from '../repo.ts';
import type { FullTranscript } from '../schemas.ts';

/**
 * Transcripts are JSON files under `data/tenants/<id>/transcripts/<callId>.json` (file names are
 * server-derived: the call id); a row per file indexes them for listing and filtering.
 */
export class TranscriptStore {
  constructor(
    private readonly repo: TelephonyRepo,
    private readonly paths: Paths,
  ) {}

  file(t: Tenant, callId: string): string {
    return this.paths.tenantFile(t, 'transcripts', `${callId}.json`);
  }

  /** Writes the file atomically (temp + rename) and returns the index row to store with it. */
  write(t: Tenant, tr: FullTranscript, rule: string, number = ''): TranscriptRow {
    const file = this.file(t, tr.callId);
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const text = JSON.stringify(tr, null, 2);
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, text, { mode: 0o600 });
    fs.renameSync(tmp, file);
    const st = fs.statSync(file);
    return {
      tenant_id: t.id,
      call_id: tr.callId,
      caller_source: tr.callerSource,
      started_utc: tr.startedUtc,
      ended_utc: tr.endedUtc,
      mtime_utc: st.mtime.toISOString(),
      duration_sec: tr.durationSec,
      rule,
      phone: tr.phone,
      display_name: tr.displayName,
      number,
      outcome: tr.outcome,
      voice: tr.voice,
      language: tr.language,
      model: tr.model,
      tokens_total: tr.tokensTotal,
      tokens_prompt: tr.tokensPrompt,
      turn_count: tr.turns.length,
      size: st.size,
      file: path.basename(file),
    };
  }

  list(t: Tenant, q: { source?: 'vnum' | 'outbound-ai' | 'both'; q?: string; since?: string; limit: number; offset: number }) {
    let since: string | undefined;
    if (q.since) {
      const s = /[zZ]|[+-]\d\d:?\d\d$/.test(q.since) || !/T/.test(q.since) ? q.since : `${q.since}Z`;
      const ms = Date.parse(s);
      if (Number.isNaN(ms)) throw new InputError(`invalid query parameter since: not an ISO 8601 date-time: ${q.since}`, 'invalid_request', { field: 'since' });
      since = new Date(ms).toISOString();
    }
    // Spec: source=vnum matches callerSource vnum and office-tab.
    const sources = q.source === 'vnum' ? ['vnum', 'office-tab'] : q.source === 'outbound-ai' ? ['outbound-ai'] : undefined;
    const { rows, total } = this.repo.listTranscripts(t, { sources, q: q.q, since, limit: q.limit, offset: q.offset });
    return { total, data: rows.map(summary) };
  }

  read(t: Tenant, callId: string): FullTranscript {
    const row = this.repo.transcript(t, callId);
    if (!row) throw new NotFoundError(`no transcript for call ${callId}`);
    try {
      return JSON.parse(fs.readFileSync(this.file(t, callId), 'utf8')) as FullTranscript;
    } catch {
      throw new NotFoundError(`the transcript file of call ${callId} is missing`);
    }
  }
}

export function summary(r: TranscriptRow) {
  return {
    callId: r.call_id,
    callerSource: r.caller_source,
    startedUtc: r.started_utc,
    endedUtc: r.ended_utc,
    mtimeUtc: r.mtime_utc,
    durationSec: r.duration_sec,
    rule: r.rule,
    phone: r.phone,
    displayName: r.display_name,
    number: r.number,
    outcome: r.outcome,
    voice: r.voice,
    language: r.language,
    model: r.model,
    tokensTotal: r.tokens_total,
    tokensPrompt: r.tokens_prompt,
    turnCount: r.turn_count,
    size: r.size,
    source: r.caller_source,
    file: r.file,
  };
}
