import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import type { AuthPolicy, Principal } from '../auth.ts';
import type { AppError } from '../errors.ts';
import type { Tenant } from '../tenancy.ts';
import type { Logger } from '../log.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * How a route reads its body. `json` and `form` parse and validate against `body`;
 * `json-or-form` takes either; `raw` hands over the bytes (content types in `contentTypes`);
 * `stream` leaves the body unread for the handler to consume from `req.raw` itself, bounded by
 * its own limit (large uploads streamed to disk; `contentTypes` still checked, auth still before
 * the body); `none` refuses a body.
 */
export type BodyType = 'json' | 'form' | 'json-or-form' | 'raw' | 'stream' | 'none';

export type RateLimitClass = 'public' | 'authenticated' | 'sensitive' | false | { name: string; perMinute: number };

export interface ResponseDoc {
  description: string;
  schema?: z.ZodType;
  contentType?: string;
}

/** What a handler sees: the tenant and principal are resolved once, before the handler runs. */
export interface RouteRequest<Q = unknown, B = unknown, P = unknown> {
  tenant: Tenant;
  principal: Principal | null;
  query: Q;
  body: B;
  params: P;
  /** Raw request bytes (empty for GET): HMAC body length, signatures over the exact body. */
  rawBody: Buffer;
  ip: string;
  ua: string;
  requestId: string;
  /** The Host header exactly as sent (admin HMAC signs it). */
  hostHeader: string;
  /** `proto://host[:port]` as the client addressed us. */
  origin: string;
  /**
   * The tenant's public origin: every absolute URL the appliance signs, mails or publishes comes
   * from it (credential issuer and status lists, OIDC issuer and discovery, federation statements,
   * verifier metadata, mailed sign-in, recovery and invitation links, share URLs). It is the
   * tenant's configured origin (`sovcomms tenant set-origin`) when there is one; else the request's
   * host only when it is one of the tenant's own host names or an address of this machine,
   * otherwise the tenant's main host (publicOriginOf), on
   * the scheme and port the appliance listens on. A forged Host header can therefore never put
   * another site (or another port) into a signed artefact or a link.
   */
  publicOrigin: string;
  headers: Request['headers'];
  log: Logger;
  raw: Request;
}

export interface RouteDef<Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType, P extends z.ZodType = z.ZodType> {
  method: Method;
  /**
   * `/api.ashx/v1/calls/:id`, or a query-verb address: `/signal.ashx?whitelist=add` (key and
   * value), `/lotl.ashx?anchor` (key present, any value).
   */
  path: string;
  /** Other addresses of the same handler (`.ashx?action=` and pretty paths). */
  aliases?: string[];
  summary: string;
  description?: string;
  /** Group in the v1 root and OpenAPI tags; defaults to the plugin name. */
  area?: string;
  auth: AuthPolicy;
  params?: P;
  query?: Q;
  body?: B;
  bodyType?: BodyType;
  /** Accepted content types for `raw` bodies. */
  contentTypes?: string[];
  bodyLimit?: number;
  responses?: Record<number, ResponseDoc>;
  rateLimit?: RateLimitClass;
  /** Fold PascalCase body keys to camelCase (default true for JSON bodies). */
  camelize?: boolean;
  /** Leave out of the API description (never for a real endpoint: aliases are listed anyway). */
  hidden?: boolean;
  handler(req: RouteRequest<z.infer<Q>, z.infer<B>, z.infer<P>>, res: Response): unknown;
  /**
   * A page that a person's browser opens (a wallet's redirect, a link in a mail) answers its
   * refusals as a page, not JSON: the dispatcher hands every AppError raised for the route (its
   * query refused, a rate limit, or the handler's own) to this, and renders what it returns.
   */
  errorPage?(req: { headers: IncomingHttpHeaders }, e: AppError): Reply;
}

/** A handler's non-200 or non-JSON answer. */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
    readonly kind: 'json' | 'text' | 'buffer' | 'redirect' | 'empty' = 'json',
  ) {}
}

export const reply = Object.assign((status: number, body: unknown, headers?: Record<string, string>) => new Reply(status, body, headers), {
  text: (status: number, text: string, contentType = 'text/plain; charset=utf-8', headers: Record<string, string> = {}) =>
    new Reply(status, text, { 'Content-Type': contentType, ...headers }, 'text'),
  buffer: (status: number, buf: Buffer, contentType: string, headers: Record<string, string> = {}) =>
    new Reply(status, buf, { 'Content-Type': contentType, ...headers }, 'buffer'),
  redirect: (location: string, status = 302, headers: Record<string, string> = {}) => new Reply(status, null, { Location: location, ...headers }, 'redirect'),
  empty: (status = 204, headers: Record<string, string> = {}) => new Reply(status, null, headers, 'empty'),
});

/** Route registration as plugins see it. */
export interface RouteRegistrar {
  add<Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType, P extends z.ZodType = z.ZodType>(def: RouteDef<Q, B, P>): void;
  /** Serves a folder of static files under a URL prefix (login pages, console). */
  static(prefix: string, dir: string): void;
  /**
   * A pre-router handler: it sees each raw request before the router (Express), while its plugin
   * runs, and returns true when it has taken the request; false passes it on untouched (it must
   * not have read the body then). For a hot endpoint whose per-request router cost matters (the
   * OAuth token endpoint). It uses the same pipeline pieces as the router (server/http/body.ts,
   * respond.ts: bounded body, error answers, security headers, request ids), so both paths answer
   * alike. The endpoint's RouteDef stays registered: it documents the endpoint in /openapi.json
   * and serves what is passed on.
   */
  preRouter(handler: PreRouterHandler): void;
  /**
   * Takes HTTP Upgrade requests (WebSocket) at an address (`/chat.ashx?op=socket`: path and query
   * verb, matched like route addresses) while its plugin runs. The core resolves the tenant from
   * Host first (the same rule as every request) and answers 404 to upgrades nobody takes; the
   * handler authenticates, then completes the handshake (e.g. ws `handleUpgrade`) or writes an
   * HTTP error and destroys the socket. Document the address with a plain route too (it answers
   * requests without an Upgrade header, e.g. 426), so it appears in /openapi.json.
   */
  upgrade(address: string, handler: UpgradeHandler): void;
}

/** What an upgrade handler gets besides the raw request: resolved once by the core, as for routes. */
export interface UpgradeContext {
  tenant: Tenant;
  ip: string;
  requestId: string;
}

/** See RouteRegistrar.upgrade. */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, ctx: UpgradeContext) => void;

/** See RouteRegistrar.preRouter. */
export type PreRouterHandler = (req: IncomingMessage, res: ServerResponse) => boolean;
