import { defineService } from '../../server/sdk.ts';
import type { OidcService } from './provider.ts';

/** The OpenID Provider for plugins that add grants or need the issuer (`ctx.use(OIDC)`). */
export const OIDC = defineService<OidcService>('oidc');
export type { OidcService };
