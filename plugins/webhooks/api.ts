import { defineService } from '../../server/sdk.ts';
import type { WebhookService } from './service.ts';

/** Webhook subscriptions and deliveries of the tenant, for plugins that show or manage them (`ctx.use(WEBHOOKS)`). */
export const WEBHOOKS = defineService<WebhookService>('webhooks');
