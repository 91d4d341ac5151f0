/**
 * Telephony bridge entry point: `node --import tsx plugins/telephony/bridge/main.ts` (or forked
 * by the telephony plugin's supervisor). Announces readiness the same way headless and forked
 * (STYLE.md, actualbudget pattern): one JSON line on stdout, and `process.send` when present.
 */
import { Bridge, optionsFromEnv } from './bridge.ts';
import { log } from './log.ts';
import { BRIDGE_NODE_FLAGS, gcMode } from './node-flags.ts';
import { describeFailure, EXIT_START_FAILED, startFailure } from './start-failure.ts';

/**
 * A start that failed (the SIP port taken...): started by the core (IPC), the report goes to it
 * alone and it logs the one line; run on its own, the bridge logs that line itself. No stack trace
 * either way: the reason is known.
 */
async function failStart(err: unknown): Promise<never> {
  const f = startFailure(err);
  process.stdout.write(JSON.stringify(f) + '\n');
  if (process.send) await new Promise<void>((r) => process.send!(f, () => r()));
  else log('error', describeFailure(f, { port: 'SOVCOMMS_BRIDGE_SIP_PORT', host: 'SOVCOMMS_BRIDGE_SIP_HOST' }), { reason: f.reason });
  process.exit(EXIT_START_FAILED);
}

async function main(): Promise<void> {
  let bridge: Bridge;
  try {
    bridge = new Bridge(optionsFromEnv(process.env));
  } catch (err) {
    process.stderr.write(`bridge: ${(err as Error).message}\n`);
    process.exit(2);
  }
  let controlUrl: string;
  try {
    controlUrl = await bridge.start();
  } catch (err) {
    return failStart(err);
  }
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
