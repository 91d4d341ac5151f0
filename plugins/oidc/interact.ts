import { z } from 'zod';
import { type PluginContext, policy, type RouteRegistrar } from '../../server/sdk.ts';
import { emailLinkRoutes } from './email-links.ts';
import { invitationRoutes } from './invitations.ts';
import { passkeyRoutes } from './passkeys.ts';
import type { OidcConfig } from './schemas.ts';
import type { OidcServices } from './services.ts';

/**
 * The sign-in methods beside the password: passkeys (passkeys.ts), e-mail links (email-links.ts)
 * and the invitation claim (invitations.ts), plus the step that resumes a pending authorization
 * once one of them signed the browser in. What they share is SignIn (the browser, its session
 * and CSRF tokens) and OneTimeLinks (single-use links and their mail), both built at setup.
 */
export function interactRoutes(r: RouteRegistrar, ctx: PluginContext<OidcConfig>, s: OidcServices): void {
  const area = 'login';
  r.add({
    method: 'GET',
    path: '/oidc.ashx/resume',
    summary: 'Continues a pending authorization after a sign-in step',
    area,
    auth: policy.public,
    query: z.object({ i: z.string().max(64) }),
    responses: { 302: { description: 'onward in the authorization flow' } },
    handler: (req) => {
      const pend = s.flow.pending(req, req.query.i);
      if (!('it' in pend)) return pend;
      return s.flow.proceed(req, pend.it.params, pend.client, pend.it, pend.browser);
    },
  });
  passkeyRoutes(r, ctx, s, area);
  emailLinkRoutes(r, ctx, s, area);
  invitationRoutes(r, ctx, s, area);
}
