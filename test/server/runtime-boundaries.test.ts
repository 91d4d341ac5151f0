import fs from 'node:fs';
import path from 'node:path';
import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { scratchDirs } from '../support/cleanup.ts';

/**
 * Runtime boundaries (STYLE.md, the Signal-Desktop idea): `main/` alone may import `electron`;
 * `renderer/` alone may touch the DOM; `server/` and `plugins/` are plain Node. `renderer/` may
 * not import Node built-ins, Electron, or server/plugin code (type-only imports are erased at
 * build time and allowed). Imports are read with the TypeScript parser, so comments and strings
 * (a plugin's HTML page may carry a script that uses `document`) never count.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SOURCE = /\.(?:[cm]?[jt]s|tsx|jsx)$/;
const NODE_BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
const DOM_GLOBALS = new Set(['document', 'window']);

export interface Violation {
  file: string;
  line: number;
  rule: string;
}

function walk(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else if (SOURCE.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

interface ImportRef {
  spec: string;
  typeOnly: boolean;
  line: number;
}

function scan(file: string): { imports: ImportRef[]; domUses: number[] } {
  const text = fs.readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const imports: ImportRef[] = [];
  const domUses: number[] = [];
  const line = (n: ts.Node) => sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier)) {
      const c = n.importClause;
      const typeOnly =
        !!c &&
        // eslint-disable-next-line @typescript-eslint/no-deprecated -- still what TypeScript 5.9 sets for `import type`; the test reads imports as the compiler does
        (c.isTypeOnly ||
          (!c.name &&
            !!c.namedBindings &&
            ts.isNamedImports(c.namedBindings) &&
            c.namedBindings.elements.length > 0 &&
            c.namedBindings.elements.every((e) => e.isTypeOnly)));
      imports.push({ spec: n.moduleSpecifier.text, typeOnly, line: line(n) });
    } else if (ts.isExportDeclaration(n) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) {
      imports.push({ spec: n.moduleSpecifier.text, typeOnly: n.isTypeOnly, line: line(n) });
    } else if (ts.isImportEqualsDeclaration(n) && ts.isExternalModuleReference(n.moduleReference) && ts.isStringLiteral(n.moduleReference.expression)) {
      imports.push({ spec: n.moduleReference.expression.text, typeOnly: n.isTypeOnly, line: line(n) });
    } else if (ts.isCallExpression(n) && n.arguments.length >= 1 && ts.isStringLiteralLike(n.arguments[0]!)) {
      const isImport = n.expression.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(n.expression) && n.expression.text === 'require';
      if (isImport || isRequire) imports.push({ spec: (n.arguments[0] as ts.StringLiteral).text, typeOnly: false, line: line(n) });
    } else if (ts.isPropertyAccessExpression(n) || ts.isElementAccessExpression(n)) {
      const target = n.expression;
      if (ts.isIdentifier(target) && DOM_GLOBALS.has(target.text)) domUses.push(line(n));
      // globalThis.document.x / globalThis.window
      if (ts.isPropertyAccessExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'globalThis' && DOM_GLOBALS.has(n.name.text))
        domUses.push(line(n));
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return { imports, domUses };
}

const isElectron = (spec: string) => spec === 'electron' || spec.startsWith('electron/');

/** The top-level area a resolved relative import lands in (`server`, `plugins`, `renderer`, ...). */
function areaOf(root: string, fromFile: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const rel = path.relative(root, path.resolve(path.dirname(fromFile), spec));
  if (rel.startsWith('..')) return undefined;
  return rel.split(path.sep)[0];
}

/**
 * The plugin contract (ARCHITECTURE.md): a file under `plugins/<p>/` imports the SDK
 * (`server/sdk.ts`), files of its own plugin, another plugin's `api.ts` (typed service references),
 * Node built-ins and npm packages; nothing else of the core or of another plugin. The telephony
 * bridge is its own process: `plugins/telephony/bridge/` imports only itself and the control
 * contract both sides share (`plugins/telephony/control.ts`), never the SDK or the core; the
 * contract itself imports only `zod`, or the bridge would load whatever it imported.
 * Type-only imports count too: a type from a core file is still a reach around the SDK.
 */
const BRIDGE = path.join('plugins', 'telephony', 'bridge');
const BRIDGE_CONTRACT = path.join('plugins', 'telephony', 'control.ts');
const SDK = path.join('server', 'sdk.ts');

export function checkPluginImports(root: string): Violation[] {
  const v: Violation[] = [];
  for (const file of walk(path.join(root, 'plugins'))) {
    const rel = path.relative(root, file);
    const plugin = rel.split(path.sep)[1]!;
    const inBridge = rel.startsWith(BRIDGE + path.sep);
    for (const i of scan(file).imports) {
      if (rel === BRIDGE_CONTRACT) {
        if (i.spec !== 'zod') v.push({ file: rel, line: i.line, rule: `the bridge's control contract imports only zod (${i.spec})` });
        continue;
      }
      if (!i.spec.startsWith('.')) continue; // built-ins and npm packages
      const target = path.relative(root, path.resolve(path.dirname(file), i.spec));
      const add = (rule: string) => v.push({ file: rel, line: i.line, rule: `${rule} (${i.spec})` });
      if (inBridge) {
        if (!target.startsWith(BRIDGE + path.sep) && target !== BRIDGE_CONTRACT) add('the bridge imports only itself and plugins/telephony/control.ts');
        continue;
      }
      const parts = target.split(path.sep);
      if (target === SDK) continue;
      if (parts[0] === 'plugins' && parts[1] === plugin && parts.length > 2) continue;
      if (parts[0] === 'plugins' && parts.length === 3 && parts[2] === 'api.ts') continue;
      // The registry of built-in plugins imports each manifest.
      if (rel === path.join('plugins', 'index.ts') && parts[0] === 'plugins' && parts.length === 3 && parts[2] === 'index.ts') continue;
      add(
        parts[0] === 'plugins'
          ? `plugins/${plugin} reaches into another plugin: use its api.ts service reference`
          : `plugins/${plugin} imports the core past the SDK: import from server/sdk.ts`,
      );
    }
  }
  return v;
}

export function checkBoundaries(root: string): Violation[] {
  const v: Violation[] = [];
  const add = (file: string, line: number, rule: string) => v.push({ file: path.relative(root, file), line, rule });
  for (const area of ['server', 'plugins']) {
    for (const file of walk(path.join(root, area))) {
      const { imports, domUses } = scan(file);
      for (const i of imports) {
        if (i.typeOnly) continue;
        if (isElectron(i.spec)) add(file, i.line, `${area}/ imports ${i.spec}: only main/ may import electron`);
        const to = areaOf(root, file, i.spec);
        if (to === 'main' || to === 'renderer') add(file, i.line, `${area}/ imports ${to}/ code (${i.spec}): server and plugins are plain Node`);
      }
      for (const l of domUses) add(file, l, `${area}/ uses a DOM global (document/window): only renderer/ may touch the DOM`);
    }
  }
  for (const file of walk(path.join(root, 'main'))) {
    const { imports, domUses } = scan(file);
    for (const i of imports) if (!i.typeOnly && areaOf(root, file, i.spec) === 'renderer') add(file, i.line, `main/ imports renderer/ code (${i.spec})`);
    for (const l of domUses) add(file, l, 'main/ uses a DOM global (document/window): only renderer/ may touch the DOM');
  }
  for (const file of walk(path.join(root, 'renderer'))) {
    // Vite's config runs in Node at build time and never reaches the page.
    const buildConfig = path.relative(path.join(root, 'renderer'), file) === 'vite.config.ts';
    for (const i of scan(file).imports) {
      if (i.typeOnly) continue;
      if (!buildConfig && (NODE_BUILTINS.has(i.spec) || i.spec.startsWith('node:'))) add(file, i.line, `renderer/ imports the Node built-in ${i.spec}`);
      if (isElectron(i.spec)) add(file, i.line, `renderer/ imports ${i.spec}: only main/ may import electron (use the preload bridge)`);
      const to = areaOf(root, file, i.spec);
      if (to === 'server' || to === 'plugins' || to === 'main') add(file, i.line, `renderer/ imports ${to}/ code (${i.spec}): talk to the server over HTTP`);
    }
  }
  return v;
}

/** Folders that are not our source: dependencies, build output, data, coverage. */
const NOT_SOURCE = new Set(['node_modules', 'dist', 'data', 'coverage']);

/**
 * `main/` is the only folder that imports `electron`, anywhere in the repository (scripts, bin,
 * tests and benches included; type-only imports too: a test needing Electron's shapes uses
 * main/shell.ts, the interface the desktop logic is written against).
 */
export function checkElectronOnlyInMain(root: string): Violation[] {
  const v: Violation[] = [];
  const files: string[] = [];
  for (const e of fs.readdirSync(root, { withFileTypes: true })) {
    if (e.name.startsWith('.') || NOT_SOURCE.has(e.name) || e.name === 'main') continue;
    const p = path.join(root, e.name);
    if (e.isDirectory()) files.push(...walk(p));
    else if (SOURCE.test(e.name)) files.push(p);
  }
  for (const file of files)
    for (const i of scan(file).imports)
      if (isElectron(i.spec)) v.push({ file: path.relative(root, file), line: i.line, rule: `imports ${i.spec}: only main/ may import electron` });
  return v;
}

const scratch = scratchDirs('sovcomms-boundaries-');

function tree(files: Record<string, string>): string {
  const d = scratch();
  for (const [p, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(d, p)), { recursive: true });
    fs.writeFileSync(path.join(d, p), text);
  }
  return d;
}

describe('runtime boundaries', () => {
  it('this repository keeps them (main/ and renderer/ may not exist yet)', () => {
    const v = checkBoundaries(ROOT);
    expect(v.map((x) => `${x.file}:${x.line}: ${x.rule}`)).toEqual([]);
    // The scan is not vacuous: it read the core and the plugins.
    expect(walk(path.join(ROOT, 'server')).length).toBeGreaterThan(10);
    expect(walk(path.join(ROOT, 'plugins')).length).toBeGreaterThan(5);
  });

  it('fails when an import or a DOM use crosses a line', () => {
    const root = tree({
      'server/a.ts': "import { app } from 'electron';\nexport const x = app;\n",
      'server/b.ts': "// document.title in a comment is fine\nconst html = '<script>document.title = 1</script>';\nexport const t = document.title + html;\n",
      'plugins/p/index.ts': "const { ipcRenderer } = require('electron');\nexport const w = window.location;\nexport const g = globalThis.document;\n",
      'plugins/p/lazy.ts': "export const load = () => import('electron/main');\nexport { thing } from '../../renderer/ui.ts';\n",
      'main/index.ts': "import { app } from 'electron';\nimport { startServer } from '../server/a.ts';\nexport { app, startServer };\n",
      'renderer/ui.ts': [
        "import fs from 'node:fs';",
        "import path from 'path';",
        "import { ipcRenderer } from 'electron';",
        "import { Appliance } from '../server/app.ts';",
        "import type { Tenant } from '../server/tenancy.ts';",
        "import { type Principal } from '../server/auth.ts';",
        'export const el = document.body;',
        'export const thing = 1;',
      ].join('\n'),
    });
    const v = checkBoundaries(root).map((x) => `${x.file}:${x.line}`);
    expect(v.sort()).toEqual(
      [
        'plugins/p/index.ts:1',
        'plugins/p/index.ts:2',
        'plugins/p/index.ts:3',
        'plugins/p/lazy.ts:1',
        'plugins/p/lazy.ts:2',
        'renderer/ui.ts:1',
        'renderer/ui.ts:2',
        'renderer/ui.ts:3',
        'renderer/ui.ts:4',
        'server/a.ts:1',
        'server/b.ts:3',
      ].sort(),
    );
  });

  it('plugins reach the core only through server/sdk.ts; the bridge only through its contract, which imports only zod', () => {
    expect(checkPluginImports(ROOT).map((x) => `${x.file}:${x.line}: ${x.rule}`)).toEqual([]);
    const root = tree({
      'server/sdk.ts': 'export const x = 1;\n',
      'plugins/index.ts': "import a from './a/index.ts';\nexport default [a];\n",
      'plugins/a/index.ts': [
        "import { x } from '../../server/sdk.ts';",
        "import { own } from './own.ts';",
        "import type { Tenant } from '../../server/tenancy.ts';",
        "import { parse } from '../../server/cli.ts';",
        "import { secret } from '../b/service.ts';",
        "import { bRef } from '../b/api.ts';",
        "import { z } from 'zod';",
        "import fs from 'node:fs';",
        "const pages = '../../resources/login';",
        'export default { x, own, parse, secret, bRef, z, fs, pages };',
      ].join('\n'),
      'plugins/telephony/bridge/call.ts': [
        "import { leg } from './media/leg.ts';",
        "import { control } from '../control.ts';",
        "import { x } from '../../../server/sdk.ts';",
        "import { schemas } from '../schemas.ts';",
        'export { leg, control, x, schemas };',
      ].join('\n'),
      'plugins/telephony/control.ts': [
        "import { z } from 'zod';",
        "import type { Tenant } from '../../server/sdk.ts';",
        "import { e164 } from './schemas.ts';",
        "import fs from 'node:fs';",
        'export { z, e164, fs };',
      ].join('\n'),
    });
    expect(
      checkPluginImports(root)
        .map((x) => `${x.file}:${x.line}`)
        .sort(),
    ).toEqual(
      [
        'plugins/a/index.ts:3',
        'plugins/a/index.ts:4',
        'plugins/a/index.ts:5',
        'plugins/telephony/bridge/call.ts:3',
        'plugins/telephony/bridge/call.ts:4',
        'plugins/telephony/control.ts:2',
        'plugins/telephony/control.ts:3',
        'plugins/telephony/control.ts:4',
      ].sort(),
    );
  });

  it('no file outside main/ imports electron, anywhere in the repository', () => {
    expect(checkElectronOnlyInMain(ROOT).map((x) => `${x.file}:${x.line}: ${x.rule}`)).toEqual([]);
    // main/ does (the adapter and the preload): the scan would see it.
    expect(walk(path.join(ROOT, 'main')).some((f) => scan(f).imports.some((i) => isElectron(i.spec)))).toBe(true);
    const root = tree({
      'main/electron-adapter.ts': "import { app } from 'electron';\nexport const a = app;\n",
      'main/preload.cts': "import electron = require('electron');\nexport = electron;\n",
      'scripts/tool.ts': "import { app } from 'electron';\nexport const a = app;\n",
      'bin/start.mjs': "const { app } = await import('electron');\nexport { app };\n",
      'test/main/x.test.ts': "import type { BrowserWindow } from 'electron';\nexport type W = BrowserWindow;\n",
      'bench/b.ts': "const e = require('electron/main');\nexport { e };\n",
      'build/notarize.cjs': "// require('electron') in a comment is fine\nmodule.exports = 'electron';\n",
      'electron.config.ts': "import { shell } from 'electron';\nexport { shell };\n",
      'dist/main/index.js': "import { app } from 'electron';\n",
      'node_modules/x/index.js': "require('electron');\n",
    });
    expect(
      checkElectronOnlyInMain(root)
        .map((x) => `${x.file}:${x.line}`)
        .sort(),
    ).toEqual(['bench/b.ts:1', 'bin/start.mjs:1', 'electron.config.ts:1', 'scripts/tool.ts:1', 'test/main/x.test.ts:1'].sort());
  });

  it('allows what each side is for', () => {
    const root = tree({
      'server/ok.ts': "import fs from 'node:fs';\nexport const page = '<script>window.close()</script>';\nexport const f = fs;\n",
      'main/index.ts': "import { app, BrowserWindow } from 'electron';\nimport fs from 'node:fs';\nexport { app, BrowserWindow, fs };\n",
      'renderer/app.tsx':
        "import type { Tenant } from '../server/tenancy.ts';\nexport const t: Tenant | null = null;\nexport const h = window.location.href + document.title;\n",
    });
    expect(checkBoundaries(root)).toEqual([]);
  });
});
