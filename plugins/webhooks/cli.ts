import { type CliCommand, type CliContext, NotFoundError, parse, type Tenant, UsageError, zodMessage } from '../../server/sdk.ts';
import type { WebhookServices } from './index.ts';
import { eventsInput } from './schemas.ts';
import type { WebhookService } from './service.ts';

/** An id names one subscription appliance-wide; --tenant, when given, must agree. */
function tenantOfSubscription(ctx: CliContext, svc: WebhookService, id: string, tenantHost: string | undefined): Tenant {
  if (!/^[0-9a-f]{16}$/.test(id)) throw new UsageError(`ID: a subscription id is 16 hex characters, got ${id}`);
  const row = svc.repo.subscriptionById(id);
  const tenant = row ? ctx.tenants.byId(row.tenant_id) : undefined;
  if (!row || !tenant || (tenantHost && ctx.tenants.require(tenantHost).id !== tenant.id)) throw new NotFoundError(`no webhook subscription ${id}`);
  return tenant;
}

export const webhookCli: CliCommand<WebhookServices> = {
  summary: 'Webhook subscriptions',
  usage: [
    'webhook add --url U --events E[,E] [--tenant HOST]   (prints the id and the secret, once)',
    'webhook list [--tenant HOST] [--json]',
    'webhook remove ID',
    'webhook resume ID',
    'webhook test ID',
  ],
  changes: ['add', 'remove', 'resume', 'test'],
  audited: ['tenant', 'url', 'events'],
  allEvents: ['add'],
  async run(args, ctx, { service: svc }) {
    const [sub, ...rest] = args;
    switch (sub) {
      case 'add': {
        const { values } = parse(rest, { url: { type: 'string' }, events: { type: 'string' }, tenant: { type: 'string' } }, 0);
        if (typeof values.url !== 'string') throw new UsageError('webhook add: --url U is required');
        if (typeof values.events !== 'string') throw new UsageError('webhook add: --events E[,E] is required (or --events "*")');
        const events = eventsInput.safeParse(values.events);
        if (!events.success) throw new UsageError(zodMessage(events.error, '--events'));
        const tenant = ctx.tenants.require(typeof values.tenant === 'string' ? values.tenant : undefined);
        const { item, secret } = await svc.add(tenant, { url: values.url, events: events.data }, 'cli');
        ctx.audit.write(tenant, { event: 'webhook-add', user: 'cli', extra: { id: item.id, url: item.url } });
        ctx.out(`id      ${item.id}`);
        ctx.out(`secret  ${secret}`);
        ctx.err(`webhook ${item.id} for ${tenant.host} → ${item.url} (${item.events.join(',')}); the secret above is shown once.`);
        return 0;
      }
      case 'list': {
        const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
        const tenant = ctx.tenants.require(typeof values.tenant === 'string' ? values.tenant : undefined);
        const { items } = svc.list(tenant);
        if (values.json) {
          ctx.out(JSON.stringify(items, null, 2));
          return 0;
        }
        const rows = items.map((i) => ({
          id: i.id,
          active: i.active ? 'yes' : 'PAUSED',
          failures: String(i.failures),
          events: i.events.join(','),
          url: i.url,
          lastFiredUtc: i.lastFiredUtc ?? '-',
        }));
        const cols = ['id', 'active', 'failures', 'events', 'url', 'lastFiredUtc'] as const;
        const w = cols.map((c) => Math.max(c.length, ...rows.map((r) => r[c].length)));
        const line = (v: string[]) =>
          v
            .map((x, i) => x.padEnd(w[i]!))
            .join('  ')
            .trimEnd();
        ctx.out(line(cols.map((c) => c.toUpperCase())));
        for (const r of rows) ctx.out(line(cols.map((c) => r[c])));
        return 0;
      }
      case 'remove':
      case 'resume':
      case 'test': {
        const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 1);
        const id = positionals[0];
        if (!id) throw new UsageError(`webhook ${sub}: ID is required`);
        const tenant = tenantOfSubscription(ctx, svc, id, typeof values.tenant === 'string' ? values.tenant : undefined);
        if (sub === 'remove') {
          svc.remove(tenant, id);
          ctx.audit.write(tenant, { event: 'webhook-remove', user: 'cli', extra: { id } });
          ctx.out(`webhook ${id} removed`);
        } else if (sub === 'resume') {
          svc.resume(tenant, id);
          ctx.audit.write(tenant, { event: 'webhook-resume', user: 'cli', extra: { id } });
          ctx.out(`webhook ${id} resumed (failures reset to 0)`);
        } else {
          const { eventId } = svc.testFire(tenant, id, 'cli');
          ctx.out(`webhook.test event ${eventId} recorded for ${id}; the running server delivers it`);
        }
        return 0;
      }
      default:
        throw new UsageError(sub ? `webhook: unknown subcommand ${sub}` : 'webhook: subcommand required (add, list, remove, resume, test)');
    }
  },
};
