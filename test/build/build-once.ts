import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { build } from '../../scripts/build.ts';
import { ROOT } from '../support/cli.ts';

/**
 * `npm run build` into dist/.test-build (inside the project, so the compiled code finds
 * node_modules; never the dist/ a developer may be running), shared by the test files that need
 * it: the first process to take the lock builds, the others wait and reuse the result while the
 * sources are unchanged (a fingerprint of their paths, sizes and times). Two builds side by
 * side on a loaded two-core machine took over two minutes; one takes ten seconds.
 */
export const OUT = path.join(ROOT, 'dist', '.test-build');
export const DIST_BIN = path.join(OUT, 'bin', 'sovcomms.js');
const LOCK = `${OUT}.lock`;
const STAMP = path.join(OUT, '.source-fingerprint');
const SOURCES = ['server', 'plugins', 'main', 'bin', 'resources', 'scripts/build.ts', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];

function fingerprint(): string {
  const h = crypto.createHash('sha256');
  const visit = (p: string) => {
    const st = fs.statSync(p, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) for (const e of fs.readdirSync(p).sort()) visit(path.join(p, e));
    else h.update(`${path.relative(ROOT, p)}\0${st.size}\0${st.mtimeMs}\n`);
  };
  for (const s of SOURCES) visit(path.join(ROOT, s));
  return h.digest('hex');
}

function fresh(fp: string): boolean {
  return fs.existsSync(DIST_BIN) && fs.existsSync(STAMP) && fs.readFileSync(STAMP, 'utf8') === fp;
}

let done = false;
export async function buildOnce(): Promise<string> {
  if (done) return OUT;
  const fp = fingerprint();
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  for (;;) {
    try {
      fs.mkdirSync(LOCK);
    } catch {
      // Another test process builds: wait for it (a lock older than 10 minutes is a dead one's).
      const st = fs.statSync(LOCK, { throwIfNoEntry: false });
      if (st && Date.now() - st.mtimeMs > 600_000) fs.rmSync(LOCK, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 200));
      continue;
    }
    try {
      if (!fresh(fp)) {
        await build(() => undefined, OUT);
        fs.writeFileSync(STAMP, fp);
      }
    } finally {
      fs.rmSync(LOCK, { recursive: true, force: true });
    }
    done = true;
    return OUT;
  }
}
