import { defineService, type Tenant } from '../../server/sdk.ts';

/** A certificate the tenant's RP CA issued for another plugin (the wallet verifier's access certificate). */
export interface IssuedLeaf {
  /** DER of the leaf, then of the CA (OpenID4VP x5c order: leaf first). */
  chainDer: Buffer[];
  serial: string;
  notBefore: string;
  notAfter: string;
}

/** The tenant's RP certificate authority for plugins that need a certificate from it (`ctx.use(RP_CA)`). */
export interface RpCaApi {
  /** Issues an RP access certificate (dNSName = `host`) for a key the caller holds. */
  issueFor(tenant: Tenant, req: { host: string; spki: Buffer; days: number; issuedBy: string }): Promise<IssuedLeaf>;
  /** The CA certificate (DER): the anchor a wallet pins. */
  caDer(tenant: Tenant): Promise<Buffer>;
}

export const RP_CA = defineService<RpCaApi>('rp-ca');
