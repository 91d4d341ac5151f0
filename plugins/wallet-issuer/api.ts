import { defineService, type Tenant } from '../../server/sdk.ts';

/** Name of the core auth verifier of the credential access token (policy.custom). */
export const CREDENTIAL_VERIFIER = 'wallet-issuer-credential-token';

/**
 * What the wallet issuer offers other plugins (`ctx.use(WALLET_ISSUER)`), for our own verifier:
 * the tenant's trust anchor (IACA), its published signing keys, and the status of a credential
 * it issued (Token Status List, draft-ietf-oauth-status-list), without an HTTP round trip.
 */
export interface WalletIssuerApi {
  /** The tenant's IACA certificate: the root of the mdoc x5chain and of the SD-JWT VC x5c. */
  iaca(tenant: Tenant): Promise<{ der: Buffer; pem: string }>;
  /** The signing keys verifiers may meet (active and those in their rotation overlap), as JWKs with x5c. */
  jwks(tenant: Tenant): Promise<{ keys: Record<string, unknown>[] }>;
  /**
   * The status of a credential's `status.status_list` reference: 0 VALID, 1 INVALID (revoked),
   * undefined when the reference is not one of this tenant's lists or no credential holds it.
   */
  credentialStatus(tenant: Tenant, ref: { uri: string; idx: number }): 0 | 1 | undefined;
  /** The signed Status List Token of a list, as served at its URI. */
  statusListToken(tenant: Tenant, origin: string, listId: number): Promise<string>;
}

export const WALLET_ISSUER = defineService<WalletIssuerApi>('wallet-issuer');
