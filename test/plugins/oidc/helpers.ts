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
    const body = (init.body ?? undefined) as string | URLSearchParams | undefined;
    return httpFetch(target, { method: init.method ?? 'GET', headers, body });
  }) as typeof fetch;
}

/** openid-client Configuration for a client of the tenant at `host` (e.g. `localhost:PORT`). */
export async function rp(
  s: TestServer,
  host: string,
  clientId: string,
  metadata: Partial<oidc.ClientMetadata> | string | undefined,
  auth?: oidc.ClientAuth,
): Promise<oidc.Configuration> {
  const f = loopbackFetch(s);
  const cf: oidc.CustomFetch = (url, options) => f(url, options as unknown as RequestInit);
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- marked deprecated only to stand out; the tests talk plain HTTP to loopback
  return oidc.discovery(new URL(`http://${host}`), clientId, metadata, auth, { execute: [oidc.allowInsecureRequests], [oidc.customFetch]: cf });
}

export async function saveClient(s: TestServer, host: string, body: Record<string, unknown>, key?: string): Promise<{ client_secret?: string }> {
  const json = JSON.stringify(body);
  const headers: Record<string, string> = key ? {} : { 'X-Service-Admin-Signature': s.hmac('oidc-clients-save', host, Buffer.byteLength(json)) };
  const res = await s.fetch('/signal.ashx?oidc-clients-save=1', { method: 'POST', host, json: body, headers, key });
  if (res.status !== 200) throw new Error(`save client: ${res.status} ${await res.text()}`);
  return (await res.json()) as { client_secret?: string };
}

export async function tokenForm(
  s: TestServer,
  host: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await s.fetch('/oauth2/v1/token', { method: 'POST', host, body: new URLSearchParams(form), headers });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

/** A minimal browser for the protocol tests: a cookie jar and manual redirects, over loopback. */
export class TestBrowser {
  readonly jar = new Map<string, string>();
  constructor(
    private readonly s: TestServer,
    readonly host: string,
  ) {}

  private cookieHeader(): string {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  private keep(res: Response): void {
    for (const c of res.headers.getSetCookie()) {
      const [kv, ...attrs] = c.split(';');
      const i = kv!.indexOf('=');
      const k = kv!.slice(0, i).trim();
      const v = kv!.slice(i + 1).trim();
      if (attrs.some((a) => /max-age=0/i.test(a.trim())) || v === '') this.jar.delete(k);
      else this.jar.set(k, v);
    }
  }

  async get(url: string): Promise<Response> {
    const u = new URL(url, `http://${this.host}`);
    const res = await this.s.fetch(u.pathname + u.search, { host: u.host, headers: { cookie: this.cookieHeader() } });
    this.keep(res);
    return res;
  }

  async post(path: string, form: Record<string, string>): Promise<Response> {
    const res = await this.s.fetch(path, { method: 'POST', host: this.host, body: new URLSearchParams(form), headers: { cookie: this.cookieHeader() } });
    this.keep(res);
    return res;
  }

  /** Follows redirects on the server until one leaves it (to a client's redirect_uri) or a page is shown. */
  async follow(res: Response): Promise<{ res: Response; location?: string }> {
    let r = res;
    for (let n = 0; n < 10; n++) {
      if (r.status !== 302 && r.status !== 303) return { res: r };
      const loc = r.headers.get('location')!;
      const u = new URL(loc, `http://${this.host}`);
      if (u.host !== this.host) return { res: r, location: u.href };
      r = await this.get(u.href);
    }
    throw new Error('too many redirects');
  }
}

export function hidden(html: string, name: string): string {
  const m = new RegExp(`name="${name}" value="([^"]*)"`).exec(html);
  if (!m) throw new Error(`no hidden field ${name} in page`);
  return m[1]!
    .replace(/&amp;/g, '&')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>');
}

/**
 * Runs an authorization request through the pages: sign-in (when asked), consent (when asked).
 * Returns the URL the browser was finally sent to (the client's redirect_uri with the response).
 */
export async function authorizeThrough(
  b: TestBrowser,
  authUrl: URL | string,
  user?: { username: string; password: string },
  consent: 'allow' | 'deny' = 'allow',
): Promise<string> {
  let { res, location } = await b.follow(await b.get(String(authUrl)));
  for (let step = 0; step < 5 && !location; step++) {
    const html = await res.text();
    if (html.includes('action="/oidc.ashx/login"') && user) {
      ({ res, location } = await b.follow(
        await b.post('/oidc.ashx/login', { i: hidden(html, 'i'), csrf: hidden(html, 'csrf'), username: user.username, password: user.password }),
      ));
    } else if (html.includes('action="/oidc.ashx/consent"')) {
      ({ res, location } = await b.follow(await b.post('/oidc.ashx/consent', { i: hidden(html, 'i'), csrf: hidden(html, 'csrf'), decision: consent })));
    } else {
      throw new Error(`stuck at a page (${res.status}): ${html.slice(0, 300)}`);
    }
  }
  if (!location) throw new Error('the flow did not return to the client');
  return location;
}
