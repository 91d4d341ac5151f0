/**
 * `npm run build`: the server, the plugins (with the telephony bridge and its media threads) and
 * the CLI entry compiled to plain JavaScript in `dist/` (source maps beside), plus every file
 * they read at run time that is not TypeScript (migrations, the worker boot file, resources/).
 * `node dist/bin/sovcomms.js serve` then runs without a TypeScript loader; Electron's
 * utilityProcess runs the same file.
 *
 * `dist/console/` belongs to the console's own build (`npm run build:console`, run after this
 * one by `npm run build`): it is left alone here.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { bundle, linkEntry } from './bundle.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DIST = path.join(ROOT, 'dist');
/** What this build owns in dist/ (everything else, dist/console above all, is someone else's). */
export const OWNED = ['bin', 'bundle', 'server', 'plugins', 'resources', 'package.json'];
/** Source trees whose non-TypeScript files the compiled code reads (SQL, the worker boot). */
const TREES = ['server', 'plugins'];
const SKIP = /\.(?:ts|md)$/;

function copyTree(from: string, to: string, keep: (name: string) => boolean): number {
  let n = 0;
  for (const e of fs.readdirSync(from, { withFileTypes: true })) {
    const src = path.join(from, e.name);
    const dst = path.join(to, e.name);
    if (e.isDirectory()) n += copyTree(src, dst, keep);
    else if (e.isFile() && keep(e.name)) {
      fs.mkdirSync(to, { recursive: true });
      fs.copyFileSync(src, dst);
      n++;
    }
  }
  return n;
}

/**
 * TypeScript 5.9's rewriteRelativeImportExtensions misses some dynamic imports (seen: the
 * `await import('./tls.ts')` inside rp-ca's start()), which would fail at run time without a
 * loader. Rewrites what it left: `.ts` and `.js` are the same length, so the source maps stay true.
 */
function rewriteLeftoverImports(dir: string): number {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      n += rewriteLeftoverImports(p);
      continue;
    }
    if (!e.name.endsWith('.js')) continue;
    const text = fs.readFileSync(p, 'utf8');
    const out = text.replace(/\bimport\((['"])(\.{1,2}\/[^'"]+)\.ts\1\)/g, (_m, q: string, spec: string) => {
      n++;
      return `import(${q}${spec}.js${q})`;
    });
    if (out !== text) fs.writeFileSync(p, out);
  }
  return n;
}

/**
 * Every file of tsconfig.build.json to JavaScript, one file at a time (`ts.transpileModule`, the
 * project's own compiler, with the project's options), a source map beside each. No type check
 * here: `npm run typecheck` (and `npm test`) does that over the same files, and a whole-program
 * `tsc` emit took a minute on a loaded two-core machine where this takes seconds. Per-file
 * emit is exact for this code: tsconfig.json has `isolatedModules` and `verbatimModuleSyntax`,
 * which is also what the development loader (tsx) relies on.
 */
function transpileAll(out: string): number {
  const configPath = path.join(ROOT, 'tsconfig.build.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(
    configPath,
    { outDir: out },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(`tsconfig.build.json: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
      },
    },
  );
  if (!parsed) throw new Error('tsconfig.build.json could not be read');
  if (parsed.errors.length)
    throw new Error(`tsconfig.build.json: ${parsed.errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('; ')}`);
  // Every file is an ES module (package.json "type": "module"): what NodeNext decides per file from
  // package.json, which a single-file transpile cannot look up, is said here.
  const options: ts.CompilerOptions = { ...parsed.options, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler };
  let n = 0;
  for (const file of parsed.fileNames) {
    if (file.endsWith('.d.ts') || !/\.[mc]?tsx?$/.test(file)) continue;
    const rel = path.relative(ROOT, file);
    const js = path.join(out, rel.replace(/\.([mc]?)tsx?$/, '.$1js'));
    const result = ts.transpileModule(fs.readFileSync(file, 'utf8'), { compilerOptions: options, fileName: file, reportDiagnostics: true });
    const errors = (result.diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
    if (errors.length) throw new Error(`${rel}: ${errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('; ')}`);
    fs.mkdirSync(path.dirname(js), { recursive: true });
    fs.writeFileSync(js, result.outputText);
    if (result.sourceMapText) {
      // transpileModule names the source by its bare file name: point it at the real file.
      const map = JSON.parse(result.sourceMapText) as { file: string; sources: string[]; sourceRoot?: string };
      map.file = path.basename(js);
      map.sources = [path.relative(path.dirname(js), file).split(path.sep).join('/')];
      delete map.sourceRoot;
      fs.writeFileSync(`${js}.map`, JSON.stringify(map));
    }
    n++;
  }
  return n;
}

/** The same stamp the TypeScript tree computes at start (server/build-info.ts), fixed at build time. */
function stampFromGit(): string {
  if (process.env.SOVCOMMS_BUILD) return process.env.SOVCOMMS_BUILD;
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  try {
    const s = execFileSync('git', ['log', '-1', '--format=%cd.%h', '--date=format:%Y%m%d'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
    if (s) return s;
  } catch {
    // Not a git checkout (a source tarball): the date and the version.
  }
  return `${new Date().toISOString().slice(0, 10).replace(/-/g, '')}.v${pkg.version}`;
}

/**
 * Builds into `out` (default dist/). Tests build into a folder of their own under dist/ (inside
 * the project, so node_modules resolves), never into the dist/ a developer may be running.
 */
/** Removes what this build owns in `out` (a previous build's files), never dist/console. */
export function clean(out = DIST): void {
  for (const name of OWNED) fs.rmSync(path.join(out, name), { recursive: true, force: true });
}

export async function build(log: (l: string) => void = console.log, out = DIST): Promise<void> {
  const started = Date.now();
  const DIST = out;
  clean(DIST);
  const emitted = transpileAll(DIST);
  const fixed = rewriteLeftoverImports(DIST);
  let copied = 0;
  for (const t of TREES) copied += copyTree(path.join(ROOT, t), path.join(DIST, t), (n) => !SKIP.test(n));
  copied += copyTree(path.join(ROOT, 'resources'), path.join(DIST, 'resources'), () => true);
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  // dist/ stands on its own: ES modules, the version, and the build stamp server/build-info reads.
  fs.writeFileSync(
    path.join(DIST, 'package.json'),
    JSON.stringify({ name: pkg.name, version: pkg.version, private: true, type: 'module', build: stampFromGit() }, null, 2) + '\n',
  );
  const chunks = await bundle(DIST);
  linkEntry(DIST);
  fs.chmodSync(path.join(DIST, 'bin', 'sovcomms.js'), 0o755);
  log(
    `${path.relative(ROOT, DIST)}/ built in ${((Date.now() - started) / 1000).toFixed(1)} s (${emitted} files compiled, ${copied} files copied beside the compiled JavaScript${fixed ? `, ${fixed} import specifiers rewritten` : ''}; the CLI and server bundled into ${chunks} files)`,
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await build();
