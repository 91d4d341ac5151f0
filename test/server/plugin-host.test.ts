import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Appliance } from '../../server/app.ts';
import { defineService, definePlugin, type PluginManifest, type AnyPlugin } from '../../server/plugin.ts';
import { policy } from '../../server/auth.ts';
import { LogCapture, startTestServer } from '../support/server.ts';
import { probePlugin, withBuiltins } from './fixtures/test-plugins.ts';
import { scratchDirs } from '../support/cleanup.ts';

const dir = scratchDirs('sovcomms-host-');
const m = (p: PluginManifest) => definePlugin(p) as AnyPlugin;
const create = (plugins: PluginManifest[]) =>
  Appliance.create({ dataDir: dir(), env: {}, plugins, logDestination: new LogCapture(), overrides: { http: { port: 0 } } });

describe('plugin host', () => {
  it('starts in dependency order and stops in reverse', async () => {
    const trail: string[] = [];
    const p = (name: string, dependsOn: string[] = []) =>
      m({
        name,
        description: name,
        dependsOn,
        start: async () => {
          await new Promise((r) => setTimeout(r, 5));
          trail.push(`start ${name}`);
        },
        stop: () => {
          trail.push(`stop ${name}`);
        },
      });
    // Listed out of order on purpose.
    const a = await create([p('c', ['b']), p('b', ['a']), p('a'), p('d', ['core'])]);
    await a.start();
    expect(trail.filter((t) => t.startsWith('start'))).toEqual(['start a', 'start b', 'start c', 'start d'].filter((x) => trail.includes(x)));
    expect(trail.indexOf('start a')).toBeLessThan(trail.indexOf('start b'));
    expect(trail.indexOf('start b')).toBeLessThan(trail.indexOf('start c'));
    await a.stop();
    const stops = trail.filter((t) => t.startsWith('stop'));
    expect(stops.indexOf('stop c')).toBeLessThan(stops.indexOf('stop b'));
    expect(stops.indexOf('stop b')).toBeLessThan(stops.indexOf('stop a'));
    expect(a.pluginStatus().every((s) => s.state === 'stopped')).toBe(true);
  });

  it('refuses unknown dependencies, cycles, bad names and services used without a dependency', async () => {
    await expect(create([m({ name: 'x', description: '', dependsOn: ['nope'] })])).rejects.toThrow(/x depends on nope, which is not loaded/);
    await expect(create([m({ name: 'x', description: '', dependsOn: ['y'] }), m({ name: 'y', description: '', dependsOn: ['x'] })])).rejects.toThrow(/cycle/);
    expect(() => definePlugin({ name: 'Bad Name', description: '' })).toThrow(/invalid plugin name/);
    const thing = defineService<{ ok: boolean }>('thing');
    const provider = m({ name: 'provider', description: '', setup: (ctx) => ctx.provide(thing, { ok: true }) });
    const sneaky = m({
      name: 'sneaky',
      description: '',
      start: (_s, ctx) => {
        ctx.use(thing);
      },
    });
    const a = await create([provider, sneaky]);
    await a.start();
    try {
      const st = a.pluginStatus().find((s) => s.name === 'sneaky')!;
      expect(st.state).toBe('failed');
      expect(st.error).toMatch(/without depending on it/);
    } finally {
      await a.stop();
    }
  });

  it('refuses a route registered twice and an event declared by two plugins', async () => {
    const route = { method: 'GET' as const, path: '/api.ashx/v1/twice', summary: 'x', auth: policy.public, handler: () => ({}) };
    await expect(
      create([
        m({ name: 'one', description: '', routes: (r) => r.add(route) }),
        m({ name: 'two', description: '', routes: (r) => r.add({ ...route, path: '/API.ashx/v1/TWICE' }) }),
      ]),
    ).rejects.toThrow(/registered twice/);
    await expect(
      create([
        m({ name: 'one', description: '', events: { 'x.happened': z.object({}) } }),
        m({ name: 'two', description: '', events: { 'x.happened': z.object({}) } }),
      ]),
    ).rejects.toThrow(/declared by both one and two/);
  });

  it('a plugin whose health says degraded shows in /readyz without failing readiness', async () => {
    const t = await startTestServer({
      plugins: [...(await withBuiltins()), m({ name: 'wobbly', description: '', health: () => ({ status: 'degraded', reason: 'bridge slow' }) })],
    });
    try {
      const r = await t.fetch('/readyz');
      expect(r.status).toBe(200);
      const body = (await r.json()) as { status: string; plugins: Record<string, { state: string; health?: { status: string; reason?: string } }> };
      expect(body.status).toBe('degraded');
      expect(body.plugins.wobbly).toMatchObject({ state: 'started', health: { status: 'degraded', reason: 'bridge slow' } });
    } finally {
      await t.stop();
    }
  });
});

describe('clean shutdown', () => {
  it('drains an in-flight request, then refuses new connections and closes the store', async () => {
    const t = await startTestServer({ plugins: await withBuiltins(probePlugin) });
    const inflight = t.fetch('/api.ashx/v1/probe/slow');
    await new Promise((r) => setTimeout(r, 50));
    const stopped = t.appliance.stop();
    const r = await inflight;
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ slow: true });
    await stopped;
    await expect(t.fetch('/healthz')).rejects.toThrow();
    expect(t.appliance.core.db.open).toBe(false);
    await t.stop();
  });

  it('checkpoints the WAL periodically while running and truncates it at stop', async () => {
    const a = await Appliance.create({
      dataDir: dir(),
      env: {},
      plugins: [],
      logDestination: new LogCapture(),
      overrides: { http: { port: 0, host: '127.0.0.1' }, store: { checkpointMs: 1000 } },
    });
    const calls: string[] = [];
    const db = a.core.db;
    const orig = db.pragma.bind(db);
    db.pragma = ((source: string, options?: { simple?: boolean }) => {
      calls.push(source);
      return orig(source, options);
    }) as typeof db.pragma;
    await a.start();
    await new Promise((r) => setTimeout(r, 1400));
    expect(calls).toContain('wal_checkpoint(PASSIVE)');
    await a.stop();
    expect(calls[calls.length - 1]).toBe('wal_checkpoint(TRUNCATE)');
  });
});
