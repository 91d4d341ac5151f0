import { policy, bearerToken } from './auth.ts';
import { reply, type RouteDef } from './http/route.ts';
import type { CoreServices } from './core.ts';
import type { Metrics, ScrapeTokens } from './metrics.ts';

/** The credential check of /metrics, registered with the core's auth service. */
export const METRICS_VERIFIER = 'metrics';

/**
 * `GET /metrics`: appliance-wide figures, so the caller is the super-admin (an admin of the
 * primary tenant, by OIDC bearer or ak_ key) or a Prometheus holding the scrape token
 * (`sovcomms metrics token rotate`).
 */
export function metricsRoute(core: CoreServices, metrics: Metrics, tokens: ScrapeTokens): RouteDef {
  if (!core.auth.customVerifier(METRICS_VERIFIER)) {
    core.auth.registerVerifier(METRICS_VERIFIER, async ({ headers, tenant }) => {
      const token = bearerToken(headers.authorization);
      if (!token) return null;
      if (tokens.check(token)) {
        return { kind: 'client', tenantId: tenant.id, subject: 'metrics-scrape', userName: 'metrics-scrape', scopes: [], superAdmin: false };
      }
      const p = await core.auth.verifyBearer(token, tenant);
      return p && p.role === 'admin' && p.superAdmin ? p : null;
    });
  }
  return {
    method: 'GET',
    path: '/metrics',
    summary: 'Prometheus metrics (text format 0.0.4): HTTP, calls, bridge, webhooks, jobs, trusted lists, tokens, process',
    area: 'core',
    auth: policy.custom(METRICS_VERIFIER, 'super-admin bearer or ak_ key, or the metrics scrape token'),
    responses: { 200: { description: 'the metrics, text/plain; version=0.0.4', contentType: 'text/plain; version=0.0.4' } },
    handler: async () => reply.text(200, await metrics.render(), metrics.contentType),
  };
}
