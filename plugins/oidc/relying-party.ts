import crypto from 'node:crypto';
import type { Tenant } from '../../server/sdk.ts';
import type { RelyingParty, RelyingPartyClient, RequestInfo } from './api.ts';
import { builtInClient } from './clients.ts';
import type { OidcProvider } from './provider.ts';

const b64urlSha256 = (s: string) => crypto.createHash('sha256').update(s).digest('base64url');

/**
 * "Sign in through our own provider" for a plugin's browser flow (the room page, the wallet
 * issuer's authorization step): OIDC Core §3.1 authorization code flow with PKCE S256 (RFC 7636)
 * and a nonce, for the plugin's built-in public client; the code comes back to the plugin's
 * callback and is exchanged in process. The caller keeps state, verifier and nonce bound to the
 * browser that started (a sealed cookie, or a row keyed by a browser cookie) and checks `state`.
 */
export function relyingParty(provider: OidcProvider, issuerOf: (origin: string) => string, c: RelyingPartyClient): RelyingParty {
  const redirectUri = (origin: string) => `${origin}${c.callbackPath}`;
  return {
    start(tenant: Tenant, origin: string) {
      const redirect = builtInClient(provider.clients, tenant, { clientId: c.clientId, name: c.name, redirectUri: redirectUri(origin) });
      const state = crypto.randomBytes(32).toString('base64url');
      const verifier = crypto.randomBytes(48).toString('base64url');
      const nonce = crypto.randomBytes(16).toString('base64url');
      const u = new URL(`${issuerOf(origin)}/oauth2/v1/authorize`);
      u.search = new URLSearchParams({
        response_type: 'code',
        client_id: c.clientId,
        redirect_uri: redirect,
        scope: 'openid profile email',
        state,
        nonce,
        code_challenge: b64urlSha256(verifier),
        code_challenge_method: 'S256',
      }).toString();
      return { location: u.toString(), state, verifier, nonce };
    },

    async finish(tenant: Tenant, origin: string, p: { code: string; verifier: string; nonce: string }, req: RequestInfo) {
      let sub: string;
      try {
        const t = (await provider.token(
          tenant,
          issuerOf(origin),
          { grant_type: 'authorization_code', code: p.code, redirect_uri: redirectUri(origin), client_id: c.clientId, code_verifier: p.verifier },
          req,
        )) as { access_token: string; id_token?: string };
        // The ID token comes straight from our own token endpoint (no network between): its
        // signature needs no check here, only that it answers this sign-in (OIDC Core §3.1.3.7 item 11).
        const idt = t.id_token ? (JSON.parse(Buffer.from(t.id_token.split('.')[1] ?? '', 'base64url').toString()) as { nonce?: string }) : {};
        const at = await provider.verifyAccessToken(tenant, t.access_token);
        const client = provider.clients.get(tenant, c.clientId);
        if (client) await provider.revoke(tenant, client, t.access_token);
        if (!at?.sub || idt.nonce !== p.nonce) return { error: 'unconfirmed' as const };
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- sub comes from a token's claims, typed but not checked
        sub = String(at.sub);
      } catch (e) {
        return { error: 'unconfirmed' as const, detail: (e as Error).message };
      }
      const user = provider.activeUser(tenant, sub);
      return user ? { user } : { error: 'inactive' as const };
    },
  };
}
