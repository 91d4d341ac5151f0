import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { z } from 'zod';
import { AppError } from '../errors.ts';

/**
 * What every answer carries, from the router or a pre-router handler (one list, so the two paths
 * cannot drift): a request id, no MIME sniffing, no referrer.
 */
export const SECURITY_HEADERS: readonly (readonly [string, string])[] = [
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
];

/** An error as the one error body `{error, error_description}`, its status and headers. */
export interface ErrorAnswer {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, string>;
  /** A server fault (not a client mistake): log it at error level, with the request id. */
  fault: boolean;
}

/** The one mapping from a thrown value to an answer: typed errors keep their code, anything else is a 500 without detail. */
export function errorAnswer(e: unknown, requestId: string): ErrorAnswer {
  if (e instanceof AppError) return { status: e.status, body: { error: e.code, error_description: e.message, ...e.extra }, headers: e.headers, fault: false };
  if (e instanceof z.ZodError) {
    const issue = e.issues[0];
    const field = issue?.path.map(String).join('.');
    return {
      status: 400,
      body: {
        error: 'invalid_request',
        error_description: issue ? `${field}: ${issue.message}` : 'invalid input',
        ...(field ? { field } : {}),
        ...(issue ? { issue: issueOf(issue) } : {}),
      },
      headers: {},
      fault: false,
    };
  }
  if (isHttpError(e)) {
    return {
      status: e.status,
      body: { error: e.status === 413 ? 'payload_too_large' : 'invalid_request', error_description: e.expose ? e.message : 'bad request' },
      headers: {},
      fault: false,
    };
  }
  if (isStorageFull(e)) {
    // The disk is full: the write is refused in words and nothing was half-written (SQLite rolled
    // the transaction back); still a fault, so the operator sees it in the log.
    return {
      status: 507,
      body: { error: 'storage_full', error_description: `the appliance's disk is full; the change was not saved (request ${requestId})` },
      headers: { 'Retry-After': '60' },
      fault: true,
    };
  }
  return { status: 500, body: { error: 'server_error', error_description: `internal error (request ${requestId})` }, headers: {}, fault: true };
}

/**
 * What a client needs to say a refused value in its own words: the zod issue code (`too_small`,
 * `invalid_format`, `invalid_value`, ... or a custom code) and its bounds, format or allowed values.
 * The console maps these to translated texts; `error_description` stays the English fallback.
 */
export function issueOf(issue: z.core.$ZodIssue): Record<string, unknown> {
  const out: Record<string, unknown> = { code: issue.code };
  const i = issue as unknown as Record<string, unknown>;
  for (const k of ['origin', 'minimum', 'maximum', 'format', 'expected']) {
    const v = i[k];
    if (typeof v === 'string' || typeof v === 'number') out[k] = v;
    else if (typeof v === 'bigint') out[k] = Number(v);
  }
  if (Array.isArray(i.values)) out.values = (i.values as unknown[]).filter((v) => typeof v === 'string' || typeof v === 'number');
  return out;
}

/** SQLITE_FULL (the database or its WAL could not grow) or ENOSPC from a file write. */
export function isStorageFull(e: unknown): boolean {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT';
}

/** body-parser and friends throw errors with a 4xx `status` and an `expose` flag. */
function isHttpError(e: unknown): e is { status: number; expose: boolean; message: string } {
  if (typeof e !== 'object' || e === null) return false;
  const status = (e as { status?: unknown }).status;
  return typeof status === 'number' && status >= 400 && status < 500;
}

/**
 * Random bytes drawn from a block filled at once (as crypto.randomUUID does): for identifiers
 * made on every request (request ids, token ids), where a randomBytes() call each costs more than
 * the bytes. Each identifier still gets fresh CSPRNG bytes; none is ever handed out twice.
 */
export class RandomPool {
  #pool = Buffer.alloc(0);
  #pos = 0;
  constructor(private readonly blockSize = 4096) {}

  take(bytes: number): Buffer {
    const at = this.next(bytes);
    return this.#pool.subarray(at, at + bytes);
  }

  // The text straight from the pool: no Buffer view made per identifier.
  hex(bytes: number): string {
    const at = this.next(bytes);
    return this.#pool.toString('hex', at, at + bytes);
  }

  base64url(bytes: number): string {
    const at = this.next(bytes);
    return this.#pool.toString('base64url', at, at + bytes);
  }

  /** Where the next `bytes` fresh bytes start (the pool refilled when it has too few left). */
  private next(bytes: number): number {
    if (this.#pos + bytes > this.#pool.length) {
      this.#pool = crypto.randomBytes(Math.max(this.blockSize, bytes));
      this.#pos = 0;
    }
    this.#pos += bytes;
    return this.#pos - bytes;
  }
}

const ids = new RandomPool();

/** The request id: the client's `X-Request-Id` when it is a plain token, else 16 fresh hex digits. Not a secret (it is echoed). */
export function newRequestId(incoming: unknown): string {
  if (typeof incoming === 'string' && /^[A-Za-z0-9._-]{8,64}$/.test(incoming)) return incoming;
  return ids.hex(8);
}

/** The peer's address as the appliance names clients (IPv4-mapped IPv6 shown as IPv4). */
export function peerAddress(req: Pick<IncomingMessage, 'socket'>): string {
  return plainIp(req.socket.remoteAddress ?? '');
}

export function plainIp(ip: string): string {
  return ip.startsWith('::ffff:') ? ip.slice(7) : ip;
}

/** How long a refused upgrade's socket may stay open after its answer was sent. */
export const REFUSED_UPGRADE_GRACE_MS = 2000;

/**
 * Refuses an HTTP Upgrade request on its raw socket with the one error body (RouteRegistrar.upgrade):
 * the status, the error's headers (WWW-Authenticate on 401, Retry-After on 429), then closes.
 */
export function rejectUpgrade(socket: Duplex, e: unknown, requestId: string): ErrorAnswer {
  const a = errorAnswer(e, requestId);
  if (socket.writable) {
    const body = JSON.stringify(a.body);
    const headers: (readonly [string, string])[] = [
      ['Content-Type', 'application/json; charset=utf-8'],
      ['Content-Length', String(Buffer.byteLength(body))],
      ['Cache-Control', 'no-store'],
      ['Connection', 'close'],
      ['X-Request-Id', requestId],
      ...SECURITY_HEADERS,
      ...Object.entries(a.headers),
    ];
    // node:http taken here, not imported: the SDK brings this module into every CLI command, which serves no HTTP.
    const reason = process.getBuiltinModule('node:http').STATUS_CODES[a.status] ?? 'Error';
    // end() flushes the answer, then closes: the client reads it before the connection goes.
    socket.end(`HTTP/1.1 ${a.status} ${reason}\r\n${headers.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${body}`);
    // The server's sockets allow half-open connections: a client that never closes its side
    // would hold a refused upgrade (and its descriptor) for good. It has had its answer.
    const t = setTimeout(() => socket.destroy(), REFUSED_UPGRADE_GRACE_MS);
    t.unref();
    socket.once('close', () => clearTimeout(t));
  } else socket.destroy();
  return a;
}
