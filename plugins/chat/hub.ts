import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { z } from 'zod';
import {
  AppError,
  AuthenticationError,
  bearerToken,
  errorAnswer,
  InputError,
  rejectUpgrade,
  sha256Hex,
  type AuthPolicy,
  type AuthService,
  type Clock,
  type Logger,
  type Principal,
  type RateLimiter,
  type Tenant,
  type UpgradeContext,
  type User,
} from '../../server/sdk.ts';
import type { ChatConfig } from './schemas.ts';
import type { ChatService, EventFrame, EventSink } from './service.ts';

/** Close codes (RFC 6455 §7.4; 4000-4999 are the application's). */
export const CLOSE = {
  /** The server is stopping: reconnect later with since=<last seq>. */
  goingAway: 1001,
  /** A frame the server cannot accept (not JSON, unknown type, too big). */
  policy: 1008,
  /** The socket fell behind (its send buffer overflowed): reconnect with since=<last seq>. */
  slow: 1013,
  /** Too many sockets for this user: the oldest is closed. */
  replaced: 4001,
  /** The credential the socket opened with is no longer valid (revoked, expired, user disabled): authenticate again, then resume. */
  unauthorized: 4003,
} as const;

/** Buffers go out as text frames (they hold UTF-8 JSON). */
const TEXT_FRAME = { binary: false } as const;

interface Conn {
  ws: WebSocket;
  tenant: Tenant;
  user: User;
  /** Highest seq sent: frames at or below it are never sent again (no duplicate on replay + live). */
  lastSeq: number;
  alive: boolean;
  /** Whether the credential the socket opened with still holds (checked every heartbeat). */
  recheck(): Promise<boolean>;
}

const clientFrame = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ping'), id: z.string().max(64).optional() }),
  z.object({ type: z.literal('typing'), threadId: z.string().max(40) }),
  z.object({ type: z.literal('send'), threadId: z.string().max(40), text: z.string(), clientId: z.string().max(64).optional() }),
  z.object({ type: z.literal('read'), threadId: z.string().max(40), upTo: z.number().int().min(1) }),
]);

/**
 * The chat's WebSockets: authentication at the upgrade, per-tenant registry, fan-out of committed
 * events to the members of a thread, and resume: a socket opened with `since=<seq>` first gets
 * every event after it that the user may see, then live ones; both go through `lastSeq`, so none
 * is lost or sent twice. Replay and registration run in one synchronous step, and events are
 * published synchronously after their commit, so nothing can fall between the two.
 */
export class ChatHub implements EventSink {
  /**
   * The WebSocket server, made at the first socket: `ws` costs 35-45 ms of CPU to load, which
   * every start paid (bench/core.bench.ts "time to ready") for a feature used once a user chats.
   */
  #wss: Promise<WebSocketServer> | undefined;
  /** tenant id → user id → sockets. */
  readonly #conns = new Map<string, Map<string, Set<Conn>>>();
  /** sha256(ticket) → who, until when. */
  readonly #tickets = new Map<string, { tenantId: string; userId: string; expires: number }>();
  #heartbeat: NodeJS.Timeout | undefined;
  #count = 0;

  constructor(
    private readonly chat: ChatService,
    private readonly d: { auth: AuthService; policy: AuthPolicy; config: ChatConfig; log: Logger; limiter: RateLimiter; clock: Clock },
  ) {}

  get sockets(): number {
    return this.#count;
  }

  start(): void {
    // Liveness (RFC 6455 ping/pong): a socket that missed a whole interval is cut; its client
    // resumes. The same beat re-checks each socket's credential, so a revoked key, an expired
    // token or a disabled user stops receiving within one interval.
    this.#heartbeat = setInterval(() => {
      for (const users of this.#conns.values())
        for (const set of users.values())
          for (const c of set) {
            if (!c.alive) {
              c.ws.terminate();
              continue;
            }
            c.alive = false;
            c.ws.ping();
            void c.recheck().then(
              (ok) => {
                if (ok) return;
                this.unregister(c);
                c.ws.close(CLOSE.unauthorized, 'credential no longer valid');
              },
              (e: unknown) => this.d.log.warn({ err: e }, 'chat socket credential check failed'),
            );
          }
    }, this.d.config.heartbeatMs);
    this.#heartbeat.unref();
  }

  stop(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    for (const users of this.#conns.values()) for (const set of users.values()) for (const c of set) c.ws.close(CLOSE.goingAway, 'server stopping');
    this.#conns.clear();
  }

  // ---- tickets (browsers cannot set Authorization on a WebSocket) ----

  /** A one-time ticket for the caller: 32 random bytes, kept only as a SHA-256, valid ticketTtlMs. */
  issueTicket(tenant: Tenant, user: User): { ticket: string; expiresIn: number } {
    const now = this.d.clock.now();
    for (const [k, v] of this.#tickets) if (v.expires <= now) this.#tickets.delete(k);
    if (this.#tickets.size >= 100_000) throw new AppError(429, 'rate_limited', 'too many socket tickets outstanding', { headers: { 'Retry-After': '5' } });
    const ticket = 'wst_' + crypto.randomBytes(32).toString('base64url');
    this.#tickets.set(sha256Hex(ticket), { tenantId: tenant.id, userId: user.id, expires: now + this.d.config.ticketTtlMs });
    return { ticket, expiresIn: Math.floor(this.d.config.ticketTtlMs / 1000) };
  }

  /** Consumes a ticket (found by its hash: no comparison of secrets), for this tenant only. */
  private takeTicket(ticket: string, tenant: Tenant): string | null {
    const k = sha256Hex(ticket);
    const t = this.#tickets.get(k);
    if (!t) return null;
    this.#tickets.delete(k);
    if (t.expires <= this.d.clock.now() || t.tenantId !== tenant.id) return null;
    return t.userId;
  }

  // ---- the upgrade ----

  /** RouteRegistrar.upgrade handler for /chat.ashx?op=socket. */
  handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, ctx: UpgradeContext): void => {
    void this.accept(req, socket, head, ctx).catch((e: unknown) => {
      const a = rejectUpgrade(socket, e, ctx.requestId);
      if (a.fault) this.d.log.error({ err: e, requestId: ctx.requestId }, 'chat socket upgrade failed');
    });
  };

  private async accept(req: IncomingMessage, socket: Duplex, head: Buffer, ctx: UpgradeContext): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const sinceRaw = url.searchParams.get('since');
    if (sinceRaw !== null && !/^\d{1,15}$/.test(sinceRaw)) throw new InputError('since must be a message id or event seq (digits)');
    const since = sinceRaw === null ? null : Number(sinceRaw);
    const ticket = url.searchParams.get('ticket');
    const tenant = ctx.tenant;
    let user: User;
    let recheck: () => Promise<boolean>;
    if (ticket !== null && req.headers.authorization === undefined) {
      const userId = ticket.length <= 100 ? this.takeTicket(ticket, tenant) : null;
      if (!userId) throw new AuthenticationError('invalid, used or expired socket ticket');
      const principal = { kind: 'user' as const, tenantId: tenant.id, subject: userId, scopes: [], superAdmin: false };
      user = this.chat.userOf(tenant, principal);
      // A ticket holds no credential to re-verify: the user must stay active.
      recheck = () => Promise.resolve(this.stillUser(tenant, principal));
    } else {
      const p = await this.d.auth.authenticate(this.d.policy, { headers: req.headers, tenant, rawHost: req.headers.host ?? '', bodyLen: 0 });
      user = this.chat.userOf(tenant, p);
      const token = bearerToken(req.headers.authorization)!;
      recheck = async () => this.stillUser(tenant, await this.d.auth.verifyBearer(token, tenant));
    }
    const wss = await (this.#wss ??= import('ws').then(
      (m) => new m.WebSocketServer({ noServer: true, maxPayload: 64 * 1024, perMessageDeflate: false, clientTracking: false }),
    ));
    if (socket.destroyed) return;
    wss.handleUpgrade(req, socket, head, (ws) => this.attach(ws, tenant, user, since, recheck));
  }

  private stillUser(tenant: Tenant, p: Principal | null): boolean {
    try {
      this.chat.userOf(tenant, p);
      return true;
    } catch {
      return false;
    }
  }

  /** Registers, says hello, replays after `since`: one synchronous step (see the class comment). */
  private attach(ws: WebSocket, tenant: Tenant, user: User, since: number | null, recheck: () => Promise<boolean>): void {
    const head = this.chat.repo.headFor(tenant);
    // A cursor past the head (a restored database, another appliance's cursor) would silence the
    // socket until the log caught up with it: the client is told to resync and goes on from head.
    const ahead = since !== null && since > head;
    const c: Conn = { ws, tenant, user, lastSeq: since === null || ahead ? head : since, alive: true, recheck };
    this.register(c);
    this.sendRaw(c, JSON.stringify({ type: 'hello', user: { id: user.id, login: user.name }, tenant: tenant.host, since, head }));
    if (ahead) this.sendRaw(c, JSON.stringify({ type: 'resync', head }));
    if (since !== null) this.replay(c, head);
    ws.on('pong', () => {
      c.alive = true;
    });
    ws.on('message', (data, isBinary) => this.onFrame(c, data as Buffer, isBinary));
    ws.on('close', () => this.unregister(c));
    ws.on('error', () => ws.terminate());
  }

  private replay(c: Conn, head: number): void {
    let sent = 0;
    for (;;) {
      const page = this.chat.repo.eventsFor(c.tenant, c.user.id, c.lastSeq, 1000);
      for (const ev of page) {
        const f = this.chat.frame(c.tenant, ev);
        if (f) this.sendFrame(c, f);
        else c.lastSeq = ev.seq;
      }
      sent += page.length;
      if (page.length < 1000) break;
      if (sent >= this.d.config.maxReplay) {
        // Too far behind to replay: the client reloads threads and history, then goes on from head.
        this.sendRaw(c, JSON.stringify({ type: 'resync', head }));
        c.lastSeq = Math.max(c.lastSeq, head);
        break;
      }
    }
    this.sendRaw(c, JSON.stringify({ type: 'ready', upTo: c.lastSeq }));
  }

  private register(c: Conn): void {
    let users = this.#conns.get(c.tenant.id);
    if (!users) this.#conns.set(c.tenant.id, (users = new Map<string, Set<Conn>>()));
    let set = users.get(c.user.id);
    if (!set) users.set(c.user.id, (set = new Set()));
    set.add(c);
    this.#count++;
    if (set.size > this.d.config.maxSocketsPerUser) {
      const oldest = set.values().next().value!;
      this.unregister(oldest);
      oldest.ws.close(CLOSE.replaced, 'too many sockets for this user');
    }
  }

  private unregister(c: Conn): void {
    const users = this.#conns.get(c.tenant.id);
    const set = users?.get(c.user.id);
    if (!set?.delete(c)) return;
    this.#count--;
    if (!set.size) users!.delete(c.user.id);
    if (!users!.size) this.#conns.delete(c.tenant.id);
  }

  // ---- fan-out ----

  /** EventSink: one serialisation per event, then each member's sockets (only this tenant's). */
  publish(tenant: Tenant, threadId: string, onlyUserId: string | null, frame: EventFrame): void {
    const users = this.#conns.get(tenant.id);
    if (!users) return;
    // Encoded once for all recipients: ws would otherwise turn the string into bytes per socket.
    const text = Buffer.from(JSON.stringify(frame));
    const to = onlyUserId ? [onlyUserId] : this.chat.memberIds(tenant, threadId);
    for (const uid of to) {
      const set = users.get(uid);
      if (!set) continue;
      for (const c of set) {
        if (frame.seq <= c.lastSeq) continue;
        c.lastSeq = frame.seq;
        this.sendRaw(c, text);
      }
    }
  }

  ephemeral(tenant: Tenant, threadId: string, exceptUserId: string, frame: Record<string, unknown>): void {
    const users = this.#conns.get(tenant.id);
    if (!users) return;
    const text = JSON.stringify(frame);
    for (const uid of this.chat.memberIds(tenant, threadId)) {
      if (uid === exceptUserId) continue;
      for (const c of users.get(uid) ?? []) this.sendRaw(c, text);
    }
  }

  private sendFrame(c: Conn, f: EventFrame): void {
    if (f.seq <= c.lastSeq) return;
    c.lastSeq = f.seq;
    this.sendRaw(c, JSON.stringify(f));
  }

  /** Sends, or closes a socket whose buffer overflowed (1013): its client resumes with since=lastSeq it saw. */
  private sendRaw(c: Conn, text: string | Buffer): void {
    if (c.ws.readyState !== c.ws.OPEN) return;
    if (c.ws.bufferedAmount > this.d.config.maxSocketBufferBytes) {
      this.unregister(c);
      c.ws.close(CLOSE.slow, 'fell behind; resume with since');
      return;
    }
    c.ws.send(text, TEXT_FRAME);
  }

  // ---- frames from the client ----

  private onFrame(c: Conn, data: Buffer, isBinary: boolean): void {
    let parsed: z.infer<typeof clientFrame>;
    try {
      if (isBinary) throw new InputError('binary frames are not accepted');
      const r = clientFrame.safeParse(JSON.parse(data.toString('utf8')));
      if (!r.success) throw new InputError(`unknown or malformed frame: ${r.error.issues[0]?.message ?? 'invalid'}`);
      parsed = r.data;
    } catch (e) {
      c.ws.close(CLOSE.policy, e instanceof AppError ? e.message.slice(0, 120) : 'frames are JSON objects');
      return;
    }
    const clientId = parsed.type === 'send' ? parsed.clientId : parsed.type === 'ping' ? parsed.id : undefined;
    try {
      this.d.limiter.check('chat-socket', `${c.tenant.id}:${c.user.id}`, this.d.config.socketFramesPerMinute);
      switch (parsed.type) {
        case 'ping':
          this.sendRaw(c, JSON.stringify({ type: 'pong', id: parsed.id }));
          return;
        case 'typing':
          this.chat.typing(c.tenant, c.user, parsed.threadId);
          return;
        case 'read':
          this.chat.read(c.tenant, c.user, parsed.threadId, parsed.upTo);
          return;
        case 'send': {
          const m = this.chat.send(c.tenant, c.user, { threadId: parsed.threadId }, parsed.text);
          this.sendRaw(c, JSON.stringify({ type: 'ack', clientId, id: m.id }));
          return;
        }
      }
    } catch (e) {
      const a = errorAnswer(e, '-');
      if (a.fault) this.d.log.error({ err: e }, 'chat socket frame failed');
      this.sendRaw(c, JSON.stringify({ type: 'error', clientId, status: a.status, ...a.body }));
    }
  }
}
