import createClient, { type Middleware } from 'openapi-fetch';
import { accessToken, signIn } from '../auth.ts';
import { tenantHeaders } from '../tenant.ts';
import type { components, paths } from './schema';

/** The JSON request body of an operation, from the OpenAPI description. */
export type Body<P extends keyof paths, M extends 'post' | 'put' | 'patch'> = paths[P][M] extends { requestBody?: { content: { 'application/json': infer B } } }
  ? B
  : never;

/** Why the API refused a field: the zod issue code and its bounds (the error body's `issue`). */
export type Issue = NonNullable<components['schemas']['Error']['issue']>;

/**
 * An API error: its code, the field it names (when it names one) and why, and the server's English
 * description (`message`), which the console shows only when it has no words of its own for the code.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    readonly issue?: Issue,
    /** The error body's other members (tenant_limit's `cap` and `limit`, 405's `allowed`). */
    readonly extra: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

/**
 * The spec's query-verb addresses (`/signal.ashx?trunks=list`) are path keys in the description,
 * and their verb is also a declared query parameter: openapi-fetch then writes the query twice
 * (`?trunks=list?trunks=list`). Folded here into one query with each pair once.
 */
export function foldQuery(url: string): string {
  const i = url.indexOf('?');
  if (i === -1) return url;
  const seen = new Set<string>();
  const out = new URLSearchParams();
  for (const [k, v] of new URLSearchParams(url.slice(i + 1).replace(/\?/g, '&'))) {
    const key = `${k}\u0000${v}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.append(k, v);
  }
  const q = out.toString();
  return `${url.slice(0, i)}?${q}`;
}

const auth: Middleware = {
  async onRequest({ request }) {
    const t = await accessToken();
    const url = foldQuery(request.url);
    // A Request's URL cannot change: build the same request anew (its body read once, as bytes).
    const r =
      url === request.url
        ? request
        : new Request(url, {
            method: request.method,
            headers: request.headers,
            body: request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.arrayBuffer(),
            signal: request.signal,
          });
    if (t) r.headers.set('Authorization', `Bearer ${t}`);
    for (const [k, v] of Object.entries(tenantHeaders(new URL(r.url).pathname))) r.headers.set(k, v);
    return r;
  },
};

/** The typed client: paths, parameters and bodies come from the appliance's OpenAPI description. */
export const api = createClient<paths>({ baseUrl: location.origin });
api.use(auth);

type ErrorBody = Partial<components['schemas']['Error']>;

/** Unwraps an openapi-fetch answer: the data, or an ApiError (a 401 first tries a refresh, then signs in again). */
export async function call<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await p;
  if (response.ok) return data as T;
  const e = (error ?? {}) as ErrorBody;
  if (response.status === 401) {
    const fresh = await accessToken(true);
    if (!fresh) await signIn();
  }
  const field = e.field ?? /^(?:invalid (?:field|query parameter) )?([A-Za-z0-9_.[\]]+):/.exec(e.error_description ?? '')?.[1];
  const { error: _code, error_description: _description, error_uri: _uri, field: _field, issue: _issue, ...extra } = e;
  throw new ApiError(response.status, e.error ?? 'error', e.error_description ?? e.error ?? `HTTP ${response.status}`, field, e.issue, extra);
}
