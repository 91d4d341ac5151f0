import type { RouteRequest } from '../../server/sdk.ts';
import type { RequestInfo } from './api.ts';

/**
 * The issuer is the tenant's public origin (RouteRequest.publicOrigin): its configured origin, or
 * the tenant's own host name the client used, on the listener's scheme and port. A tenant
 * reachable under several of its own host names is one OP per name; a Host header that is not
 * one of them (or names another port) never becomes an issuer. Access tokens are accepted by any
 * host of the same tenant (provider.verifyAccessToken).
 * The one place the issuer is derived (routes, the authorization flow, OidcService.issuer); the
 * token pre-router computes the same origin with publicOriginOf.
 */
export function issuerOf(req: { publicOrigin: string }): string {
  return issuerOfOrigin(req.publicOrigin);
}

export function issuerOfOrigin(origin: string): string {
  return origin.replace(/\/+$/, '');
}

export function reqInfo(req: RouteRequest): RequestInfo {
  return { ip: req.ip, ua: req.ua, headers: req.headers };
}
