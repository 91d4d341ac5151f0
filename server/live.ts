import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { policy } from './auth.ts';
import type { DB } from './store/db.ts';
import type { EventBus, AppEvent, Notice } from './events.ts';
import type { RouteDef } from './http/route.ts';
import type { PluginHost } from './plugin-host.ts';
import type { StreamSlots } from './http/streams.ts';

/** How many missed events a reconnecting client is sent before it is told to reload instead. */
const REPLAY_MAX = 5000;
const STATUS_EVERY_MS = 5000;
const PING_EVERY_MS = 15000;

interface Client {
  res: ServerResponse;
  tenantId: string;
  lastId: number;
  lastStatus: string;
}

const liveQuery = z.object({
  since: z.coerce.number().int().min(0).optional().describe('resume after this event id (the Last-Event-ID header does the same)'),
});

/**
 * The console's live feed: Server-Sent Events over `fetch` (the bearer rides in the
 * Authorization header, so no token ever sits in a URL). Two kinds of frames:
 * - `event: <name>` with `id: <n>`: the tenant's durable events from the outbox (calls changing
 *   state, transcripts, shares, webhook tests, ...). A client that reconnects with `Last-Event-ID`
 *   (or `?since=`) gets every event it missed, in order, then the live ones: none lost, none twice.
 *   More than REPLAY_MAX missed: one `event: reset`, and the client reloads its views.
 * - `event: notice`: passing changes of the tenant's data that are not events of their own
 *   (`webhook.delivery`: a delivery queued, attempted, finished; `call.state`: a call scheduled,
 *   dispatched, cancelled, ended; `<collection>.changed`: an admin change over the API, whoever
 *   made it, see changeNotice in http/dispatch.ts). Not replayed: a client that reconnects
 *   reloads the views they concern. Like events, a notice reaches only its own tenant's clients.
 * - `event: status`: the plugins' states and health details (bridge and trunk registration,
 *   webhook backlog and paused subscriptions, trusted-list freshness), sent on connect and
 *   whenever they change; a snapshot, so a reconnect needs nothing replayed.
 */
export class LiveHub {
  readonly #clients = new Set<Client>();
  #unlisten: (() => void) | undefined;
  #unnotice: (() => void) | undefined;
  #statusTimer: NodeJS.Timeout | undefined;
  #pingTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: DB,
    private readonly events: EventBus,
    private readonly host: () => PluginHost | undefined,
    /** Where the master key is kept (KeyService.store), shown on the dashboard. */
    private readonly keyStore = 'file',
    /** Caps on open streams, shared with the WebSocket upgrades (none in unit tests of the hub). */
    private readonly slots?: StreamSlots,
  ) {}

  get size(): number {
    return this.#clients.size;
  }

  route(): RouteDef<typeof liveQuery> {
    return {
      method: 'GET',
      path: '/api.ashx/v1/events',
      summary: "Live feed of the tenant's events and the appliance's status (text/event-stream; resumable with Last-Event-ID)",
      description:
        'Frames: `event: <event name>` + `id: <n>` + `data: {"id","name","data","ts"}` for durable events (resume with the ' +
        '`Last-Event-ID` header or `?since=`; nothing missed is lost), `event: status` + `data: {plugins}` on connect and on ' +
        'every change, `event: notice` + `data: {"name","data"}` for passing changes that are not stored events (`webhook.delivery`: ' +
        '`{subscriptionId, deliveryId?, state?}`; `call.state`: `{callId, status}` on every change of an outbound call, scheduled, dispatched, ' +
        'cancelled or ended; `<collection>.changed`: `{}` after each admin change over the API, by whoever made it, e.g. `trunks.changed`, ' +
        '`outbound-routes.changed`, `numbers.changed`, `users.changed`, `apikeys.changed`, `webhooks.changed`, `calls.changed`; ' +
        'not replayed, reload the view after a reconnect), `event: hello` + `data: {"lastId"}` first, `event: reset` when more than 5000 events were missed, and ' +
        'a `: ping` comment every 15 s.',
      area: 'console',
      auth: policy.v1Admin,
      query: liveQuery,
      rateLimit: 'sensitive',
      responses: { 200: { description: 'text/event-stream' } },
      handler: (req, res) => {
        const header = req.raw.headers['last-event-id'];
        const fromHeader = typeof header === 'string' && /^\d{1,15}$/.test(header) ? Number(header) : undefined;
        const release = this.slots?.take(req.ip);
        if (release) res.once('close', release);
        this.open(res, req.tenant.id, fromHeader ?? req.query.since);
      },
    };
  }

  open(res: ServerResponse, tenantId: string, since: number | undefined): void {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Accel-Buffering': 'no',
    });
    res.socket?.setNoDelay(true);
    const maxId = (this.db.prepare('SELECT COALESCE(MAX(id), 0) AS m FROM events').get() as { m: number }).m;
    const c: Client = { res, tenantId, lastId: since ?? maxId, lastStatus: '' };
    res.write(`retry: 3000\nevent: hello\ndata: ${JSON.stringify({ lastId: maxId })}\n\n`);
    if (since !== undefined && since < maxId) this.replay(c, maxId);
    this.sendStatus(c);
    this.#clients.add(c);
    res.on('close', () => {
      this.#clients.delete(c);
      if (!this.#clients.size) this.idle();
    });
    this.wake();
  }

  private replay(c: Client, upTo: number): void {
    const missed = (
      this.db.prepare('SELECT COUNT(*) AS n FROM events WHERE tenant_id = ? AND id > ? AND id <= ?').get(c.tenantId, c.lastId, upTo) as { n: number }
    ).n;
    if (missed > REPLAY_MAX) {
      c.res.write(`event: reset\ndata: ${JSON.stringify({ missed })}\n\n`);
      c.lastId = upTo;
      return;
    }
    const rows = this.db
      .prepare('SELECT id, tenant_id, name, data, ts FROM events WHERE tenant_id = ? AND id > ? AND id <= ? ORDER BY id')
      .all(c.tenantId, c.lastId, upTo) as { id: number; tenant_id: string; name: string; data: string; ts: string }[];
    for (const r of rows) this.send(c, { id: r.id, tenantId: r.tenant_id, name: r.name, data: JSON.parse(r.data) as Record<string, unknown>, ts: r.ts });
    c.lastId = upTo;
  }

  private send(c: Client, ev: AppEvent): void {
    if (ev.tenantId !== c.tenantId || ev.id <= c.lastId) return;
    c.lastId = ev.id;
    // Event names are declared identifiers (no newline can reach the frame).
    c.res.write(`id: ${ev.id}\nevent: ${ev.name}\ndata: ${JSON.stringify({ id: ev.id, name: ev.name, data: ev.data, ts: ev.ts })}\n\n`);
  }

  private sendNotice(c: Client, n: Notice): void {
    if (n.tenantId !== c.tenantId) return;
    // The bus checked the name (an identifier); JSON.stringify escapes newlines in the data.
    c.res.write(`event: notice\ndata: ${JSON.stringify({ name: n.name, data: n.data })}\n\n`);
  }

  private status(): string {
    const plugins = this.host()?.status() ?? [];
    return JSON.stringify({
      masterKey: this.keyStore,
      plugins: Object.fromEntries(
        plugins.map((p) => [
          p.name,
          { state: p.state, required: p.required, ...(p.error ? { error: p.error } : {}), ...(p.health ? { health: p.health } : {}) },
        ]),
      ),
    });
  }

  private sendStatus(c: Client, now = this.status()): void {
    if (now === c.lastStatus) return;
    c.lastStatus = now;
    c.res.write(`event: status\ndata: ${now}\n\n`);
  }

  private wake(): void {
    this.#unlisten ??= this.events.listen((ev) => {
      for (const c of this.#clients) this.send(c, ev);
    });
    this.#unnotice ??= this.events.onNotice((n) => {
      for (const c of this.#clients) this.sendNotice(c, n);
    });
    this.#statusTimer ??= setInterval(() => {
      const now = this.status();
      for (const c of this.#clients) this.sendStatus(c, now);
    }, STATUS_EVERY_MS);
    this.#statusTimer.unref();
    this.#pingTimer ??= setInterval(() => {
      for (const c of this.#clients) c.res.write(': ping\n\n');
    }, PING_EVERY_MS);
    this.#pingTimer.unref();
  }

  private idle(): void {
    this.#unlisten?.();
    this.#unnotice?.();
    this.#unlisten = this.#unnotice = undefined;
    clearInterval(this.#statusTimer);
    clearInterval(this.#pingTimer);
    this.#statusTimer = this.#pingTimer = undefined;
  }

  /** Ends every stream (shutdown): clients reconnect to the next process with Last-Event-ID. */
  closeAll(): void {
    for (const c of this.#clients) c.res.end();
    this.#clients.clear();
    this.idle();
  }
}
