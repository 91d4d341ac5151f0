import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { BIN, cleanEnv, readDataDirDb, ROOT, runCli } from '../support/cli.ts';
import { tempDir } from '../support/server.ts';
import { BUILTIN_PLUGINS } from '../../plugins/index.ts';
import { SNAPSHOT } from '../plugins/lotl/support.ts';
import { subcommandIn } from '../../server/cli/audit.ts';

/**
 * Every `sovcomms` command exits once its work is done: each runs as a child process, the way a
 * script or a timer runs it, and must be gone before its deadline (a handle left open, say a
 * worker thread's port, an mDNS socket or a timer, keeps a process idle until killed: `lotl
 * import` did its work and then never exited). One representative invocation per command.
 */
const DEADLINE_MS = 60_000;
const dirs: string[] = [];
let dataDir: string;
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
function dir(): string {
  const d = tempDir('sovcomms-cli-exit-');
  dirs.push(d);
  return d;
}

beforeAll(async () => {
  dataDir = dir();
  // Initialised once (primary tenant, admin), so each command below only does its own work.
  expect((await runCli(['migrate'], { dataDir })).code).toBe(0);
}, DEADLINE_MS * 2);

const COMMANDS: { argv: string[]; code: number }[] = [
  { argv: ['help'], code: 0 },
  { argv: ['version'], code: 0 },
  { argv: ['tenant', 'list'], code: 0 },
  { argv: ['user', 'list', '--json'], code: 0 },
  { argv: ['apikey', 'list'], code: 0 },
  { argv: ['admin-secret', 'sign', 'whitelist-add'], code: 0 },
  { argv: ['migrate'], code: 0 },
  { argv: ['doctor'], code: 0 },
  { argv: ['backup', 'create'], code: 0 },
  { argv: ['backup', 'list'], code: 0 },
  { argv: ['setup', '--sip-host', '127.0.0.1'], code: 0 },
  { argv: ['metrics', 'token', 'status'], code: 0 },
  { argv: ['service', 'install', '--dry-run'], code: 0 },
  { argv: ['prompt', 'list'], code: 0 },
  { argv: ['route', 'inbound', 'list'], code: 0 },
  { argv: ['ca', 'status'], code: 0 },
  { argv: ['client', 'list'], code: 0 },
  { argv: ['webhook', 'list'], code: 0 },
  { argv: ['trunk', 'list'], code: 0 },
  { argv: ['number', 'list'], code: 0 },
  { argv: ['phone', 'list'], code: 0 },
  // The LOTL alone: its signature is checked on the list-check thread, which held the process.
  { argv: ['lotl', 'import', path.join(SNAPSHOT, 'eu-lotl.xml')], code: 0 },
  { argv: ['lotl', 'status'], code: 0 },
  { argv: ['discover', '--timeout-ms', '500'], code: 0 },
  { argv: ['issuer', 'status'], code: 0 },
  { argv: ['verifier', 'trust', 'list'], code: 0 },
];

describe('every command exits when its work is done', { timeout: DEADLINE_MS * 3 }, () => {
  it('covers every command of the core and of every built-in plugin', async () => {
    const { stdout } = await runCli(['help'], { timeoutMs: DEADLINE_MS });
    const named = new Set([...stdout.matchAll(/^ {2}sovcomms (\S+)/gm)].map((m) => m[1]!));
    const tested = new Set(COMMANDS.map((c) => c.argv[0]!));
    expect([...named].filter((c) => !tested.has(c) && c !== 'serve')).toEqual([]);
  });

  for (const { argv, code } of COMMANDS) {
    it(`sovcomms ${argv.join(' ')}`, async () => {
      const r = await runCli(argv, { dataDir, timeoutMs: DEADLINE_MS });
      expect(r.code, r.stderr).toBe(code);
    });
  }

  it('sovcomms serve: stops and exits on SIGTERM', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', dir()], {
      cwd: ROOT,
      env: cleanEnv({ SOVCOMMS_LOG_LEVEL: 'warn' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const t = setTimeout(() => reject(new Error(`serve not listening in time: ${out}`)), DEADLINE_MS);
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (/listening on/.test(out)) {
          clearTimeout(t);
          resolve();
        }
      });
    });
    child.kill('SIGTERM');
    const deadline = new Promise<'deadline'>((resolve) => setTimeout(() => resolve('deadline'), DEADLINE_MS).unref());
    const code = await Promise.race([exited, deadline]);
    if (code === 'deadline') child.kill('SIGKILL');
    expect(code).toBe(0);
  });
});

describe('a command sets up only its plugin and what that plugin depends on', { timeout: DEADLINE_MS * 2 }, () => {
  it('the catalog names each plugin and its commands as its manifest does', async () => {
    for (const entry of BUILTIN_PLUGINS) {
      const p = await entry.load();
      expect(p.name).toBe(entry.name);
      expect(Object.keys(p.cli ?? {}).sort(), p.name).toEqual([...entry.commands].sort());
    }
  });

  it('`webhook list` on a fresh data dir migrates the core, webhooks and audit, and no other plugin', async () => {
    const d = dir();
    const r = await runCli(['webhook', 'list'], { dataDir: d, timeoutMs: DEADLINE_MS });
    expect(r.code, r.stderr).toBe(0);
    const migrated = readDataDirDb(d, (db) => (db.prepare('SELECT DISTINCT plugin FROM schema_migrations').all() as { plugin: string }[]).map((x) => x.plugin));
    expect(migrated.sort()).toEqual(['audit', 'core', 'webhooks']);
  });

  it("`webhook add` still checks names against every plugin's events (they are declared for add only)", async () => {
    const d = dir();
    const r = await runCli(['webhook', 'add', '--url', 'https://hooks.example.org/x', '--events', 'no.such-event'], { dataDir: d, timeoutMs: DEADLINE_MS });
    expect(r.code).toBe(1);
    // The refusal lists the known names: call.ended is telephony's, loaded for `add` beside webhooks.
    expect(r.stderr).toMatch(/not an event any plugin declares/);
    expect(r.stderr).toContain('call.ended');
  });

  it('only the subcommands a command lists declare every event (`webhook list` loads no other manifest)', () => {
    expect(subcommandIn(['add'], ['add', '--url', 'u'])).toBe(true);
    expect(subcommandIn(['add'], ['list'])).toBe(false);
    expect(subcommandIn(true, ['list'])).toBe(true);
    expect(subcommandIn(false, ['add'])).toBe(false);
    expect(subcommandIn(['trust add'], ['trust', 'add'])).toBe(true);
    expect(subcommandIn(['trust add'], ['trust', 'list'])).toBe(false);
  });

  it('`verifier trust list` brings its dependencies (rp-ca, lotl, oidc, audit)', async () => {
    const d = dir();
    const r = await runCli(['verifier', 'trust', 'list'], { dataDir: d, timeoutMs: DEADLINE_MS });
    expect(r.code, r.stderr).toBe(0);
    const migrated = readDataDirDb(d, (db) => (db.prepare('SELECT DISTINCT plugin FROM schema_migrations').all() as { plugin: string }[]).map((x) => x.plugin));
    expect(migrated.sort()).toEqual(['audit', 'core', 'lotl', 'oidc', 'rp-ca', 'wallet-verifier']);
  });
});
