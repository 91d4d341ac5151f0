import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../server/cli.ts';
import { tempDir } from '../support/server.ts';

/**
 * `sovcomms service install|uninstall` under a temporary root prefix: the unit is written there
 * (never to the real /etc), with the user, the data dir, the restart policy and the hardening; the
 * system commands are printed, not run. `--dry-run` writes nothing.
 */
const root = tempDir('sovcomms-root-');
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' };
  const code = await main(args, io);
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('sovcomms service', () => {
  const unitPath = path.join(root, 'etc/systemd/system/sovcomms.service');
  it('--dry-run prints the unit and the commands, writes nothing', async () => {
    const r = await cli(['service', 'install', '--root', root, '--dry-run', '--data-dir', '/var/lib/sovcomms']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('ExecStart=');
    expect(r.err).toContain('would run: systemctl enable --now sovcomms.service');
    expect(fs.existsSync(unitPath)).toBe(false);
  });

  it('install writes a hardened unit under the root prefix; uninstall removes it', async () => {
    const r = await cli(['service', 'install', '--root', root, '--user', 'sovsvc', '--data-dir', '/var/lib/sovcomms']);
    expect(r.code).toBe(0);
    const unit = fs.readFileSync(unitPath, 'utf8');
    for (const line of [
      'User=sovsvc',
      'Environment=SOVCOMMS_DATA_DIR=/var/lib/sovcomms',
      'Restart=on-failure',
      'NoNewPrivileges=yes',
      'ProtectSystem=strict',
      'ReadWritePaths=/var/lib/sovcomms',
      'WantedBy=multi-user.target',
    ])
      expect(unit.split('\n')).toContain(line);
    expect(unit).toMatch(/^ExecStart=\S+node\S* \S+sovcomms\.(mjs|js) serve --data-dir \/var\/lib\/sovcomms$/m);
    // The data dir is made under the prefix; user and systemctl only printed (not the real system).
    expect(fs.statSync(path.join(root, 'var/lib/sovcomms')).mode & 0o777).toBe(0o700);
    expect(r.err).toContain('would run: useradd --system');
    expect(r.err).toContain('would run: systemctl enable --now sovcomms.service');
    const u = await cli(['service', 'uninstall', '--root', root]);
    expect(u.code).toBe(0);
    expect(fs.existsSync(unitPath)).toBe(false);
    expect(u.err).toContain('would run: systemctl disable --now sovcomms.service');
  });

  it('refuses a bad user name and an unknown subcommand (usage, exit 2)', async () => {
    expect((await cli(['service', 'install', '--root', root, '--user', 'Root;rm'])).code).toBe(2);
    expect((await cli(['service', 'restart'])).code).toBe(2);
  });
});
