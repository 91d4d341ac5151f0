/**
 * A real appliance in a child process for the job-queue crash test:
 *   node bin/run-ts.mjs test/support/job-child.ts DATA_DIR OUT_FILE [ENQUEUE_COUNT]
 * Its `crash-append` queue's jobs take ~50 ms and then append "<jobId> <pid>" to OUT_FILE.
 * It prints one JSON line {"ready": url} when listening, stops cleanly on SIGTERM/SIGINT
 * (exit 0) and is SIGKILLed by the test to simulate a crash.
 */
import fs from 'node:fs';
import { z } from 'zod';
import { Appliance } from '../../server/app.ts';
import { definePlugin, type AnyPlugin } from '../../server/plugin.ts';
import { builtinPlugins } from '../../plugins/index.ts';

const [dataDir, outFile, enqueueArg] = process.argv.slice(2);
if (!dataDir || !outFile) {
  process.stderr.write('usage: job-child.ts DATA_DIR OUT_FILE [ENQUEUE_COUNT]\n');
  process.exit(2);
}

const crashJobs = definePlugin({
  name: 'crashjobs',
  description: 'test jobs that append to a file',
  start(_s, ctx) {
    ctx.jobs.define({
      name: 'crash-append',
      schema: z.object({ n: z.number().int() }),
      concurrency: 4,
      maxAttempts: 5,
      async run(job) {
        await new Promise((r) => setTimeout(r, 50));
        fs.appendFileSync(outFile, `${job.id} ${process.pid}\n`);
      },
    });
    const n = Number(enqueueArg ?? 0);
    if (n > 0) {
      // One transaction: either all jobs exist or none.
      ctx.db.transaction(() => {
        for (let i = 0; i < n; i++) ctx.jobs.enqueue('crash-append', { n: i }, { dedupeKey: `job-${i}` });
      })();
    }
  },
});

const appliance = await Appliance.create({
  dataDir,
  env: {},
  overrides: { http: { port: 0, host: '127.0.0.1', drainMs: 3000 }, jobs: { pollMs: 20 }, log: { level: 'warn' } },
  plugins: [...(await builtinPlugins()), crashJobs as AnyPlugin],
});
const { url } = await appliance.start();
process.stdout.write(JSON.stringify({ ready: url, pid: process.pid }) + '\n');

const onSignal = (sig: string) => {
  process.stderr.write(`${sig}: stopping\n`);
  appliance.stop().then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(`stop failed: ${String(e)}\n`);
      process.exit(1);
    },
  );
};
process.once('SIGTERM', () => onSignal('SIGTERM'));
process.once('SIGINT', () => onSignal('SIGINT'));
