/**
 * The super-admin's tenant switch: which tenant the admin pages act on. Kept in memory only, like
 * the tokens: a reload starts on the signed-in tenant again. The API takes the choice as the
 * `X-Sovcomms-Tenant` header (README "Tenant switch"); routes about the caller themselves (chat,
 * sign-in, userinfo) are theirs in any tenant and do not take it.
 */
let acting: string | undefined;
const listeners = new Set<(host: string | undefined) => void>();

export function actingTenant(): string | undefined {
  return acting;
}

/** Acts on the tenant with this host name; undefined returns to the signed-in tenant. */
export function setActingTenant(host: string | undefined): void {
  if (host === acting) return;
  acting = host;
  for (const l of listeners) l(host);
}

export function onActingTenant(l: (host: string | undefined) => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

// The office tab rings for the signed-in user in their own tenant only (api.ashx/v1/phone/…).
const SELF = /^\/(?:chat\.ashx|oidc\.ashx|oauth2\/|api\.ashx\/v1\/phone\/)/i;

/** The switch header for a request to `path`, or none. */
export function tenantHeaders(path: string): Record<string, string> {
  return acting && !SELF.test(path) ? { 'X-Sovcomms-Tenant': acting } : {};
}
