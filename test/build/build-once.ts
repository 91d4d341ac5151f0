import fs from 'node:fs';
import path from 'node:path';
import { build } from '../../scripts/build.ts';
import { ROOT } from '../support/cli.ts';

/**
 * `npm run build` into a folder of this test process's own under dist/ (inside the project, so
 * the compiled code finds node_modules; never the dist/ a developer may be running), once per
 * test file, removed when the process exits.
 */
export const OUT = path.join(ROOT, 'dist', `.test-${process.pid}`);
export const DIST_BIN = path.join(OUT, 'bin', 'sovcomms.js');

let built = false;
export function buildOnce(again = false): string {
  if (built && !again) return OUT;
  build(() => undefined, OUT);
  if (!built) process.once('exit', () => fs.rmSync(OUT, { recursive: true, force: true }));
  built = true;
  return OUT;
}
