import path from 'node:path';
import { UsageError, withParses } from './cli-args.ts';
import { defaultDataDir } from './config.ts';
import { ConfigError, MigrationError, AppError } from './errors.ts';
import type { AnyPlugin, CliCommand } from './plugin.ts';
import { BUILD } from './build-info.ts';
import { schemaVersionsOnDisk } from './store/migrate.ts';
import type { CoreCommand } from './cli/command.ts';
import { processIo, type CliIo } from './cli/io.ts';
import { builtinPluginSource, givenPlugins, openForCli, withDependencies, type PluginSource } from './cli/open.ts';
import { auditCliChange, subcommandIn } from './cli/audit.ts';

export type { CliIo } from './cli/io.ts';

/**
 * The core's commands, in the order `sovcomms help` lists them (the plugins' follow). Each module
 * is loaded when its command runs: `tenant list` compiles none of the others (`serve` alone pulls
 * in HTTPS, `backup` the archive reader, `doctor` the network probes), about a tenth of a command's
 * time on Node 20, which has no compile cache (bench/cli.bench.ts).
 */
const CORE_COMMANDS: Record<string, () => Promise<CoreCommand>> = {
  serve: async () => (await import('./cli/serve.ts')).serveCommand,
  setup: async () => (await import('./cli/setup.ts')).setupCommand,
  tenant: async () => (await import('./cli/tenant.ts')).tenantCommand,
  user: async () => (await import('./cli/user.ts')).userCommand,
  apikey: async () => (await import('./cli/apikey.ts')).apikeyCommand,
  'admin-secret': async () => (await import('./cli/admin-secret.ts')).adminSecretCommand,
  migrate: async () => (await import('./cli/migrate.ts')).migrateCommand,
  doctor: async () => (await import('./cli/doctor.ts')).doctorCommand,
  backup: async () => (await import('./cli/backup.ts')).backupCommand,
  metrics: async () => (await import('./cli/metrics.ts')).metricsCommand,
  service: async () => (await import('./cli/service.ts')).serviceCommand,
};

/** The plugin that every command loads beside its own: it writes the audit rows of changes. */
const AUDIT_PLUGIN = 'audit';

/** Every usage line, core commands first, then each plugin's: one table, from the declarations. */
export async function cliUsage(plugins?: AnyPlugin[]): Promise<string[]> {
  const list = plugins ?? (await builtinPluginSource().all());
  const core = await Promise.all(Object.values(CORE_COMMANDS).map((load) => load()));
  const commands: Pick<CliCommand, 'usage'>[] = [...core, ...list.flatMap((p) => Object.values(p.cli ?? {}))];
  return commands.flatMap((c) => c.usage);
}

async function help(io: CliIo, plugins: PluginSource): Promise<void> {
  io.out('usage: sovcomms <command> [options]   (every command takes --data-dir DIR; default ./data or $SOVCOMMS_DATA_DIR)');
  for (const l of await cliUsage(await plugins.all())) io.out(`  sovcomms ${l}`);
}

/**
 * Runs one CLI invocation; returns the exit code (0 ok, 1 failure, 2 usage). A command loads and
 * sets up only what it runs on: a plugin's command its plugin and that plugin's dependencies, a
 * core command the audit plugin (`migrate` and `doctor` every plugin), plus the core.
 */
export async function main(argv: string[], io: CliIo = processIo, opts: { plugins?: AnyPlugin[] } = {}): Promise<number> {
  const [cmd, ...rest] = argv;
  const source = opts.plugins ? givenPlugins(opts.plugins) : builtinPluginSource();
  try {
    if (!cmd || cmd === 'help' || cmd === '--help' || cmd === '-h') {
      await help(io, source);
      return cmd ? 0 : 2;
    }
    if (cmd === '--version' || cmd === 'version') {
      io.out(BUILD);
      return 0;
    }
    const core = Object.hasOwn(CORE_COMMANDS, cmd) ? await CORE_COMMANDS[cmd]!() : undefined;
    if (core?.opens === 'nothing') return await core.run(rest, io);
    const dataDir = dataDirOf(rest);
    let plugins: AnyPlugin[];
    let run: (args: string[], o: Awaited<ReturnType<typeof openForCli>>) => Promise<number>;
    let command: CliCommand<unknown>;
    if (core) {
      plugins = core.opens === 'all' ? await source.all() : await withDependencies(source, [AUDIT_PLUGIN]);
      command = core;
      // Read before the store is opened: opening it applies what is pending (doctor reports that).
      const schemaBefore = core.opens === 'all' ? schemaVersionsOnDisk(dataDir) : new Map<string, number>();
      run = (args, o) => core.run(args, o.ctx(null, io), { plugins, schemaBefore });
    } else {
      const owner = await source.owner(cmd);
      const pluginCommand = owner?.cli?.[cmd];
      if (!owner || !pluginCommand) throw new UsageError(`unknown command: ${cmd} (see sovcomms help)`);
      plugins = await withDependencies(source, [owner.name, AUDIT_PLUGIN]);
      command = pluginCommand;
      run = (args, o) => pluginCommand.run(args, o.ctx(owner.name, io), o.host.services(owner.name));
    }
    const o = await openForCli(dataDir, io, plugins);
    try {
      const args = stripDataDir(rest);
      if (subcommandIn(command.allEvents ?? false, args)) {
        for (const p of await source.all())
          if (!plugins.some((q) => q.name === p.name)) for (const [name, schema] of Object.entries(p.events ?? {})) o.core.events.declare(p.name, name, schema);
      }
      const { result: code, parses } = await withParses(() => run(args, o));
      if (code === 0) auditCliChange(o, cmd, command, args, parses);
      return code;
    } finally {
      o.close();
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`sovcomms: ${e.message}`);
      return 2;
    }
    if (e instanceof ConfigError || e instanceof MigrationError || e instanceof AppError) {
      io.err(`sovcomms: ${e.message}`);
      return 1;
    }
    io.err(`sovcomms: ${(e as Error)?.message ?? String(e)}`);
    return 1;
  }
}

/** `--data-dir` may stand anywhere in the arguments. */
function dataDirOf(args: string[]): string {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--data-dir') {
      const v = args[i + 1];
      if (!v || v.startsWith('--')) throw new UsageError('--data-dir needs a directory');
      return path.resolve(v);
    }
    if (a.startsWith('--data-dir=')) return path.resolve(a.slice('--data-dir='.length));
  }
  return defaultDataDir();
}

function stripDataDir(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--data-dir') {
      i++;
      continue;
    }
    if (args[i]!.startsWith('--data-dir=')) continue;
    out.push(args[i]!);
  }
  return out;
}
