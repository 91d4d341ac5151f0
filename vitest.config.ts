import { defineConfig } from 'vitest/config';

/**
 * Test files that each run in a fresh process, as every file did before:
 * - those that measure real-time audio or a latency bound inside the test process itself (45
 *   WebRTC visitors, RTP far ends, a /healthz probe during an import): in a process that earlier
 *   files have used, the 45-visitor file lost audio (59-117 packets against < 10);
 * - those whose libraries change process-wide state when they load.
 */
const ALONE = [
  'test/plugins/telephony/rooms-many.test.ts',
  'test/plugins/telephony/rooms.test.ts',
  'test/plugins/telephony/bridge-media-threads.test.ts',
  'test/plugins/lotl/tar-bomb.test.ts',
  // @owf/mdoc registers cbor-x extensions for the whole process when it loads (tag 24 as its
  // DataItem): the wallet tests, which decode with cbor-x both with and without it, get fresh ones.
  'test/plugins/wallet-issuer/**/*.test.ts',
  'test/plugins/wallet-verifier/**/*.test.ts',
];

export default defineConfig({
  test: {
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests start real servers and child processes; two cores: keep forks few.
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        // The rest share a process per worker: the appliance's modules are loaded once per worker,
        // not once per file (the suite took 820-880 s instead of about 1,030 s on the 2-core machine).
        test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: ALONE, isolate: false },
      },
      { extends: true, test: { name: 'alone', include: ALONE, isolate: true } },
    ],
  },
});
