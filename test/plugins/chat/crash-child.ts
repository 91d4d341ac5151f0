/**
 * A real appliance (every built-in plugin, chat among them) in a child process for the upload
 * crash test:
 *   node bin/run-ts.mjs test/plugins/chat/crash-child.ts DATA_DIR
 * Makes users alice and bob on the primary tenant when missing, mints an ak_ key for each start,
 * and prints one JSON line {"ready": url, "alice": key} when listening. The test SIGKILLs it to
 * simulate a crash and SIGTERMs it to stop (exit 0).
 */
import { Appliance } from '../../../server/app.ts';

const [dataDir] = process.argv.slice(2);
if (!dataDir) {
  process.stderr.write('usage: crash-child.ts DATA_DIR\n');
  process.exit(2);
}

const appliance = await Appliance.create({
  dataDir,
  env: {},
  overrides: {
    http: { port: 0, host: '127.0.0.1', drainMs: 1000 },
    log: { level: 'warn' },
    plugins: { lotl: { autoRefresh: false }, telephony: { bridge: { mode: 'off' } }, chat: { maxUploadBytes: 64 * 1024 * 1024 } },
  },
});
const { url } = await appliance.start();
const core = appliance.core;
const primary = core.tenants.primary()!;
for (const name of ['alice', 'bob']) {
  if (!core.users.byName(primary, name)) await core.users.add(primary, { name, password: 'correct horse battery staple' });
}
const alice = core.auth.createApiKey(primary, core.users.byName(primary, 'alice')!, { createdBy: 'crash-child' }).key;
process.stdout.write(JSON.stringify({ ready: url, alice, pid: process.pid }) + '\n');

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
