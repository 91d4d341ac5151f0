import { z } from 'zod';
import { pageQuery } from '../../server/sdk.ts';
import { isCidr } from './net-policy.ts';

/** The parts of the address policy a tenant may override (issue 5 §5: "per-tenant policy"). */
export const networkPolicy = z
  .object({
    /** 127.0.0.0/8 and ::1. Refused by default: a webhook must not reach the appliance itself. */
    allowLoopback: z.boolean().optional(),
    /** 169.254.0.0/16 and fe80::/10. Cloud metadata addresses stay refused unless in allowCidrs. */
    allowLinkLocal: z.boolean().optional(),
    /** RFC 1918, RFC 6598 and fc00::/7: allowed by default, an on-prem box talks to the LAN. */
    allowPrivate: z.boolean().optional(),
    /** CIDRs always allowed (checked after denyCidrs), e.g. one loopback port-forwarder. */
    allowCidrs: z.array(z.string().refine(isCidr, 'not an address or CIDR')).optional(),
    /** CIDRs always refused. */
    denyCidrs: z.array(z.string().refine(isCidr, 'not an address or CIDR')).optional(),
  })
  .strict();
export type NetworkPolicyInput = z.infer<typeof networkPolicy>;

export const webhooksConfig = z
  .object({
    /**
     * Deliveries in flight at once in this process, across all subscriptions. With 4 per
     * subscription, 15 receivers can hang at once before a healthy one waits for a slot.
     */
    concurrency: z.number().int().min(1).max(1000).default(64),
    /** Deliveries of one subscription admitted to the job queue at once (running or awaiting a retry). */
    perSubscriptionConcurrency: z.number().int().min(1).max(100).default(4),
    /** Per-attempt timeout (issue 5: 10 s default). */
    timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
    /** How much of a receiver's response body is read and kept in the delivery log. */
    maxResponseBytes: z.number().int().min(0).max(65_536).default(4096),
    /**
     * PEM file (absolute, or relative to the data dir) of extra CAs trusted for https receivers,
     * e.g. the office's own CA; Node's public roots stay trusted too.
     */
    caFile: z.string().min(1).optional(),
    /** Upper bound on a receiver's Retry-After, so one header cannot park a delivery for days. */
    maxRetryAfterSec: z.number().int().min(1).default(3600),
    /** Finished deliveries and their attempt log are kept this many days (0 keeps them). */
    retentionDays: z.number().int().min(0).default(30),
    /**
     * How long a receiver's DNS answer is reused (ms; 0 asks the resolver for every attempt).
     * Every attempt still checks the addresses against the policy and connects to a checked one.
     */
    dnsCacheMs: z.number().int().min(0).max(300_000).default(5000),
    /** Subscriptions per tenant. */
    maxSubscriptions: z.number().int().min(1).default(1000),
    /** Default address policy for every tenant ... */
    ...networkPolicy.shape,
    /** ... and per-tenant overrides, keyed by the tenant's host name. */
    tenants: z.record(z.string(), networkPolicy).default({}),
  })
  .strict();
export type WebhooksConfig = z.infer<typeof webhooksConfig>;

const EVENT_NAME = /^(\*|[a-z][a-z0-9-]*(\.[a-z0-9-]+)*)$/;

export const subscriptionItem = z.object({
  id: z.string().describe('16 hex characters'),
  url: z.string(),
  events: z.array(z.string()).describe('event names, or ["*"] for all'),
  active: z.boolean().describe('false after 20 consecutive failed deliveries, or a 410 from the receiver'),
  createdAtUtc: z.string(),
  createdBy: z.string(),
  lastFiredUtc: z.string().nullable().describe('last successful delivery'),
  failures: z.number().int().describe('consecutive failed deliveries'),
});
export type SubscriptionItem = z.infer<typeof subscriptionItem>;

export const eventsInput = z
  .union([z.array(z.string()), z.string()])
  .transform((v) => (Array.isArray(v) ? v : v.split(',')).map((s) => s.trim()).filter(Boolean))
  .pipe(z.array(z.string().max(100).regex(EVENT_NAME, 'event names are lower-case dotted words, or *')).min(1).max(100))
  .transform((list) => (list.includes('*') ? ['*'] : [...new Set(list)]));

export const eventInfo = z.object({
  name: z.string().describe('the event name a subscription lists (X-Service-Event)'),
  plugin: z.string().describe('the plugin that declares and emits it'),
  description: z.string(),
});

export const addBody = z.object({
  url: z.string().min(1).max(2048).describe('http(s) URL of the receiver'),
  events: eventsInput.describe('event names (array or comma-separated) from GET /api.ashx/v1/webhooks/events, or ["*"]; another name is 400 unknown_event'),
});

export const idBody = z.object({ id: z.string().regex(/^[0-9a-f]{16}$/, 'a subscription id is 16 hex characters') });

export const listQuery = z.object({ webhooks: z.literal('list').optional() });

export const deliveriesQuery = pageQuery.extend({
  webhooks: z.literal('deliveries').optional(),
  id: z.string().regex(/^[0-9a-f]{16}$/, 'a subscription id is 16 hex characters'),
});

export const redeliverBody = z.object({ deliveryId: z.uuid() });

export const createdSubscription = subscriptionItem.extend({
  secret: z.string().describe('signing secret, shown only in this response (whsec_ + base64)'),
});

export const attemptItem = z.object({
  attempt: z.number().int(),
  startedUtc: z.string(),
  durationMs: z.number().int(),
  status: z.number().int().nullable().describe('HTTP status, null when no response'),
  error: z.string().nullable(),
  nextTryUtc: z.string().nullable(),
});

export const deliveryItem = z.object({
  id: z.string().describe('X-Service-Delivery-Id and webhook-id'),
  subscriptionId: z.string(),
  eventId: z.number().int(),
  event: z.string(),
  state: z.enum(['queued', 'pending', 'delivered', 'failed', 'skipped']),
  attempts: z.number().int(),
  createdAtUtc: z.string(),
  nextTryUtc: z.string().nullable(),
  lastStatus: z.number().int().nullable(),
  lastError: z.string().nullable(),
  finishedUtc: z.string().nullable(),
  log: z.array(attemptItem),
});
export type DeliveryItem = z.infer<typeof deliveryItem>;

/** `webhook.test`, the one event this plugin declares (spec "Events": the test-fire button). */
export const webhookTestEvent = z
  .object({
    subscriptionId: z.string(),
    message: z.string(),
    requestedBy: z.string(),
  })
  .describe('A test delivery requested from the console or the API (sent only to the named subscription)');
