import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_DIR, DATA_DIR, ENV_FILE, packageDeb, productionPackages, UNIT_PATH } from '../../scripts/package-deb.ts';
import { buildOnce, OUT } from '../build/build-once.ts';
import { cleanEnv, ROOT } from '../support/cli.ts';

/**
 * `npm run package:deb`: the package is built once from the shared test build, read back with
 * dpkg-deb (control fields, the unit, what is and is not inside), then installed, removed and
 * purged with the real dpkg into a throwaway root (`--root`, `--force-script-chrootless`: the
 * maintainer scripts run here with DPKG_ROOT set) with fake systemctl/useradd/userdel first on
 * PATH, so the machine's own users and services are never touched. The installed `sovcomms`
 * runs `--version` and `doctor` on a temporary data dir.
 */
const haveDpkg = spawnSync('sh', ['-c', 'command -v dpkg-deb && command -v dpkg'], { stdio: 'ignore' }).status === 0;

let work: string;
let deb: string;
let files: string[];

beforeAll(async () => {
  if (!haveDpkg) return;
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-deb-'));
  await buildOnce();
  deb = packageDeb({ dist: OUT, out: work, log: () => undefined });
  files = execFileSync('dpkg-deb', ['-c', deb], { maxBuffer: 64 << 20 })
    .toString()
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(/\s+/)[5].replace(/^\./, ''));
}, 600_000);

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

const fake = (log: string) => ({
  systemctl: `#!/bin/sh\necho "systemctl $*" >> ${log}\n`,
  // Adds the user to $prefix/etc/passwd like `useradd --prefix` would, without the machine's shadow files.
  useradd: `#!/bin/sh\necho "useradd $*" >> ${log}\nprefix=; prev=; for a; do [ "$prev" = --prefix ] && prefix=$a; prev=$a; name=$a; done\necho "$name:x:990:990::${DATA_DIR}:/usr/sbin/nologin" >> "$prefix/etc/passwd"\necho "$name:x:990:" >> "$prefix/etc/group"\n`,
  userdel: `#!/bin/sh\necho "userdel $*" >> ${log}\nprefix=; prev=; for a; do [ "$prev" = --prefix ] && prefix=$a; prev=$a; name=$a; done\nsed -i "/^$name:/d" "$prefix/etc/passwd" "$prefix/etc/group"\n`,
});

describe.skipIf(!haveDpkg)(
  haveDpkg ? 'the headless Debian package' : 'the headless Debian package (skipped: no dpkg-deb/dpkg, from Debian package dpkg)',
  () => {
    it('is named sovcomms_<version>_<arch>.deb and its control fields say what it needs', () => {
      const version = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
      const arch = execFileSync('dpkg', ['--print-architecture']).toString().trim();
      expect(path.basename(deb)).toBe(`sovcomms_${version}_${arch}.deb`);
      const field = (f: string) => execFileSync('dpkg-deb', ['-f', deb, f]).toString().trim();
      expect(field('Package')).toBe('sovcomms');
      expect(field('Architecture')).toBe(arch);
      expect(field('Depends')).toMatch(/^nodejs \(>= 20\.19\), nodejs \(<< \d+\)/);
      expect(field('Depends')).toContain('libstdc++6');
      expect(field('Recommends')).toContain('softhsm2');
      expect(Number(field('Installed-Size'))).toBeGreaterThan(10_000);
      const info = execFileSync('dpkg-deb', ['-I', deb]).toString();
      for (const s of ['postinst', 'prerm', 'postrm', 'conffiles']) expect(info).toContain(s);
    });

    it('holds the compiled server, production node_modules, the wrapper and the unit service install writes', () => {
      const migrationFiles = ['server', 'plugins'].flatMap((d) =>
        (fs.readdirSync(path.join(ROOT, d), { recursive: true }) as string[]).filter((f) => f.endsWith('.sql')).map((f) => `${APP_DIR}/${d}/${f}`),
      );
      expect(migrationFiles.length).toBeGreaterThan(10);
      for (const f of [
        '/usr/bin/sovcomms',
        UNIT_PATH,
        ENV_FILE,
        `${APP_DIR}/bin/sovcomms.js`,
        `${APP_DIR}/bundle/cli.js`,
        ...migrationFiles,
        `${APP_DIR}/node_modules/better-sqlite3/build/Release/better_sqlite3.node`,
        `${APP_DIR}/node_modules/pkcs11js/build/Release/pkcs11.node`,
        `${APP_DIR}/node_modules/express/package.json`,
      ])
        expect(files, f).toContain(f);
      const unit = execFileSync('sh', ['-c', `dpkg-deb --fsys-tarfile "${deb}" | tar -xOf - .${UNIT_PATH}`]).toString();
      expect(unit).toContain('User=sovcomms');
      expect(unit).toContain(`ReadWritePaths=${DATA_DIR}`);
      expect(unit).toContain(`ExecStart=/usr/bin/node ${APP_DIR}/bin/sovcomms.js serve --data-dir ${DATA_DIR}`);
      expect(unit).toContain(`EnvironmentFile=-${ENV_FILE}`);
      expect(unit).toMatch(/^NoNewPrivileges=yes$/m);
      expect(unit).toMatch(/^ProtectSystem=strict$/m);
    });

    it('has no Electron, no dev dependencies, no tests, no TypeScript sources and no data dir', () => {
      const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
      const shipped = new Set(files.filter((f) => f.endsWith('/package.json')).map((f) => f.slice(APP_DIR.length + 1, -'/package.json'.length)));
      const dev = Object.entries(lock.packages).filter(([k, v]) => k && v.dev && shipped.has(k));
      expect(dev.map(([k]) => k)).toEqual([]);
      expect(files.some((f) => /\/node_modules\/(?:electron|vitest|typescript|tsx|esbuild|playwright-core|vite)\//.test(f))).toBe(false);
      const own = files.filter((f) => f.startsWith(`${APP_DIR}/`) && !f.startsWith(`${APP_DIR}/node_modules/`));
      expect(own.filter((f) => /^\/usr\/lib\/sovcomms\/(?:test|bench|main|renderer|scripts|data)\//.test(f))).toEqual([]);
      expect(own.filter((f) => /\.test\.[jt]s$|(?<!\.d)\.ts$/.test(f))).toEqual([]);
      // Nothing of a data dir: no database, no master key, no tenant files, no private key anywhere.
      expect(files.filter((f) => /(?:appliance\.db|master\.key|\/tenants\/|\.key$|-key\.pem$|\.p12$)/.test(f))).toEqual([]);
      const pems = own.filter((f) => f.endsWith('.pem')).map((f) => `.${f}`);
      const text = execFileSync('sh', ['-c', `dpkg-deb --fsys-tarfile "${deb}" | tar -xOf - ${pems.join(' ')}`]).toString();
      expect(text).not.toContain('PRIVATE KEY');
      expect(files.some((f) => f.startsWith(DATA_DIR))).toBe(false);
      // The closure it ships is what package.json's dependencies need at run time.
      expect(productionPackages()).toContain('node_modules/better-sqlite3');
    });

    // The maintainer scripts chown the data dir to the service user, which only root may do.
    const asRoot = process.getuid?.() === 0;
    it.skipIf(!asRoot)(
      `installs into a throwaway root: user, data dir, unit enabled; the installed sovcomms runs; remove keeps the data, purge deletes it${asRoot ? '' : ' (skipped: needs root)'}`,
      () => {
        const root = path.join(work, 'root');
        const bin = path.join(work, 'fakebin');
        const log = path.join(work, 'calls.log');
        for (const d of ['var/lib/dpkg/info', 'var/lib/dpkg/updates', 'var/lib/dpkg/triggers', 'etc']) fs.mkdirSync(path.join(root, d), { recursive: true });
        for (const f of ['var/lib/dpkg/status', 'var/lib/dpkg/available']) fs.writeFileSync(path.join(root, f), '');
        fs.writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
        fs.writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\n');
        fs.mkdirSync(bin);
        for (const [name, text] of Object.entries(fake(log))) fs.writeFileSync(path.join(bin, name), text, { mode: 0o755 });
        const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}:/usr/sbin:/sbin` };
        const dpkg = (...args: string[]) =>
          execFileSync(
            'dpkg',
            [`--root=${root}`, '--force-script-chrootless', '--force-depends', '--force-not-root', `--log=${path.join(work, 'dpkg.log')}`, ...args],
            {
              env,
              stdio: ['ignore', 'pipe', 'pipe'],
            },
          ).toString();

        dpkg('-i', deb);
        expect(fs.readFileSync(path.join(root, 'etc/passwd'), 'utf8')).toMatch(/^sovcomms:x:990:990:/m);
        const data = path.join(root, DATA_DIR);
        expect(fs.statSync(data).mode & 0o777).toBe(0o700);
        if (process.getuid?.() === 0) expect(fs.statSync(data).uid).toBe(990);
        const calls = () => fs.readFileSync(log, 'utf8');
        expect(calls()).toContain(`useradd --prefix ${root} --system --user-group --home-dir ${DATA_DIR}`);
        expect(calls()).toContain('systemctl daemon-reload');
        expect(calls()).toContain('systemctl enable sovcomms.service');
        expect(fs.existsSync(path.join(root, UNIT_PATH))).toBe(true);

        // The installed command on a temporary data dir (never the machine's /var/lib/sovcomms).
        const dir = path.join(work, 'data');
        const run = (...args: string[]) => {
          const r = spawnSync(path.join(root, 'usr/bin/sovcomms'), [...args, '--data-dir', dir], {
            env: cleanEnv({ SOVCOMMS_DATA_DIR: dir, PATH: env.PATH }),
            encoding: 'utf8',
            timeout: 60_000,
          });
          return { code: r.status, out: `${r.stdout}${r.stderr}` };
        };
        const v = run('--version');
        expect(v.code, v.out).toBe(0);
        expect(v.out.trim()).toMatch(/^\d{8}\.\w+/);
        const doc = run('doctor');
        expect(doc.out).toMatch(/schema core at version \d+, none pending/);
        expect(doc.out).not.toMatch(/migration\(s\) pending/);
        expect(doc.out).toContain(`plugin telephony loaded`);
        expect(fs.existsSync(path.join(dir, 'appliance.db'))).toBe(true);

        // remove: unit disabled and gone, data kept; purge: data and user gone.
        fs.writeFileSync(path.join(data, 'appliance.db'), 'kept');
        dpkg('-r', 'sovcomms');
        expect(calls()).toContain('systemctl disable --now sovcomms.service');
        expect(fs.existsSync(path.join(root, UNIT_PATH))).toBe(false);
        expect(fs.existsSync(path.join(root, APP_DIR))).toBe(false);
        expect(fs.readFileSync(path.join(data, 'appliance.db'), 'utf8')).toBe('kept');
        expect(fs.existsSync(path.join(root, ENV_FILE))).toBe(true);
        dpkg('-P', 'sovcomms');
        expect(fs.existsSync(data)).toBe(false);
        expect(fs.existsSync(path.join(root, ENV_FILE))).toBe(false);
        expect(fs.readFileSync(path.join(root, 'etc/passwd'), 'utf8')).not.toContain('sovcomms');
      },
      120_000,
    );
  },
);
