import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { AppError, type FastHandler, InputError, newRequestId, type PluginContext, queryObject } from '../../server/sdk.ts';
import type { OidcProvider } from './provider.ts';
import { tokenForm, type OidcConfig } from './schemas.ts';

const TOKEN_PATHS = new Set(['/oauth2/v1/token', '/oidc.ashx/token']);

/**
 * The token endpoint in front of Express (issue 3's benchmark: Express's per-request cost was
 * most of a client_credentials token). Same conventions as the dispatcher: tenant by Host, the
 * `public` per-IP rate limit, bounded body, the same zod form, errors as {error,
 * error_description}, no-store. It takes only plain requests: anything behind a proxy (where
 * trust-proxy settings decide the origin) or not form-encoded goes the full way, to the same
 * handler registered as an ordinary route.
 */
export function tokenFastPath(ctx: PluginContext<OidcConfig>, p: () => OidcProvider): FastHandler {
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const pathname = (q < 0 ? url : url.slice(0, q)).toLowerCase();
    if (!TOKEN_PATHS.has(pathname) && !(pathname === '/oidc.ashx' && new URLSearchParams(url.slice(q + 1)).get('action') === 'token')) return false;
    if (req.headers['x-forwarded-for'] !== undefined || req.headers['x-forwarded-proto'] !== undefined || req.headers.forwarded !== undefined) return false;
    if (!isFormType(req.headers['content-type'])) return false;
    void handle(ctx, p, req, res);
    return true;
  };
}

const FORM = 'application/x-www-form-urlencoded';

/** The media type (parameters and case aside, RFC 9110 §8.3.1) is a form's. */
function isFormType(ct: string | undefined): boolean {
  if (ct === undefined) return false;
  if (ct === FORM) return true;
  const semi = ct.indexOf(';');
  return (semi < 0 ? ct : ct.slice(0, semi)).trim().toLowerCase() === FORM;
}

/** Headers of every answer; the list form of writeHead skips a per-request object walk. */
function send(res: ServerResponse, requestId: string, status: number, body: unknown, extra?: Record<string, string>): void {
  const json = JSON.stringify(body);
  const headers = [
    'Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(Buffer.byteLength(json)), 'Cache-Control', 'no-store', 'Pragma', 'no-cache',
    'X-Request-Id', requestId, 'X-Content-Type-Options', 'nosniff', 'Referrer-Policy', 'no-referrer',
  ];
  if (extra) for (const k in extra) headers.push(k, extra[k]!);
  res.writeHead(status, headers);
  res.end(json);
}

async function handle(ctx: PluginContext<OidcConfig>, p: () => OidcProvider, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const logInfo = ctx.log.isLevelEnabled('info');
  const started = logInfo ? process.hrtime.bigint() : 0n;
  const requestId = newRequestId(req.headers['x-request-id']);
  let tenantHost = '';
  try {
    const tenant = ctx.tenants.resolve(req.headers.host);
    tenantHost = tenant.host;
    const rawIp = req.socket.remoteAddress ?? '';
    const ip = rawIp.startsWith('::ffff:') ? rawIp.slice(7) : rawIp;
    ctx.rateLimit.check('public', ip, ctx.core.rateLimit.publicPerMinute);
    const raw = await readBody(req, ctx.core.http.bodyLimitBytes);
    const parsed = tokenForm.safeParse(queryObject(new URLSearchParams(raw)));
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new InputError(`invalid field ${issue.path.map(String).join('.')}: ${issue.message}`);
    }
    const proto = (req.socket as TLSSocket).encrypted ? 'https' : 'http';
    const issuer = `${proto}://${req.headers.host || `${ctx.core.http.host}:${ctx.core.http.port}`}`;
    const out = await p().token(tenant, issuer, parsed.data, { ip, ua: String(req.headers['user-agent'] ?? '').slice(0, 512), headers: req.headers });
    send(res, requestId, 200, out);
  } catch (e) {
    if (e instanceof AppError) send(res, requestId, e.status, { error: e.code, error_description: e.message, ...e.extra }, e.headers);
    else {
      ctx.log.error({ err: e, requestId }, 'token request failed');
      send(res, requestId, 500, { error: 'server_error', error_description: `internal error (request ${requestId})` });
    }
  }
  if (logInfo) {
    ctx.log.info({ reqId: requestId, method: 'POST', path: (req.url ?? '').split('?')[0], status: res.statusCode, ms: Number(process.hrtime.bigint() - started) / 1e6, tenant: tenantHost }, 'request');
  }
}

/**
 * The body as UTF-8, at most `limit` bytes (413 beyond). Plain 'data'/'end' listeners: an async
 * iterator over the request costs several objects and promises per request.
 */
function readBody(req: IncomingMessage, limit: number): Promise<string> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(new AppError(413, 'payload_too_large', `request body over ${limit} bytes`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.destroy();
        reject(new AppError(413, 'payload_too_large', `request body over ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
    // A client that goes away mid-body: 'end' never comes; settle so the handler returns.
    req.on('close', () => {
      if (!req.complete) reject(new AppError(400, 'invalid_request', 'request body incomplete'));
    });
  });
}

