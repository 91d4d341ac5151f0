/**
 * A real appliance in a child process for the webhook crash test:
 *   node bin/run-ts.mjs test/plugins/webhooks/crash-child.ts DATA_DIR
 * Settings come from DATA_DIR/config.json. `POST /crash-emit.ashx?prefix=P&n=N` records N
 * `call.ended` events in one transaction. Prints {"ready": url} when listening; the test
 * SIGKILLs it to simulate a crash and SIGTERMs it to stop.
 */
import { z } from 'zod';
import { Appliance } from '../../../server/app.ts';
import { policy } from '../../../server/auth.ts';
import { definePlugin, type AnyPlugin } from '../../../server/plugin.ts';
import { testPlugins } from './support.ts';

const [dataDir] = process.argv.slice(2);
if (!dataDir) {
  process.stderr.write('usage: crash-child.ts DATA_DIR\n');
  process.exit(2);
}

const emitter = definePlugin({
  name: 'crash-emitter',
  description: 'emits call.ended in batches for the crash test',
  routes(r, _s, ctx) {
    r.add({
      method: 'POST',
      path: '/crash-emit.ashx',
      summary: 'test only: emit N call.ended events in one transaction',
      auth: policy.public,
      rateLimit: false,
      query: z.object({ prefix: z.string().regex(/^[a-z0-9-]+$/), n: z.coerce.number().int().min(1).max(1000) }),
      handler: (req) => {
        const tenant = ctx.tenants.primary()!;
        ctx.db
          .transaction(() => {
            for (let i = 0; i < req.query.n; i++) ctx.events.emit(tenant.id, 'call.ended', { callId: `${req.query.prefix}-${i}` });
          })
          .immediate();
        return { ok: true };
      },
    });
  },
});

const appliance = await Appliance.create({
  dataDir,
  env: {},
  overrides: { http: { port: 0, host: '127.0.0.1', drainMs: 2000 }, log: { level: 'warn' } },
  plugins: [...testPlugins(), emitter as AnyPlugin],
});
const { url } = await appliance.start();
process.stdout.write(JSON.stringify({ ready: url, pid: process.pid }) + '\n');

const onSignal = () => {
  appliance.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.once('SIGTERM', onSignal);
process.once('SIGINT', onSignal);
