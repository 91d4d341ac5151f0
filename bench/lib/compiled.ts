/**
 * The compiled server for the benchmarks' compiled rows: `dist/bin/sovcomms.js` of `npm run
 * build` when it is there and no source is newer (the rule of bin/start.mjs), else a build of
 * the benchmark's own into a folder it removes afterwards (at a load average of 15 on two cores a
 * build alone takes over a minute of a benchmark's ~90 s).
 */
import fs from 'node:fs';
import path from 'node:path';
import { build } from '../../scripts/build.ts';
import { ROOT } from './load.ts';

/** The fresh `dist/bin/sovcomms.js` of a checkout (this one by default), or undefined when it is missing or older than a source. */
export function freshDistEntry(root = ROOT): string | undefined {
  const entry = path.join(root, 'dist', 'bin', 'sovcomms.js');
  if (!fs.existsSync(entry)) return undefined;
  const built = fs.statSync(entry).mtimeMs;
  let newest = 0;
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts') || e.name.endsWith('.sql')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
    }
  };
  for (const d of ['server', 'plugins', 'bin']) walk(path.join(root, d));
  return newest <= built ? entry : undefined;
}

/** A compiled entry to run: the fresh dist/, else one built now; `done()` removes what was built here. */
export async function compiledEntry(): Promise<{ entry: string; how: string; done: () => void }> {
  const fresh = freshDistEntry();
  if (fresh) return { entry: fresh, how: 'dist/ of npm run build', done: () => undefined };
  const out = path.join(ROOT, 'dist', `.bench-${process.pid}`);
  const t0 = performance.now();
  await build(() => undefined, out);
  const how = `built for this run in ${((performance.now() - t0) / 1000).toFixed(1)} s (dist/ missing or stale)`;
  return { entry: path.join(out, 'bin', 'sovcomms.js'), how, done: () => fs.rmSync(out, { recursive: true, force: true }) };
}
