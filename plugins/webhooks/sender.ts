import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { BUILD } from '../../server/sdk.ts';
import { resolveAllowed, type NetworkPolicy, type Resolver } from './net-policy.ts';

/**
 * One secret, two signatures. The secret is `whsec_` + base64 of 24 random bytes, the Standard
 * Webhooks convention:
 * - `X-Service-Signature: sha256=<hex>` (spec "Events") keys HMAC-SHA256 with the whole secret
 *   string as UTF-8 bytes, as GitHub-style verifiers (`@octokit/webhooks-methods` verify(secret,
 *   body, sig)) do with the string they are given;
 * - `webhook-signature: v1,<base64>` (Standard Webhooks §Signature scheme) keys it with the bytes
 *   after `whsec_`, base64-decoded, as `new Webhook(secret)` of the `standardwebhooks` library does.
 */
export function newSecret(): string {
  return 'whsec_' + crypto.randomBytes(24).toString('base64');
}

export function serviceSignature(secret: string, body: string | Buffer): string {
  return 'sha256=' + crypto.createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex');
}

export function standardSignature(secret: string, id: string, timestampSec: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return 'v1,' + crypto.createHmac('sha256', key).update(`${id}.${timestampSec}.${body}`).digest('base64');
}

export interface DeliveryRequest {
  url: string;
  body: string;
  event: string;
  deliveryId: string;
  attempt: number;
  secret: string;
  /** Unix seconds for webhook-timestamp (the time of this attempt: receivers check freshness). */
  timestampSec: number;
}

export function deliveryHeaders(d: DeliveryRequest): Record<string, string> {
  return {
    'Content-Type': 'application/json',
    'User-Agent': `sovcomms-webhooks/${BUILD}`,
    'X-Service-Event': d.event,
    'X-Service-Signature': serviceSignature(d.secret, d.body),
    'X-Service-Delivery-Id': d.deliveryId,
    'X-Service-Attempt': String(d.attempt),
    'webhook-id': d.deliveryId,
    'webhook-timestamp': String(d.timestampSec),
    'webhook-signature': standardSignature(d.secret, d.deliveryId, d.timestampSec, d.body),
  };
}

export interface SendOptions {
  policy: NetworkPolicy;
  timeoutMs: number;
  maxResponseBytes: number;
  signal?: AbortSignal;
  resolve?: Resolver;
  /**
   * Keep-alive agents. Their pools are keyed by the checked address (and SNI name), so a reused
   * connection always goes where the policy check said; without them every attempt connects anew.
   */
  agents?: { http: http.Agent; https: https.Agent };
  /** Trusted CA certificates for https receivers (PEM), replacing Node's defaults when set. */
  ca?: string[];
}

export interface SendResult {
  /** HTTP status, or null when no response arrived. */
  status: number | null;
  headers: http.IncomingHttpHeaders;
  /** The first `maxResponseBytes` of the response body. */
  body: string;
  durationMs: number;
  /** Set when no response arrived (network error, timeout, refused address). */
  error?: string;
  /** The address policy refused every resolved address: retrying will not help. */
  refused?: boolean;
  /** The address the request went to (absent when none was allowed). */
  address?: string;
}

/**
 * POSTs one delivery. The URL's host is resolved and checked once, and the request connects to
 * that checked address (Host and TLS SNI keep the name), so a name cannot rebind to a refused
 * address in between. Redirects are not followed (a 3xx is a failed attempt); the response body
 * is read only up to a small bound; one timeout covers connect, headers and body.
 */
export function send(d: DeliveryRequest, o: SendOptions): Promise<SendResult> {
  return exchange(d.url, { method: 'POST', headers: deliveryHeaders(d), body: d.body }, o);
}

/** One outbound request under the address policy, as `send` makes it (any method). */
export async function exchange(target: string, req: OutboundRequest, o: SendOptions): Promise<SendResult> {
  const started = performance.now();
  const url = new URL(target);
  let targets: { address: string; family: 4 | 6 }[];
  try {
    targets = await resolveAllowed(url, o.policy, o.resolve);
  } catch (e) {
    const err = e as Error;
    return {
      status: null,
      headers: {},
      body: '',
      durationMs: Math.round(performance.now() - started),
      error: err.message,
      refused: err.name === 'AddressRefused',
    };
  }
  let r: SendResult & { staleSocket?: boolean; noConnect?: boolean } = { status: null, headers: {}, body: '', durationMs: 0 };
  let address: string | undefined;
  for (const t of targets) {
    address = t.address;
    r = await sendOnce(req, url, t, o);
    // A kept-alive connection the receiver closed while idle fails at once with a reset (the
    // well-known keep-alive race); that is not the receiver's answer, so try once on a new one.
    if (r.staleSocket && !o.signal?.aborted) r = await sendOnce(req, url, t, { ...o, agents: undefined });
    // Nothing listens at this address (say ::1 when the receiver is IPv4 only): the next allowed one.
    if (!r.noConnect || o.signal?.aborted) break;
  }
  return { ...r, address, durationMs: Math.round(performance.now() - started) };
}

export interface OutboundRequest {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

const NO_CONNECT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'EAFNOSUPPORT']);

async function sendOnce(
  d: OutboundRequest,
  url: URL,
  target: { address: string; family: 4 | 6 },
  o: SendOptions,
): Promise<SendResult & { staleSocket?: boolean; noConnect?: boolean }> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const isHttps = url.protocol === 'https:';
  const port = url.port ? Number(url.port) : isHttps ? 443 : 80;
  const headers = { ...d.headers, Host: url.host, ...(d.body === undefined ? {} : { 'Content-Length': String(Buffer.byteLength(d.body)) }) };
  const options: https.RequestOptions = {
    method: d.method,
    host: target.address,
    family: target.family,
    port,
    path: url.pathname + url.search,
    headers,
    agent: o.agents ? (isHttps ? o.agents.https : o.agents.http) : false,
    // TLS: verify the certificate against the name in the URL, not the address we connect to.
    ...(isHttps && !/^[\d.]+$|:/.test(url.hostname) ? { servername: url.hostname } : {}),
    ...(isHttps && o.ca ? { ca: o.ca } : {}),
  };
  return new Promise<SendResult & { staleSocket?: boolean; noConnect?: boolean }>((resolve) => {
    let done = false;
    const finish = (r: Omit<SendResult, 'durationMs'> & { staleSocket?: boolean; noConnect?: boolean }) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
      resolve({ ...r, durationMs: elapsed() });
    };
    const req = (isHttps ? https : http).request(options, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        if (size < o.maxResponseBytes) chunks.push(c.subarray(0, o.maxResponseBytes - size));
        size += c.length;
        // Enough read: the status is what counts, the rest is not our business.
        if (size >= o.maxResponseBytes) {
          finish({ status: res.statusCode ?? null, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
          res.destroy();
        }
      });
      res.on('end', () => finish({ status: res.statusCode ?? null, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', () => finish({ status: res.statusCode ?? null, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    const timer = setTimeout(() => {
      finish({ status: null, headers: {}, body: '', error: `timed out after ${o.timeoutMs} ms` });
      req.destroy();
    }, o.timeoutMs);
    const onAbort = () => {
      finish({ status: null, headers: {}, body: '', error: 'interrupted (shutting down)' });
      req.destroy();
    };
    if (o.signal?.aborted) return onAbort();
    o.signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (e: NodeJS.ErrnoException) =>
      finish({
        status: null,
        headers: {},
        body: '',
        error: e.code ? `${e.code}: ${e.message}` : e.message,
        staleSocket: req.reusedSocket && (e.code === 'ECONNRESET' || e.code === 'EPIPE'),
        noConnect: NO_CONNECT.has(e.code ?? ''),
      }),
    );
    req.end(d.body);
  });
}

/**
 * Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Returns milliseconds from `now`,
 * or undefined when absent or unreadable.
 */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}
