import fs from 'node:fs';
import path from 'node:path';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import type { TestServer } from '../../support/server.ts';
import { tempDir } from '../../support/server.ts';

export const SOFTHSM_MODULE = '/usr/lib/softhsm/libsofthsm2.so';
export const REPO_ROOT = path.resolve(import.meta.dirname, '../../..');
const run = promisify(execFile);

/** A SoftHSM2 configuration in a temp dir with one fresh token (slot ids are random: find by label). */
export function makeSoftHsmToken(label: string, pin: string, soPin = '87654321'): { conf: string; dir: string } {
  const dir = tempDir('rp-ca-softhsm-');
  fs.mkdirSync(path.join(dir, 'tokens'));
  const conf = path.join(dir, 'softhsm2.conf');
  fs.writeFileSync(conf, `directories.tokendir = ${path.join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--so-pin', soPin, '--pin', pin], {
    env: { ...process.env, SOFTHSM2_CONF: conf },
    stdio: 'pipe',
  });
  return { conf, dir };
}

/** Runs `openssl ...`; returns stdout+stderr and the exit code (never throws on a non-zero exit). */
export async function openssl(args: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await run('openssl', args, { encoding: 'utf8' });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof x.code === 'number' ? x.code : 1, out: (x.stdout ?? '') + (x.stderr ?? '') };
  }
}

/** Runs the real `sovcomms` CLI in a child process. */
export async function sovcomms(args: string[], opts: { env?: NodeJS.ProcessEnv; stdin?: string } = {}): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [path.join(REPO_ROOT, 'bin/sovcomms.mjs'), ...args],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, ...opts.env },
        encoding: 'utf8',
        timeout: 60_000,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        if (err && (err as { killed?: boolean }).killed) return reject(new Error(`sovcomms ${args.join(' ')} timed out\n${stderr}`));
        resolve({ code, out: stdout, err: stderr });
      },
    );
    child.stdin!.end(opts.stdin ?? '');
  });
}

/** An admin-HMAC signed call (the "H" of the spec's "B or H"). */
export function adminCall(
  s: TestServer,
  method: 'GET' | 'POST',
  pathAndQuery: string,
  bucket: string,
  opts: { host?: string; json?: unknown } = {},
): Promise<Response> {
  const host = opts.host ?? `127.0.0.1:${s.port}`;
  const body = opts.json === undefined ? undefined : JSON.stringify(opts.json);
  const headers: Record<string, string> = { 'x-service-admin-signature': s.hmac(bucket, host, body ? Buffer.byteLength(body) : undefined) };
  if (body) headers['content-type'] = 'application/json';
  return s.fetch(pathAndQuery, { method, host, headers, body });
}

/**
 * The bytes of the database files, read by a child process. Opening and closing the SQLite file
 * in this process would drop the POSIX locks the running server holds on it (fcntl locks are per
 * process), after which another process may delete the live WAL.
 */
export function databaseBytes(dataDir: string): Buffer[] {
  return fs
    .readdirSync(dataDir)
    .filter((n) => n.startsWith('appliance.db'))
    .map((n) => execFileSync('cat', [path.join(dataDir, n)], { maxBuffer: 512 * 1024 * 1024 }));
}

/** `grep -F` over the database files in a child process: true when the text occurs. */
export function grepDatabase(dataDir: string, text: string): boolean {
  const files = fs
    .readdirSync(dataDir)
    .filter((n) => n.startsWith('appliance.db'))
    .map((n) => path.join(dataDir, n));
  try {
    execFileSync('grep', ['-a', '-q', '-F', '--', text, ...files], { stdio: 'ignore' });
    return true;
  } catch (e) {
    if ((e as { status?: number }).status === 1) return false;
    throw e;
  }
}

export function writeTemp(dir: string, name: string, data: string | Buffer): string {
  const f = path.join(dir, name);
  fs.writeFileSync(f, data);
  return f;
}

/**
 * A response body as JSON. Test bodies are checked field by field with expect(), so a loose type
 * keeps the assertions readable; anything wrong fails the assertion, not the compiler.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see the comment above: test assertions read the JSON freely
export async function body(r: Response): Promise<any> {
  return r.json();
}

/**
 * Registers `clientId` as an OIDC client of the tenant at `host` (admin HMAC): the CA issues an RP
 * certificate only for a registered client.
 */
export async function registerClient(s: TestServer, clientId: string, host = `127.0.0.1:${s.port}`): Promise<void> {
  const name = clientId.replace(/^x509_san_dns:/, '');
  const r = await adminCall(s, 'POST', '/signal.ashx?oidc-clients-save=1', 'oidc-clients-save', {
    host,
    json: { client_id: clientId, redirect_uris: [`https://${name}/callback`] },
  });
  if (r.status !== 200) throw new Error(`register client ${clientId}: ${r.status} ${await r.text()}`);
}

/** registerClient for a test of the CA itself: a client id the provider refuses (a bad name the CA must refuse too) is left unregistered. */
export async function tryRegisterClient(s: TestServer, clientId: unknown, host?: string): Promise<void> {
  if (typeof clientId !== 'string') return;
  await registerClient(s, clientId, host).catch(() => undefined);
}
