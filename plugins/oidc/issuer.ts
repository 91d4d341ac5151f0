import type { RouteRequest } from '../../server/sdk.ts';
import type { RequestInfo } from './api.ts';

/**
 * The issuer is the tenant's origin exactly as the client addressed it (scheme, host and port
 * from the request): a tenant reachable under several host names is one OP per name, and the
 * appliance behind its LAN name or its loopback address both validate for the RP that used them.
 * Access tokens are accepted by any host of the same tenant (provider.verifyAccessToken).
 * The one place the issuer is derived (routes, the authorization flow, OidcService.issuer).
 */
export function issuerOf(req: { origin: string }): string {
  return issuerOfOrigin(req.origin);
}

export function issuerOfOrigin(origin: string): string {
  return origin.replace(/\/+$/, '');
}

export function reqInfo(req: RouteRequest): RequestInfo {
  return { ip: req.ip, ua: req.ua, headers: req.headers };
}
