import crypto from 'node:crypto';
import {
  AppError,
  AuthenticationError,
  InputError,
  NotAllowedError,
  NotFoundError,
  type AuditWriter,
  type Clock,
  type Logger,
  type Principal,
  type Tenant,
  type TenantService,
  type User,
  type UserService,
} from '../../server/sdk.ts';
import type { ChatRepo, EventRow, MessageRow, ThreadRow } from './repo.ts';
import type { ChatConfig, MessageItem, TargetQuery, ThreadItem, UserRef } from './schemas.ts';

/** One frame of the socket's event stream (README "Socket protocol"). */
export interface EventFrame {
  seq: number;
  type: string;
  threadId: string;
  at: string;
  [k: string]: unknown;
}

/** Where committed events go (the socket hub); called after the transaction, in the same tick. */
export interface EventSink {
  publish(tenant: Tenant, threadId: string, onlyUserId: string | null, frame: EventFrame): void;
  /** Ephemeral (typing): to members' sockets but the sender's, never stored, no seq. */
  ephemeral(tenant: Tenant, threadId: string, exceptUserId: string, frame: Record<string, unknown>): void;
}

/** A file received and hashed, still at its temporary name (files.ts). */
export interface ReceivedFile {
  sha: string;
  size: number;
  type: string;
  name: string;
  tmpName: string;
}

export interface FilePlacer {
  /** Moves the staged bytes to their content address (after the row committed). */
  place(tenant: Tenant, sha: string, tmpName: string): void;
  remove(tenant: Tenant, sha: string): void;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** `text` as stored: plain text, bounded, NUL-free (it is never rendered as HTML, so no escaping here). */
export function checkText(text: string, max: number): string {
  if (text.length > max) throw new InputError(`text longer than ${max} characters`, 'invalid_request', { field: 'text' });
  if (text.includes('\u0000')) throw new InputError('text must not contain NUL', 'invalid_request', { field: 'text' });
  if (!text.trim()) throw new InputError('text must not be blank', 'invalid_request', { field: 'text' });
  return text;
}

/**
 * Chat logic, no HTTP: threads (direct and groups), messages, read markers, edits and deletes,
 * the event log the sockets deliver, exports and retention. Every method takes the tenant first
 * and checks membership itself: a thread a caller is not a member of is "not found", by id, by
 * file hash or over the socket alike.
 */
export class ChatService {
  /** Member ids per thread, for the fan-out hot path; dropped on every membership change. */
  readonly #members = new Map<string, string[]>();
  sink: EventSink | undefined;

  constructor(
    readonly repo: ChatRepo,
    private readonly d: {
      users: UserService;
      tenants: TenantService;
      clock: Clock;
      config: ChatConfig;
      audit: AuditWriter;
      log: Logger;
      files: FilePlacer;
    },
  ) {}

  // ---- identity ----

  /** The chat user behind a route's principal: a person (OIDC user token or their ak_ key), active. */
  userOf(tenant: Tenant, p: Principal | null): User {
    if (!p || (p.kind !== 'user' && p.kind !== 'apiKey')) throw new NotAllowedError('chat needs a user: an OIDC access token of a person or their ak_ key');
    const u = this.d.users.get(tenant, p.subject);
    if (!u || u.status !== 'active') throw new AuthenticationError('the account is not active');
    return u;
  }

  me(tenant: Tenant, u: User) {
    return { id: u.id, login: u.name, email: u.email, role: u.role, tenant: tenant.host, head: this.repo.headFor(tenant) };
  }

  // ---- threads ----

  /** The thread a query names, if the user is a member (else 404, never 403: existence is not told). */
  thread(tenant: Tenant, u: User, q: Partial<TargetQuery>): ThreadRow {
    let th: ThreadRow | undefined;
    if (q.with !== undefined) th = this.repo.directThread(tenant, this.directKey(u.id, this.peer(tenant, q.with).id));
    else th = this.repo.thread(tenant, (q.groupId ?? q.threadId)!);
    if (!th || (q.groupId !== undefined && th.kind !== 'group') || !this.repo.member(tenant, th.id, u.id)) {
      throw new NotFoundError(q.with !== undefined ? `no conversation with ${q.with} yet` : `no thread ${q.groupId ?? q.threadId}`);
    }
    return th;
  }

  /** Like thread(), but `with` makes the direct thread on first use (inside the caller's transaction). */
  private threadForWrite(tenant: Tenant, u: User, q: Partial<TargetQuery>, now: number): { th: ThreadRow; created: boolean } {
    if (q.with === undefined) return { th: this.thread(tenant, u, q), created: false };
    const peer = this.peer(tenant, q.with);
    const key = this.directKey(u.id, peer.id);
    const existing = this.repo.directThread(tenant, key);
    if (existing) return { th: existing, created: false };
    const th: ThreadRow = {
      id: 'd_' + crypto.randomBytes(8).toString('hex'),
      tenant_id: tenant.id,
      kind: 'direct',
      name: null,
      direct_key: key,
      created_by: u.id,
      created_at: now,
    };
    this.repo.insertThread(tenant, th);
    this.repo.addMember(tenant, th.id, u.id, 'member', now);
    if (peer.id !== u.id) this.repo.addMember(tenant, th.id, peer.id, 'member', now);
    this.#members.delete(th.id);
    return { th, created: true };
  }

  /** A user of this tenant by login (a user of another tenant is simply not found). */
  private peer(tenant: Tenant, login: string): User {
    const p = this.d.users.byName(tenant, login);
    if (!p || p.status === 'disabled') throw new NotFoundError(`no user ${login}`);
    return p;
  }

  /** 404 unless `login` is a user of this tenant (checked before an upload's bytes are read). */
  peerExists(tenant: Tenant, login: string): void {
    this.peer(tenant, login);
  }

  /** A file the user may download: shared (not deleted) in a thread they are a member of, and in place. */
  fileFor(tenant: Tenant, u: User, sha: string): { sha: string; size: number; type: string; name: string } {
    const shared = this.repo.sharedWith(tenant, sha, u.id);
    const f = shared && this.repo.file(tenant, sha);
    if (!shared || !f || f.staged !== null) throw new NotFoundError(`no file ${sha}`);
    return { sha, size: f.size, type: f.type, name: shared.file_name ?? 'file' };
  }

  private directKey(a: string, b: string): string {
    return a < b ? `${a}|${b}` : `${b}|${a}`;
  }

  memberIds(tenant: Tenant, threadId: string): string[] {
    let ids = this.#members.get(threadId);
    if (!ids) {
      ids = this.repo.members(tenant, threadId).map((m) => m.user_id);
      this.#members.set(threadId, ids);
    }
    return ids;
  }

  listThreads(tenant: Tenant, u: User): ThreadItem[] {
    return this.repo.threadsOf(tenant, u.id).map((r) => {
      const members = this.repo.members(tenant, r.id);
      const last = r.last_id ? this.repo.message(tenant, r.last_id) : undefined;
      const peer = r.kind === 'direct' ? (members.find((m) => m.user_id !== u.id) ?? members[0]) : undefined;
      return {
        id: r.id,
        kind: r.kind,
        name: r.name,
        peer: peer ? { id: peer.user_id, login: peer.login } : null,
        members: members.map((m) => ({ id: m.user_id, login: m.login, role: m.role })),
        lastMessage: last ? this.item(last) : null,
        unread: r.unread,
        readUpTo: r.read_up_to,
        createdAt: iso(r.created_at)!,
      };
    });
  }

  threadInfo(tenant: Tenant, th: ThreadRow) {
    return {
      id: th.id,
      kind: th.kind,
      name: th.name,
      members: this.repo.members(tenant, th.id).map((m) => ({ id: m.user_id, login: m.login, role: m.role })),
      createdAt: iso(th.created_at)!,
    };
  }

  // ---- messages ----

  send(tenant: Tenant, u: User, q: Partial<TargetQuery>, text: string): MessageItem {
    checkText(text, this.d.config.maxTextLength);
    const now = this.d.clock.now();
    const out = this.repo.tx(() => {
      const { th, created } = this.threadForWrite(tenant, u, q, now);
      const pre = created ? [this.repo.insertEvent(tenant, { threadId: th.id, kind: 'thread' }, now)] : [];
      const seq = this.repo.insertEvent(tenant, { threadId: th.id, kind: 'message' }, now);
      this.repo.insertMessage(tenant, { id: seq, threadId: th.id, senderId: u.id, text }, now);
      return { seqs: [...pre, seq], threadId: th.id };
    });
    this.emit(tenant, out.seqs);
    return this.item(this.repo.message(tenant, out.seqs[out.seqs.length - 1]!)!);
  }

  /**
   * Shares an uploaded file: the file row (staged) and the message commit first, then the bytes
   * move to their content address and the row is marked in place. A crash between the two leaves
   * a staged row that start-up recovery completes (files.ts), never a row naming a partial file.
   */
  shareFile(tenant: Tenant, u: User, q: Partial<TargetQuery>, f: ReceivedFile): MessageItem {
    const now = this.d.clock.now();
    let fresh = false;
    const out = this.repo.tx(() => {
      const { th, created } = this.threadForWrite(tenant, u, q, now);
      fresh = this.repo.insertFile(tenant, { sha: f.sha, size: f.size, type: f.type, staged: f.tmpName }, now);
      const pre = created ? [this.repo.insertEvent(tenant, { threadId: th.id, kind: 'thread' }, now)] : [];
      const seq = this.repo.insertEvent(tenant, { threadId: th.id, kind: 'message' }, now);
      this.repo.insertMessage(tenant, { id: seq, threadId: th.id, senderId: u.id, text: null, fileSha: f.sha, fileName: f.name }, now);
      return { seqs: [...pre, seq] };
    });
    // Same bytes uploaded before: the existing file stays, this copy goes (place() handles both).
    this.d.files.place(tenant, f.sha, f.tmpName);
    if (fresh) this.repo.fileInPlace(tenant, f.sha);
    this.emit(tenant, out.seqs);
    return this.item(this.repo.message(tenant, out.seqs[out.seqs.length - 1]!)!);
  }

  history(tenant: Tenant, u: User, q: Partial<TargetQuery> & { before?: number; after?: number; limit: number }) {
    const th = this.thread(tenant, u, q);
    const rows = this.repo.history(tenant, th.id, { before: q.before, after: q.after, limit: q.limit + 1 });
    const hasMore = rows.length > q.limit;
    const page = rows.slice(0, q.limit);
    if (q.after === undefined) page.reverse();
    return {
      threadId: th.id,
      messages: page.map((m) => this.item(m)),
      nextBefore: q.after === undefined && hasMore ? page[0]!.id : q.after !== undefined && page.length ? page[0]!.id : null,
      hasMore,
    };
  }

  /** Own messages only; a deleted message cannot be edited. */
  edit(tenant: Tenant, u: User, id: number, text: string): MessageItem {
    checkText(text, this.d.config.maxTextLength);
    const m = this.ownMessage(tenant, u, id);
    if (m.deleted_at !== null) throw new AppError(409, 'conflict', `message ${id} was deleted`, { reason: 'message_deleted' });
    if (m.file_sha) throw new InputError(`message ${id} is a file; delete it instead`);
    const now = this.d.clock.now();
    const seq = this.repo.tx(() => {
      this.repo.editMessage(tenant, id, text, now);
      return this.repo.insertEvent(tenant, { threadId: m.thread_id, kind: 'message.edit', messageId: id }, now);
    });
    this.emit(tenant, [seq]);
    return this.item(this.repo.message(tenant, id)!);
  }

  delete(tenant: Tenant, u: User, id: number): MessageItem {
    const m = this.ownMessage(tenant, u, id);
    if (m.deleted_at !== null) return this.item(m);
    const now = this.d.clock.now();
    const seq = this.repo.tx(() => {
      this.repo.deleteMessage(tenant, id, now);
      return this.repo.insertEvent(tenant, { threadId: m.thread_id, kind: 'message.delete', messageId: id }, now);
    });
    this.emit(tenant, [seq]);
    return this.item(this.repo.message(tenant, id)!);
  }

  private ownMessage(tenant: Tenant, u: User, id: number): MessageRow {
    const m = this.repo.message(tenant, id);
    // Someone else's message in a thread the caller is not in is "not found"; in a shared thread, 403.
    if (!m || !this.repo.member(tenant, m.thread_id, u.id)) throw new NotFoundError(`no message ${id}`);
    if (m.sender_id !== u.id) throw new NotAllowedError('only the sender may edit or delete a message');
    return m;
  }

  /** Read marker (Matrix m.fully_read): only moves forward; other devices of the user hear of it. */
  read(tenant: Tenant, u: User, threadId: string, upTo: number): { threadId: string; readUpTo: number } {
    const th = this.thread(tenant, u, { threadId });
    const now = this.d.clock.now();
    const seq = this.repo.tx(() =>
      this.repo.setReadUpTo(tenant, th.id, u.id, upTo)
        ? this.repo.insertEvent(tenant, { threadId: th.id, kind: 'read', onlyUserId: u.id, data: { upTo } }, now)
        : undefined,
    );
    if (seq) this.emit(tenant, [seq]);
    return { threadId: th.id, readUpTo: this.repo.member(tenant, th.id, u.id)!.read_up_to };
  }

  typing(tenant: Tenant, u: User, threadId: string): void {
    const th = this.thread(tenant, u, { threadId });
    this.sink?.ephemeral(tenant, th.id, u.id, { type: 'typing', threadId: th.id, user: { id: u.id, login: u.name }, at: iso(this.d.clock.now()) });
  }

  // ---- groups ----

  groupCreate(tenant: Tenant, u: User, name: string, logins: string[], meta: AuditMeta) {
    const peers = this.uniquePeers(tenant, logins).filter((p) => p.id !== u.id);
    if (peers.length + 1 > this.d.config.maxGroupMembers) throw new InputError(`a group holds at most ${this.d.config.maxGroupMembers} members`);
    const now = this.d.clock.now();
    const id = 'g_' + crypto.randomBytes(8).toString('hex');
    const seqs = this.repo.tx(() => {
      this.repo.insertThread(tenant, { id, kind: 'group', name, direct_key: null, created_by: u.id, created_at: now });
      this.repo.addMember(tenant, id, u.id, 'owner', now);
      for (const p of peers) this.repo.addMember(tenant, id, p.id, 'member', now);
      this.#members.delete(id);
      return [this.repo.insertEvent(tenant, { threadId: id, kind: 'thread', data: { by: ref(u) } }, now)];
    });
    this.audit(tenant, meta, 'chat-group-create', { group: id, name, members: [u.name, ...peers.map((p) => p.name)].join(',') });
    this.emit(tenant, seqs);
    return this.threadInfo(tenant, this.repo.thread(tenant, id)!);
  }

  /** Owners (the creator) and tenant admins who are members may rename; Mattermost's channel admin rule. */
  groupRename(tenant: Tenant, u: User, groupId: string, name: string, meta: AuditMeta) {
    const th = this.thread(tenant, u, { groupId });
    this.requireManager(tenant, u, th);
    const now = this.d.clock.now();
    const seq = this.repo.tx(() => {
      this.repo.renameThread(tenant, th.id, name);
      return this.repo.insertEvent(tenant, { threadId: th.id, kind: 'thread', data: { by: ref(u), renamedFrom: th.name } }, now);
    });
    this.audit(tenant, meta, 'chat-group-rename', { group: th.id, from: th.name ?? '', to: name });
    this.emit(tenant, [seq]);
    return this.threadInfo(tenant, this.repo.thread(tenant, th.id)!);
  }

  /** Any member may add people (Matrix's default invite level); the adder is recorded. */
  groupAdd(tenant: Tenant, u: User, groupId: string, logins: string[], meta: AuditMeta) {
    const th = this.thread(tenant, u, { groupId });
    const peers = this.uniquePeers(tenant, logins);
    const now = this.d.clock.now();
    const { seqs, added } = this.repo.tx(() => {
      const added = peers.filter((p) => this.repo.addMember(tenant, th.id, p.id, 'member', now));
      if (this.repo.members(tenant, th.id).length > this.d.config.maxGroupMembers) {
        throw new InputError(`a group holds at most ${this.d.config.maxGroupMembers} members`);
      }
      this.#members.delete(th.id);
      const seqs = added.length
        ? [this.repo.insertEvent(tenant, { threadId: th.id, kind: 'member.add', data: { by: ref(u), members: added.map(ref) } }, now)]
        : [];
      return { seqs, added };
    });
    this.#members.delete(th.id);
    if (added.length) this.audit(tenant, meta, 'chat-group-add', { group: th.id, members: added.map((p) => p.name).join(',') });
    this.emit(tenant, seqs);
    return this.threadInfo(tenant, this.repo.thread(tenant, th.id)!);
  }

  /** Owners and tenant admins who are members remove others; anyone may leave (groupLeave). */
  groupRemove(tenant: Tenant, u: User, groupId: string, logins: string[], meta: AuditMeta) {
    const th = this.thread(tenant, u, { groupId });
    this.requireManager(tenant, u, th);
    const peers = this.uniquePeers(tenant, logins);
    return this.removeMembers(tenant, u, th, peers, 'chat-group-remove', meta);
  }

  groupLeave(tenant: Tenant, u: User, groupId: string, meta: AuditMeta) {
    const th = this.thread(tenant, u, { groupId });
    return this.removeMembers(tenant, u, th, [u], 'chat-group-leave', meta);
  }

  private removeMembers(tenant: Tenant, u: User, th: ThreadRow, peers: User[], event: string, meta: AuditMeta) {
    const now = this.d.clock.now();
    const { seqs, removed } = this.repo.tx(() => {
      const removed = peers.filter((p) => this.repo.removeMember(tenant, th.id, p.id));
      this.#members.delete(th.id);
      if (!removed.length) return { seqs: [], removed };
      const data = { by: ref(u), members: removed.map(ref) };
      const seqs = [this.repo.insertEvent(tenant, { threadId: th.id, kind: 'member.remove', data }, now)];
      // The removed no longer see the thread's events: each gets this one addressed to them alone.
      for (const p of removed) seqs.push(this.repo.insertEvent(tenant, { threadId: th.id, kind: 'member.remove', onlyUserId: p.id, data }, now));
      // A group left with no owner passes ownership to its longest-standing member.
      const rest = this.repo.members(tenant, th.id);
      if (rest.length && !rest.some((m) => m.role === 'owner')) {
        this.repo.setRole(tenant, th.id, rest[0]!.user_id, 'owner');
      }
      return { seqs, removed };
    });
    this.#members.delete(th.id);
    if (removed.length) this.audit(tenant, meta, event, { group: th.id, members: removed.map((p) => p.name).join(',') });
    this.emit(tenant, seqs);
    return { groupId: th.id, removed: removed.map(ref) };
  }

  private requireManager(tenant: Tenant, u: User, th: ThreadRow): void {
    const m = this.repo.member(tenant, th.id, u.id);
    if (m?.role !== 'owner' && u.role !== 'admin') throw new NotAllowedError('only the group owner or a tenant admin may do this');
  }

  private uniquePeers(tenant: Tenant, logins: string[]): User[] {
    const seen = new Map<string, User>();
    for (const l of logins) {
      const p = this.peer(tenant, l);
      seen.set(p.id, p);
    }
    return [...seen.values()];
  }

  private audit(tenant: Tenant, meta: AuditMeta, event: string, extra: Record<string, string>): void {
    this.d.audit.write(tenant, { event, user: meta.user, ip: meta.ip, ua: meta.ua, extra });
  }

  // ---- events ----

  /** Committed events to the sockets, in seq order. */
  private emit(tenant: Tenant, seqs: number[]): void {
    if (!this.sink || !seqs.length) return;
    for (const ev of this.repo.eventsBySeq(tenant, seqs)) {
      const f = this.frame(tenant, ev);
      if (f) this.sink.publish(tenant, ev.thread_id, ev.only_user_id, f);
    }
  }

  /** An event as a socket frame, with the message as it is now (null when retention removed it). */
  frame(tenant: Tenant, ev: EventRow): EventFrame | null {
    const base: EventFrame = { seq: ev.seq, type: ev.kind, threadId: ev.thread_id, at: iso(ev.created_at)! };
    const data = ev.data ? (JSON.parse(ev.data) as Record<string, unknown>) : {};
    if (ev.kind === 'message' || ev.kind === 'message.edit' || ev.kind === 'message.delete') {
      const m = this.repo.message(tenant, ev.kind === 'message' ? ev.seq : ev.message_id!);
      if (!m) return null;
      return { ...base, message: this.item(m) };
    }
    if (ev.kind === 'thread') {
      const th = this.repo.thread(tenant, ev.thread_id);
      if (!th) return null;
      return { ...base, ...data, thread: this.threadInfo(tenant, th) };
    }
    return { ...base, ...data };
  }

  item(m: MessageRow): MessageItem {
    const deleted = m.deleted_at !== null;
    return {
      id: m.id,
      threadId: m.thread_id,
      sender: { id: m.sender_id, login: m.sender_login ?? '(removed user)' },
      text: deleted ? null : m.text,
      file:
        !deleted && m.file_sha
          ? { sha: m.file_sha, name: m.file_name ?? 'file', size: m.file_size ?? 0, type: m.file_type ?? 'application/octet-stream' }
          : null,
      createdAt: iso(m.created_at)!,
      editedAt: iso(m.edited_at),
      deleted,
    };
  }

  // ---- admin: export, retention ----

  exportThread(tenant: Tenant, threadId: string, meta: AuditMeta) {
    const th = this.repo.thread(tenant, threadId);
    if (!th) throw new NotFoundError(`no thread ${threadId}`);
    this.audit(tenant, meta, 'chat-export', { thread: th.id });
    return {
      format: 'sovcomms-chat-export/1' as const,
      exportedAt: new Date(this.d.clock.now()).toISOString(),
      tenant: tenant.host,
      thread: this.threadInfo(tenant, th),
      messages: this.repo.allMessages(tenant, th.id).map((m) => this.item(m)),
    };
  }

  retention(tenant: Tenant): { retentionDays: number | null; inherited: boolean } {
    const r = this.repo.retentionDays(tenant);
    return r ? { retentionDays: r.retention_days, inherited: false } : { retentionDays: this.d.config.defaultRetentionDays, inherited: true };
  }

  setRetention(tenant: Tenant, days: number | null, meta: AuditMeta) {
    this.repo.setRetention(tenant, days, meta.user, this.d.clock.now());
    this.audit(tenant, meta, 'chat-retention', { days: days === null ? 'forever' : String(days) });
    return this.retention(tenant);
  }

  /**
   * The retention job's work for every tenant: messages (and their events) older than the
   * tenant's days go; then files no message references any more, rows first, bytes after.
   */
  sweep(): { messages: number; files: number } {
    let messages = 0;
    let files = 0;
    for (const tenant of this.d.tenants.list()) {
      const days = this.retention(tenant).retentionDays;
      if (days !== null) {
        const cutoff = this.d.clock.now() - days * 86_400_000;
        messages += this.repo.tx(() => this.repo.deleteOlderThan(tenant, cutoff));
      }
      for (const sha of this.repo.unreferencedFiles(tenant)) {
        this.repo.deleteFileRow(tenant.id, sha);
        this.d.files.remove(tenant, sha);
        files++;
      }
    }
    if (messages || files) this.d.log.info({ messages, files }, 'chat retention: old messages and unreferenced files deleted');
    return { messages, files };
  }
}

export interface AuditMeta {
  user: string;
  ip?: string;
  ua?: string;
}

function ref(u: User): UserRef {
  return { id: u.id, login: u.name };
}
