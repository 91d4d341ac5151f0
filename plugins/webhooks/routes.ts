import { z } from 'zod';
import {
  envelope,
  envelopeSchema,
  pageOf,
  pageQuery,
  type PluginContext,
  policy,
  type Principal,
  type RouteRegistrar,
  type RouteRequest,
} from '../../server/sdk.ts';
import {
  addBody,
  createdSubscription,
  eventInfo,
  deliveriesQuery,
  deliveryItem,
  idBody,
  listQuery,
  redeliverBody,
  subscriptionItem,
  updateBody,
} from './schemas.ts';
import type { WebhookService } from './service.ts';

export function actorOf(p: Principal | null): string {
  if (!p) return 'anonymous';
  return p.userName ?? p.email ?? p.subject;
}

/**
 * The admin surface under /signal.ashx (spec "Tenant admin": bearer with role admin, or the admin
 * HMAC header; the bucket is `webhooks-<verb>`, signed over `bucket|Host[|bodyLen]`), and the
 * read-only v1 list.
 */
export function webhookRoutes(r: RouteRegistrar, service: WebhookService, ctx: PluginContext): void {
  const audit = (req: RouteRequest, event: string, extra: Record<string, string | number | boolean>) =>
    ctx.audit.write(req.tenant, { event, user: actorOf(req.principal), ip: req.ip, ua: req.ua, extra });
  const ok = z.object({ ok: z.literal(true) });

  r.add({
    method: 'GET',
    path: '/api.ashx/v1/webhooks',
    summary: 'Webhook subscriptions of the tenant (never the secret)',
    area: 'webhooks',
    auth: policy.v1Admin,
    query: pageQuery,
    responses: { 200: { description: 'list envelope of subscriptions', schema: envelopeSchema(subscriptionItem) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const { items, total } = service.list(req.tenant, page);
      return envelope(items, total, page, req.raw.originalUrl);
    },
  });

  r.add({
    method: 'GET',
    path: '/api.ashx/v1/webhooks/events',
    summary: 'The events a webhook subscription may name: every declared event with its plugin and description (payloads: /openapi.json webhooks)',
    area: 'webhooks',
    auth: policy.v1Admin,
    query: pageQuery,
    responses: { 200: { description: 'list envelope of event names, sorted by name', schema: envelopeSchema(eventInfo) } },
    handler: (req) => {
      const page = pageOf(req.query);
      const all = service.catalog();
      return envelope(all.slice(page.offset, page.offset + page.limit), all.length, page, req.raw.originalUrl);
    },
  });

  r.add({
    method: 'GET',
    path: '/signal.ashx?webhooks=list',
    summary: 'Webhook subscriptions of the tenant (admin surface; never the secret)',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-list'),
    query: listQuery,
    responses: { 200: { description: 'subscriptions', schema: z.array(subscriptionItem) } },
    handler: (req) => service.list(req.tenant).items,
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?webhooks=add',
    summary: 'Create a webhook subscription; the signing secret is in this response only',
    description:
      'The secret is `whsec_` + base64. X-Service-Signature is HMAC-SHA256 keyed with the whole secret string (UTF-8); ' +
      'webhook-signature (Standard Webhooks) is keyed with the base64-decoded bytes after `whsec_`.',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-add'),
    body: addBody,
    responses: {
      200: { description: 'the subscription and its secret (shown once)', schema: createdSubscription },
      400: { description: 'invalid_url, address_refused, or unknown_event (an event no plugin declares; the body lists `known`)' },
    },
    handler: async (req) => {
      const { item, secret } = await service.add(req.tenant, req.body, actorOf(req.principal));
      audit(req, 'webhook-add', { id: item.id, url: item.url, events: item.events.join(',') });
      return { ...item, secret };
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?webhooks=remove',
    summary: 'Delete a webhook subscription and its delivery log',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-remove'),
    body: idBody,
    responses: { 200: { description: 'the removed subscription', schema: z.object({ deleted: subscriptionItem }) }, 404: { description: 'not_found' } },
    handler: (req) => {
      const deleted = service.remove(req.tenant, req.body.id);
      audit(req, 'webhook-remove', { id: deleted.id });
      return { deleted };
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?webhooks=update',
    summary: 'Edit a webhook subscription: its receiver URL (checked as on add) and events; the secret and the delivery log stay',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-update'),
    body: updateBody,
    responses: { 200: { description: 'the subscription', schema: subscriptionItem }, 404: { description: 'not_found' } },
    handler: async (req) => {
      const item = await service.update(req.tenant, req.body.id, req.body);
      audit(req, 'webhook.update', { id: item.id, url: item.url, events: item.events.join(',') });
      return item;
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?webhooks=pause',
    summary: 'Pause a webhook subscription: nothing is delivered to it until it is resumed',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-pause'),
    body: idBody,
    responses: { 200: { description: 'the subscription', schema: subscriptionItem }, 404: { description: 'not_found' } },
    handler: (req) => {
      const item = service.pause(req.tenant, req.body.id);
      audit(req, 'webhook-pause', { id: item.id });
      return item;
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?webhooks=resume',
    summary: 'Re-activate a paused webhook subscription (failures reset to 0)',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-resume'),
    body: idBody,
    responses: { 200: { description: 'the subscription', schema: subscriptionItem }, 404: { description: 'not_found' } },
    handler: (req) => {
      const item = service.resume(req.tenant, req.body.id);
      audit(req, 'webhook-resume', { id: item.id });
      return item;
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?webhooks=test',
    summary: 'Test-fire: send a webhook.test event to one subscription',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-test'),
    body: idBody,
    rateLimit: 'sensitive',
    responses: {
      200: {
        description: 'the event was recorded; watch the delivery log',
        schema: ok.extend({ id: z.string(), event: z.string(), eventId: z.number().int() }),
      },
      404: { description: 'not_found' },
      409: { description: 'subscription_paused' },
    },
    handler: (req) => {
      const { eventId } = service.testFire(req.tenant, req.body.id, actorOf(req.principal));
      return { ok: true as const, id: req.body.id, event: 'webhook.test', eventId };
    },
  });

  r.add({
    method: 'GET',
    path: '/signal.ashx?webhooks=deliveries',
    summary: 'Delivery log of one subscription, newest first: state, attempts (status, duration, error, next try)',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-deliveries'),
    query: deliveriesQuery,
    responses: { 200: { description: 'list envelope of deliveries', schema: envelopeSchema(deliveryItem) }, 404: { description: 'not_found' } },
    handler: (req) => {
      const page = pageOf(req.query);
      const { items, total } = service.deliveries(req.tenant, req.query.id, page);
      return envelope(items, total, page, req.raw.originalUrl);
    },
  });

  r.add({
    method: 'POST',
    path: '/signal.ashx?webhooks=redeliver',
    summary: 'Deliver a past delivery again (same delivery id; attempts start at 1)',
    area: 'webhooks',
    auth: policy.adminOrHmac('webhooks-redeliver'),
    body: redeliverBody,
    responses: {
      200: { description: 'queued', schema: ok.extend({ id: z.string(), subscriptionId: z.string() }) },
      404: { description: 'not_found' },
      409: { description: 'delivery_in_progress or subscription_paused' },
    },
    handler: (req) => {
      const r = service.redeliver(req.tenant, req.body.deliveryId);
      audit(req, 'webhook-redeliver', { id: r.subscriptionId, delivery: r.id });
      return { ok: true as const, ...r };
    },
  });
}
