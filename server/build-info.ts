import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function compute(): string {
  if (process.env.SOVCOMMS_BUILD) return process.env.SOVCOMMS_BUILD;
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

function fallback(): string {
  const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return `${new Date().toISOString().slice(0, 10).replace(/-/g, '')}.v${pkg.version}`;
}

export const BUILD = compute();
export const PRODUCT_NAME = 'Sovereign Communications Appliance';
