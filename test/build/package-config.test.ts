import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { minimatch } from 'minimatch';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TrayIcon } from '../../main/shell.ts';
import { ROOT } from '../support/cli.ts';
import { tempDir } from '../support/server.ts';
import { buildOnce, OUT } from './build-once.ts';

/**
 * The packaging is written and checked, never run here (no Electron binary, no internet):
 * electron-builder's own configuration loader and schema validation read electron-builder.yml
 * offline, and every file the package takes from the tree exists after `npm run build`.
 */
const require = createRequire(import.meta.url);
interface BuilderConfig {
  files: (string | { filter: string[] })[];
  extraMetadata: { main: string };
  asar: boolean;
  asarUnpack: string[];
  npmRebuild: boolean;
  extraResources: { from: string; to: string }[];
  linux: { target: string[]; icon: string; desktop: { entry: Record<string, string> } };
  win: { target: string[]; icon: string };
  mac: { target: string[]; icon: string; entitlements: string; entitlementsInherit: string; hardenedRuntime: boolean };
  directories: { buildResources: string };
}
// electron-builder's own code (app-builder-lib), CommonJS without typings for these paths.
// eslint-disable-next-line @typescript-eslint/unbound-method -- module functions of app-builder-lib, not methods
const { getConfig, validateConfiguration } = require('app-builder-lib/out/util/config/config.js') as {
  getConfig(dir: string, file: string | null, extra: unknown): Promise<BuilderConfig>;
  validateConfiguration(c: unknown, logger: unknown): Promise<void>;
};
const { DebugLogger } = require('builder-util') as { DebugLogger: new (enabled: boolean) => unknown };

let config: BuilderConfig;
beforeAll(async () => {
  config = await getConfig(ROOT, null, null);
  await buildOnce();
}, 600_000);

/** A path of the package, as it is in this test's own build (dist/ -> dist/.test-PID/). */
/** Whether electron-builder's `files` filter takes a path (positive globs, then exclusions). */
function packaged(p: string): boolean {
  const patterns = config.files.flatMap((f) => (typeof f === 'string' ? [f] : f.filter));
  const m = (g: string) => minimatch(p, g, { dot: true });
  return patterns.filter((g) => !g.startsWith('!')).some(m) && !patterns.filter((g) => g.startsWith('!')).some((g) => m(g.slice(1)));
}

const built = (p: string) => (p.startsWith('dist/') ? path.join(OUT, p.slice('dist/'.length)) : path.join(ROOT, p));

describe('electron-builder configuration', () => {
  it("passes electron-builder's validation; a wrong key does not", async () => {
    await expect(validateConfiguration(config, new DebugLogger(false))).resolves.toBeUndefined();
    const dir = tempDir('sovcomms-builder-');
    try {
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'x', version: '1.0.0' }));
      const text = fs.readFileSync(path.join(ROOT, 'electron-builder.yml'), 'utf8').replace('  hardenedRuntime: true', '  hardenedRuntme: true');
      fs.writeFileSync(path.join(dir, 'electron-builder.yml'), text);
      const bad = await getConfig(dir, null, null);
      await expect(validateConfiguration(bad, new DebugLogger(false))).rejects.toThrow(/Invalid configuration object[\s\S]*configuration\.mac /);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('targets: Linux AppImage and deb, Windows NSIS, macOS dmg; asar with the native modules unpacked', () => {
    expect(config.linux.target).toEqual(['AppImage', 'deb']);
    expect(config.win.target).toEqual(['nsis']);
    expect(config.mac.target).toEqual(['dmg']);
    expect(config.mac.hardenedRuntime).toBe(true);
    expect(config.asar).toBe(true);
    for (const m of ['better-sqlite3', 'pkcs11js', 'cbor-extract']) expect(config.asarUnpack).toContain(`node_modules/${m}/**/*`);
    expect(config.asarUnpack).toContain('**/*.node');
    // The rebuild for Electron's ABI is the packaging script's explicit step, not electron-builder's.
    expect(config.npmRebuild).toBe(false);
    const script = fs.readFileSync(path.join(ROOT, 'scripts/package-desktop.sh'), 'utf8');
    expect(script).toMatch(/electron-rebuild --version "\$ELECTRON_VERSION" --force --only better-sqlite3,pkcs11js,cbor-extract/);
    expect(script).toMatch(/npm rebuild better-sqlite3 pkcs11js cbor-extract/);
    // The packaged native modules are production dependencies (electron-builder ships only those).
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const m of ['better-sqlite3', 'pkcs11js', 'bonjour-service']) expect(pkg.dependencies[m], m).toBeTruthy();
  });

  it('every file the package lists exists after npm run build', () => {
    const must: string[] = [
      config.extraMetadata.main,
      'dist/main/preload.cjs',
      'dist/bin/sovcomms.js',
      'dist/bundle/cli.js',
      'dist/package.json',
      'dist/plugins/telephony/bridge/main.js',
      'dist/plugins/telephony/bridge/media/thread.js',
      'dist/plugins/telephony/bridge/media/worker-boot.mjs',
      'dist/server/migrations/0001-core.sql',
      'dist/resources/login/login.html',
      'dist/resources/lotl/lotl-signers.pem',
      config.win.icon,
      config.mac.icon,
      config.mac.entitlements,
      config.mac.entitlementsInherit,
    ];
    for (const p of must) {
      expect(fs.existsSync(built(p)), p).toBe(true);
      if (p.startsWith('dist/')) expect(packaged(p), `${p} in files`).toBe(true);
    }
    expect(packaged('package.json')).toBe(true);
    expect(packaged('dist/console/index.html')).toBe(true); // the console's build, when present
    expect(packaged('dist/.test-build/bin/sovcomms.js')).toBe(false); // test builds stay out
    expect(packaged('dist/.bench-1234/bin/sovcomms.js')).toBe(false);
    expect(packaged('test/main/desktop.test.ts')).toBe(false);
    // Every migration folder of every plugin made it next to its compiled index.js.
    for (const plugin of fs.readdirSync(path.join(ROOT, 'plugins'))) {
      const src = path.join(ROOT, 'plugins', plugin, 'migrations');
      if (!fs.existsSync(src)) continue;
      for (const f of fs.readdirSync(src)) expect(fs.existsSync(path.join(OUT, 'plugins', plugin, 'migrations', f)), `${plugin}/${f}`).toBe(true);
    }
    // Linux icon set, tray icons for every tray state, the native modules to unpack.
    const linuxIcons = fs.readdirSync(path.join(ROOT, config.linux.icon));
    for (const s of [16, 32, 48, 64, 128, 256, 512]) expect(linuxIcons).toContain(`${s}x${s}.png`);
    const tray = config.extraResources.find((r) => r.to === 'icons')!;
    const states: TrayIcon[] = ['starting', 'ready', 'degraded', 'stopped'];
    for (const s of states) expect(fs.existsSync(path.join(ROOT, tray.from, `tray-${s}.png`)), s).toBe(true);
    for (const m of ['better-sqlite3', 'pkcs11js', 'cbor-extract']) expect(fs.existsSync(path.join(ROOT, 'node_modules', m, 'package.json')), m).toBe(true);
    expect(config.directories.buildResources).toBe('build');
    expect(config.linux.desktop.entry).toMatchObject({ Name: 'Sovereign Communications Appliance', Categories: expect.stringContaining('Network') });
  });

  it('the icons are real images of the sizes named (PNG signature and IHDR; ICO directory)', () => {
    const size = (p: string) => {
      const b = fs.readFileSync(path.join(ROOT, p));
      expect(b.subarray(0, 8).toString('hex'), p).toBe('89504e470d0a1a0a');
      return [b.readUInt32BE(16), b.readUInt32BE(20)];
    };
    expect(size('build/icon.png')).toEqual([1024, 1024]);
    expect(size('build/icons/512x512.png')).toEqual([512, 512]);
    expect(size('build/tray/tray-ready.png')).toEqual([32, 32]);
    const ico = fs.readFileSync(path.join(ROOT, 'build/icon.ico'));
    expect([ico.readUInt16LE(0), ico.readUInt16LE(2), ico.readUInt16LE(4)]).toEqual([0, 1, 4]);
  });
});
