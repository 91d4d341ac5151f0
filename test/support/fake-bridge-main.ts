/**
 * The fake bridge as a process, started by the telephony plugin's supervisor in embedded mode:
 * reads the CONTROL-API.md environment, prints the bridge-ready line (and sends it over IPC),
 * and exits when its parent goes away.
 */
import { FakeBridge } from './fake-bridge.ts';

const env = process.env;
const bridge = new FakeBridge(env.SOVCOMMS_BRIDGE_TOKEN ?? '', env.SOVCOMMS_BRIDGE_CALLBACK_URL ?? '');
const url = await bridge.start(Number(env.SOVCOMMS_BRIDGE_CONTROL_PORT ?? 0));
const ready = { type: 'bridge-ready', controlUrl: url };
process.stdout.write(JSON.stringify(ready) + '\n');
process.send?.(ready);
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => {
  void bridge.stop().then(() => process.exit(0));
});
