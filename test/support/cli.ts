/**
 * Runs the real `sovcomms` CLI (`node bin/sovcomms.mjs`) in a child process, the way an operator
 * or a script would, and starts `sovcomms serve` as a child for end-to-end tests.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = path.join(ROOT, 'bin/sovcomms.mjs');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment without any SOVCOMMS_* variable of the machine running the tests. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SOVCOMMS_')) env[k] = v;
  // Child appliances of tests spawn no SIP bridge and fetch no trusted lists unless a test says so.
  const quiet = JSON.stringify({ plugins: { telephony: { bridge: { mode: 'off' } }, lotl: { autoRefresh: false } } });
  return { ...env, SOVCOMMS_CONFIG_JSON: quiet, ...extra };
}

/** Runs one CLI command to completion. `dataDir` is appended as `--data-dir DIR` when given. */
export function runCli(args: string[], opts: { dataDir?: string; stdin?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CliResult> {
  const argv = [BIN, ...args, ...(opts.dataDir ? ['--data-dir', opts.dataDir] : [])];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { cwd: ROOT, env: cleanEnv(opts.env), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`sovcomms ${args.join(' ')} did not finish in time; stderr: ${stderr}`));
    }, opts.timeoutMs ?? 120_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.stdin ?? '');
  });
}

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** The first-start admin password the server printed (once). */
  password: string | undefined;
  output(): { stdout: string; stderr: string };
  /** Sends a signal and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `sovcomms serve --port 0` and resolves once it prints its URL. */
export function startServe(dataDir: string, extraArgs: string[] = [], env: Record<string, string> = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1', ...extraArgs, '--data-dir', dataDir], {
    cwd: ROOT,
    env: cleanEnv({ SOVCOMMS_LOG_LEVEL: 'warn', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`sovcomms serve not ready in 120 s; stdout: ${stdout}; stderr: ${stderr}`));
    }, 120_000);
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`sovcomms serve exited (${code}) before listening; stderr: ${stderr}`));
    });
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
      const m = /listening on (https?:\/\/\S+)/.exec(stdout);
      if (!m) return;
      clearTimeout(timer);
      resolve({
        child,
        url: m[1]!,
        password: /password: (\S+)/.exec(stdout)?.[1],
        output: () => ({ stdout, stderr }),
        async stop(signal = 'SIGTERM') {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          return exited;
        },
      });
    });
  });
}

/** Reads a data dir's database (read-only, closed after `fn`) beside a running or stopped appliance. */
export function readDataDirDb<T>(dataDir: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path.join(dataDir, 'appliance.db'), { readonly: true, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}
