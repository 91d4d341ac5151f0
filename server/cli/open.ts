import { bootstrap, openCore, type CoreServices } from '../core.ts';
import { hostServices, makePaths, PluginHost } from '../plugin-host.ts';
import type { AnyPlugin, CliContext } from '../plugin.ts';
import { AUDIT_WRITER } from '../core-services.ts';
import type { CliIo } from './io.ts';

/** The plugins a run may load: given (tests), else the built-in ones, each loaded on demand. */
export interface PluginSource {
  /** The plugin whose manifest adds this command, if any. */
  owner(command: string): Promise<AnyPlugin | undefined>;
  byName(name: string): Promise<AnyPlugin | undefined>;
  all(): Promise<AnyPlugin[]>;
}

export function givenPlugins(list: AnyPlugin[]): PluginSource {
  return {
    owner: async (command) => list.find((p) => p.cli?.[command]),
    byName: async (name) => list.find((p) => p.name === name),
    all: async () => list,
  };
}

/** The built-in plugins (plugins/index.ts): a command loads its own plugin, not all twelve. */
export function builtinPluginSource(): PluginSource {
  const catalog = import('../../plugins/index.ts');
  const byName = async (name: string) => (await catalog).BUILTIN_PLUGINS.find((p) => p.name === name)?.load();
  return {
    owner: async (command) => {
      const entry = (await catalog).BUILTIN_PLUGINS.find((p) => p.commands.includes(command));
      return entry ? byName(entry.name) : undefined;
    },
    byName,
    all: async () => (await catalog).builtinPlugins(),
  };
}

/**
 * The named plugins and everything they depend on (`dependsOn`, followed to the end): what a
 * command sets up. A dependency the source lacks is left for the host to report by name.
 */
export async function withDependencies(source: PluginSource, names: string[]): Promise<AnyPlugin[]> {
  const out = new Map<string, AnyPlugin>();
  const queue = [...names];
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    if (name === 'core' || out.has(name)) continue;
    const p = await source.byName(name);
    if (!p) continue;
    out.set(name, p);
    queue.push(...(p.dependsOn ?? []));
  }
  return [...out.values()];
}

/** What the first start says, once: the primary tenant and the generated administrator password. */
export function firstRunLines({ host, user, password }: { host: string; user: string; password: string }): string[] {
  return [
    `First start: primary tenant ${host}, administrator "${user}".`,
    `  password: ${password}`,
    `  (shown once; change it with: sovcomms user passwd ${user})`,
  ];
}

export interface Opened {
  core: CoreServices;
  host: PluginHost;
  ctx(plugin: string | null, io: CliIo): CliContext;
  close(): void;
}

/**
 * Opens the store for a CLI command: core migrations and those of the plugins given, their events
 * declared and their `setup` run (the very services the server would build for them).
 */
export async function openForCli(dataDir: string, io: CliIo, plugins: AnyPlugin[]): Promise<Opened> {
  const core = openCore({ dataDir });
  // A fresh data dir is initialised exactly as the first `serve` does it (primary tenant, first
  // administrator, secrets), so every command works from the first one on. The password goes to
  // stderr: stdout may be data a script reads (`--json`).
  try {
    const first = await bootstrap(core);
    if (first) for (const line of firstRunLines(first)) io.err(line);
  } catch (e) {
    core.db.close();
    throw e;
  }
  const disabled = new Set(core.config.disabledPlugins);
  const host = new PluginHost(
    plugins.filter((p) => !disabled.has(p.name)),
    hostServices(core),
  );
  try {
    host.configure();
    host.migrateAll();
    host.declareEvents();
    await host.setupAll();
    core.audit.target = host.provided(AUDIT_WRITER);
  } catch (e) {
    core.db.close();
    throw e;
  }
  return {
    core,
    host,
    ctx: (plugin, io) => ({
      dataDir: core.config.dataDir,
      core: core.config,
      config: plugin ? host.context(plugin)?.config : undefined,
      db: core.db,
      tenants: core.tenants,
      users: core.users,
      auth: core.auth,
      keys: core.keys,
      secrets: core.secrets,
      jobs: core.jobs,
      events: core.events,
      audit: core.audit,
      clock: core.clock,
      paths: makePaths(core.config.dataDir),
      log: core.log,
      out: io.out,
      err: io.err,
      readStdin: io.stdin,
    }),
    close: () => core.db.close(),
  };
}
