import { z } from 'zod';
import { buildOpenApi, authText } from './openapi.ts';
import { policy } from './auth.ts';
import { reply, type RouteDef } from './http/route.ts';
import type { Dispatcher } from './http/dispatch.ts';
import type { PluginHost } from './plugin-host.ts';
import type { DeclaredEvent } from './events.ts';
import { BUILD, PRODUCT_NAME } from './build-info.ts';
import { PAGE_DEFAULT, PAGE_MAX } from './http/envelope.ts';
import type { BackupState } from './backup/service.ts';

/** Routes the core itself serves: health, readiness, the API description and the v1 root. */
export function coreRoutes(
  dispatcher: Dispatcher,
  host: () => PluginHost | undefined,
  events?: () => readonly DeclaredEvent[],
  backup?: () => BackupState,
): RouteDef[] {
  let cached: { doc: unknown } | undefined;
  const openapi = () => {
    // Routes are sealed at start, so the description is built once.
    cached ??= { doc: buildOpenApi(dispatcher.routes, { build: BUILD, events: events?.() }) };
    return cached.doc;
  };
  return [
    {
      method: 'GET',
      path: '/healthz',
      summary: 'Liveness: the process answers',
      area: 'core',
      auth: policy.public,
      rateLimit: false,
      responses: { 200: { description: 'alive', schema: z.object({ status: z.literal('ok') }) } },
      handler: () => ({ status: 'ok' }),
    },
    {
      method: 'GET',
      path: '/readyz',
      summary: "Readiness: each plugin's state; 503 until every required plugin has started",
      area: 'core',
      auth: policy.public,
      rateLimit: false,
      responses: { 200: { description: 'ready' }, 503: { description: 'not ready' } },
      handler: () => {
        const h = host();
        const plugins = h?.status() ?? [];
        const ready = !!h && plugins.every((p) => !p.required || p.state === 'started');
        const b = backup?.();
        // A failing or overdue backup schedule degrades readiness without making it unready: the
        // appliance serves, but the operator must look (the dashboard says the same).
        const backupDegraded = b?.health === 'failing' || b?.health === 'overdue';
        const degraded = backupDegraded || plugins.some((p) => p.health?.status === 'degraded' || (!p.required && p.state === 'failed'));
        const body = {
          status: ready ? (degraded ? 'degraded' : 'ready') : 'starting',
          build: BUILD,
          ...(b
            ? {
                backup: {
                  health: b.health,
                  lastSuccess: b.lastSuccess?.at ?? null,
                  lastFailure: b.lastFailure ? { at: b.lastFailure.at, reason: b.lastFailure.reason } : null,
                  nextRun: b.nextRun,
                },
              }
            : {}),
          plugins: Object.fromEntries(
            plugins.map((p) => [
              p.name,
              { state: p.state, required: p.required, ...(p.error ? { error: p.error } : {}), ...(p.health ? { health: p.health } : {}) },
            ]),
          ),
        };
        return reply(ready ? 200 : 503, body);
      },
    },
    {
      method: 'GET',
      path: '/openapi.json',
      aliases: ['/.well-known/openapi.json'],
      summary: 'OpenAPI 3.1 description of every endpoint',
      area: 'core',
      auth: policy.public,
      handler: (_req, res) => {
        res.setHeader('Cache-Control', 'public, max-age=60');
        return openapi();
      },
    },
    {
      method: 'GET',
      path: '/api.ashx/v1',
      summary: 'v1 root: name, version, build and every registered endpoint',
      area: 'core',
      auth: policy.public,
      handler: () => ({
        name: PRODUCT_NAME,
        version: 'v1',
        build: BUILD,
        endpoints: dispatcher.routes
          .filter((r) => !r.def.hidden)
          .flatMap((r) =>
            r.addresses.map((path) => ({ method: r.def.method, path, description: r.def.summary, area: r.def.area ?? r.plugin, auth: authText(r.def.auth) })),
          ),
        auth: {
          bearer: 'Authorization: Bearer <access token> from the token endpoint; role=admin for v1',
          apiKey: 'Authorization: Bearer ak_... personal API key, in place of a bearer on v1',
          adminHmac: 'X-Service-Admin-Signature: hex HMAC-SHA256 over bucket|Host (or bucket|Host|bodyLen) with the admin shared secret',
          adminHmacV2:
            'X-Service-Admin-Signature-V2: t=<unix seconds>,sig=<hex HMAC-SHA256 over v2|bucket|Host|t|<hex SHA-256 of the body>>; ±5 minutes, each signature once (extension; sovcomms admin-secret sign)',
        },
        pagination: { limitDefault: PAGE_DEFAULT, limitMax: PAGE_MAX, offsetDefault: 0, envelope: ['data', 'total', 'limit', 'offset', 'next'] },
        errors: {
          shape: '{error, error_description}',
          statuses: {
            400: 'bad input',
            401: 'missing or invalid credentials',
            403: 'not privileged',
            404: 'not_found',
            405: 'method not allowed',
            409: 'conflict',
            413: 'body too large',
            415: 'unsupported content type',
            429: 'rate limited (Retry-After)',
            501: 'not configured',
            502: 'bridge unreachable',
            503: 'bridge not configured or plugin not running',
          },
        },
        openapi: '/openapi.json',
      }),
    },
  ];
}
