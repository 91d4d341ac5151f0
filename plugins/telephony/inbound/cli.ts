import { type CliCommand, parse, UsageError, zodMessage } from '../../../server/sdk.ts';
import { tenantOf } from '../cli.ts';
import { inboundCreate } from '../schemas.ts';
import type { TelephonyServices } from '../services.ts';

/**
 * `sovcomms route inbound add|list|remove`: the spec's inbound routes, as the v1
 * `/inbound-routes` API has them (first match by Did and FromNumber, new rows before the `*`
 * catchall, which cannot be removed; a target no call could reach is refused naming why).
 */
export const routeCommand: CliCommand<TelephonyServices> = {
  summary: 'Inbound routes (Did, FromNumber → User)',
  usage: [
    'route inbound add DID --user USER [--from-number PATTERN] [--tenant HOST]',
    'route inbound list [--tenant HOST]',
    'route inbound remove DID [--from-number PATTERN] [--tenant HOST]',
  ],
  changes: ['inbound add', 'inbound remove'],
  audited: ['tenant', 'user', 'from-number'],
  // Synchronous work behind the command's async signature.
  run(args, ctx, { inboundRoutes }) {
    const [kind, sub, ...rest] = args;
    if (kind !== 'inbound') return Promise.reject(new UsageError('usage: sovcomms route inbound add|list|remove'));
    const { values, positionals } = parse(rest, { tenant: { type: 'string' }, user: { type: 'string' }, 'from-number': { type: 'string' } });
    const t = tenantOf(ctx, values.tenant);
    const from = typeof values['from-number'] === 'string' ? values['from-number'] : undefined;
    switch (sub) {
      case 'add': {
        const parsed = inboundCreate.safeParse({ did: positionals[0], fromNumber: from, user: values.user });
        if (!parsed.success) return Promise.reject(new UsageError(`route inbound add: ${zodMessage(parsed.error)}`));
        const r = inboundRoutes.add(t, parsed.data);
        ctx.out(`inbound route ${r.did}${r.fromNumber ? ` from ${r.fromNumber}` : ''} → ${r.user} saved for ${t.host}`);
        return Promise.resolve(0);
      }
      case 'list':
        for (const r of inboundRoutes.rows(t)) ctx.out(`${r.did}\tfrom=${r.fromNumber || '-'}\tuser=${r.user || '-'}`);
        return Promise.resolve(0);
      case 'remove': {
        const did = positionals[0];
        if (!did) return Promise.reject(new UsageError('route inbound remove: give the Did'));
        const r = inboundRoutes.remove(t, did, from);
        ctx.out(`inbound route ${r.did}${r.fromNumber ? ` from ${r.fromNumber}` : ''} removed from ${t.host}`);
        return Promise.resolve(0);
      }
      default:
        return Promise.reject(new UsageError('usage: sovcomms route inbound add|list|remove'));
    }
  },
};
