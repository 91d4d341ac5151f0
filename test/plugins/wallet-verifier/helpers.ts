import type { TestServer } from '../../support/server.ts';

/** An admin-HMAC signed call (the "H" of "B or H"). */
export function adminCall(s: TestServer, method: 'GET' | 'POST', pathAndQuery: string, bucket: string, json?: unknown): Promise<Response> {
  const host = `127.0.0.1:${s.port}`;
  const body = json === undefined ? undefined : JSON.stringify(json);
  const headers: Record<string, string> = { 'x-service-admin-signature': s.hmac(bucket, host, body ? Buffer.byteLength(body) : undefined) };
  if (body) headers['content-type'] = 'application/json';
  return s.fetch(pathAndQuery, { method, host, headers, body });
}

/** A response body as JSON; assertions check it field by field, so a loose type keeps them readable. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see the comment above
export async function body(r: Response): Promise<any> {
  return r.json();
}
