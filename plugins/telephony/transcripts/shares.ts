import crypto from 'node:crypto';
import { AppError, type Clock, type EventBus, NotFoundError, sha256Hex, type Tenant } from '../../../server/sdk.ts';
import type { ShareRow, TelephonyRepo } from '../repo.ts';
import type { FullTranscript, ShareView } from '../schemas.ts';
import type { TranscriptStore } from './store.ts';

/** 32 random bytes, base64url: 256 bits, so a link cannot be guessed, only leaked. */
const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;
const TAIL = 8;

export function shareView(r: ShareRow, file: string, now: number): ShareView {
  const status = r.revoked_at ? 'revoked' : r.expires_at && Date.parse(r.expires_at) <= now ? 'expired' : 'active';
  return {
    id: r.id,
    callId: r.call_id,
    file,
    tokenTail: r.token_tail,
    ttlHours: r.ttl_hours,
    createdBy: r.created_by,
    createdUtc: r.created_at,
    expiresUtc: r.expires_at,
    status,
    revokedUtc: r.revoked_at,
    revokedBy: r.revoked_by,
    views: r.views,
    lastViewedUtc: r.last_viewed_at,
  };
}

/**
 * Share links of transcripts: create (the token is returned once and stored as SHA-256), list per
 * transcript, revoke, and open for the public page. Every change and the event it causes commit
 * in one transaction (the outbox), so a webhook never announces a link that does not exist.
 */
export class TranscriptShares {
  constructor(
    private readonly repo: TelephonyRepo,
    private readonly transcripts: TranscriptStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
  ) {}

  private fileOf(t: Tenant, callId: string): string {
    const row = this.repo.transcript(t, callId);
    if (!row) throw new NotFoundError(`no transcript for call ${callId}`);
    return row.file;
  }

  create(t: Tenant, callId: string, ttlHours: number, createdBy: string): { share: ShareView; token: string } {
    const file = this.fileOf(t, callId);
    const token = crypto.randomBytes(32).toString('base64url');
    const now = this.clock.now();
    const row: ShareRow = {
      id: 'shr_' + crypto.randomBytes(8).toString('hex'),
      tenant_id: t.id,
      call_id: callId,
      token_hash: sha256Hex(token),
      token_tail: token.slice(-TAIL),
      ttl_hours: ttlHours,
      created_at: new Date(now).toISOString(),
      created_by: createdBy,
      expires_at: ttlHours === 0 ? null : new Date(now + ttlHours * 3_600_000).toISOString(),
      revoked_at: null,
      revoked_by: null,
      views: 0,
      last_viewed_at: null,
    };
    this.repo.tx(() => {
      this.repo.insertShare(row);
      this.events.emit(t.id, 'transcript.share.created', {
        token: row.token_tail,
        file,
        ttlHours,
        createdBy,
        expiresUtc: row.expires_at,
        callId,
        shareId: row.id,
      });
    });
    return { share: shareView(row, file, now), token };
  }

  list(t: Tenant, callId: string, limit: number, offset: number): { data: ShareView[]; total: number } {
    const file = this.fileOf(t, callId);
    const now = this.clock.now();
    const { rows, total } = this.repo.listShares(t, callId, limit, offset);
    return { data: rows.map((r) => shareView(r, file, now)), total };
  }

  /** Revokes a link; revoking it again changes nothing and announces nothing (`changed` false). */
  revoke(t: Tenant, callId: string, shareId: string, revokedBy: string): { share: ShareView; changed: boolean } {
    const file = this.fileOf(t, callId);
    if (!this.repo.share(t, callId, shareId)) throw new NotFoundError(`no share ${shareId} of the transcript of call ${callId}`);
    const at = new Date(this.clock.now()).toISOString();
    const changed = this.repo.tx(() => {
      if (!this.repo.revokeShare(t, shareId, at, revokedBy)) return false;
      const row = this.repo.share(t, callId, shareId)!;
      this.events.emit(t.id, 'transcript.share.revoked', { token: row.token_tail, file, revokedBy, callId, shareId });
      return true;
    });
    return { share: shareView(this.repo.share(t, callId, shareId)!, file, this.clock.now()), changed };
  }

  /**
   * The transcript behind a token, counted as a view (and announced), or undefined for anything
   * that must not open: malformed, unknown, another tenant's, revoked, expired, or a transcript
   * whose file is gone. The caller answers all of these alike, so none is an oracle for another.
   */
  open(t: Tenant, token: string, viewerIp: string): { transcript: FullTranscript; share: ShareView } | undefined {
    if (!TOKEN_RE.test(token)) return undefined;
    const row = this.repo.shareByHash(t, sha256Hex(token));
    const now = this.clock.now();
    if (!row || row.revoked_at || (row.expires_at && Date.parse(row.expires_at) <= now)) return undefined;
    const index = this.repo.transcript(t, row.call_id);
    if (!index) return undefined;
    let transcript: FullTranscript;
    try {
      transcript = this.transcripts.read(t, row.call_id);
    } catch (e) {
      if (e instanceof AppError && e.status === 404) return undefined;
      throw e;
    }
    const at = new Date(now).toISOString();
    this.repo.tx(() => {
      this.repo.recordShareView(t, row.id, at);
      this.events.emit(t.id, 'transcript.share.viewed', { token: row.token_tail, file: index.file, viewerIp, callId: row.call_id, shareId: row.id });
    });
    return { transcript, share: shareView({ ...row, views: row.views + 1, last_viewed_at: at }, index.file, now) };
  }
}
