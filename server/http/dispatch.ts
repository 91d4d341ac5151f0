import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { NextFunction, Request, Response } from 'express';
import type { z } from 'zod';
import { AppError, InputError } from '../errors.ts';
import { HMAC_HEADER, HMAC_V2_HEADER, type AuthRequest, type AuthService, type Principal } from '../auth.ts';
import type { Logger } from '../log.ts';
import type { CoreConfig } from '../config.ts';
import { publicOriginOf, type Tenant } from '../tenancy.ts';
import { camelizeKeys, MAX_JSON_DEPTH, nestsDeeperThan } from './key-case.ts';
import { readBounded, readSigned } from './body.ts';
import { fastQuery, type FastQuery } from './fast-query.ts';
import { errorAnswer, issueOf, newRequestId, plainIp } from './respond.ts';
import type { RateLimiter } from './rate-limit.ts';
import { Reply, type Method, type RouteDef, type RouteRequest } from './route.ts';
import { parseAddress, queryObject } from './address.ts';

export { parseAddress, queryObject, type ParsedAddress } from './address.ts';

export interface RegisteredRoute {
  plugin: string;
  def: RouteDef;
  /** Primary address first, then aliases. */
  addresses: string[];
  /** The live notice a success of this admin change sends (`changeNotice`), if it is one. */
  notice?: string;
  /** The query schema's check without zod, when it is a simple one (http/fast-query.ts). */
  fastQuery?: FastQuery;
}

/** A route found for a request, with its path parameters as decoded from the request's path. */
export interface RouteMatch {
  route: RegisteredRoute;
  params: Record<string, string>;
}

/** A request's path and query as the router reads them (requestTarget). */
export interface RequestTarget {
  pathname: string;
  searchParams: URLSearchParams;
}

/**
 * The live notice of an admin route that changes data: `<what>.changed`, where `what` is the
 * collection its primary address names (`/api.ashx/v1/outbound-routes/:match` → `outbound-routes`,
 * `/signal.ashx?trunks=save` → `trunks`, `/signal.ashx?oidc-invite=1` → `oidc-invite`,
 * `/rp-cert.ashx?issue` → `rp-cert`, `/chat.ashx?op=settings` → `chat`). Reads (GET), public routes and the bridge's own callbacks
 * (custom auth) send none.
 */
export function changeNotice(def: RouteDef): string | undefined {
  if (def.method === 'GET' || def.auth.kind !== 'credentials' || def.auth.role !== 'admin') return undefined;
  const a = parseAddress(def.path);
  const file = (a.segments[a.segments.length - 1] ?? '').replace(/\.ashx$/, '');
  let what: string | undefined;
  // A generic verb key (`?op=`, `?action=`) names no collection: the file does (`chat`).
  if (a.verbKey) what = a.verbValue === undefined || a.verbKey === 'op' || a.verbKey === 'action' ? file : a.verbKey;
  else {
    const literal = a.segments.filter((x) => !x.startsWith(':') && !x.endsWith('.ashx'));
    what = literal[literal.indexOf('v1') + 1];
  }
  const name = `${what ?? ''}.changed`;
  return /^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$/.test(name) ? name : undefined;
}

interface Address {
  route: RegisteredRoute;
  address: string;
  segments: string[];
  verbKey?: string;
  verbValue?: string;
  /** Registration order. */
  seq: number;
}

/** The admin HMAC bucket a query-verb address implies (`whitelist=add` → `whitelist-add`). */
export function defaultHmacBucket(address: string): string {
  const a = parseAddress(address);
  const file = (a.segments[a.segments.length - 1] ?? '').replace(/\.ashx$/, '');
  if (!a.verbKey) return a.segments.join('-').replace(/\.ashx/g, '');
  if (a.verbValue === undefined || a.verbValue === '1') return a.verbKey.includes('-') ? a.verbKey : `${file}-${a.verbKey}`;
  return `${a.verbKey}-${a.verbValue}`;
}

export interface DispatchDeps {
  auth: AuthService;
  limiter: RateLimiter;
  config: CoreConfig;
  log: Logger;
  pluginReady(plugin: string): boolean;
  /** The port the appliance listens on (known once it listens; the configured one before). */
  listeningPort(): number;
  /** A tenant by one of its host names (TenantService.byHost), for the tenant switch header. */
  tenantByHost(host: string): Tenant | undefined;
  /**
   * An admin change succeeded in this tenant (`changeNotice` names it): the console's live feed
   * tells the tenant's open consoles, whichever client (a CRM's `ak_` key, a script, another
   * console) made it.
   */
  changed?(tenantId: string, notice: string): void;
}

/**
 * A super-admin's tenant switch: the console's tenant switcher (and a script) acts on another
 * tenant from the primary tenant's host with the super-admin's own bearer. The value is one of the
 * target tenant's host names, as the spec's `?tenant=HOST` takes it.
 */
export const TENANT_SWITCH_HEADER = 'x-sovcomms-tenant';

/** SHA-256 of no bytes: what a V2 signature of a streamed route's request covers. */
const EMPTY_DIGEST = crypto.createHash('sha256').digest('hex');

/**
 * The one router of the appliance. It matches literal segments case-insensitively (`.ashx`
 * paths come from IIS), `:params` as single URL-decoded segments, and query verbs; a known
 * address with another method answers 405 with Allow. Then: plugin readiness, rate limit,
 * bounded body, auth, schema validation, handler, rendering, all errors through one function.
 */
export class Dispatcher {
  readonly routes: RegisteredRoute[] = [];
  readonly #index = new Map<string, Address[]>();
  #seq = 0;
  #sealed = false;

  /** `http.trustProxy` off: the client is the socket's peer, as Express's req.ip then says, without its header parsing. */
  readonly #trustsNoProxy: boolean;

  constructor(private readonly deps: DispatchDeps) {
    this.#trustsNoProxy = deps.config.http.trustProxy === false;
    // Spool files of a process that died mid-upload: nobody reads them again.
    fs.rmSync(this.spoolDir, { recursive: true, force: true });
  }

  add(plugin: string, def: RouteDef): void {
    if (this.#sealed) throw new Error(`route ${def.method} ${def.path} added after start`);
    const addresses = [def.path, ...(def.aliases ?? [])];
    const route: RegisteredRoute = { plugin, def, addresses, notice: changeNotice(def), fastQuery: def.query && fastQuery(def.query) };
    for (const address of addresses) {
      const a = parseAddress(address);
      for (const other of this.#index.get(indexKey(a.segments)) ?? []) {
        if (other.route.def.method === def.method && other.address.toLowerCase() === address.toLowerCase()) {
          throw new Error(`route ${def.method} ${address} registered twice (${other.route.plugin} and ${plugin})`);
        }
      }
      const entry: Address = { route, address, segments: a.segments, verbKey: a.verbKey, verbValue: a.verbValue, seq: this.#seq++ };
      const k = indexKey(a.segments);
      if (!this.#index.has(k)) this.#index.set(k, []);
      this.#index.get(k)!.push(entry);
    }
    this.routes.push(route);
  }

  seal(): void {
    this.#sealed = true;
  }

  /** Finds the route for a request; throws 405 when the address exists with other methods. */
  match(method: string, pathname: string, query: URLSearchParams): RouteMatch | null {
    const rawSegs = pathname.split('/').slice(1);
    // Addresses whose last segment is this literal, and those ending in a :param.
    const last = (rawSegs[rawSegs.length - 1] ?? '').toLowerCase();
    const literal = this.#index.get(`${rawSegs.length}|${last}`);
    const param = this.#index.get(`${rawSegs.length}|:`);
    // Registration order, as before the split: it breaks ties between equally ranked addresses.
    const candidates = literal && param ? [...literal, ...param].sort((x, y) => x.seq - y.seq) : (literal ?? param ?? []);
    let best: { a: Address; params: Record<string, string>; rank: number }[] = [];
    let bestRank = -1;
    for (const a of candidates) {
      const params = matchSegments(a.segments, rawSegs);
      if (!params) continue;
      let rank: number;
      if (a.verbKey === undefined) rank = 1;
      else if (!query.has(a.verbKey)) continue;
      else if (a.verbValue === undefined) rank = 2;
      else if (query.get(a.verbKey) === a.verbValue) rank = 3;
      else continue;
      // Literal segments beat params: /inbound-routes/:did vs a literal sibling.
      rank = rank * 100 + a.segments.filter((s) => !s.startsWith(':')).length;
      if (rank > bestRank) {
        bestRank = rank;
        best = [{ a, params, rank }];
      } else if (rank === bestRank) best.push({ a, params, rank });
    }
    if (!best.length) return null;
    const hit = best.find((b) => b.a.route.def.method === method) ?? (method === 'HEAD' ? best.find((b) => b.a.route.def.method === 'GET') : undefined);
    if (!hit) {
      const allow = [...new Set(best.map((b) => b.a.route.def.method))].sort().join(', ');
      throw new AppError(405, 'method_not_allowed', `${method} is not allowed here; allowed: ${allow}`, { headers: { Allow: allow } });
    }
    return { route: hit.a.route, params: hit.params };
  }

  /**
   * Express middleware: matches the request, dispatches a matched route, passes an unmatched
   * request on. (The appliance's front door matches ordinary requests before Express and calls
   * dispatch() itself; this is the way in for what it hands to Express.)
   */
  middleware() {
    return (req: Request, res: Response, next: NextFunction): void => {
      let url: RequestTarget;
      let m: RouteMatch | null;
      try {
        url = requestTarget(req.originalUrl);
        m = this.match(req.method, url.pathname, url.searchParams);
      } catch (e) {
        this.fail(req, res, e, undefined, bodyPendingOf(req));
        return;
      }
      if (m) this.dispatch(req, res, m, url);
      else next();
    };
  }

  /**
   * Serves a request the route `m` was matched for (its target read as `url`): plugin readiness,
   * rate limit, auth, body, validation, handler, rendering, every error through fail(). `res.locals`
   * holds the request's tenant and id (the first middleware's RequestLocals, server/app.ts). A GET
   * or HEAD whose credential is checked without I/O (`ak_` keys, the admin signature) and whose
   * handler answers synchronously is served here without a promise.
   */
  dispatch(req: Request, res: Response, m: RouteMatch, url: RequestTarget): void {
    const { route } = m;
    const def = route.def;
    res.locals.route = def.path;
    // Until the body is read, an error answer closes the connection: the unread body is not drained.
    let bodyPending = bodyPendingOf(req);
    try {
      if (!this.deps.pluginReady(route.plugin)) {
        throw new AppError(503, 'plugin_unavailable', `the ${route.plugin} plugin is not running`, { headers: { 'Retry-After': '5' } });
      }
      const ip = this.#trustsNoProxy ? plainIp(req.socket.remoteAddress ?? '') : clientIp(req);
      // Credentialed routes of the default class are limited per credential once it is known, and
      // failed authentications per IP apart from them: a noisy client behind the office NAT
      // spends neither the budget of the valid keys behind the same address nor their access.
      // Sensitive credentialed routes too: 35 unauthenticated requests from one address once
      // blocked the super-admin's own POST /users from it; failures are charged per IP apart.
      if (!limitedPerCredential(def)) this.rateLimit(def, ip);
      // Authenticate before reading the body: a request without a valid bearer, key or custom
      // credential is refused without its body ever being read (500 unauthenticated 8 MiB posts
      // once held 2.4 GB). Only the admin signatures cover the body, so only they read it first.
      const signed =
        def.auth.kind === 'credentials' &&
        req.headers.authorization === undefined &&
        (req.headers[HMAC_HEADER] !== undefined || req.headers[HMAC_V2_HEADER] !== undefined);
      // Only the V2 admin signature covers the body, so only it is read first. Everything about a
      // signed request that can be checked without its body is checked before: the per-IP budget,
      // the V2 header's form and time, and the whole V1 signature (it signs the declared length).
      const v2 = signed && req.headers[HMAC_V2_HEADER] !== undefined;
      if (signed) this.deps.limiter.check('signed', ip, this.deps.config.rateLimit.signedPerMinute);
      const declared = Number(req.headers['content-length'] ?? 0) || 0;
      const authReq: AuthRequest = { headers: req.headers, tenant: res.locals.tenant as Tenant, rawHost: req.headers.host ?? '', bodyLen: declared };
      // No body to read (readBounded reads nothing for these either, body.ts): when the credential
      // needs no I/O either, the whole request is served in this turn.
      if (!v2 && (def.bodyType === 'stream' || req.method === 'GET' || req.method === 'HEAD')) {
        const principal = this.authenticateNow(def, ip, authReq);
        if (principal !== undefined) {
          // A streamed body stays pending: the handler reads it, and an error before its end closes the connection.
          if (def.bodyType === 'stream') checkStreamType(def, req);
          else bodyPending = false;
          void this.respond(req, res, m, url, authReq, principal, NO_BODY, ip);
          return;
        }
      }
      void this.dispatchAsync(req, res, m, url, authReq, ip, v2);
    } catch (e) {
      this.fail(req, res, e, def, bodyPending);
    }
  }

  /** dispatch() for what needs a promise: a credential checked by I/O (an OIDC bearer, a custom verifier) or a body to read. */
  private async dispatchAsync(req: Request, res: Response, m: RouteMatch, url: RequestTarget, authReq: AuthRequest, ip: string, v2: boolean): Promise<void> {
    const def = m.route.def;
    // Until the body is read, an error answer closes the connection: the unread body is not drained.
    let bodyPending = bodyPendingOf(req);
    try {
      let principal = v2 ? null : await this.authenticate(def, ip, authReq);
      if (v2) await this.authenticate(def, ip, authReq, () => this.deps.auth.precheckHmacV2(String(req.headers[HMAC_V2_HEADER])));
      // A streamed body stays pending: the handler reads it, and an error before its end closes the connection.
      const streamed = def.bodyType === 'stream';
      if (streamed) checkStreamType(def, req);
      else bodyPending = false;
      let rawBody: Buffer;
      if (v2) {
        rawBody = await this.readSignedBody(req, def, authReq.bodyLen, async (digest) => {
          principal = await this.authenticate(def, ip, { ...authReq, bodyDigest: digest });
        });
      } else if (streamed || req.method === 'GET' || req.method === 'HEAD') {
        // readBounded reads nothing for these either (body.ts): no promise and no sink per request.
        rawBody = NO_BODY;
      } else rawBody = await readBounded(req, def.bodyLimit ?? this.deps.config.http.bodyLimitBytes);
      await this.respond(req, res, m, url, authReq, principal, rawBody, ip);
    } catch (e) {
      this.fail(req, res, e, def, bodyPending);
    }
  }

  /**
   * The request once authenticated and its body read: the per-credential limit, the tenant
   * switch, validation, the handler and its answer. Throws what fails before the handler's
   * answer; a promise of the handler is settled by settle(), which renders its errors itself.
   */
  private respond(
    req: Request,
    res: Response,
    m: RouteMatch,
    url: RequestTarget,
    authReq: AuthRequest,
    principal: Principal | null,
    rawBody: Buffer,
    ip: string,
  ): Promise<void> | undefined {
    const { route, params } = m;
    const def = route.def;
    const tenant = authReq.tenant;
    if (principal && limitedPerCredential(def)) {
      // The person (or client) and the client they came through: two people signed in to the same
      // console client are two budgets, not one (the client id alone keyed them together).
      const who = principal.keyId ?? `${principal.kind}:${principal.subject}|${principal.clientId ?? ''}`;
      const rl = this.deps.config.rateLimit;
      if (def.rateLimit === 'sensitive') this.deps.limiter.check('sensitive', `${principal.tenantId}|${who}`, rl.sensitivePerMinute);
      else this.deps.limiter.check('authenticated', `${principal.tenantId}|${who}`, rl.authenticatedPerMinute);
    }
    let effective = tenant;
    const switchTo = req.headers[TENANT_SWITCH_HEADER];
    if (switchTo !== undefined && principal) ({ tenant: effective, principal } = this.switchTenant(def, principal, tenant, switchTo));
    const parsedParams = def.params ? validate(def.params, params, 'path parameter') : params;
    const query = queryObject(url.searchParams);
    const parsedQuery = def.query ? (route.fastQuery?.(query) ?? validate(def.query, query, 'query parameter')) : query;
    const body = parseBody(def, req, rawBody);
    const rr = new DispatchedRequest(
      req,
      res,
      this.deps,
      effective,
      principal,
      parsedQuery,
      body,
      parsedParams,
      rawBody,
      ip,
      res.locals.requestId as string,
      authReq.rawHost,
    );
    res.setHeader('Cache-Control', 'no-store');
    // Most handlers answer synchronously: awaiting only a promise spares a microtask turn.
    const pending = def.handler(rr, res);
    if (isThenable(pending)) return this.settle(req, res, route, pending, effective.id);
    this.answer(res, route, pending, effective.id);
    return undefined;
  }

  /** A handler's promise: its answer, or its error through fail() (the body has been read by then unless streamed). */
  private async settle(req: Request, res: Response, route: RegisteredRoute, pending: PromiseLike<unknown>, tenantId: string): Promise<void> {
    try {
      this.answer(res, route, await pending, tenantId);
    } catch (e) {
      this.fail(req, res, e, route.def, route.def.bodyType === 'stream' && bodyPendingOf(req));
    }
  }

  /** Renders a handler's answer; a successful admin change tells the tenant's consoles (`changeNotice`). */
  private answer(res: Response, route: RegisteredRoute, out: unknown, tenantId: string): void {
    render(res, out);
    if (route.notice && res.statusCode < 400) this.deps.changed?.(tenantId, route.notice);
  }

  /**
   * The one way an error of a request becomes its answer: the route's error page when it has one
   * (an HTML flow), else renderError. `bodyPending`: the body is unread, so the connection closes.
   */
  private fail(req: Request, res: Response, e: unknown, def: RouteDef | undefined, bodyPending: boolean): void {
    if (bodyPending && !res.headersSent) res.setHeader('Connection', 'close');
    if (def?.errorPage && e instanceof AppError && !res.headersSent) {
      let page: Reply | undefined;
      try {
        page = def.errorPage(req, e as AppError);
      } catch {
        // The page could not be made (its plugin's words unavailable): the plain answer below.
      }
      if (page) {
        for (const [k, v] of Object.entries(e.headers)) res.setHeader(k, v);
        render(res, page);
        return;
      }
    }
    renderError(res, e, res.locals.log as Logger, res.locals.requestId as string);
  }

  /**
   * Applies X-Sovcomms-Tenant. Only a super-admin's own bearer (a person, not a key or the HMAC)
   * may switch, and only on admin routes: routes about the caller themselves (chat, passkeys, /me)
   * have no meaning in a tenant where the caller has no account, and answer 400 rather than
   * silently acting on the primary tenant. The principal keeps its subject and names where it
   * comes from, so the target tenant's audit log says who acted.
   */
  private switchTenant(def: RouteDef, principal: Principal, from: Tenant, value: string | string[]): { tenant: Tenant; principal: Principal } {
    const host = (Array.isArray(value) ? value[0] : value)?.trim().toLowerCase() ?? '';
    if (def.auth.kind !== 'credentials' || def.auth.role !== 'admin' || !def.auth.accept.includes('bearer')) {
      throw new InputError(`X-Sovcomms-Tenant applies to admin routes only, not to ${def.method} ${def.path}`, 'tenant_switch_not_allowed');
    }
    if (principal.kind !== 'user' || !principal.superAdmin) {
      throw new AppError(403, 'insufficient_scope', "X-Sovcomms-Tenant needs a super-admin's bearer token (an admin of the primary tenant)");
    }
    const target = host ? this.deps.tenantByHost(host) : undefined;
    if (!target) throw new AppError(404, 'not_found', `X-Sovcomms-Tenant: no tenant has the host name ${JSON.stringify(host.slice(0, 253))}`);
    if (target.id === from.id) return { tenant: from, principal };
    return {
      tenant: target,
      principal: { ...principal, tenantId: target.id, userName: `${principal.userName ?? principal.subject}@${from.host}` },
    };
  }

  /** Authenticates; a failure is counted for the IP, and past that budget answers 429 instead of 401. */
  private async authenticate(def: RouteDef, ip: string, req: AuthRequest, check?: () => void): Promise<Principal | null> {
    try {
      if (check) {
        check();
        return null;
      }
      return await this.deps.auth.authenticate(def.auth, req);
    } catch (e) {
      throw this.authFailed(e, ip);
    }
  }

  /** authenticate() without a promise (AuthService.authenticateNow): undefined when only authenticate() can decide. */
  private authenticateNow(def: RouteDef, ip: string, req: AuthRequest): Principal | null | undefined {
    try {
      return this.deps.auth.authenticateNow(def.auth, req);
    } catch (e) {
      throw this.authFailed(e, ip);
    }
  }

  /** A failed authentication: counted for the IP (429 past its budget, thrown from here); returns the error to throw. */
  private authFailed(e: unknown, ip: string): unknown {
    if (e instanceof AppError && e.status === 401) this.deps.limiter.check('auth-failed', ip, this.deps.config.rateLimit.failedAuthPerMinute);
    return e;
  }

  /** Signed bodies over the spool threshold being read now (bounded by http.maxLargeSignedBodies). */
  #largeBodies = 0;

  /**
   * Reads a V2-signed body: hashed as it arrives (spooled to a file when large), the signature
   * checked against the digest by `verify`, and only then the bytes handed on. A streamed route
   * gets none (its handler reads the stream; the signature then covers an empty body, as before).
   */
  private async readSignedBody(req: Request, def: RouteDef, declared: number, verify: (digest: string) => Promise<void>): Promise<Buffer> {
    const c = this.deps.config.http;
    if (def.bodyType === 'stream') {
      await verify(EMPTY_DIGEST);
      return Buffer.alloc(0);
    }
    const large = declared > c.spoolAboveBytes || req.headers['content-length'] === undefined;
    if (large && this.#largeBodies >= c.maxLargeSignedBodies) {
      throw new AppError(503, 'temporarily_unavailable', 'too many large signed uploads in progress; try again shortly', {
        headers: { 'Retry-After': '5', Connection: 'close' },
      });
    }
    if (large) this.#largeBodies++;
    try {
      const body = await readSigned(req, def.bodyLimit ?? c.bodyLimitBytes, { spoolDir: this.spoolDir, spoolAbove: c.spoolAboveBytes });
      try {
        await verify(body.digest);
      } catch (e) {
        body.discard();
        throw e;
      }
      return await body.bytes();
    } finally {
      if (large) this.#largeBodies--;
    }
  }

  private get spoolDir(): string {
    return path.join(this.deps.config.dataDir, 'tmp', 'signed-bodies');
  }

  private rateLimit(def: RouteDef, ip: string): void {
    const rl = this.deps.config.rateLimit;
    const cls = def.rateLimit ?? (def.auth.kind === 'public' ? 'public' : 'authenticated');
    if (cls === false) return;
    if (typeof cls === 'object') return this.deps.limiter.check(cls.name, ip, cls.perMinute);
    const perMinute = cls === 'public' ? rl.publicPerMinute : cls === 'sensitive' ? rl.sensitivePerMinute : rl.authenticatedPerMinute;
    this.deps.limiter.check(cls, ip, perMinute);
  }
}

/** Whether the request declares a body (until it is read, an error answer closes the connection). */
function bodyPendingOf(req: Request): boolean {
  return req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
}

/**
 * Whether the route's rate limit is counted per credential (once it is known) rather than per IP:
 * credentialed routes of the default and the sensitive class.
 */
function limitedPerCredential(def: RouteDef): boolean {
  return def.auth.kind !== 'public' && (def.rateLimit === undefined || def.rateLimit === 'authenticated' || def.rateLimit === 'sensitive');
}

/** The body of a GET, HEAD or streamed request as the handler sees it (zero bytes: nothing to change in it). */
const NO_BODY = Buffer.alloc(0);

/** A request-target whose path and query WHATWG URL parsing leaves exactly as they are. */
const PLAIN_TARGET = /^\/(?!\/)[A-Za-z0-9\-_~!$&'()*+,;=:@./]*(?:\?[\x21-\x22\x24-\x7e]*)?$/;

/**
 * The path and query of a request, as `new URL(target, 'http://localhost')` gives them. A plain
 * target (printable ASCII, no `#`, no percent sign, backslash or dot segment in the path, not
 * `//`) is split as it stands: URL would normalise nothing in it, and its query reads the same
 * through URLSearchParams. Anything else goes through URL (dot segments, `\`, `//host`, encodings).
 */
export function requestTarget(target: string): RequestTarget {
  if (PLAIN_TARGET.test(target) && !DOT_SEGMENT.test(target)) {
    const q = target.indexOf('?');
    return q < 0
      ? { pathname: target, searchParams: new URLSearchParams() }
      : // With its `?`: the constructor drops one leading `?`, so a query that itself starts with one keeps it.
        { pathname: target.slice(0, q), searchParams: new URLSearchParams(target.slice(q)) };
  }
  const u = new URL(target, 'http://localhost');
  return { pathname: u.pathname, searchParams: u.searchParams };
}

/** A `.` or `..` path segment (URL resolves them); only the path part before `?` counts. */
const DOT_SEGMENT = /^[^?]*\/\.\.?(?:[/?]|$)/;

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (typeof v === 'object' || typeof v === 'function') && v !== null && typeof (v as { then?: unknown }).then === 'function';
}

/**
 * What a handler gets (RouteRequest). A class, so a request allocates one object and no closures:
 * `origin`, `publicOrigin` and `log` are worked out on first read (most v1 listings read none).
 */
class DispatchedRequest implements RouteRequest {
  readonly ua: string;
  readonly headers: Request['headers'];
  #origin: string | undefined;
  #publicOrigin: string | undefined;

  constructor(
    readonly raw: Request,
    private readonly res: Response,
    private readonly deps: DispatchDeps,
    readonly tenant: Tenant,
    readonly principal: Principal | null,
    readonly query: unknown,
    readonly body: unknown,
    readonly params: unknown,
    readonly rawBody: Buffer,
    readonly ip: string,
    readonly requestId: string,
    readonly hostHeader: string,
  ) {
    this.ua = (raw.headers['user-agent'] ?? '').slice(0, 512);
    this.headers = raw.headers;
  }

  get origin(): string {
    return (this.#origin ??= `${this.raw.protocol}://${this.hostHeader || `${this.deps.config.http.host}:${this.deps.config.http.port}`}`);
  }

  // Made when a handler reads it (links, issuers): most requests (v1 listings) never do, and
  // it parses the Host header against the tenant's names and the machine's own addresses.
  get publicOrigin(): string {
    return (this.#publicOrigin ??= publicOriginOf(this.tenant, this.raw.protocol, this.hostHeader, this.deps.listeningPort()));
  }

  /** The request logger, made only when a handler logs (server/app.ts). */
  get log(): Logger {
    return this.res.locals.log as Logger;
  }
}

/**
 * Bucket of an address: segment count and last segment (`:` for a param). Lookups read the
 * request's literal bucket and the param bucket, so only addresses that can match are tried
 * (the bucket by count alone held ~25 addresses per v1 request; bench/core.bench.ts).
 */
function indexKey(segs: string[]): string {
  const last = segs[segs.length - 1] ?? '';
  return `${segs.length}|${last.startsWith(':') ? ':' : last}`;
}

function matchSegments(pattern: string[], actual: string[]): Record<string, string> | null {
  if (pattern.length !== actual.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const a = actual[i]!;
    if (p.startsWith(':')) {
      if (!a) return null;
      let v: string;
      try {
        v = decodeURIComponent(a);
      } catch {
        throw new InputError(`malformed percent-encoding in path segment ${JSON.stringify(a)}`);
      }
      params[p.slice(1)] = v;
    } else if (p !== a.toLowerCase()) return null;
  }
  return params;
}

export function clientIp(req: Request): string {
  return plainIp(req.ip ?? req.socket.remoteAddress ?? '');
}

function validate<S extends z.ZodType>(schema: S, input: unknown, what: string): z.infer<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.map(String).join('.');
  throw new InputError(
    field ? `invalid ${what} ${field}: ${issue.message}` : `invalid ${what}: ${issue.message}`,
    'invalid_request',
    field ? { field, issue: issueOf(issue) } : { issue: issueOf(issue) },
  );
}

function mediaType(req: Request): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

/** A streamed body's media type must be one the route names (checked before the handler reads it). */
function checkStreamType(def: RouteDef, req: Request): void {
  const mt = mediaType(req);
  if (def.contentTypes && !def.contentTypes.includes(mt)) {
    throw new AppError(415, 'unsupported_media_type', `content type ${mt || '(none)'} not supported; use ${def.contentTypes.join(' or ')}`);
  }
}

function parseBody(def: RouteDef, req: Request, raw: Buffer): unknown {
  const type = def.bodyType ?? (def.body ? 'json' : 'none');
  if (type === 'none' || type === 'stream') {
    return undefined;
  }
  const mt = mediaType(req);
  if (type === 'raw') {
    if (raw.length && def.contentTypes && !def.contentTypes.includes(mt)) {
      throw new AppError(415, 'unsupported_media_type', `content type ${mt || '(none)'} not supported; use ${def.contentTypes.join(' or ')}`);
    }
    return raw;
  }
  let value: unknown = {};
  const isJson = mt === 'application/json' || mt.endsWith('+json');
  const isForm = mt === 'application/x-www-form-urlencoded';
  if (raw.length) {
    if (isJson && (type === 'json' || type === 'json-or-form')) {
      try {
        value = JSON.parse(raw.toString('utf8'));
      } catch {
        throw new InputError('malformed JSON body');
      }
      if (nestsDeeperThan(value, MAX_JSON_DEPTH)) throw new InputError(`JSON body nested deeper than ${MAX_JSON_DEPTH} levels`);
      if (def.camelize !== false) value = camelizeKeys(value);
    } else if (isForm && (type === 'form' || type === 'json-or-form')) {
      value = queryObject(new URLSearchParams(raw.toString('utf8')));
    } else {
      const want =
        type === 'json' ? 'application/json' : type === 'form' ? 'application/x-www-form-urlencoded' : 'application/json or application/x-www-form-urlencoded';
      throw new AppError(415, 'unsupported_media_type', `content type ${mt || '(none)'} not supported; use ${want}`);
    }
  }
  return def.body ? validate(def.body, value, 'field') : value;
}

export function render(res: Response, out: unknown): void {
  if (res.headersSent || res.writableEnded) return;
  if (out instanceof Reply) {
    for (const [k, v] of Object.entries(out.headers)) res.setHeader(k, v);
    // The Host header picks the tenant, so a shared cache must key every cacheable answer on it.
    if (/\bpublic\b/.test(String(res.getHeader('Cache-Control') ?? ''))) res.vary('Host');
    res.status(out.status);
    switch (out.kind) {
      case 'json':
        sendJson(res, out.body);
        return;
      case 'text':
        res.send(String(out.body));
        return;
      case 'buffer':
        res.end(out.body as Buffer);
        return;
      default:
        res.end();
        return;
    }
  }
  if (out === undefined) {
    res.status(204).end();
    return;
  }
  res.status(200);
  sendJson(res, out);
}

/**
 * Express's `res.json` without its general `send` (charset lookups through content-type parsing,
 * freshness and ETag checks that never apply: ETags are off and the answers are no-store): the
 * same bytes and headers (`application/json; charset=utf-8` unless a handler chose a type, a
 * Content-Length, no body for HEAD). A v1 listing is small, so this is a visible share of its cost.
 */
function sendJson(res: Response, body: unknown): void {
  const json = JSON.stringify(body);
  const status = res.statusCode;
  if (json === undefined || status === 204 || status === 304 || res.hasHeader('ETag') || res.hasHeader('Last-Modified')) {
    // What JSON has no text for, the statuses without a body and conditional answers: Express's own rules.
    res.json(body);
    return;
  }
  const type = res.getHeader('Content-Type');
  if (type === undefined) res.setHeader('Content-Type', 'application/json; charset=utf-8');
  else if (!/;\s*charset=/i.test(String(type))) res.setHeader('Content-Type', `${String(type)}; charset=utf-8`);
  // Encoded once: the length is the encoded bytes' (Buffer.byteLength and then end(json) encode twice).
  if (res.req.method === 'HEAD') {
    res.setHeader('Content-Length', Buffer.byteLength(json));
    res.end();
    return;
  }
  const bytes = Buffer.from(json);
  res.setHeader('Content-Length', bytes.length);
  res.end(bytes);
}

/** The one place an error becomes an Express response: `{error, error_description}`, never a stack. */
export function renderError(res: Response, e: unknown, log: Logger, requestId: string): void {
  const a = errorAnswer(e, requestId);
  if (a.fault) log.error({ err: e, requestId }, 'request failed');
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [k, v] of Object.entries(a.headers)) res.setHeader(k, v);
  res.setHeader('Cache-Control', 'no-store');
  res.status(a.status).json(a.body);
}

export { newRequestId };

export type { Method };
