import type { AnyPlugin } from '../server/sdk.ts';
import audit from './audit/index.ts';
import rpCa from './rp-ca/index.ts';
import webhooks from './webhooks/index.ts';
import oidc from './oidc/index.ts';
import telephony from './telephony/index.ts';
import lotl from './lotl/index.ts';
import admin from './admin/index.ts';
import consolePlugin from './console/index.ts';
import discovery from './discovery/index.ts';
import chat from './chat/index.ts';
import walletIssuer from './wallet-issuer/index.ts';
import walletVerifier from './wallet-verifier/index.ts';

/** The built-in plugins, in no particular order: the host sorts them by dependency. */
export function builtinPlugins(): AnyPlugin[] {
  return [audit, rpCa, oidc, webhooks, telephony, lotl, admin, consolePlugin, discovery, chat, walletIssuer, walletVerifier];
}
