import * as oidc from 'openid-client';
import { httpFetch, type TestServer } from '../../support/server.ts';

/**
 * A fetch for openid-client that reaches the test server on loopback whatever host the URL
 * names, keeping the Host header (tenancy is chosen by Host; undici would not let us set it).
 */
export function loopbackFetch(s: TestServer): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const u = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const headers = new Headers(init.headers);
    headers.set('host', u.host);
    const target = `http://127.0.0.1:${s.port}${u.pathname}${u.search}`;
    const body = init.body as string | URLSearchParams | undefined;
    return httpFetch(target, { method: init.method ?? 'GET', headers, body });
  }) as typeof fetch;
}

/** openid-client Configuration for a client of the tenant at `host` (e.g. `localhost:PORT`). */
export async function rp(s: TestServer, host: string, clientId: string, metadata: Partial<oidc.ClientMetadata> | string | undefined, auth?: oidc.ClientAuth): Promise<oidc.Configuration> {
  const f = loopbackFetch(s);
  const cf: oidc.CustomFetch = (url, options) => f(url, options as unknown as RequestInit);
  return oidc.discovery(new URL(`http://${host}`), clientId, metadata, auth, { execute: [oidc.allowInsecureRequests], [oidc.customFetch]: cf });
}

export async function saveClient(s: TestServer, host: string, body: Record<string, unknown>, key?: string): Promise<{ client_secret?: string }> {
  const json = JSON.stringify(body);
  const headers: Record<string, string> = key ? {} : { 'X-Service-Admin-Signature': s.hmac('oidc-clients-save', host, Buffer.byteLength(json)) };
  const res = await s.fetch('/signal.ashx?oidc-clients-save=1', { method: 'POST', host, json: body, headers, key });
  if (res.status !== 200) throw new Error(`save client: ${res.status} ${await res.text()}`);
  return (await res.json()) as { client_secret?: string };
}

export async function tokenForm(s: TestServer, host: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await s.fetch('/oauth2/v1/token', { method: 'POST', host, body: new URLSearchParams(form), headers });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}
