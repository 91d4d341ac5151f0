import type { TestServer } from '../../support/server.ts';
import { until as pollUntil } from '../../support/until.ts';

export { startSmtp, type Mail } from '../../support/smtp.ts';

// Response bodies are checked field by field; `any` keeps those checks short.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export async function j(r: Response | Promise<Response>): Promise<{ status: number; body: Json }> {
  const res = await r;
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** The admin surface takes a bearer or the admin HMAC over `bucket|Host[|bodyLen]`. */
export function adm(s: TestServer, p: string, bucket: string, json?: unknown, host?: string): Promise<Response> {
  const body = json === undefined ? undefined : JSON.stringify(json);
  const sig = s.hmac(bucket, host ?? `127.0.0.1:${s.port}`, body ? Buffer.byteLength(body) : undefined);
  return s.fetch(p, {
    method: body ? 'POST' : 'GET',
    body,
    host,
    headers: { 'x-service-admin-signature': sig, ...(body ? { 'content-type': 'application/json' } : {}) },
  });
}

/** `until` with this folder's shorter default wait. */
export const until = <T>(fn: () => T | Promise<T>, ms = 5000, what = 'condition') => pollUntil(fn, ms, what);

export function eventsOf(s: TestServer, callId: string): { name: string; data: Json }[] {
  return (s.appliance.core.db.prepare('SELECT name, data FROM events ORDER BY id').all() as { name: string; data: string }[])
    .map((e) => ({ name: e.name, data: JSON.parse(e.data) }))
    .filter((e) => e.data.callId === callId);
}

export const call = (over: Record<string, unknown> = {}) => ({
  phone: '+4930123456',
  displayName: 'Dr. Example',
  email: 'ops@example.com',
  systemPrompt: 'Confirm the appointment on Tuesday.',
  apiKey: 'AIza-test-engine-key-42',
  ...over,
});

/**
 * Waits until the appliance's embedded bridge is ready and listening for SIP (over TLS too with
 * `tls`), and returns its health (`sip.port`, `sip.tlsPort`, ...).
 */
export function bridgeListening(s: TestServer, opts: { tls?: boolean; ms?: number } = {}): Promise<Json> {
  return until(
    async () => {
      const b = (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body;
      return b.state === 'ready' && (opts.tls ? b.health?.sip?.tlsPort : b.health?.sip?.port) ? b.health : null;
    },
    opts.ms ?? 30_000,
    opts.tls ? 'bridge listening for TLS' : 'bridge ready',
  );
}

/** Waits until a call (by id, through the v1 API) has ended, and returns its record. */
export function callEnded(s: TestServer, id: string, ms = 40_000): Promise<Json> {
  return until(
    async () => {
      const r = (await j(s.fetch(`/api.ashx/v1/calls/${id}`, { key: s.adminKey }))).body;
      return r.status.startsWith('ended') ? r : null;
    },
    ms,
    'call ended',
  );
}
