import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function compute(): string {
  if (process.env.SOVCOMMS_BUILD) return process.env.SOVCOMMS_BUILD;
  // `npm run build` stamps the build into dist/package.json: the compiled tree (and a packaged
  // app, which has no .git) never runs git at start.
  const stamped = readPackage().build;
  if (stamped) return stamped;
  try {
    // Date of the last commit plus its short hash: changes whenever the handlers do.
    return (
      execFileSync('git', ['log', '-1', '--format=%cd.%h', '--date=format:%Y%m%d'], { cwd: root, stdio: ['ignore', 'pipe', 'ignore'], timeout: 2000 })
        .toString()
        .trim() || fallback()
    );
  } catch {
    return fallback();
  }
}

function readPackage(): { version: string; build?: string } {
  return JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string; build?: string };
}

function fallback(): string {
  // eslint-disable-next-line no-restricted-syntax -- the stamp of an unbuilt tree is the day it runs, computed at import before any Clock exists
  return `${new Date().toISOString().slice(0, 10).replace(/-/g, '')}.v${readPackage().version}`;
}

export const BUILD = compute();
export const PRODUCT_NAME = 'Sovereign Communications Appliance';
