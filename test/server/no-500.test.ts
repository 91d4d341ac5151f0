import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import type { RegisteredRoute } from '../../server/http/dispatch.ts';

/**
 * "Never a 500 for a client mistake", over every route every plugin registers (generic over the
 * dispatcher, so plugins added later are covered): each address gets malformed JSON, a wrong
 * content type, a JSON array, an empty object and a bad query value, with valid credentials so
 * the input reaches validation and the handler. 502/503 (a bridge not configured or unreachable)
 * are honest answers; 500 is a bug, and no answer may carry a stack trace.
 */
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
});

const CASES: [label: string, body: string | undefined, contentType: string | undefined][] = [
  ['no body', undefined, undefined],
  ['malformed JSON', '{"a":', 'application/json'],
  ['wrong content type', 'hello', 'text/plain'],
  ['JSON array', '[1, 2]', 'application/json'],
  ['JSON null', 'null', 'application/json'],
  ['empty object', '{}', 'application/json'],
];

function credentials(r: RegisteredRoute, bodyLen: number): { key?: string; headers: Record<string, string> } {
  const a = r.def.auth;
  if (a.kind !== 'credentials') return { headers: {} };
  if (a.accept.includes('apiKey')) return { key: s.adminKey, headers: {} };
  if (a.accept.includes('hmac') && a.hmacBucket) return { headers: { 'X-Service-Admin-Signature': s.hmac(a.hmacBucket, undefined, bodyLen) } };
  return { headers: {} };
}

describe('no 500 for client mistakes', () => {
  it('on every registered route and address', { timeout: 240_000 }, async () => {
    const bad: string[] = [];
    let tried = 0;
    for (const r of s.appliance.dispatcher.routes) {
      // A live stream answers 200 and never ends (test/server/live.test.ts checks it).
      if (r.def.responses?.[200]?.description === 'text/event-stream') continue;
      for (const address of r.addresses) {
        const url = address.replace(/:[A-Za-z0-9_]+/g, 'x%20y') + (address.includes('?') ? '&' : '?') + 'limit=abc&offset=-1';
        for (const [label, body, ct] of CASES) {
          if ((r.def.method === 'GET' || r.def.method === 'DELETE') && body !== undefined) continue;
          const { key, headers } = credentials(r, body ? Buffer.byteLength(body) : 0);
          if (ct) headers['Content-Type'] = ct;
          const res = await s.fetch(url, { method: r.def.method, body, headers, key });
          const text = await res.text();
          tried++;
          if (res.status === 500 || /\n\s+at .+:\d+:\d+/.test(text))
            bad.push(`${res.status} ${r.plugin}: ${r.def.method} ${address} [${label}] ${text.slice(0, 200)}`);
        }
      }
    }
    expect(tried).toBeGreaterThan(10);
    expect(bad).toEqual([]);
  });
});
