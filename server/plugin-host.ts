import fs from 'node:fs';
import path from 'node:path';
import type express from 'express';
import { z } from 'zod';
import { parseConfigSection } from './config.ts';
import { migrate } from './store/migrate.ts';
import type { AnyPlugin, PluginContext, PluginHealth, MetricFamily, Paths, ServiceRef } from './plugin.ts';
import type { PreRouterHandler, RouteRegistrar, UpgradeHandler } from './http/route.ts';
import type { Dispatcher } from './http/dispatch.ts';
import { parseAddress, type ParsedAddress } from './http/address.ts';
import type { Tenant } from './tenancy.ts';

export type PluginState = 'loaded' | 'starting' | 'started' | 'failed' | 'stopped' | 'skipped';

export interface PluginStatus {
  name: string;
  state: PluginState;
  required: boolean;
  error?: string;
  health?: PluginHealth;
}

type Services = Omit<PluginContext, 'name' | 'config' | 'provide' | 'use' | 'tryUse' | 'log'> & { log: PluginContext['log'] };

/** The core's doors every plugin context carries, from the core services (the server and the CLI alike). */
export function hostServices(
  core: {
    config: PluginContext['core'];
    db: PluginContext['db'];
    tenants: PluginContext['tenants'];
    users: PluginContext['users'];
    log: PluginContext['log'];
    audit: PluginContext['audit'];
    events: PluginContext['events'];
    jobs: PluginContext['jobs'];
    keys: PluginContext['keys'];
    secrets: PluginContext['secrets'];
    auth: PluginContext['auth'];
    limiter: PluginContext['rateLimit'];
    clock: PluginContext['clock'];
  },
  listening?: PluginContext['listening'],
): Services {
  return {
    core: core.config,
    db: core.db,
    tenants: core.tenants,
    users: core.users,
    log: core.log,
    audit: core.audit,
    events: core.events,
    jobs: core.jobs,
    keys: core.keys,
    secrets: core.secrets,
    auth: core.auth,
    rateLimit: core.limiter,
    clock: core.clock,
    paths: makePaths(core.config.dataDir),
    ...(listening ? { listening } : {}),
  };
}

/** Orders plugins so each comes after what it depends on; unknown or circular dependencies throw. */
export function orderPlugins(plugins: AnyPlugin[]): AnyPlugin[] {
  const byName = new Map(plugins.map((p) => [p.name, p]));
  const out: AnyPlugin[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (p: AnyPlugin, trail: string[]) => {
    const s = state.get(p.name);
    if (s === 'done') return;
    if (s === 'visiting') throw new Error(`plugin dependency cycle: ${[...trail, p.name].join(' -> ')}`);
    state.set(p.name, 'visiting');
    for (const d of p.dependsOn ?? []) {
      if (d === 'core') continue;
      const dep = byName.get(d);
      if (!dep) throw new Error(`plugin ${p.name} depends on ${d}, which is not loaded`);
      visit(dep, [...trail, p.name]);
    }
    state.set(p.name, 'done');
    out.push(p);
  };
  for (const p of plugins) visit(p, []);
  return out;
}

export function makePaths(dataDir: string): Paths {
  return {
    dataDir,
    tenantFile(tenant: Tenant, ...segments: string[]): string {
      for (const s of segments) {
        // Names are server-derived: ids, hashes, fixed words. Refuse anything that could climb.
        if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/.test(s) || s.includes('..')) throw new Error(`unsafe path segment ${JSON.stringify(s)}`);
      }
      if (!/^[a-f0-9]{12}$/.test(tenant.id) && !/^[A-Za-z0-9_-]+$/.test(tenant.id)) throw new Error('unsafe tenant id');
      return path.join(dataDir, 'tenants', tenant.id, ...segments);
    },
  };
}

/**
 * Loads plugins (config, migrations, events, routes), starts them in dependency order and stops
 * them in reverse. A plugin whose start fails is reported by name and reason; the plugins that
 * depend on it are skipped; the rest run.
 */
export class PluginHost {
  readonly order: AnyPlugin[];
  /** Pre-router handlers (RouteRegistrar.preRouter), in registration order. */
  readonly preRouters: { plugin: string; handler: PreRouterHandler; route: string }[] = [];
  /** Upgrade handlers (RouteRegistrar.upgrade), in registration order. */
  readonly upgrades: { plugin: string; address: ParsedAddress; handler: UpgradeHandler }[] = [];
  readonly #status = new Map<string, PluginStatus>();
  readonly #ctx = new Map<string, PluginContext>();
  /** What each plugin's `setup` returned (absent for plugins without one). */
  readonly #services = new Map<string, unknown>();
  readonly #provided = new Map<string, { plugin: string; impl: unknown }>();

  constructor(
    plugins: AnyPlugin[],
    private readonly core: Services,
  ) {
    this.order = orderPlugins(plugins);
    for (const p of this.order) this.#status.set(p.name, { name: p.name, state: 'loaded', required: p.required ?? true });
  }

  /** Validates every plugin's settings (a bad value stops the start naming its path). */
  configure(): void {
    for (const p of this.order) {
      const raw = this.core.core.plugins[p.name] ?? {};
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- AnyPlugin's config schema is any by design (each plugin has its own); parseConfigSection validates against it
      const schema = p.config ?? z.object({}).loose();
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- the parsed settings of the plugin's own schema, typed by the plugin
      const config = parseConfigSection(schema, raw, `plugins.${p.name}`);
      this.#ctx.set(p.name, this.makeContext(p, config));
    }
  }

  migrateAll(): void {
    for (const p of this.order) if (p.migrations?.length) migrate(this.core.db, p.name, p.migrations, this.core.clock);
  }

  declareEvents(): void {
    for (const p of this.order) for (const [name, schema] of Object.entries(p.events ?? {})) this.core.events.declare(p.name, name, schema);
  }

  /**
   * Runs every plugin's `setup` once, in dependency order (so `ctx.use` finds what a dependency
   * provided). A failing setup stops the whole start, naming the plugin: it means bad settings or
   * unreadable files, which the operator must fix, not a plugin to run without.
   */
  async setupAll(): Promise<void> {
    for (const p of this.order) {
      if (!p.setup) continue;
      try {
        this.#services.set(p.name, await p.setup(this.#ctx.get(p.name)!));
      } catch (e) {
        throw new Error(`plugin ${p.name}: setup failed: ${(e as Error)?.message ?? String(e)}`, { cause: e });
      }
    }
  }

  /** What a plugin's `setup` built (the CLI hands it to the plugin's commands). */
  services(name: string): unknown {
    return this.#services.get(name);
  }

  /** Express's static handler comes from the server: the CLI, which opens a host too, loads no Express. */
  registerRoutes(dispatcher: Dispatcher, app: express.Express, serveStatic: typeof express.static): void {
    for (const p of this.order) {
      if (!p.routes) continue;
      const ctx = this.#ctx.get(p.name)!;
      const r: RouteRegistrar = {
        add: (def) => dispatcher.add(p.name, def as never),
        static: (prefix, dir) => {
          app.use(prefix, serveStatic(dir, { dotfiles: 'deny', index: false, redirect: false, fallthrough: true }));
        },
        preRouter: (handler) => {
          this.preRouters.push({ plugin: p.name, handler, route: `pre-router:${p.name}` });
        },
        upgrade: (address, handler) => {
          this.upgrades.push({ plugin: p.name, address: parseAddress(address), handler });
        },
      };
      p.routes(r, this.#services.get(p.name), ctx);
    }
  }

  /** A service some plugin provided (the core's own doors, like ctx.audit, use this). */
  provided<T>(ref: ServiceRef<T>): T | undefined {
    return this.#provided.get(ref.name)?.impl as T | undefined;
  }

  context(name: string): PluginContext | undefined {
    return this.#ctx.get(name);
  }

  async startAll(): Promise<void> {
    for (const p of this.order) {
      const st = this.#status.get(p.name)!;
      const failedDep = (p.dependsOn ?? []).find((d) => d !== 'core' && this.#status.get(d)?.state !== 'started');
      if (failedDep) {
        st.state = 'skipped';
        st.error = `dependency ${failedDep} is not running`;
        this.core.log.error({ plugin: p.name, reason: st.error }, 'plugin skipped');
        continue;
      }
      st.state = 'starting';
      try {
        await p.start?.(this.#services.get(p.name), this.#ctx.get(p.name)!);
        st.state = 'started';
      } catch (e) {
        st.state = 'failed';
        st.error = (e as Error)?.message ?? String(e);
        this.core.log.error({ plugin: p.name, reason: st.error }, 'plugin failed to start');
      }
    }
  }

  async stopAll(): Promise<void> {
    for (const p of [...this.order].reverse()) {
      const st = this.#status.get(p.name)!;
      if (st.state !== 'started') continue;
      try {
        await p.stop?.(this.#services.get(p.name));
      } catch (e) {
        this.core.log.error({ plugin: p.name, err: e }, 'plugin failed to stop cleanly');
      }
      st.state = 'stopped';
    }
  }

  isStarted(name: string): boolean {
    return this.#status.get(name)?.state === 'started';
  }

  status(): PluginStatus[] {
    return this.order.map((p) => {
      const st = { ...this.#status.get(p.name)! };
      if (st.state === 'started' && p.health) {
        try {
          st.health = p.health(this.#services.get(p.name));
        } catch (e) {
          st.health = { status: 'degraded', reason: (e as Error).message };
        }
      }
      return st;
    });
  }

  /** Every started plugin's metric families (a plugin whose report throws is left out and named). */
  metricFamilies(onError: (plugin: string, e: unknown) => void): MetricFamily[] {
    const out: MetricFamily[] = [];
    for (const p of this.order) {
      if (!p.metrics || this.#status.get(p.name)?.state !== 'started') continue;
      try {
        out.push(...p.metrics(this.#services.get(p.name), this.#ctx.get(p.name)!));
      } catch (e) {
        onError(p.name, e);
      }
    }
    return out;
  }

  private makeContext(p: AnyPlugin, config: unknown): PluginContext {
    const log = this.core.log.child({ plugin: p.name });
    const deps = new Set(p.dependsOn ?? []);
    return {
      ...this.core,
      name: p.name,
      config,
      log,
      provide: (ref, impl) => {
        const prev = this.#provided.get(ref.name);
        if (prev && prev.plugin !== p.name) throw new Error(`service ${ref.name} provided by both ${prev.plugin} and ${p.name}`);
        this.#provided.set(ref.name, { plugin: p.name, impl });
      },
      // The ref's type parameter is the provider's promise (ctx.provide took a T for this ref).
      use: <T>(ref: ServiceRef<T>): T => {
        const s = this.#provided.get(ref.name);
        if (!s) throw new Error(`plugin ${p.name} uses service ${ref.name}, which no plugin provides`);
        if (!deps.has(s.plugin) && s.plugin !== p.name) throw new Error(`plugin ${p.name} uses ${ref.name} of ${s.plugin} without depending on it`);
        return s.impl as T;
      },
      tryUse: <T>(ref: ServiceRef<T>): T | undefined => this.#provided.get(ref.name)?.impl as T | undefined,
    };
  }
}

export function ensureDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}
