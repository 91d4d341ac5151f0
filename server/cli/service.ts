import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, str, UsageError } from '../cli-args.ts';
import { defaultDataDir } from '../config.ts';
import type { CliIo } from './io.ts';
import type { CoreCommand } from './command.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const UNIT = 'sovcomms.service';

export interface UnitOptions {
  user: string;
  dataDir: string;
  /** The command systemd runs (absolute paths). */
  execStart: string;
  workingDirectory: string;
  /** An optional `KEY=value` file of settings read before start (the Debian package's /etc/sovcomms/sovcomms.env). */
  environmentFile?: string;
  /** Where the Documentation= line points (default the README beside the working directory). */
  documentation?: string;
}

/**
 * The systemd unit of a headless appliance: its own unprivileged user, the data dir the only
 * writable place (ProtectSystem=strict), restarted on failure, no privilege escalation.
 */
export function systemdUnit(o: UnitOptions): string {
  return `[Unit]
Description=Sovereign Communications Appliance
Documentation=${o.documentation ?? `file://${o.workingDirectory}/README.md`}
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=${o.user}
Group=${o.user}
Environment=SOVCOMMS_DATA_DIR=${o.dataDir}
Environment=NODE_ENV=production
${o.environmentFile ? `EnvironmentFile=-${o.environmentFile}\n` : ''}WorkingDirectory=${o.workingDirectory}
ExecStart=${o.execStart}
Restart=on-failure
RestartSec=5s
TimeoutStopSec=30s
# Hardening: nothing but the data dir is writable, no new privileges, no kernel or device access.
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=${o.dataDir}
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RestrictNamespaces=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
UMask=0077
# SIP on 5060 and HTTPS on 443 need no root: the capability alone.
AmbientCapabilities=CAP_NET_BIND_SERVICE
CapabilityBoundingSet=CAP_NET_BIND_SERVICE

[Install]
WantedBy=multi-user.target
`;
}

function run(io: CliIo, cmd: string, args: string[], dry: boolean): void {
  io.err(`${dry ? 'would run' : 'running'}: ${cmd} ${args.join(' ')}`);
  if (!dry) execFileSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * `sovcomms service install|uninstall`: writes the unit under `--root` (default `/`; a test passes a
 * temporary directory and nothing outside it is touched), makes the user and the data dir, and
 * enables and starts it. `--dry-run` (or `--print`) only prints the unit and the commands. With a
 * `--root` other than `/` the system commands (useradd, systemctl) are printed, not run.
 */
export const serviceCommand: CoreCommand = {
  opens: 'nothing',
  summary: 'A systemd service for a headless machine',
  usage: ['service install [--user U] [--data-dir DIR] [--root PREFIX] [--no-enable] [--dry-run|--print]', 'service uninstall [--root PREFIX] [--dry-run]'],
  changes: false,
  async run(args, io) {
    const [sub, ...rest] = args;
    const { values } = parse(
      rest,
      {
        user: { type: 'string' },
        'data-dir': { type: 'string' },
        root: { type: 'string' },
        'no-enable': { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        print: { type: 'boolean' },
      },
      0,
    );
    const root = path.resolve(str(values.root) ?? '/');
    const system = root === '/';
    const dry = values['dry-run'] === true || values.print === true;
    const unitPath = path.join(root, 'etc/systemd/system', UNIT);
    if (sub === 'install') {
      const user = str(values.user) ?? 'sovcomms';
      if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(user)) throw new UsageError(`--user: not a user name: ${user}`);
      const dataDir = path.resolve(str(values['data-dir']) ?? (system ? '/var/lib/sovcomms' : defaultDataDir()));
      const compiled = fs.existsSync(path.join(ROOT, 'dist/bin/sovcomms.js'));
      const entry = compiled ? path.join(ROOT, 'dist/bin/sovcomms.js') : path.join(ROOT, 'bin/sovcomms.mjs');
      const unit = systemdUnit({ user, dataDir, execStart: `${process.execPath} ${entry} serve --data-dir ${dataDir}`, workingDirectory: ROOT });
      if (dry) {
        io.out(unit);
        io.err(`would write ${unitPath}`);
      } else {
        fs.mkdirSync(path.dirname(unitPath), { recursive: true });
        fs.writeFileSync(unitPath, unit, { mode: 0o644 });
        io.err(`wrote ${unitPath}`);
      }
      const sysDry = dry || !system;
      run(io, 'useradd', ['--system', '--home-dir', dataDir, '--no-create-home', '--shell', '/usr/sbin/nologin', user], sysDry);
      if (!dry) fs.mkdirSync(path.join(root, path.relative('/', dataDir)), { recursive: true, mode: 0o700 });
      run(io, 'chown', ['-R', `${user}:${user}`, dataDir], sysDry);
      run(io, 'systemctl', ['daemon-reload'], sysDry);
      if (values['no-enable'] !== true) run(io, 'systemctl', ['enable', '--now', UNIT], sysDry);
      return 0;
    }
    if (sub === 'uninstall') {
      const sysDry = dry || !system;
      run(io, 'systemctl', ['disable', '--now', UNIT], sysDry);
      if (dry) io.err(`would remove ${unitPath}`);
      else if (fs.existsSync(unitPath)) {
        fs.rmSync(unitPath);
        io.err(`removed ${unitPath} (the data dir and the user are kept)`);
      } else io.err(`no ${unitPath}`);
      run(io, 'systemctl', ['daemon-reload'], sysDry);
      return 0;
    }
    throw new UsageError(sub ? `service: unknown subcommand ${sub}` : 'service: subcommand required (install, uninstall)');
  },
};
