/**
 * A bare core (store, jobs, events; no HTTP) in a temp data dir for queue-level tests, closed
 * and removed after each test of the file that calls `coreHarness()`.
 */
import fs from 'node:fs';
import { afterEach } from 'vitest';
import { openCore, type CoreServices } from '../../server/app.ts';
import type { Clock } from '../../server/clock.ts';
import { LogCapture, tempDir } from './server.ts';

export function coreHarness(prefix = 'sovcomms-core-'): (o?: { clock?: Clock; dir?: string }) => CoreServices {
  const open: { core: CoreServices; dir: string }[] = [];
  afterEach(async () => {
    for (const { core, dir } of open.splice(0)) {
      await core.jobs.shutdown(200);
      core.events.stop();
      if (core.db.open) core.db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  return (o = {}) => {
    const dir = o.dir ?? tempDir(prefix);
    const core = openCore({ dataDir: dir, env: {}, clock: o.clock, overrides: { jobs: { pollMs: 20 } }, logDestination: new LogCapture() });
    open.push({ core, dir });
    return core;
  };
}
