import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import {
  errorAnswer,
  InputError,
  newRequestId,
  peerAddress,
  type PluginContext,
  type PreRouterHandler,
  publicOriginOf,
  queryObject,
  readBounded,
  SECURITY_HEADERS,
  zodMessage,
} from '../../server/sdk.ts';
import type { OidcProvider } from './provider.ts';
import type { OidcConfig, TokenForm } from './schemas.ts';
import type { z } from 'zod';

const TOKEN_PATHS = new Set(['/oauth2/v1/token', '/oidc.ashx/token']);

/**
 * The token endpoint before the router (the benchmark's hot path: Express's per-request cost was
 * most of a client_credentials token). It uses the router's own pipeline pieces (bounded body
 * reader, error answers, security headers, request ids) and the same conventions: tenant by
 * Host, the `public` per-IP rate limit, the same zod form, no-store. It takes only plain
 * requests: anything behind a proxy (where trust-proxy settings decide the client's address and
 * the origin) or not form-encoded goes the router's way, to the same handler registered as an
 * ordinary route.
 */
export function tokenPreRouter(ctx: PluginContext<OidcConfig>, provider: OidcProvider): PreRouterHandler {
  // The form of the registered grants, composed once (the router's route uses the same schema).
  const form = provider.tokenForm();
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const pathname = (q < 0 ? url : url.slice(0, q)).toLowerCase();
    if (!TOKEN_PATHS.has(pathname) && !(pathname === '/oidc.ashx' && new URLSearchParams(url.slice(q + 1)).get('action') === 'token')) return false;
    if (req.headers['x-forwarded-for'] !== undefined || req.headers['x-forwarded-proto'] !== undefined || req.headers.forwarded !== undefined) return false;
    if (!isFormType(req.headers['content-type'])) return false;
    void handle(ctx, provider, form, req, res);
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

/**
 * A JSON answer with the headers every answer carries (the list form of writeHead skips a
 * per-request object walk). It is written at the check phase of this turn of the event loop,
 * with the other answers made in the same turn: a load of token requests then leaves in bursts
 * rather than one write per I/O callback, and the client's side wakes once per burst. On this
 * machine that took about 15 µs of event-loop time off each token at 10k tokens/s
 * (bench/results/2026-12-06-vm-tokens-4.md); the answer waits microseconds for it.
 */
function send(res: ServerResponse, requestId: string, status: number, body: unknown, extra?: Record<string, string>): void {
  const json = JSON.stringify(body);
  const headers = [
    'Content-Type',
    'application/json; charset=utf-8',
    'Content-Length',
    String(Buffer.byteLength(json)),
    'Cache-Control',
    'no-store',
    'Pragma',
    'no-cache',
    'X-Request-Id',
    requestId,
  ];
  for (const [k, v] of SECURITY_HEADERS) headers.push(k, v);
  if (extra) for (const k in extra) headers.push(k, extra[k]!);
  unwritten.push({ res, status, headers, json });
  if (unwritten.length === 1) setImmediate(writeAll);
}

interface Unwritten {
  res: ServerResponse;
  status: number;
  headers: string[];
  json: string;
}

let unwritten: Unwritten[] = [];

function writeAll(): void {
  const u = unwritten;
  unwritten = [];
  for (const { res, status, headers, json } of u) {
    try {
      res.writeHead(status, headers);
      res.end(json);
    } catch {
      // A response that cannot be written (its socket already gone) takes no other with it.
      res.destroy();
    }
  }
}

async function handle(
  ctx: PluginContext<OidcConfig>,
  provider: OidcProvider,
  tokenForm: z.ZodType<TokenForm>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const logInfo = ctx.log.isLevelEnabled('info');
  const started = logInfo ? process.hrtime.bigint() : 0n;
  const requestId = newRequestId(req.headers['x-request-id']);
  let tenantHost = '';
  // The answer's status, for the log line (the answer itself is written later in the turn).
  let status: number;
  try {
    const tenant = ctx.tenants.resolve(req.headers.host);
    tenantHost = tenant.host;
    const ip = peerAddress(req);
    ctx.rateLimit.check('public', ip, ctx.core.rateLimit.publicPerMinute);
    const raw = await readBounded(req, ctx.core.http.bodyLimitBytes);
    const parsed = tokenForm.safeParse(queryObject(new URLSearchParams(raw.toString('utf8'))));
    if (!parsed.success) throw new InputError(`invalid field ${zodMessage(parsed.error)}`);
    // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- asks whether the server's socket is TLS; a plain socket answers undefined
    const proto = (req.socket as TLSSocket).encrypted ? 'https' : 'http';
    // The same issuer as discovery's (the tenant's public origin): the connection's local port is the listener's.
    const issuer = publicOriginOf(tenant, proto, req.headers.host, req.socket.localPort ?? ctx.core.http.port);
    const answer = await provider.token(tenant, issuer, parsed.data, { ip, ua: (req.headers['user-agent'] ?? '').slice(0, 512), headers: req.headers });
    send(res, requestId, (status = 200), answer);
  } catch (e) {
    const a = errorAnswer(e, requestId);
    if (a.fault) ctx.log.error({ err: e, requestId }, 'token request failed');
    send(res, requestId, (status = a.status), a.body, a.headers);
  }
  if (logInfo) {
    ctx.log.info(
      {
        reqId: requestId,
        method: 'POST',
        path: (req.url ?? '').split('?')[0],
        status,
        ms: Number(process.hrtime.bigint() - started) / 1e6,
        tenant: tenantHost,
      },
      'request',
    );
  }
}
