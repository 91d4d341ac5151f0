/**
 * `npm run package:deb`: the headless appliance as a Debian package, built with dpkg-deb (Debian's
 * own tool; nothing is downloaded). Server only: the compiled server and plugins (`npm run build`
 * output, with the console's static files when they are built), the production node_modules of
 * this machine (native better-sqlite3 and pkcs11js built here, for this Node's ABI), `sovcomms` in
 * /usr/bin, the systemd unit `sovcomms service install` writes (the same generator), a system user
 * made in postinst, the data in /var/lib/sovcomms (kept on remove, deleted on purge). No Electron,
 * no dev dependencies, no tests, no data dir of the machine that built it.
 *
 *   npm run package:deb                       # dist/sovcomms_<version>_<arch>.deb
 *   node bin/run-ts.mjs scripts/package-deb.ts --dist DIR --out DIR   # from an existing build
 *
 * Layout (Debian Policy 9.1, the FHS): /usr/lib/sovcomms (the app), /usr/bin/sovcomms (a shell
 * wrapper), /lib/systemd/system/sovcomms.service, /etc/sovcomms/sovcomms.env (a conffile of
 * SOVCOMMS_* settings the unit and the wrapper read), /var/lib/sovcomms (made by postinst).
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemdUnit } from '../server/cli/service.ts';
import { OWNED } from './build.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const APP_DIR = '/usr/lib/sovcomms';
export const DATA_DIR = '/var/lib/sovcomms';
export const ENV_FILE = '/etc/sovcomms/sovcomms.env';
export const UNIT_PATH = '/lib/systemd/system/sovcomms.service';
const USER = 'sovcomms';

/**
 * Production dependencies the compiled app never loads: tsx (and esbuild under it) is the
 * TypeScript loader of a checkout; the compiled entry and the worker boot file skip it for `.js`.
 */
const NOT_AT_RUN_TIME = new Set(['tsx']);
/**
 * Build leftovers inside native packages: the sources, the object files and the static library
 * node-gyp linked from. The `.node` files beside them are all that is loaded.
 */
const PRUNE = [
  /^better-sqlite3\/(?:deps|src)$/,
  /\/build\/Release\/(?:obj|obj\.target|\.deps)$/,
  /\/build\/Release\/[^/]+\.a$/,
  /\/build\/Release\/test_extension\.node$/,
  /\/build\/(?:Makefile|config\.gypi|[^/]+\.mk)$/,
];

interface LockEntry {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/**
 * The folders under node_modules the app needs: the closure of package.json's dependencies
 * (less NOT_AT_RUN_TIME), resolved the way Node resolves them (the nearest node_modules up the
 * tree), read from package-lock.json; optional ones only where this machine installed them.
 */
export function productionPackages(root = ROOT): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const seen = new Set<string>();
  const resolve = (from: string, name: string): string | undefined => {
    for (let dir = from; ;) {
      const cand = `${dir ? `${dir}/` : ''}node_modules/${name}`;
      if (lock.packages[cand]) return cand;
      if (!dir) return undefined;
      const i = dir.lastIndexOf('/node_modules/');
      dir = i < 0 ? '' : dir.slice(0, i);
    }
  };
  const visit = (from: string, deps: Record<string, string>, optional: boolean) => {
    for (const name of Object.keys(deps)) {
      const at = resolve(from, name);
      if (!at) {
        if (optional) continue;
        throw new Error(`package-lock.json has no ${name} (needed from ${from || 'package.json'}): run npm install`);
      }
      if (seen.has(at)) continue;
      if (!fs.existsSync(path.join(root, at))) {
        if (optional) continue;
        throw new Error(`${at} is not installed: run npm install`);
      }
      seen.add(at);
      const e = lock.packages[at];
      visit(at, e.dependencies ?? {}, false);
      visit(at, e.optionalDependencies ?? {}, true);
    }
  };
  visit('', Object.fromEntries(Object.entries(pkg.dependencies).filter(([n]) => !NOT_AT_RUN_TIME.has(n))), false);
  return [...seen].sort();
}

/** Copies a package folder without its nested node_modules (those are packages of their own) and without PRUNE's leftovers. */
function copyPackage(src: string, dst: string, rel: string): void {
  fs.mkdirSync(dst, { recursive: true });
  for (const e of fs.readdirSync(src, { withFileTypes: true })) {
    const r = `${rel}/${e.name}`;
    if (e.name === 'node_modules' || PRUNE.some((p) => p.test(r.replace(/^node_modules\//, '')))) continue;
    const s = path.join(src, e.name);
    const d = path.join(dst, e.name);
    if (e.isDirectory()) copyPackage(s, d, r);
    else if (e.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(s), d);
    else if (e.isFile()) fs.copyFileSync(s, d);
  }
}

/**
 * The production node_modules, copied once per (lock file, Node ABI, architecture, this script)
 * into dist/.deb-cache/ and reused by later builds: copying it is most of a cold build.
 */
function cachedNodeModules(arch: string, log: (l: string) => void): string {
  const h = crypto.createHash('sha256');
  h.update(fs.readFileSync(path.join(ROOT, 'package-lock.json')));
  h.update(fs.readFileSync(fileURLToPath(import.meta.url)));
  h.update(`${process.versions.modules}\0${arch}`);
  const dir = path.join(ROOT, 'dist', '.deb-cache', `node_modules-${h.digest('hex').slice(0, 16)}`);
  if (fs.existsSync(path.join(dir, '.complete'))) return dir;
  const started = Date.now();
  fs.rmSync(path.join(ROOT, 'dist', '.deb-cache'), { recursive: true, force: true });
  const tmp = `${dir}.tmp-${process.pid}`;
  const pkgs = productionPackages();
  for (const p of pkgs) copyPackage(path.join(ROOT, p), path.join(tmp, p.replace(/^node_modules\//, '')), p);
  fs.writeFileSync(path.join(tmp, '.complete'), pkgs.join('\n') + '\n');
  fs.renameSync(tmp, dir);
  log(`production node_modules: ${pkgs.length} packages copied in ${((Date.now() - started) / 1000).toFixed(1)} s (cached in ${path.relative(ROOT, dir)})`);
  return dir;
}

function debianVersion(v: string): string {
  // Debian Policy 5.6.12: a semver pre-release (1.0.0-rc.1) sorts before the release with "~".
  return v.replace('-', '~');
}

/**
 * The runtime the native addons were compiled for: Node's ABI changes with its major version, so
 * the package depends on this build machine's major (Debian's nodejs is versioned like 20.19.2).
 */
function nodeDepends(): string {
  const major = Number(process.versions.node.split('.')[0]);
  const floor = major === 20 ? '20.19' : major === 22 ? '22.12' : String(major);
  return `nodejs (>= ${floor}), nodejs (<< ${major + 1})`;
}

const WRAPPER = `#!/bin/sh
# sovcomms: the appliance's command line (Debian package). Reads the settings the service reads;
# as root, runs as the service's user so the data dir keeps one owner.
set -e
here=$(dirname "$(readlink -f "$0")")
app="$here/../lib/sovcomms"
given="\${SOVCOMMS_DATA_DIR:-}"
if [ -r "$here/../../etc/sovcomms/sovcomms.env" ]; then set -a; . "$here/../../etc/sovcomms/sovcomms.env"; set +a; fi
SOVCOMMS_DATA_DIR="\${given:-${DATA_DIR}}"
export SOVCOMMS_DATA_DIR
if [ "$(id -u)" = 0 ] && [ -z "\${SOVCOMMS_RUN_AS_ROOT:-}" ] && id -u ${USER} >/dev/null 2>&1; then
  exec runuser -u ${USER} -- env SOVCOMMS_DATA_DIR="$SOVCOMMS_DATA_DIR" node "$app/bin/sovcomms.js" "$@"
fi
exec node "$app/bin/sovcomms.js" "$@"
`;

const ENV_TEMPLATE = `# Settings of the sovcomms service and the sovcomms command (KEY=value, read by systemd and /bin/sh).
# README "Configuration" names them; other settings go in ${DATA_DIR}/config.json. The data dir
# is fixed (${DATA_DIR}, the unit's only writable path). After a change: systemctl restart sovcomms
# SOVCOMMS_HOST=0.0.0.0
# SOVCOMMS_PORT=8443
# SOVCOMMS_PRIMARY_HOST=pbx.example.org
# SOVCOMMS_LOG_LEVEL=info
`;

// Maintainer scripts (Debian Policy 6, 10.9): $DPKG_ROOT prefixes every path, so dpkg
// --root/--force-script-chrootless (and the test's throwaway root) work. The data is removed on
// purge only.
const POSTINST = `#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! grep -q '^${USER}:' "$DPKG_ROOT/etc/passwd" 2>/dev/null; then
    useradd \${DPKG_ROOT:+--prefix "$DPKG_ROOT"} --system --user-group --home-dir ${DATA_DIR} --no-create-home --shell /usr/sbin/nologin ${USER}
  fi
  uid=$(awk -F: '$1 == "${USER}" { print $3 }' "$DPKG_ROOT/etc/passwd")
  gid=$(awk -F: '$1 == "${USER}" { print $4 }' "$DPKG_ROOT/etc/passwd")
  mkdir -p "$DPKG_ROOT${DATA_DIR}"
  chown "$uid:$gid" "$DPKG_ROOT${DATA_DIR}"
  chmod 0700 "$DPKG_ROOT${DATA_DIR}"
  if command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    systemctl enable sovcomms.service >/dev/null 2>&1 || true
    if [ -d "$DPKG_ROOT/run/systemd/system" ]; then systemctl restart sovcomms.service || true; fi
  fi
fi
exit 0
`;

const PRERM = `#!/bin/sh
set -e
if command -v systemctl >/dev/null 2>&1; then
  case "$1" in
    remove|deconfigure) systemctl disable --now sovcomms.service >/dev/null 2>&1 || true ;;
    upgrade) systemctl stop sovcomms.service >/dev/null 2>&1 || true ;;
  esac
fi
exit 0
`;

const POSTRM = `#!/bin/sh
set -e
case "$1" in
  remove)
    if command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
    ;;
  purge)
    # The data (database, keys, transcripts, uploads) goes with purge only; the user too.
    rm -rf "$DPKG_ROOT${DATA_DIR}"
    rm -rf "$DPKG_ROOT/etc/sovcomms"
    if grep -q '^${USER}:' "$DPKG_ROOT/etc/passwd" 2>/dev/null; then
      userdel \${DPKG_ROOT:+--prefix "$DPKG_ROOT"} ${USER} >/dev/null 2>&1 || true
    fi
    if command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
    ;;
esac
exit 0
`;

function write(file: string, text: string, mode = 0o644): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text, { mode });
  fs.chmodSync(file, mode);
}

function duKiB(dir: string): number {
  let bytes = 0;
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) bytes += fs.statSync(p).size;
    }
  };
  walk(dir);
  return Math.ceil(bytes / 1024);
}

export interface DebOptions {
  /** A finished `npm run build` output (default dist/). */
  dist?: string;
  /** Where the .deb goes (default dist/). */
  out?: string;
  log?: (l: string) => void;
}

/** Builds the package; returns the path of the .deb. */
export function packageDeb(o: DebOptions = {}): string {
  const log = o.log ?? console.log;
  const started = Date.now();
  const dist = path.resolve(o.dist ?? path.join(ROOT, 'dist'));
  const out = path.resolve(o.out ?? path.join(ROOT, 'dist'));
  if (!fs.existsSync(path.join(dist, 'bin', 'sovcomms.js'))) throw new Error(`${dist} has no compiled server: run npm run build first`);
  const distPkg = JSON.parse(fs.readFileSync(path.join(dist, 'package.json'), 'utf8')) as { name: string; version: string };
  const arch = execFileSync('dpkg', ['--print-architecture']).toString().trim();
  const version = debianVersion(distPkg.version);

  const stage = fs.mkdtempSync(path.join(ROOT, 'dist', '.deb-stage-'));
  try {
    const app = path.join(stage, APP_DIR);
    fs.mkdirSync(app, { recursive: true });
    // The compiled app: what build() owns in dist/, plus the console's static files if built.
    for (const name of [...OWNED, 'console']) {
      const src = path.join(dist, name);
      if (fs.existsSync(src)) fs.cpSync(src, path.join(app, name), { recursive: true });
    }
    fs.copyFileSync(path.join(ROOT, 'README.md'), path.join(app, 'README.md'));
    // Hard links into the cache: the same files, no second copy of 40 MB per build.
    execFileSync('cp', ['-al', cachedNodeModules(arch, log), path.join(app, 'node_modules')]);
    fs.rmSync(path.join(app, 'node_modules', '.complete'));

    write(path.join(stage, 'usr/bin/sovcomms'), WRAPPER, 0o755);
    write(
      path.join(stage, UNIT_PATH),
      systemdUnit({
        user: USER,
        dataDir: DATA_DIR,
        execStart: `/usr/bin/node ${APP_DIR}/bin/sovcomms.js serve --data-dir ${DATA_DIR}`,
        workingDirectory: APP_DIR,
        environmentFile: ENV_FILE,
        documentation: `file://${APP_DIR}/README.md`,
      }),
    );
    write(path.join(stage, ENV_FILE), ENV_TEMPLATE);

    const control = path.join(stage, 'DEBIAN');
    write(
      path.join(control, 'control'),
      [
        `Package: ${distPkg.name}`,
        `Version: ${version}`,
        `Architecture: ${arch}`,
        'Maintainer: Sovereign Communications Appliance maintainers <root@localhost>',
        `Installed-Size: ${duKiB(stage)}`,
        `Depends: ${nodeDepends()}, libc6, libstdc++6, passwd, util-linux`,
        'Recommends: softhsm2, openssl',
        'Section: net',
        'Priority: optional',
        'Description: Sovereign Communications Appliance (headless server)',
        ' On-prem, multi-tenant AI voice (SIP bridge), OIDC provider, EU wallet issuer and',
        ' verifier, trusted lists and webhooks, as a systemd service. Server only: the desktop',
        ' (Electron) build is packaged separately.',
        '',
      ].join('\n'),
    );
    write(path.join(control, 'conffiles'), `${ENV_FILE}\n`);
    write(path.join(control, 'postinst'), POSTINST, 0o755);
    write(path.join(control, 'prerm'), PRERM, 0o755);
    write(path.join(control, 'postrm'), POSTRM, 0o755);

    fs.mkdirSync(out, { recursive: true });
    const deb = path.join(out, `${distPkg.name}_${version}_${arch}.deb`);
    // --root-owner-group: root:root in the archive without fakeroot; xz -1: a tenth of the default
    // level's time for a few per cent more size.
    execFileSync('dpkg-deb', ['--root-owner-group', '-Zxz', '-z1', '--build', stage, deb], { stdio: ['ignore', 'ignore', 'inherit'] });
    log(`${path.relative(process.cwd(), deb)}: ${(fs.statSync(deb).size / 1e6).toFixed(1)} MB, built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return deb;
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  packageDeb({ dist: opt('--dist'), out: opt('--out') });
}
