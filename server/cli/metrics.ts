import { parse, UsageError } from '../cli-args.ts';
import type { CoreCommand } from './command.ts';

/**
 * The scrape token of `GET /metrics`: made (or replaced) and shown once, revoked, or asked about.
 * Only its SHA-256 is stored; the running server checks it at the next scrape, no restart.
 */
export const metricsCommand: CoreCommand = {
  opens: 'store',
  summary: 'The scrape token of GET /metrics',
  usage: ['metrics token rotate   (prints a new scrape token once; the old one stops working)', 'metrics token revoke', 'metrics token status'],
  changes: ['token rotate', 'token revoke'],
  async run(args, ctx) {
    const [group, sub, ...rest] = args;
    if (group !== 'token') throw new UsageError(group ? `metrics: unknown subcommand ${group}` : 'metrics: subcommand required (token rotate|revoke|status)');
    parse(rest, {}, 0);
    // Loaded here, not with the command table: ../metrics.ts brings prom-client (~30 ms of every
    // other command's start).
    const { ScrapeTokens } = await import('../metrics.ts');
    const tokens = new ScrapeTokens(ctx.db);
    if (sub === 'rotate') {
      ctx.out(tokens.rotate());
      ctx.err('scrape token set: send it as "Authorization: Bearer <token>" to GET /metrics (it is not shown again)');
    } else if (sub === 'revoke') {
      ctx.err(tokens.revoke() ? 'scrape token revoked' : 'there was no scrape token');
    } else if (sub === 'status') {
      ctx.out(tokens.configured() ? 'scrape token: set' : 'scrape token: none');
    } else throw new UsageError(sub ? `metrics token: unknown subcommand ${sub}` : 'metrics token: rotate, revoke or status');
    return 0;
  },
};
