import fs from 'node:fs';
import { parse, str, UsageError } from '../cli-args.ts';
import { signAdminHmacV2 } from '../auth.ts';
import type { CoreCommand } from './command.ts';

export const adminSecretCommand: CoreCommand = {
  opens: 'store',
  summary: 'The admin HMAC secret of the admin routes',
  usage: ['admin-secret show', 'admin-secret rotate', 'admin-secret sign BUCKET [--host H] [--body-file F]   (prints the X-Service-Admin-Signature-V2 header)'],
  // `show` changes nothing but hands out the secret of every admin route: who read it, and when,
  // belongs in the audit log as much as a rotation.
  changes: ['rotate', 'show'],
  async run(args, ctx) {
    const [sub, ...rest] = args;
    if (sub === 'sign') {
      // For scripts: `curl -H "$(sovcomms admin-secret sign whitelist-add --body-file b.json)" --data-binary @b.json ...`
      const { values, positionals } = parse(rest, { host: { type: 'string' }, 'body-file': { type: 'string' } }, 1);
      const bucket = positionals[0];
      if (!bucket) throw new UsageError('admin-secret sign: BUCKET is required');
      if (!/^[a-z0-9][a-z0-9._-]{0,63}$/.test(bucket)) throw new UsageError(`BUCKET: not a bucket name: ${bucket}`);
      // The Host header exactly as the client will send it; by default the address `serve` listens on.
      const c = ctx.core.http;
      const host = str(values.host) ?? `${c.host.includes(':') ? `[${c.host}]` : c.host}:${c.port}`;
      const file = str(values['body-file']);
      let body: Buffer = Buffer.alloc(0);
      if (file) {
        try {
          body = fs.readFileSync(file);
        } catch (e) {
          throw new UsageError(`--body-file: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
        }
      }
      ctx.out(`X-Service-Admin-Signature-V2: ${signAdminHmacV2(ctx.auth.adminSecret(), bucket, host, body, Math.floor(ctx.clock.now() / 1000))}`);
      return 0;
    }
    parse(rest, {}, 0);
    if (sub === 'show') ctx.out(ctx.auth.adminSecret());
    else if (sub === 'rotate') {
      ctx.out(ctx.auth.rotateAdminSecret());
      ctx.err('admin HMAC secret rotated; signatures made with the old one are refused from now on');
    } else throw new UsageError(sub ? `admin-secret: unknown subcommand ${sub}` : 'admin-secret: subcommand required (show, rotate, sign)');
    return 0;
  },
};
