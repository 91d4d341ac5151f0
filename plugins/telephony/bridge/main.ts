/**
 * Telephony bridge entry point: `node --import tsx plugins/telephony/bridge/main.ts` (or forked
 * by the telephony plugin's supervisor). Announces readiness the same way headless and forked
 * (STYLE.md, actualbudget pattern): one JSON line on stdout, and `process.send` when present.
 */
import { Bridge, optionsFromEnv } from './bridge.ts';
import { log } from './log.ts';
import { BRIDGE_NODE_FLAGS, gcMode } from './node-flags.ts';

async function main(): Promise<void> {
  let bridge: Bridge;
  try {
    bridge = new Bridge(optionsFromEnv(process.env));
  } catch (err) {
    process.stderr.write(`bridge: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const controlUrl = await bridge.start();
  const ready = { type: 'bridge-ready', controlUrl, instanceId: bridge.instanceId, sipPort: bridge.sipPort };
  process.stdout.write(JSON.stringify(ready) + '\n');
  process.send?.(ready);
  log('info', 'bridge ready', { controlUrl, sipPort: bridge.sipPort, instanceId: bridge.instanceId, gc: gcMode() });
  if (gcMode() !== 'single-threaded') {
    log(
      'warn',
      `started without ${BRIDGE_NODE_FLAGS.join(' ')}: garbage collection on the media threads waits for normal-priority helper threads (see bridge/README.md)`,
    );
  }

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => process.exit(code), 8000);
    force.unref();
    await bridge.stop().catch(() => undefined);
    process.exit(code);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
  // The supervisor closing the IPC channel means the core is gone: do not outlive it.
  process.on('disconnect', () => void stop(0));
  // A stray rejected promise must not take every call down with the process.
  process.on('unhandledRejection', (reason) => log('error', 'unhandled rejection', { error: String((reason as Error)?.stack ?? reason) }));
  process.on('uncaughtException', (err) => {
    log('error', 'uncaught exception', { error: err.stack ?? err.message });
    void stop(1);
  });
}

void main();
