/**
 * Electron's entry (package.json "main": dist/main/index.js). Wires the real Electron shell into
 * DesktopApp; the server it starts is dist/bin/sovcomms.js, the same entry as `sovcomms serve`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { electronShell } from './electron-adapter.ts';
import { DesktopApp } from './desktop.ts';
import { pinnedProbe } from './probe.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
// dist/main -> dist/
const dist = path.resolve(here, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(dist, 'package.json'), 'utf8')) as { build?: string };
// Packaged, the tray icons sit in the app's resources (electron-builder's extraResources); run
// from a checkout (`electron dist/main/index.js`), in build/tray.
const packagedIcons = path.join(process.resourcesPath ?? dist, 'icons');
const iconsDir = fs.existsSync(packagedIcons) ? packagedIcons : path.resolve(dist, '..', 'build', 'tray');

// The probe reads the pin the server reports after start (policyState is filled in then).
const desktop: DesktopApp = new DesktopApp(electronShell(iconsDir), {
  serverEntry: path.join(dist, 'bin', 'sovcomms.js'),
  preload: path.join(here, 'preload.cjs'),
  build: pkg.build ?? 'dev',
  probe: pinnedProbe(() => desktop.policyState.pinnedCert),
  runtime: `Electron ${process.versions.electron}, Chromium ${process.versions.chrome}, Node ${process.versions.node}`,
});
void desktop.run();
