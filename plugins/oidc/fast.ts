import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { FastHandler } from '../../server/http/route.ts';
import { newRequestId, queryObject } from '../../server/http/dispatch.ts';
import { AppError, InputError } from '../../server/errors.ts';
import type { PluginContext } from '../../server/plugin.ts';
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
    const ct = String(req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (ct !== 'application/x-www-form-urlencoded') return false;
    void handle(ctx, p, req, res);
    return true;
  };
}

async function handle(ctx: PluginContext<OidcConfig>, p: () => OidcProvider, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = process.hrtime.bigint();
  const requestId = newRequestId(req.headers['x-request-id']);
  const send = (status: number, body: unknown, extra: Record<string, string> = {}) => {
    const json = JSON.stringify(body);
    res.writeHead(status, {
      'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(json), 'Cache-Control': 'no-store', Pragma: 'no-cache',
      'X-Request-Id': requestId, 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer', ...extra,
    });
    res.end(json);
  };
  let tenantHost = '';
  try {
    const tenant = ctx.tenants.resolve(req.headers.host);
    tenantHost = tenant.host;
    const rawIp = req.socket.remoteAddress ?? '';
    const ip = rawIp.startsWith('::ffff:') ? rawIp.slice(7) : rawIp;
    ctx.rateLimit.check('public', ip, ctx.core.rateLimit.publicPerMinute);
    const raw = await readBody(req, ctx.core.http.bodyLimitBytes);
    const parsed = tokenForm.safeParse(queryObject(new URLSearchParams(raw.toString('utf8'))));
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new InputError(`invalid field ${issue.path.map(String).join('.')}: ${issue.message}`);
    }
    const proto = (req.socket as TLSSocket).encrypted ? 'https' : 'http';
    const issuer = `${proto}://${req.headers.host || `${ctx.core.http.host}:${ctx.core.http.port}`}`;
    const out = await p().token(tenant, issuer, parsed.data, { ip, ua: String(req.headers['user-agent'] ?? '').slice(0, 512), headers: req.headers });
    send(200, out);
  } catch (e) {
    if (e instanceof AppError) send(e.status, { error: e.code, error_description: e.message, ...e.extra }, e.headers);
    else {
      ctx.log.error({ err: e, requestId }, 'token request failed');
      send(500, { error: 'server_error', error_description: `internal error (request ${requestId})` });
    }
  }
  if (ctx.log.isLevelEnabled('info')) {
    ctx.log.info({ reqId: requestId, method: 'POST', path: (req.url ?? '').split('?')[0], status: res.statusCode, ms: Number(process.hrtime.bigint() - started) / 1e6, tenant: tenantHost }, 'request');
  }
}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new AppError(413, 'payload_too_large', `request body over ${limit} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      req.destroy();
      throw new AppError(413, 'payload_too_large', `request body over ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
