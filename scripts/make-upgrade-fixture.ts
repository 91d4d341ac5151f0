/**
 * Makes test/fixtures/upgrade/<commit>.tar.gz: a data dir written by a previous release, with
 * real rows in every plugin, for test/ops/upgrade.test.ts to start today's release on.
 *
 *   node bin/run-ts.mjs scripts/make-upgrade-fixture.ts [COMMIT]     # default d91eb23
 *
 * The release's tree is exported from git history into a temporary directory (`git archive`: a
 * plain copy, so no worktree is registered in the repository and none is left behind), with this
 * checkout's node_modules linked in. scripts/make-upgrade-fixture.writer.ts is copied into it and
 * run there: that release's appliance, on a fresh data dir, driven through its HTTP API with its
 * own test helpers (a real SIPp call and the engine fake for the call and its transcript). The data
 * dir and the writer's manifest.json (the ids and credentials it made) are packed together.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_RELEASE = 'd91eb23';
const WRITER = 'scripts/make-upgrade-fixture.writer.ts';
const TRUSTED_LISTS = path.resolve(ROOT, '..', 'shared', 'fixtures', 'trusted-lists', '2026-08');
const MAX_BYTES = 2_000_000;

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 30 }).toString();
}

export function makeUpgradeFixture(commit = DEFAULT_RELEASE, log: (l: string) => void = console.log): string {
  const full = git(['rev-parse', '--verify', `${commit}^{commit}`]).trim();
  const short = full.slice(0, 7);
  if (!fs.existsSync(path.join(TRUSTED_LISTS, 'eu-lotl.xml'))) throw new Error(`no trusted-list snapshot at ${TRUSTED_LISTS}`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `sovcomms-upgrade-${short}-`));
  try {
    const tree = path.join(tmp, 'tree');
    fs.mkdirSync(tree);
    execFileSync('sh', ['-c', `git archive --format=tar "${full}" | tar -x -C "${tree}"`], { cwd: ROOT, stdio: 'inherit' });
    fs.symlinkSync(fs.realpathSync(path.join(ROOT, 'node_modules')), path.join(tree, 'node_modules'));
    fs.copyFileSync(path.join(ROOT, WRITER), path.join(tree, WRITER));
    const out = path.join(tmp, 'out');
    const dataDir = path.join(out, 'data');
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    log(`running release ${short} on a fresh data dir (a SIPp call, then every plugin's rows)`);
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SOVCOMMS_')) env[k] = v;
    execFileSync(process.execPath, ['bin/run-ts.mjs', WRITER], {
      cwd: tree,
      env: { ...env, UPGRADE_DATA_DIR: dataDir, UPGRADE_TRUSTED_LISTS: TRUSTED_LISTS, SOVCOMMS_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'inherit', 'inherit'],
      timeout: 300_000,
    });
    if (!fs.existsSync(path.join(out, 'manifest.json'))) throw new Error('the writer left no manifest.json');
    fs.writeFileSync(path.join(out, 'release.json'), JSON.stringify({ commit: full, subject: git(['log', '-1', '--format=%s', full]).trim() }, null, 2) + '\n');
    const dest = path.join(ROOT, 'test', 'fixtures', 'upgrade', `${short}.tar.gz`);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    // Fixed owner and times: the same rows make the same archive listing.
    execFileSync(
      'tar',
      [
        '--sort=name',
        '--owner=0',
        '--group=0',
        '--numeric-owner',
        '--mtime=2026-08-10 09:00Z',
        '-czf',
        dest,
        '-C',
        out,
        'release.json',
        'manifest.json',
        'data',
      ],
      {
        stdio: 'inherit',
      },
    );
    const size = fs.statSync(dest).size;
    if (size > MAX_BYTES) throw new Error(`${dest} is ${size} bytes, over ${MAX_BYTES}`);
    log(`${path.relative(ROOT, dest)}: ${(size / 1024).toFixed(0)} KiB`);
    return dest;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) makeUpgradeFixture(process.argv[2]);
