import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pinnedProbe } from '../../main/probe.ts';
import { failingPlugins, ServerSupervisor, type Probe } from '../../main/supervisor.ts';
import type { ServerState } from '../../main/tray.ts';
import { cleanEnv, ROOT } from '../support/cli.ts';
import { tempDir } from '../support/server.ts';
import { until } from '../support/until.ts';
import { type FakeChild, FakeShell, flush, ManualTimers, nodeChild } from './fake-shell.ts';

const READY = { status: 200, body: { status: 'ready', plugins: { oidc: { state: 'started', required: true } } } };

function setup(probe: Probe = async () => READY) {
  const shell = new FakeShell(tempDir('sovcomms-main-'));
  const timers = new ManualTimers();
  const states: ServerState[] = [];
  const sup = new ServerSupervisor(shell, {
    entry: '/app/dist/bin/sovcomms.js',
    args: async () => ['serve', '--port', '8443'],
    env: () => ({ SOVCOMMS_DATA_DIR: '/data' }),
    probe,
    onState: (s) => states.push(s),
    timers,
    backoffMs: 1000,
    maxBackoffMs: 8000,
    stableMs: 60_000,
    readyTimeoutMs: 30_000,
    stopTimeoutMs: 5000,
  });
  const child = () => shell.children.at(-1) as FakeChild;
  return { shell, timers, states, sup, child };
}

describe('server supervision (fake utilityProcess, manual clock)', () => {
  it('forks the serve entry with its env, waits for server-started, then for /readyz 200', async () => {
    let ready = false;
    const { sup, child, states, timers } = setup(async () => (ready ? READY : { status: 503, body: { status: 'starting' } }));
    await sup.start();
    expect(child().modulePath).toBe('/app/dist/bin/sovcomms.js');
    expect(child().args).toEqual(['serve', '--port', '8443']);
    expect(child().o).toEqual({ env: { SOVCOMMS_DATA_DIR: '/data' }, serviceName: 'sovcomms-server' });
    expect(states).toEqual([{ kind: 'starting', attempt: 1 }]);
    child().emitMessage({ type: 'server-started', url: 'https://0.0.0.0:8443' });
    await flush();
    await timers.advance(1000);
    expect(sup.state.kind).toBe('starting');
    ready = true;
    await timers.advance(300);
    expect(sup.state).toEqual({ kind: 'ready', url: 'https://0.0.0.0:8443' });
  });

  it('ready but a plugin failed or degraded: degraded, naming it; back to ready when it recovers', async () => {
    let body: unknown = { status: 'degraded', plugins: { telephony: { state: 'failed', required: false }, oidc: { state: 'started' } } };
    const { sup, child, timers } = setup(async () => ({ status: 200, body }));
    await sup.start();
    child().emitMessage({ type: 'server-started', url: 'http://127.0.0.1:1' });
    await flush();
    expect(sup.state).toEqual({ kind: 'degraded', url: 'http://127.0.0.1:1', plugins: ['telephony'] });
    body = READY.body;
    await timers.advance(5000);
    expect(sup.state.kind).toBe('ready');
    expect(failingPlugins({ plugins: { a: { state: 'started', health: { status: 'degraded' } }, b: { state: 'started' } } })).toEqual(['a']);
    expect(failingPlugins(null)).toEqual([]);
  });

  it('a crash restarts it with exponential backoff (1, 2, 4, 8, 8 s); a stable run resets the backoff', async () => {
    const { sup, child, shell, timers, states } = setup();
    await sup.start();
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      child().emitExit(1);
      await flush();
      const s = states.at(-1)!;
      expect(s.kind).toBe('restarting');
      delays.push((s as { inMs: number }).inMs);
      expect(shell.children.length).toBe(i + 1); // no restart before the delay
      await timers.advance(delays.at(-1)! - 1);
      expect(shell.children.length).toBe(i + 1);
      await timers.advance(1);
      expect(shell.children.length).toBe(i + 2);
    }
    expect(delays).toEqual([1000, 2000, 4000, 8000, 8000]);
    expect((states.at(-1) as { attempt: number }).attempt).toBe(6);
    // Up for a minute, then a crash: the backoff starts afresh.
    child().emitMessage({ type: 'server-started', url: 'http://127.0.0.1:1' });
    await flush();
    expect(sup.state.kind).toBe('ready');
    await timers.advance(61_000);
    child().emitExit(1);
    await flush();
    expect(states.at(-1)).toMatchObject({ kind: 'restarting', inMs: 1000, reason: 'exit code 1' });
  });

  it('no readiness within readyTimeoutMs: killed and restarted', async () => {
    const { sup, child, timers, shell } = setup();
    await sup.start();
    const first = child();
    await timers.advance(30_000);
    expect(first.killed).toBe(true);
    expect(sup.state.kind).toBe('restarting');
    await timers.advance(1000);
    expect(shell.children.length).toBe(2);
  });

  it('clean quit: asks the server to shut down, waits for its exit, no restart follows', async () => {
    const { sup, child, timers, shell, states } = setup();
    await sup.start();
    child().emitMessage({ type: 'server-started', url: 'http://127.0.0.1:1' });
    await flush();
    const stopping = sup.stop();
    expect(child().sent).toEqual([{ type: 'shutdown' }]);
    expect(child().killed).toBe(false);
    child().emitExit(0);
    await stopping;
    expect(states.at(-1)).toEqual({ kind: 'stopped' });
    await timers.advance(120_000);
    expect(shell.children.length).toBe(1);
  });

  it('a server that does not stop within stopTimeoutMs is killed', async () => {
    const { sup, child, timers } = setup();
    await sup.start();
    const stopping = sup.stop();
    await timers.advance(4999);
    expect(child().killed).toBe(false);
    await timers.advance(1);
    await stopping;
    expect(child().killed).toBe(true);
    expect(sup.state).toEqual({ kind: 'stopped' });
  });
});

describe('server supervision of the real server (child_process.fork of the serve entry)', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('ready through the real /readyz, restarted after SIGKILL, stopped by message with the store checkpointed', async () => {
    const dataDir = tempDir('sovcomms-main-real-');
    dirs.push(dataDir);
    const shell = new FakeShell(dataDir);
    shell.fork = nodeChild;
    const states: ServerState[] = [];
    const output: string[] = [];
    const env = cleanEnv({ SOVCOMMS_DATA_DIR: dataDir, SOVCOMMS_LOG_LEVEL: 'warn' }) as Record<string, string>;
    const sup = new ServerSupervisor(shell, {
      entry: path.join(ROOT, 'bin/sovcomms.mjs'),
      args: async () => ['serve', '--host', '127.0.0.1', '--port', '0'],
      env: () => env,
      probe: pinnedProbe(() => null),
      onState: (s) => states.push(s),
      onOutput: (l) => output.push(l),
      backoffMs: 200,
    });
    // A fresh data dir has no trusted lists yet: lotl reports degraded, which is up all the same.
    const up = () => sup.state.kind === 'ready' || sup.state.kind === 'degraded';
    await sup.start();
    // eslint-disable-next-line @typescript-eslint/use-unknown-in-catch-callback-variable -- until() rejects with an Error
    await until(() => up(), 60_000, 'ready').catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify(states)} ${output.join('\n')}`);
    });
    const firstPid = sup.pid!;
    process.kill(firstPid, 'SIGKILL');
    await until(() => states.some((s) => s.kind === 'restarting'), 10_000, 'restarting');
    await until(() => up() && sup.pid !== firstPid, 60_000, 'ready again');
    expect(states.filter((s) => s.kind === 'restarting')).toEqual([{ kind: 'restarting', inMs: 200, reason: 'exit code 128' }]);
    const secondPid = sup.pid!;
    await sup.stop();
    expect(sup.state).toEqual({ kind: 'stopped' });
    // It exited by itself (not killed): the shutdown message drained and checkpointed.
    expect(() => process.kill(secondPid, 0)).toThrow();
    const wal = path.join(dataDir, 'appliance.db-wal');
    expect(fs.existsSync(wal) ? fs.statSync(wal).size : 0).toBe(0);
  }, 120_000);
});
