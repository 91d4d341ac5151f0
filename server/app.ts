import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { startCheckpoints } from './store/db.ts';
import { Dispatcher, newRequestId, renderError, requestTarget, type RequestTarget, type RouteMatch } from './http/dispatch.ts';
import { plainIp, rejectUpgrade, SECURITY_HEADERS } from './http/respond.ts';
import { hostServices, PluginHost, type PluginStatus } from './plugin-host.ts';
import type { AnyPlugin } from './plugin.ts';
import { AUDIT_WRITER, TLS_AUTO } from './core-services.ts';
import { coreRoutes } from './core-routes.ts';
import { LiveHub } from './live.ts';
import { StreamSlots } from './http/streams.ts';
import { AppError, ConfigError } from './errors.ts';
import { z } from 'zod';
import { BACKUP_QUEUE } from './backup/service.ts';
import { backupRoutes } from './backup/routes.ts';
import { applyPendingRestore } from './backup/restore.ts';
import { defaultDataDir } from './config.ts';
import { systemClock } from './clock.ts';
import type { Tenant } from './tenancy.ts';
import type { Socket } from 'node:net';
import type { Logger } from './log.ts';
import { bootstrap, loadBuiltinPlugins, openCore, type ApplianceOptions, type CoreServices } from './core.ts';
import { Metrics, ScrapeTokens } from './metrics.ts';
import { metricsRoute } from './metrics-route.ts';

export { CORE_MIGRATIONS, DelegatingAudit, bootstrap, loadBuiltinPlugins, openCore, type ApplianceOptions, type CoreServices } from './core.ts';

/**
 * `res.locals` of a request routed through Express: what the first middleware resolves once
 * (request id, tenant, start time) and the dispatcher adds (the route's template). A class, so a
 * request allocates one object and no closures.
 */
class RequestLocals {
  tenant: Tenant | undefined;
  /** The matched route's address template (set by the dispatcher), for metrics. */
  route: string | undefined;
  /** performance.now() when the first middleware took the request. */
  started = 0;
  #log: Logger | undefined;

  constructor(
    private readonly root: Logger,
    readonly requestId: string,
  ) {}

  // The request's child logger is made on first use: with redaction configured, pino's child()
  // costs a few percent of a small request (bench/core.bench.ts), and at level warn most
  // requests never log.
  get log(): Logger {
    return (this.#log ??= this.root.child({ reqId: this.requestId }));
  }

  set log(l: Logger) {
    this.#log = l;
  }
}

export class Appliance {
  readonly core: CoreServices;
  readonly host: PluginHost;
  readonly dispatcher: Dispatcher;
  readonly app: express.Express;
  server: http.Server | https.Server | undefined;
  /** `GET /metrics` (server/metrics.ts); undefined when `metrics.enabled` is false. */
  readonly metrics: Metrics | undefined;
  /** The separate metrics listener (`metrics.port`), when configured. */
  metricsServer: http.Server | undefined;
  #stopCheckpoints: (() => void) | undefined;
  /** The public listener's port once bound (an ephemeral `--port 0` is known only then). */
  #port: number | undefined;
  #housekeeping: NodeJS.Timeout | undefined;
  #sockets = new Set<Socket>();
  /** Open WebSockets and event streams, capped per address and in all (server/http/streams.ts). */
  readonly streams: StreamSlots;
  #inflight = 0;
  /** The one 'close' listener of every routed request (`this` is the response): no closure per request. */
  readonly #onClose: (this: Response) => void;
  /** The console's live feed (server/live.ts). */
  live: LiveHub | undefined;
  #stopping: Promise<void> | undefined;
  // Node 20 has no Promise.withResolvers: a plain deferred for ctx.listening.
  #listeningResolve: (v: { url: string; port: number }) => void = () => {
    // Replaced by the promise's resolver right below.
  };
  #listening = new Promise<{ url: string; port: number }>((r) => {
    this.#listeningResolve = r;
  });

  private constructor(core: CoreServices, plugins: AnyPlugin[]) {
    this.core = core;
    this.streams = new StreamSlots(core.config.http);
    this.host = new PluginHost(plugins, hostServices(core, this.#listening));
    this.dispatcher = new Dispatcher({
      auth: core.auth,
      limiter: core.limiter,
      config: core.config,
      log: core.log,
      pluginReady: (p) => p === 'core' || this.host.isStarted(p),
      tenantByHost: (host) => core.tenants.byHost(host),
      changed: (tenantId, notice) => core.events.notify(tenantId, notice, {}),
      // The bound port, read from the socket once it listens (server.address() is a system call).
      listeningPort: () => this.#port ?? this.boundPort() ?? core.config.http.port,
    });
    const log = core.log.child({ part: 'metrics' });
    this.metrics = core.config.metrics.enabled
      ? new Metrics(core.db, log, () => this.host.metricFamilies((plugin, e) => log.warn({ plugin, err: (e as Error).message }, 'plugin metrics failed')))
      : undefined;
    const closed = (res: Response) => this.#requestClosed(res);
    this.#onClose = function (this: Response) {
      closed(this);
    };
    this.app = this.buildExpress();
  }

  /** Opens the store, validates config and loads plugins; does not listen yet. */
  static async create(opts: ApplianceOptions = {}): Promise<Appliance> {
    // A restore staged from the console takes the data dir's place before the store opens.
    const restoredFrom = applyPendingRestore(path.resolve(opts.dataDir ?? defaultDataDir(opts.env)), (opts.clock ?? systemClock).now());
    const core = openCore(opts);
    if (restoredFrom) core.log.warn({ previous: restoredFrom }, 'a restore staged from the console was applied; the previous data is kept');
    try {
      const first = await bootstrap(core);
      if (first) opts.onFirstRun?.(first);
      const plugins = opts.plugins ?? (await loadBuiltinPlugins());
      const disabled = new Set(core.config.disabledPlugins);
      const a = new Appliance(
        core,
        plugins.filter((p) => !disabled.has(p.name)),
      );
      a.host.configure();
      a.host.migrateAll();
      a.host.declareEvents();
      await a.host.setupAll();
      core.audit.target = a.host.provided(AUDIT_WRITER);
      for (const def of coreRoutes(
        a.dispatcher,
        () => a.host,
        () => core.events.catalog(),
        () => core.backups.state(),
      ))
        a.dispatcher.add('core', def);
      for (const def of backupRoutes(
        core.backups,
        core.config.dataDir,
        () => plugins,
        () => core.clock.now(),
      ))
        a.dispatcher.add('core', def);
      if (a.metrics) {
        const route = metricsRoute(core, a.metrics, new ScrapeTokens(core.db));
        // On its own listener (metrics.port) it is not served on the public one.
        if (core.config.metrics.port === undefined) a.dispatcher.add('core', route);
      }
      a.live = new LiveHub(core.db, core.events, () => a.host, core.keys.store, a.streams);
      a.dispatcher.add('core', a.live.route());
      a.host.registerRoutes(a.dispatcher, a.app, express.static);
      a.dispatcher.seal();
      a.finishExpress();
      return a;
    } catch (e) {
      core.db.close();
      throw e;
    }
  }

  private buildExpress(): express.Express {
    const app = express();
    app.disable('x-powered-by');
    app.disable('etag');
    app.set('trust proxy', this.core.config.http.trustProxy);
    app.set('query parser', 'simple');
    const dispatch = this.dispatcher.middleware();
    // First middleware: the per-request setup (#begin), then the dispatcher straight on (one router
    // layer for both): unmatched, it passes to the 404 handler. Through the listener (frontDoor)
    // Express gets only what the dispatcher found no route for or whose match failed (405, a
    // malformed parameter); `app` called directly still dispatches every route this way.
    app.use((req: Request, res: Response, next: NextFunction) => {
      res.locals = this.#locals(req);
      if (this.#begin(req, res)) dispatch(req, res, next);
    });
    return app;
  }

  /** A request's RequestLocals: its id (the client's X-Request-Id when well-formed), nothing resolved yet. */
  #locals(req: http.IncomingMessage): RequestLocals {
    return new RequestLocals(this.core.log, newRequestId(req.headers['x-request-id']));
  }

  /**
   * What every routed request gets first, through the front door or through Express; `res.locals`
   * holds its RequestLocals (#locals). X-Request-Id and the security headers; the tenant, resolved
   * once and passed on as a value (a Host that names none is answered here, and false returned);
   * the start time, the in-flight count and the close listener (metrics, access log).
   */
  #begin(req: Request, res: Response): boolean {
    const locals = res.locals as RequestLocals;
    res.setHeader('X-Request-Id', locals.requestId);
    for (const [k, v] of SECURITY_HEADERS) res.setHeader(k, v);
    try {
      locals.tenant = this.core.tenants.resolve(req.headers.host);
    } catch (e) {
      renderError(res, e, locals.log, locals.requestId);
      return false;
    }
    locals.started = performance.now();
    this.#inflight++;
    res.on('close', this.#onClose);
    return true;
  }

  /** A routed request (front door or Express) has closed: in-flight count, metrics, access log. */
  #requestClosed(res: Response): void {
    this.#inflight--;
    const locals = res.locals as RequestLocals;
    const req = res.req;
    // The route's template (set by the dispatcher), never the raw path: bounded label values.
    this.metrics?.observe(locals.route ?? 'unmatched', req.method, res.statusCode, (performance.now() - locals.started) / 1000);
    if (!this.core.log.isLevelEnabled('info')) return;
    // Path only: query strings can carry codes and tokens.
    locals.log.info(
      {
        method: req.method,
        path: req.path,
        status: res.statusCode,
        ms: performance.now() - locals.started,
        tenant: locals.tenant!.host,
      },
      'request',
    );
  }

  private finishExpress(): void {
    this.app.use((req: Request, res: Response) => this.#notFound(req, res));
    this.app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
      renderError(res, err, (res.locals.log as Logger) ?? this.core.log, (res.locals.requestId as string) ?? '-');
    });
  }

  #notFound(req: Request, res: Response): void {
    renderError(res, new AppError(404, 'not_found', `no endpoint at ${req.method} ${req.path}`), res.locals.log as Logger, res.locals.requestId as string);
  }

  /**
   * The request listener, the front door. Plugins' pre-router handlers (RouteRegistrar.preRouter)
   * first, for running plugins only. Then a request the dispatcher has a route for is served
   * without Express's router: the request and response get what Express's app.handle and its
   * router give them (own properties first, then Express's prototypes: set in this order, every
   * request's objects share one hidden class), the first middleware's setup (#begin), and the
   * dispatcher with the route already matched. Everything else (no route, a 405, a target the
   * router refuses) goes to Express as it comes, so those answers are Express's own as before.
   */
  private frontDoor(): http.RequestListener {
    const pre = this.host.preRouters;
    const { app, dispatcher } = this;
    return (req, res) => {
      for (const f of pre) {
        if (this.host.isStarted(f.plugin) && f.handler(req, res)) {
          this.#preRouted(f, req, res);
          return;
        }
      }
      let url: RequestTarget | undefined;
      let m: RouteMatch | null = null;
      try {
        url = requestTarget(req.url ?? '/');
        m = dispatcher.match(req.method ?? 'GET', url.pathname, url.searchParams);
      } catch {
        // A 405 or a malformed parameter: Express's first middleware answers it, as before.
      }
      if (!m || !url) {
        app(req, res);
        return;
      }
      const rq = req as Request;
      const rs = res as Response;
      rq.res = rs;
      rs.req = rq;
      rq.originalUrl = req.url!;
      rq.baseUrl = '';
      rq.params = {};
      // Express's router gives a handler its `next` (res.sendFile and res.format call it on failure);
      // past a dispatched route there is only the error and the 404 handler.
      rq.next = (err?: unknown) => {
        if (err) renderError(rs, err, (rs.locals as RequestLocals).log, (rs.locals as RequestLocals).requestId);
        else this.#notFound(rq, rs);
      };
      rs.locals = this.#locals(req);
      Object.setPrototypeOf(req, app.request);
      Object.setPrototypeOf(res, app.response);
      if (this.#begin(rq, rs)) dispatcher.dispatch(rq, rs, m, url);
    };
  }

  /** A pre-router handler took the request: counted like routed ones, so shutdown drains the lean path too. */
  #preRouted(f: { route: string }, req: http.IncomingMessage, res: http.ServerResponse): void {
    this.#inflight++;
    const started = performance.now();
    // A response closes once: `on`, not `once` (no wrapper to bind and remove per request).
    res.on('close', () => {
      this.#inflight--;
      this.metrics?.observe(f.route, req.method ?? 'GET', res.statusCode, (performance.now() - started) / 1000);
    });
  }

  /** The port the public listener is bound to, kept once it listens; undefined before. */
  private boundPort(): number | undefined {
    const a = this.server?.listening ? this.server.address() : undefined;
    if (a && typeof a === 'object') this.#port = a.port;
    return this.#port;
  }

  /** Open connections per client address (loopback peers are not counted). */
  #perIp = new Map<string, number>();

  /**
   * Admits a new connection, or closes it at once: past the per-address cap, or past the total cap
   * less the loopback reserve for any peer but loopback (so the console and health checks still
   * get in while the LAN floods). A connection that sends nothing within firstByteTimeoutMs is
   * closed: 20,000 silent sockets once used up the descriptors and /healthz stopped answering.
   */
  private admit(s: Socket, armSilenceTimer: boolean): void {
    const c = this.core.config.http;
    const ip = plainIp(s.remoteAddress ?? '');
    // The appliance's own loopback addresses (the console, health checks); other 127/8 peers count as clients.
    const loopback = ip === '::1' || ip === '127.0.0.1';
    const open = this.#sockets.size;
    const perIp = loopback ? 0 : (this.#perIp.get(ip) ?? 0);
    if (open >= c.maxConnections || (!loopback && (open >= c.maxConnections - c.loopbackReserve || perIp >= c.maxConnectionsPerIp))) {
      s.destroy();
      return;
    }
    this.#sockets.add(s);
    if (!loopback) this.#perIp.set(ip, perIp + 1);
    // Whether it sent anything is read from bytesRead when the timer fires, not from a 'data'
    // listener: one would take the socket from the HTTP parser, which reads a socket nobody else
    // listens to natively, and every request of the connection would then pass through the
    // stream machinery in JavaScript (bench/core.bench.ts).
    const silent = armSilenceTimer
      ? setTimeout(() => {
          if (s.bytesRead === 0) s.destroy();
        }, c.firstByteTimeoutMs)
      : undefined;
    silent?.unref();
    s.once('close', () => {
      clearTimeout(silent);
      this.#sockets.delete(s);
      if (loopback) return;
      const n = (this.#perIp.get(ip) ?? 1) - 1;
      if (n > 0) this.#perIp.set(ip, n);
      else this.#perIp.delete(ip);
    });
  }

  /** Starts plugins, the job queue and the event dispatcher, then listens. */
  async start(): Promise<{ url: string; port: number }> {
    const c = this.core;
    await this.host.startAll();
    c.jobs.define({
      name: BACKUP_QUEUE,
      schema: z.object({ due: z.number() }),
      maxAttempts: 1,
      concurrency: 1,
      // A large store takes a while: the lease outlasts it, so no second runner starts a copy.
      leaseMs: 6 * 3_600_000,
      run: () => c.backups.runScheduled(),
    });
    c.backups.ensureNext();
    c.jobs.start();
    c.events.start();
    this.#stopCheckpoints = startCheckpoints(c.db, c.config.store.checkpointMs, (e) => c.log.warn({ err: e }, 'checkpoint failed'));
    // Housekeeping: finished jobs and events every consumer has passed are kept a week for
    // diagnostics, then deleted, so the tables do not grow without bound.
    this.#housekeeping = setInterval(() => {
      try {
        const week = 7 * 86_400_000;
        const jobs = c.jobs.prune(week);
        const events = c.events.prune(week);
        if (jobs || events) c.log.info({ jobs, events }, 'old jobs and events pruned');
      } catch (e) {
        c.log.warn({ err: e }, 'housekeeping failed');
      }
    }, 3_600_000);
    this.#housekeeping.unref();
    const tls = c.config.http.tls;
    let server: http.Server | https.Server;
    if (tls === 'auto') {
      // `serve --tls auto`: the certificate comes from the plugin that provides 'tls-auto' (rp-ca);
      // its renewals swap the secure context of the running listener.
      const auto = this.host.provided(TLS_AUTO);
      if (!auto) throw new ConfigError('http.tls', '"auto" needs a plugin that provides tls-auto (rp-ca); it is not loaded or did not start');
      const s = https.createServer({ ...auto.getCredentials(), handshakeTimeout: c.config.http.firstByteTimeoutMs }, this.frontDoor());
      auto.onRenew?.(() => s.setSecureContext(auto.getCredentials()));
      server = s;
    } else if (tls) {
      server = https.createServer(
        {
          cert: fs.readFileSync(path.resolve(c.config.dataDir, tls.cert)),
          key: fs.readFileSync(path.resolve(c.config.dataDir, tls.key)),
          // A client that never completes the handshake holds a descriptor: same bound as a silent plain socket.
          handshakeTimeout: c.config.http.firstByteTimeoutMs,
        },
        this.frontDoor(),
      );
    } else server = http.createServer(this.frontDoor());
    server.headersTimeout = 20_000;
    server.requestTimeout = 120_000;
    server.keepAliveTimeout = 5_000;
    // TLS: the raw socket's bytes go to the TLS layer, not to 'data'; handshakeTimeout bounds a silent one.
    const plain = !(server instanceof https.Server);
    server.on('connection', (s: Socket) => this.admit(s, plain));
    server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => this.upgrade(req, socket, head));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(c.config.http.port, c.config.http.host, () => resolve());
    });
    await this.listenMetrics();
    const port = (server.address() as AddressInfo).port;
    const hostPart = c.config.http.host.includes(':') ? `[${c.config.http.host}]` : c.config.http.host;
    const url = `${tls ? 'https' : 'http'}://${hostPart}:${port}`;
    c.log.info({ url, plugins: this.host.status().map((p) => `${p.name}:${p.state}`) }, 'appliance ready');
    this.#listeningResolve({ url, port });
    return { url, port };
  }

  /**
   * `metrics.port`: /metrics alone on its own plain-HTTP listener (a scrape network, loopback by
   * default), with the same credentials as on the public port; every other path is 404.
   */
  private async listenMetrics(): Promise<void> {
    const m = this.core.config.metrics;
    if (!this.metrics || m.port === undefined) return;
    const route = metricsRoute(this.core, this.metrics, new ScrapeTokens(this.core.db));
    const s = http.createServer((req, res) => {
      void (async () => {
        const requestId = newRequestId(req.headers['x-request-id']);
        const send = (status: number, body: string, type: string, headers: Record<string, string> = {}) => {
          res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', 'X-Request-Id': requestId, ...headers });
          res.end(body);
        };
        try {
          const url = new URL(req.url ?? '/', 'http://localhost');
          if (url.pathname !== '/metrics') throw new AppError(404, 'not_found', `no endpoint at ${req.method} ${url.pathname}`);
          if (req.method !== 'GET') throw new AppError(405, 'method_not_allowed', 'GET only', { headers: { Allow: 'GET' } });
          const tenant = this.core.tenants.resolve(req.headers.host);
          const ip = plainIp(req.socket.remoteAddress ?? '');
          this.core.limiter.check('authenticated', ip, this.core.config.rateLimit.authenticatedPerMinute);
          await this.core.auth.authenticate(route.auth, { headers: req.headers, tenant, rawHost: req.headers.host ?? '', bodyLen: 0 });
          send(200, await this.metrics!.render(), this.metrics!.contentType);
        } catch (e) {
          const a = e instanceof AppError ? e : new AppError(500, 'server_error', `request ${requestId} failed`);
          if (!(e instanceof AppError)) this.core.log.error({ err: e, requestId }, 'metrics request failed');
          send(a.status, JSON.stringify({ error: a.code, error_description: a.message }), 'application/json', a.headers ?? {});
        }
      })();
    });
    this.metricsServer = s;
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(m.port, m.host, () => resolve());
    });
  }

  /**
   * HTTP Upgrade (WebSocket): the first upgrade handler of a running plugin whose address matches
   * takes it (RouteRegistrar.upgrade), with the tenant resolved from Host as for every request;
   * none: 404. The socket stays counted in #sockets, so stop() closes it like any connection, and
   * holds a stream slot (StreamSlots) from before the handler runs until it closes.
   */
  private upgrade(req: http.IncomingMessage, socket: Socket, head: Buffer): void {
    const requestId = newRequestId(req.headers['x-request-id']);
    socket.on('error', () => socket.destroy());
    try {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const segs = url.pathname
        .split('/')
        .slice(1)
        .map((x) => x.toLowerCase());
      const hit = this.host.upgrades.find(
        (u) =>
          this.host.isStarted(u.plugin) &&
          u.address.segments.length === segs.length &&
          u.address.segments.every((x, i) => x === segs[i]) &&
          (u.address.verbKey === undefined ||
            (url.searchParams.has(u.address.verbKey) &&
              (u.address.verbValue === undefined || url.searchParams.get(u.address.verbKey) === u.address.verbValue))),
      );
      if (!hit) throw new AppError(404, 'not_found', `no upgrade endpoint at ${url.pathname}`);
      const tenant = this.core.tenants.resolve(req.headers.host);
      const ip = plainIp(socket.remoteAddress ?? '');
      this.core.limiter.check('authenticated', ip, this.core.config.rateLimit.authenticatedPerMinute);
      // The slot is held as long as the socket, refused or upgraded, is open.
      socket.once('close', this.streams.take(ip));
      hit.handler(req, socket, head, { tenant, ip, requestId });
    } catch (e) {
      const a = rejectUpgrade(socket, e, requestId);
      if (a.fault) this.core.log.error({ err: e, requestId }, 'upgrade failed');
    }
  }

  pluginStatus(): PluginStatus[] {
    return this.host.status();
  }

  /** Stop accepting, drain requests, stop jobs and plugins in reverse, checkpoint, close the store. */
  stop(): Promise<void> {
    this.#stopping ??= this.doStop();
    return this.#stopping;
  }

  private async doStop(): Promise<void> {
    const c = this.core;
    const drainMs = c.config.http.drainMs;
    // Live streams never finish by themselves: end them first so the drain waits only for requests.
    this.live?.closeAll();
    if (this.metricsServer) {
      const ms = this.metricsServer;
      await new Promise<void>((r) => {
        ms.close(() => r());
        ms.closeAllConnections();
      });
    }
    if (this.server) {
      const closed = new Promise<void>((r) => this.server!.close(() => r()));
      this.server.closeIdleConnections?.();
      const deadline = performance.now() + drainMs;
      while (this.#inflight > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const s of this.#sockets) s.destroy();
      await closed;
    }
    await c.jobs.shutdown(drainMs);
    c.events.stop();
    await this.host.stopAll();
    this.#stopCheckpoints?.();
    if (this.#housekeeping) clearInterval(this.#housekeeping);
    try {
      c.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch (e) {
      c.log.warn({ err: e }, 'final checkpoint failed');
    }
    c.db.close();
    c.log.info('appliance stopped');
    await new Promise<void>((r) => c.log.flush(() => r()));
  }
}
