import { defineService, type Tenant } from '../../server/sdk.ts';
import type { WebhookService } from './service.ts';

/** Webhook subscriptions and deliveries of the tenant, for plugins that show or manage them (`ctx.use(WEBHOOKS)`). */
export const WEBHOOKS = defineService<WebhookService>('webhooks');

/** What an outbound GET brought back: the status and the first `maxBytes` of the body, or why nothing came. */
export interface OutboundAnswer {
  /** HTTP status, or null when no response arrived (refused address, network error, timeout). */
  status: number | null;
  body: string;
  /** The tenant's address policy refused every address of the host. */
  refused?: boolean;
}

/**
 * Fetches for other plugins under the same outbound address policy as webhook deliveries (the
 * tenant's `allowLoopback`/`allowPrivate`/CIDR settings, the address checked once and connected
 * to, no redirects): a credential, a QR code or a metadata document cannot make the appliance
 * reach where a tenant admin could not point a webhook (`ctx.tryUse(OUTBOUND)`).
 */
export interface OutboundHttp {
  get(tenant: Tenant, url: string, o: { accept: string; timeoutMs: number; maxBytes: number }): Promise<OutboundAnswer>;
}
export const OUTBOUND = defineService<OutboundHttp>('outbound-http');
