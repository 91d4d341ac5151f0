import type Database from 'better-sqlite3';
import type { DB, Tenant } from '../../server/sdk.ts';

export interface ThreadRow {
  id: string;
  tenant_id: string;
  kind: 'direct' | 'group';
  name: string | null;
  direct_key: string | null;
  created_by: string;
  created_at: number;
}

export interface MemberRow {
  thread_id: string;
  user_id: string;
  role: 'owner' | 'member';
  joined_at: number;
  read_up_to: number;
  login: string;
}

export interface MessageRow {
  id: number;
  thread_id: string;
  sender_id: string;
  sender_login: string | null;
  text: string | null;
  file_sha: string | null;
  file_name: string | null;
  file_size: number | null;
  file_type: string | null;
  created_at: number;
  edited_at: number | null;
  deleted_at: number | null;
}

export interface EventRow {
  seq: number;
  thread_id: string;
  kind: string;
  message_id: number | null;
  only_user_id: string | null;
  data: string | null;
  created_at: number;
}

export interface FileRow {
  sha: string;
  size: number;
  type: string;
  created_at: number;
  staged: string | null;
}

const MESSAGE_COLS = `m.id, m.thread_id, m.sender_id, u.name AS sender_login, m.text, m.file_sha, m.file_name,
  f.size AS file_size, f.type AS file_type, m.created_at, m.edited_at, m.deleted_at`;
const MESSAGE_FROM = `chat_messages m LEFT JOIN users u ON u.id = m.sender_id AND u.tenant_id = m.tenant_id
  LEFT JOIN chat_files f ON f.tenant_id = m.tenant_id AND f.sha = m.file_sha`;

/** The chat tables. Every statement takes the tenant first (ARCHITECTURE.md "Tenancy"). */
export class ChatRepo {
  readonly #stmts = new Map<string, Database.Statement>();

  constructor(readonly db: DB) {}

  private s(sql: string): Database.Statement {
    let st = this.#stmts.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.#stmts.set(sql, st);
    }
    return st;
  }

  tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  // ---- threads and members ----

  thread(t: Tenant, id: string): ThreadRow | undefined {
    return this.s('SELECT * FROM chat_threads WHERE tenant_id = ? AND id = ?').get(t.id, id) as ThreadRow | undefined;
  }

  directThread(t: Tenant, key: string): ThreadRow | undefined {
    return this.s('SELECT * FROM chat_threads WHERE tenant_id = ? AND direct_key = ?').get(t.id, key) as ThreadRow | undefined;
  }

  insertThread(t: Tenant, r: Omit<ThreadRow, 'tenant_id'>): void {
    this.s('INSERT INTO chat_threads (id, tenant_id, kind, name, direct_key, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      r.id,
      t.id,
      r.kind,
      r.name,
      r.direct_key,
      r.created_by,
      r.created_at,
    );
  }

  renameThread(t: Tenant, id: string, name: string): void {
    this.s('UPDATE chat_threads SET name = ? WHERE tenant_id = ? AND id = ?').run(name, t.id, id);
  }

  member(t: Tenant, threadId: string, userId: string): MemberRow | undefined {
    return this.s(
      `SELECT mb.thread_id, mb.user_id, mb.role, mb.joined_at, mb.read_up_to, u.name AS login FROM chat_members mb JOIN users u ON u.id = mb.user_id
       WHERE mb.tenant_id = ? AND mb.thread_id = ? AND mb.user_id = ?`,
    ).get(t.id, threadId, userId) as MemberRow | undefined;
  }

  members(t: Tenant, threadId: string): MemberRow[] {
    return this.s(
      `SELECT mb.thread_id, mb.user_id, mb.role, mb.joined_at, mb.read_up_to, u.name AS login FROM chat_members mb JOIN users u ON u.id = mb.user_id
       WHERE mb.tenant_id = ? AND mb.thread_id = ? ORDER BY mb.joined_at, u.name`,
    ).all(t.id, threadId) as MemberRow[];
  }

  addMember(t: Tenant, threadId: string, userId: string, role: 'owner' | 'member', now: number): boolean {
    return (
      this.s('INSERT INTO chat_members (tenant_id, thread_id, user_id, role, joined_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING').run(
        t.id,
        threadId,
        userId,
        role,
        now,
      ).changes > 0
    );
  }

  setRole(t: Tenant, threadId: string, userId: string, role: 'owner' | 'member'): void {
    this.s('UPDATE chat_members SET role = ? WHERE tenant_id = ? AND thread_id = ? AND user_id = ?').run(role, t.id, threadId, userId);
  }

  removeMember(t: Tenant, threadId: string, userId: string): boolean {
    return this.s('DELETE FROM chat_members WHERE tenant_id = ? AND thread_id = ? AND user_id = ?').run(t.id, threadId, userId).changes > 0;
  }

  /** Threads of a user with their newest message id (0 without), newest activity first. */
  threadsOf(t: Tenant, userId: string): (ThreadRow & { read_up_to: number; last_id: number | null; unread: number })[] {
    return this.s(
      `SELECT th.*, mb.read_up_to,
         (SELECT MAX(m.id) FROM chat_messages m WHERE m.tenant_id = th.tenant_id AND m.thread_id = th.id AND m.deleted_at IS NULL) AS last_id,
         (SELECT COUNT(*) FROM chat_messages m WHERE m.tenant_id = th.tenant_id AND m.thread_id = th.id AND m.id > mb.read_up_to
            AND m.sender_id != mb.user_id AND m.deleted_at IS NULL) AS unread
       FROM chat_members mb JOIN chat_threads th ON th.id = mb.thread_id AND th.tenant_id = mb.tenant_id
       WHERE mb.tenant_id = ? AND mb.user_id = ?
       ORDER BY COALESCE(last_id, 0) DESC, th.created_at DESC`,
    ).all(t.id, userId) as (ThreadRow & { read_up_to: number; last_id: number | null; unread: number })[];
  }

  setReadUpTo(t: Tenant, threadId: string, userId: string, upTo: number): boolean {
    return (
      this.s('UPDATE chat_members SET read_up_to = ? WHERE tenant_id = ? AND thread_id = ? AND user_id = ? AND read_up_to < ?').run(
        upTo,
        t.id,
        threadId,
        userId,
        upTo,
      ).changes > 0
    );
  }

  // ---- events ----

  insertEvent(t: Tenant, e: { threadId: string; kind: string; messageId?: number | null; onlyUserId?: string | null; data?: unknown }, now: number): number {
    const r = this.s('INSERT INTO chat_events (tenant_id, thread_id, kind, message_id, only_user_id, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      t.id,
      e.threadId,
      e.kind,
      e.messageId ?? null,
      e.onlyUserId ?? null,
      e.data === undefined ? null : JSON.stringify(e.data),
      now,
    );
    return Number(r.lastInsertRowid);
  }

  /** Events a user may see after `since`: in threads they are a member of now, or addressed to them. */
  eventsFor(t: Tenant, userId: string, since: number, limit: number): EventRow[] {
    return this.s(
      `SELECT seq, thread_id, kind, message_id, only_user_id, data, created_at FROM chat_events e
       WHERE e.tenant_id = ? AND e.seq > ? AND (
         (e.only_user_id IS NULL AND e.thread_id IN (SELECT thread_id FROM chat_members WHERE tenant_id = ? AND user_id = ?))
         OR e.only_user_id = ?)
       ORDER BY e.seq LIMIT ?`,
    ).all(t.id, since, t.id, userId, userId, limit) as EventRow[];
  }

  eventsBySeq(t: Tenant, seqs: number[]): EventRow[] {
    return seqs
      .map((seq) =>
        this.s('SELECT seq, thread_id, kind, message_id, only_user_id, data, created_at FROM chat_events WHERE tenant_id = ? AND seq = ?').get(t.id, seq),
      )
      .filter((r): r is EventRow => r !== undefined);
  }

  headFor(t: Tenant): number {
    const r = this.s('SELECT MAX(seq) AS head FROM chat_events WHERE tenant_id = ?').get(t.id) as { head: number | null };
    return r.head ?? 0;
  }

  // ---- messages ----

  insertMessage(t: Tenant, m: { id: number; threadId: string; senderId: string; text: string | null; fileSha?: string; fileName?: string }, now: number): void {
    this.s('INSERT INTO chat_messages (id, tenant_id, thread_id, sender_id, text, file_sha, file_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
      m.id,
      t.id,
      m.threadId,
      m.senderId,
      m.text,
      m.fileSha ?? null,
      m.fileName ?? null,
      now,
    );
  }

  message(t: Tenant, id: number): MessageRow | undefined {
    return this.s(`SELECT ${MESSAGE_COLS} FROM ${MESSAGE_FROM} WHERE m.tenant_id = ? AND m.id = ?`).get(t.id, id) as MessageRow | undefined;
  }

  /** Newest first, below `before` (exclusive) or above `after` (oldest first then). */
  history(t: Tenant, threadId: string, o: { before?: number; after?: number; limit: number }): MessageRow[] {
    if (o.after !== undefined) {
      return this.s(`SELECT ${MESSAGE_COLS} FROM ${MESSAGE_FROM} WHERE m.tenant_id = ? AND m.thread_id = ? AND m.id > ? ORDER BY m.id ASC LIMIT ?`).all(
        t.id,
        threadId,
        o.after,
        o.limit,
      ) as MessageRow[];
    }
    return this.s(`SELECT ${MESSAGE_COLS} FROM ${MESSAGE_FROM} WHERE m.tenant_id = ? AND m.thread_id = ? AND m.id < ? ORDER BY m.id DESC LIMIT ?`).all(
      t.id,
      threadId,
      o.before ?? Number.MAX_SAFE_INTEGER,
      o.limit,
    ) as MessageRow[];
  }

  allMessages(t: Tenant, threadId: string): MessageRow[] {
    return this.s(`SELECT ${MESSAGE_COLS} FROM ${MESSAGE_FROM} WHERE m.tenant_id = ? AND m.thread_id = ? ORDER BY m.id`).all(t.id, threadId) as MessageRow[];
  }

  editMessage(t: Tenant, id: number, text: string, now: number): void {
    this.s('UPDATE chat_messages SET text = ?, edited_at = ? WHERE tenant_id = ? AND id = ?').run(text, now, t.id, id);
  }

  /** A delete keeps the row (so ids and cursors stay stable) but drops its text and file reference. */
  deleteMessage(t: Tenant, id: number, now: number): void {
    this.s('UPDATE chat_messages SET text = NULL, file_sha = NULL, file_name = NULL, deleted_at = ? WHERE tenant_id = ? AND id = ?').run(now, t.id, id);
  }

  // ---- files ----

  file(t: Tenant, sha: string): FileRow | undefined {
    return this.s('SELECT sha, size, type, created_at, staged FROM chat_files WHERE tenant_id = ? AND sha = ?').get(t.id, sha) as FileRow | undefined;
  }

  /** Inserts the file row, staged; an existing row (same bytes uploaded before) is kept. Returns whether it was new. */
  insertFile(t: Tenant, f: { sha: string; size: number; type: string; staged: string }, now: number): boolean {
    return (
      this.s('INSERT INTO chat_files (tenant_id, sha, size, type, created_at, staged) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING').run(
        t.id,
        f.sha,
        f.size,
        f.type,
        now,
        f.staged,
      ).changes > 0
    );
  }

  fileInPlace(t: Tenant, sha: string): void {
    this.s('UPDATE chat_files SET staged = NULL WHERE tenant_id = ? AND sha = ?').run(t.id, sha);
  }

  stagedFiles(): (FileRow & { tenant_id: string })[] {
    return this.s('SELECT tenant_id, sha, size, type, created_at, staged FROM chat_files WHERE staged IS NOT NULL').all() as (FileRow & {
      tenant_id: string;
    })[];
  }

  deleteFileRow(tenantId: string, sha: string): void {
    this.s('DELETE FROM chat_files WHERE tenant_id = ? AND sha = ?').run(tenantId, sha);
  }

  /**
   * The message under which a member of one of its threads may download `sha` (the newest), or
   * undefined: only members of a thread where the file was shared (and not deleted) get it.
   */
  sharedWith(t: Tenant, sha: string, userId: string): { file_name: string | null } | undefined {
    return this.s(
      `SELECT m.file_name FROM chat_messages m JOIN chat_members mb ON mb.tenant_id = m.tenant_id AND mb.thread_id = m.thread_id AND mb.user_id = ?
       WHERE m.tenant_id = ? AND m.file_sha = ? AND m.deleted_at IS NULL ORDER BY m.id DESC LIMIT 1`,
    ).get(userId, t.id, sha) as { file_name: string | null } | undefined;
  }

  /** A file whose bytes were lost: its row goes, and the messages sharing it become tombstones. */
  dropFile(t: Tenant, sha: string, now: number): void {
    this.tx(() => {
      this.s('UPDATE chat_messages SET file_sha = NULL, file_name = NULL, deleted_at = COALESCE(deleted_at, ?) WHERE tenant_id = ? AND file_sha = ?').run(
        now,
        t.id,
        sha,
      );
      this.deleteFileRow(t.id, sha);
    });
  }

  // ---- retention ----

  retentionDays(t: Tenant): { retention_days: number | null } | undefined {
    return this.s('SELECT retention_days FROM chat_settings WHERE tenant_id = ?').get(t.id) as { retention_days: number | null } | undefined;
  }

  setRetention(t: Tenant, days: number | null, by: string, now: number): void {
    this.s(
      `INSERT INTO chat_settings (tenant_id, retention_days, updated_at, updated_by) VALUES (?, ?, ?, ?)
       ON CONFLICT (tenant_id) DO UPDATE SET retention_days = excluded.retention_days, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
    ).run(t.id, days, now, by);
  }

  /** Deletes messages created before `cutoff` and their events; returns how many messages went. */
  deleteOlderThan(t: Tenant, cutoff: number): number {
    this.s('DELETE FROM chat_events WHERE tenant_id = ? AND created_at < ?').run(t.id, cutoff);
    return this.s('DELETE FROM chat_messages WHERE tenant_id = ? AND created_at < ?').run(t.id, cutoff).changes;
  }

  /** Files no message references any more (and not mid-upload). */
  unreferencedFiles(t: Tenant): string[] {
    return (
      this.s(
        `SELECT f.sha FROM chat_files f WHERE f.tenant_id = ? AND f.staged IS NULL
         AND NOT EXISTS (SELECT 1 FROM chat_messages m WHERE m.tenant_id = f.tenant_id AND m.file_sha = f.sha)`,
      ).all(t.id) as { sha: string }[]
    ).map((r) => r.sha);
  }
}
