import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { Appliance } from '../../server/app.ts';
import { ConfigError } from '../../server/errors.ts';
import { LogCapture } from '../support/server.ts';
import { probePlugin, withBuiltins } from './fixtures/test-plugins.ts';
import { scratchDirs } from '../support/cleanup.ts';

const scratch = scratchDirs('sovcomms-config-');

function dataDir(config?: unknown): string {
  const d = scratch();
  if (config !== undefined) fs.writeFileSync(path.join(d, 'config.json'), typeof config === 'string' ? config : JSON.stringify(config));
  return d;
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('config layers', () => {
  it('embedded defaults', () => {
    const c = loadConfig({ dataDir: dataDir(), env: {} });
    expect(c.http).toMatchObject({ host: '127.0.0.1', port: 8080 });
    expect(c.primaryHost).toBe('localhost');
    expect(c.log.level).toBe('info');
    expect(c.plugins).toEqual({});
  });

  it('data-dir config.json over defaults, SOVCOMMS_* env over the file, overrides over env', () => {
    const d = dataDir({ http: { host: '0.0.0.0', port: 9001 }, log: { level: 'warn' }, primaryHost: 'file.example' });
    let c = loadConfig({ dataDir: d, env: {} });
    expect(c.http).toMatchObject({ host: '0.0.0.0', port: 9001 });
    expect(c.log.level).toBe('warn');
    expect(c.primaryHost).toBe('file.example');

    const env = { SOVCOMMS_PORT: '9002', SOVCOMMS_LOG_LEVEL: 'debug' };
    c = loadConfig({ dataDir: d, env });
    // Env replaces only what it names: the file's host stays.
    expect(c.http).toMatchObject({ host: '0.0.0.0', port: 9002 });
    expect(c.log.level).toBe('debug');
    expect(c.primaryHost).toBe('file.example');

    c = loadConfig({ dataDir: d, env, overrides: { http: { port: 9003 } } });
    expect(c.http).toMatchObject({ host: '0.0.0.0', port: 9003 });
    expect(c.log.level).toBe('debug');
  });

  it('SOVCOMMS_CONFIG_JSON sits with the env layer; named env vars win over it', () => {
    const d = dataDir({ rateLimit: { publicPerMinute: 10 } });
    const c = loadConfig({
      dataDir: d,
      env: { SOVCOMMS_CONFIG_JSON: JSON.stringify({ rateLimit: { publicPerMinute: 20 }, http: { port: 1 } }), SOVCOMMS_PORT: '2' },
    });
    expect(c.rateLimit.publicPerMinute).toBe(20);
    expect(c.http.port).toBe(2);
  });

  it('SOVCOMMS_DATA_DIR picks the data dir when none is given', () => {
    const d = dataDir({ http: { port: 9100 } });
    const c = loadConfig({ env: { SOVCOMMS_DATA_DIR: d } });
    expect(c.dataDir).toBe(path.resolve(d));
    expect(c.http.port).toBe(9100);
  });
});

describe('config errors name the key path and the reason', () => {
  it('a wrong type in config.json', () => {
    const e = configError(() => loadConfig({ dataDir: dataDir({ http: { port: 'abc' } }), env: {} }));
    expect(e.path).toBe('http.port');
    expect(e.message).toMatch(/^config http\.port: .*number/);
  });

  it('an out-of-range value, an unknown enum value', () => {
    expect(configError(() => loadConfig({ dataDir: dataDir({ http: { port: 70000 } }), env: {} })).path).toBe('http.port');
    expect(configError(() => loadConfig({ dataDir: dataDir({ log: { level: 'loud' } }), env: {} })).path).toBe('log.level');
  });

  it('an unknown key, at the root and nested', () => {
    let e = configError(() => loadConfig({ dataDir: dataDir({ htttp: {} }), env: {} }));
    expect(e.path).toBe('htttp');
    expect(e.message).toMatch(/unknown key/);
    e = configError(() => loadConfig({ dataDir: dataDir({ http: { prot: 1 } }), env: {} }));
    expect(e.path).toBe('http.prot');
  });

  it('a bad env value and a bad override', () => {
    expect(configError(() => loadConfig({ dataDir: dataDir(), env: { SOVCOMMS_PORT: 'abc' } })).message).toMatch(/http\.port.*SOVCOMMS_PORT/);
    expect(configError(() => loadConfig({ dataDir: dataDir(), env: { SOVCOMMS_CONFIG_JSON: '{nope' } })).message).toMatch(/SOVCOMMS_CONFIG_JSON/);
    expect(configError(() => loadConfig({ dataDir: dataDir(), env: {}, overrides: { jobs: { pollMs: 1 } } })).path).toBe('jobs.pollMs');
  });

  it('config.json that is not JSON, or not an object, names the file', () => {
    const d = dataDir('{ "http": ');
    expect(configError(() => loadConfig({ dataDir: d, env: {} })).message).toContain(path.join(d, 'config.json'));
    expect(configError(() => loadConfig({ dataDir: dataDir('[1]'), env: {} })).message).toMatch(/JSON object/);
  });

  it('stops the appliance start (no store left open, nothing listening)', async () => {
    const d = dataDir({ http: { port: 'abc' } });
    await expect(Appliance.create({ dataDir: d, env: {}, logDestination: new LogCapture() })).rejects.toThrow(/http\.port/);
  });

  it('an invalid plugin setting names plugins.<name>.<key>', async () => {
    const plugins = await withBuiltins(probePlugin);
    const start = (cfg: unknown) => Appliance.create({ dataDir: dataDir(cfg), env: {}, plugins, logDestination: new LogCapture() });
    await expect(start({ plugins: { probe: { retries: -1 } } })).rejects.toThrow(/^config plugins\.probe\.retries: /);
    await expect(start({ plugins: { probe: { colour: 'red' } } })).rejects.toThrow(/^config plugins\.probe\.colour: unknown key/);
    await expect(start({ plugins: { audit: { retentionDays: 'forever' } } })).rejects.toThrow(/^config plugins\.audit\.retentionDays: /);
    // A valid setting reaches the plugin.
    const a = await start({ plugins: { probe: { greeting: 'moin' } } });
    try {
      expect(a.host.context('probe')?.config).toMatchObject({ greeting: 'moin', retries: 1 });
    } finally {
      await a.stop();
    }
  });
});
