import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bridgeCommand } from '../../../plugins/telephony/bridge-link/link.ts';
import { BRIDGE_NODE_FLAGS, gcMode } from '../../../plugins/telephony/bridge/node-flags.ts';

describe("the embedded bridge's command line", () => {
  it('puts the Node flags first, then the entry through run-ts (TypeScript tree)', () => {
    const { argv } = bridgeCommand('plugins/telephony/bridge/main.ts', '/opt/sovcomms', false);
    expect(BRIDGE_NODE_FLAGS).toEqual(['--single-threaded-gc', '--expose-gc']);
    expect(argv).toEqual([
      ...BRIDGE_NODE_FLAGS,
      path.join('/opt/sovcomms', 'bin/run-ts.mjs'),
      path.resolve('/opt/sovcomms', 'plugins/telephony/bridge/main.ts'),
    ]);
  });

  it('runs the compiled twin directly from dist/, with the same flags', () => {
    const { argv } = bridgeCommand('plugins/telephony/bridge/main.ts', '/opt/sovcomms/dist', true);
    expect(argv).toEqual([...BRIDGE_NODE_FLAGS, path.resolve('/opt/sovcomms/dist', 'plugins/telephony/bridge/main.js')]);
  });

  it('reports the GC mode from the flags the process started with', () => {
    expect(gcMode([...BRIDGE_NODE_FLAGS, '--import', 'tsx'])).toBe('single-threaded');
    expect(gcMode(['--import', 'tsx'])).toBe('parallel');
    expect(gcMode(['--single-threaded-gc'])).toBe('partial');
  });
});
