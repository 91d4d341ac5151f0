/**
 * The CLI and server as one bundle (`dist/bundle/`), built by `npm run build` after the per-file
 * compile: what `node dist/bin/sovcomms.js` loads in the main process.
 *
 * Why: a start loaded ~550 modules one by one (resolve, stat, read, decode, compile each; Express
 * alone ~100 CommonJS files, zod 95 ES modules of which 64 are locales nobody here reads). Node 20
 * has no compile cache for ES modules, so the file count and the bytes parsed were the cost.
 * Bundled with code splitting (ES modules, a chunk per lazily imported part), `tenant list`
 * loads ~25 files and `serve` about 50: see bench/results/2026-12-06-vm-bundle.md.
 *
 * What stays outside the bundle, loaded from node_modules as before:
 * - native addons (better-sqlite3, pkcs11js, cbor-extract) and packages that load files or wasm
 *   beside themselves at run time (werift, opusscript);
 * - the telephony bridge (its own process) and the worker threads (the backup writer, the media
 *   and WebRTC threads, the trusted-list checker): they load the per-file compile in dist/ by path,
 *   exactly as before, and share nothing with the main process but messages.
 *
 * `import.meta.url` in our code points at the module's own place (migrations, resources, the
 * worker files, package.json are found next to it): in the bundle each occurrence is rewritten to
 * the URL of that module's per-file compile, which sits in dist/ beside the bundle. So every path
 * resolves to the same file it did unbundled.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';

/** Packages loaded from node_modules at run time, never copied into the bundle (see above). */
export const BUNDLE_EXTERNAL = ['better-sqlite3', 'pkcs11js', 'cbor-extract', '@cbor-extract/*', 'msgpackr-extract', 'werift', 'opusscript', 'electron'];

/** Replaces `import.meta.url` in a module of `dist` with the URL of that module's file, from a chunk in `outdir`. */
function selfUrl(out: string, outdir: string): esbuild.Plugin {
  const inDist = out.endsWith(path.sep) ? out : out + path.sep;
  return {
    name: 'self-url',
    setup(b) {
      b.onLoad({ filter: /\.m?js$/ }, async (a) => {
        if (!a.path.startsWith(inDist) || a.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
        const text = await fs.promises.readFile(a.path, 'utf8');
        if (!text.includes('import.meta.url')) return { contents: text, loader: 'js' };
        const rel = path.relative(outdir, a.path).split(path.sep).join('/');
        return { contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`), loader: 'js' };
      });
    },
  };
}

/**
 * zod's index re-exports every locale (`z.locales`, `z.core.locales`: 64 modules, ~370 KB) for
 * callers who switch the language of its messages; ours are English only (`z.config` is never
 * called with a locale), so the bundle keeps `en` (which zod itself configures) and drops the rest.
 */
function zodEnglishOnly(): esbuild.Plugin {
  return {
    name: 'zod-english-only',
    setup(b) {
      b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (a) =>
        /[\\/]zod[\\/]v4[\\/]/.test(a.importer) ? { path: path.join(path.dirname(a.importer), '../locales/en.js'), namespace: 'zod-locales' } : undefined,
      );
      b.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (a) => ({
        contents: `export { default as en } from ${JSON.stringify(a.path)};`,
        loader: 'js',
        resolveDir: path.dirname(a.path),
      }));
    },
  };
}

/** Bundles `out/server/cli.js` (the per-file compile) into `out/bundle/`; returns the number of files written. */
export async function bundle(out: string): Promise<number> {
  const outdir = path.join(out, 'bundle');
  fs.rmSync(outdir, { recursive: true, force: true });
  const result = await esbuild.build({
    entryPoints: { cli: path.join(out, 'server', 'cli.js') },
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // One-byte source: V8 keeps it as a Latin-1 string, no UTF-8 decode of megabytes at start.
    charset: 'ascii',
    external: BUNDLE_EXTERNAL,
    // The CommonJS packages inside (Express and its kin) call require() for Node's built-ins.
    banner: { js: "import { createRequire as __sovcommsRequire } from 'node:module'; const require = __sovcommsRequire(import.meta.url);" },
    plugins: [selfUrl(out, outdir), zodEnglishOnly()],
    // Maps to the TypeScript sources (esbuild follows each compiled file's own map), without copies of them.
    sourcemap: 'linked',
    sourcesContent: false,
    legalComments: 'none',
    logLevel: 'silent',
    metafile: true,
  });
  if (result.errors.length) throw new Error(`bundle: ${result.errors.map((e) => e.text).join('; ')}`);
  return Object.keys(result.metafile.outputs).filter((f) => f.endsWith('.js')).length;
}

/**
 * Points the compiled entry (`out/bin/sovcomms.js`, which imports `../server/cli.js`) at the
 * bundle. Throws when the entry no longer has that one import, so a change to bin/sovcomms.ts
 * cannot leave the bundle silently unused.
 */
export function linkEntry(out: string): void {
  const entry = path.join(out, 'bin', 'sovcomms.js');
  const text = fs.readFileSync(entry, 'utf8');
  const from = /\bimport\((['"])\.\.\/server\/cli\.js\1\)/g;
  const found = text.match(from) ?? [];
  if (found.length !== 1) throw new Error(`${entry}: expected one import of ../server/cli.js to point at the bundle, found ${found.length}`);
  // Same length ("server" and "bundle"): the entry's source map stays true.
  fs.writeFileSync(
    entry,
    text.replace(from, (_m, q: string) => `import(${q}../bundle/cli.js${q})`),
  );
}
