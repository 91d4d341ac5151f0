import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { BIN, cleanEnv, readDataDirDb, ROOT, runCli, startServe, type ServeProcess } from '../support/cli.ts';
import { httpFetch, tempDir } from '../support/server.ts';
import { signAdminHmac } from '../../server/auth.ts';
import { verifyPassword } from '../../server/users.ts';
import { main, type CliIo } from '../../server/cli.ts';
import audit from '../../plugins/audit/index.ts';
import type { AnyPlugin } from '../../server/plugin.ts';

/**
 * The CLI end to end: `node bin/sovcomms.mjs ...` child processes against a data dir that a
 * `sovcomms serve` child is using at the same time (WAL: the CLI changes data under a running
 * server). Usage-error details are checked in-process through the same `main()` to keep it fast.
 */
const dirs: string[] = [];
let dataDir: string;
let serve: ServeProcess;
afterAll(async () => {
  await serve?.stop('SIGKILL');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
function dir(): string {
  const d = tempDir('sovcomms-cli-');
  dirs.push(d);
  return d;
}

beforeAll(async () => {
  dataDir = dir();
  serve = await startServe(dataDir);
}, 180_000);

const get = (p: string, headers: Record<string, string> = {}) => httpFetch(serve.url + p, { headers });
const withKey = (key: string, host?: string) => ({ Authorization: `Bearer ${key}`, ...(host ? { Host: host } : {}) });

const readDb = <T>(fn: (db: Database.Database) => T): T => readDataDirDb(dataDir, fn);

describe('sovcomms serve', { timeout: 60_000 }, () => {
  it('first start prints the generated admin password once, and the server answers', async () => {
    expect(serve.password).toMatch(/^\S{16,}$/);
    expect(serve.output().stdout).toMatch(/First start: primary tenant localhost/);
    expect((await get('/healthz')).status).toBe(200);
    const hash = readDb((db) => (db.prepare("SELECT password_hash FROM users WHERE name = 'admin'").get() as { password_hash: string }).password_hash);
    expect(await verifyPassword(serve.password!, hash)).toBe(true);
  });
});

/** The same `main()` the bin runs, in this process (fast); the server child still runs beside it. */
async function cli(argv: string[], opts: { dataDir?: string; stdin?: string } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => opts.stdin ?? '' };
  const code = await main([...argv, ...(opts.dataDir ? ['--data-dir', opts.dataDir] : [])], io);
  return { code, stdout: out.join('\n') + (out.length ? '\n' : ''), stderr: err.join('\n') };
}

describe('tenants, users and keys while the server runs', { timeout: 240_000 }, () => {
  let keyB = '';
  let adminKey = '';

  it('child processes: tenant add, user add --password-stdin, apikey create (the key works on the server)', async () => {
    const [add, bob, key] = await Promise.all([
      runCli(['tenant', 'add', 'office-b.example', '--name', 'Office B'], { dataDir }),
      runCli(['user', 'add', 'bob', '--password-stdin'], { dataDir, stdin: 'bob password 12\n' }),
      runCli(['apikey', 'create', '--user', 'admin', '--name', 'ci'], { dataDir }),
    ]);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toMatch(/tenant office-b\.example added/);
    expect(bob.code, bob.stderr).toBe(0);
    expect(bob.stdout + bob.stderr).not.toContain('bob password 12');
    const hash = readDb((db) => (db.prepare("SELECT password_hash FROM users WHERE name = 'bob'").get() as { password_hash: string }).password_hash);
    expect(await verifyPassword('bob password 12', hash)).toBe(true);
    expect(key.code, key.stderr).toBe(0);
    adminKey = key.stdout.trim();
    // Printed once, alone on stdout (scripts capture it); the note goes to stderr.
    expect(adminKey).toMatch(/^ak_[A-Za-z0-9_-]{40,}$/);
    expect(key.stdout.trim().split('\n')).toHaveLength(1);
    expect(key.stderr).toMatch(/shown once/);
    expect((await get('/api.ashx/v1/auditlog', withKey(adminKey))).status).toBe(200);
    // Stored as its SHA-256 only.
    expect(readDb((db) => JSON.stringify(db.prepare('SELECT * FROM api_keys').all()))).not.toContain(adminKey);
  });

  it('tenant list --json; a duplicate host is a failure (1)', async () => {
    const list = await cli(['tenant', 'list', '--json'], { dataDir });
    expect(list.code).toBe(0);
    const tenants = JSON.parse(list.stdout) as { host: string; name: string; primary: boolean }[];
    expect(tenants).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ host: 'localhost', primary: true }),
        expect.objectContaining({ host: 'office-b.example', name: 'Office B', primary: false }),
      ]),
    );
    const dup = await cli(['tenant', 'add', 'OFFICE-B.example'], { dataDir });
    expect(dup.code).toBe(1);
    expect(dup.stderr).toMatch(/already belongs/);
    const text = await cli(['tenant', 'list'], { dataDir });
    expect(text.stdout).toMatch(/^HOST +NAME/);
    expect(text.stdout).toMatch(/office-b\.example +Office B/);
  });

  it('user add --password / list --json / passwd / set-role', async () => {
    const alice = await cli(
      ['user', 'add', 'alice', '--tenant', 'office-b.example', '--role', 'admin', '--email', 'alice@b.example', '--password', 'alice password 1'],
      { dataDir },
    );
    expect(alice.code, alice.stderr).toBe(0);
    expect(alice.stdout + alice.stderr).not.toContain('alice password 1');
    const list = await cli(['user', 'list', '--tenant', 'office-b.example', '--json'], { dataDir });
    const users = JSON.parse(list.stdout) as { name: string; role: string; email: string | null }[];
    expect(users).toEqual([expect.objectContaining({ name: 'alice', role: 'admin', email: 'alice@b.example' })]);
    expect(list.stdout).not.toMatch(/password|hash/i);
    // The primary tenant is the default for --tenant.
    const primaryUsers = JSON.parse((await cli(['user', 'list', '--json'], { dataDir })).stdout) as { name: string }[];
    expect(primaryUsers.map((u) => u.name).sort()).toEqual(['admin', 'bob']);

    const hashOf = (name: string) =>
      readDb((db) => (db.prepare('SELECT password_hash FROM users WHERE name = ?').get(name) as { password_hash: string }).password_hash);
    expect(await verifyPassword('alice password 1', hashOf('alice'))).toBe(true);
    const pw = await cli(['user', 'passwd', 'alice', '--tenant', 'office-b.example', '--password-stdin'], { dataDir, stdin: 'a new password 22\n' });
    expect(pw.code, pw.stderr).toBe(0);
    expect(await verifyPassword('a new password 22', hashOf('alice'))).toBe(true);
    expect(await verifyPassword('alice password 1', hashOf('alice'))).toBe(false);
    const weak = await cli(['user', 'passwd', 'alice', '--tenant', 'office-b.example', '--password', 'short'], { dataDir });
    expect(weak.code).toBe(1);
    expect(weak.stderr).toMatch(/too short/);

    const key = await cli(['apikey', 'create', '--user', 'alice', '--tenant', 'office-b.example'], { dataDir });
    keyB = key.stdout.trim();
    expect((await get('/api.ashx/v1/auditlog', withKey(keyB, 'office-b.example'))).status).toBe(200);
    expect((await get('/api.ashx/v1/auditlog', withKey(keyB))).status).toBe(401);
    // A role change is seen by the running server at once.
    expect((await cli(['user', 'set-role', 'alice', 'user', '--tenant', 'office-b.example'], { dataDir })).code).toBe(0);
    expect((await get('/api.ashx/v1/auditlog', withKey(keyB, 'office-b.example'))).status).toBe(403);
    expect((await cli(['user', 'set-role', 'alice', 'admin', '--tenant', 'office-b.example'], { dataDir })).code).toBe(0);
    expect((await get('/api.ashx/v1/auditlog', withKey(keyB, 'office-b.example'))).status).toBe(200);
  });

  it('user add --language / set-language: the language of the mails, shown by list; none follows the request', async () => {
    const add = await cli(['user', 'add', 'carla', '--language', 'de', '--email', 'carla@a.example', '--password', 'carla password 1'], { dataDir });
    expect(add.code, add.stderr).toBe(0);
    const lang = async () =>
      (JSON.parse((await cli(['user', 'list', '--json'], { dataDir })).stdout) as { name: string; language: string | null }[]).find((u) => u.name === 'carla')
        ?.language;
    expect(await lang()).toBe('de');
    expect((await cli(['user', 'set-language', 'carla', 'none'], { dataDir })).code).toBe(0);
    expect(await lang()).toBeNull();
    expect((await cli(['user', 'set-language', 'carla', 'en'], { dataDir })).code).toBe(0);
    expect(await lang()).toBe('en');
    const bad = await cli(['user', 'set-language', 'carla', 'fr'], { dataDir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/LANGUAGE: must be en, de or none, got fr/);
  });

  it('apikey list --json shows no key; revoke (child process) makes the server refuse it at once; admin-secret rotate (child process)', async () => {
    const list = await cli(['apikey', 'list', '--tenant', 'office-b.example', '--json'], { dataDir });
    expect(list.code).toBe(0);
    expect(list.stdout).not.toContain(keyB);
    const keys = JSON.parse(list.stdout) as { id: string; user: string; prefix: string; revokedAt: string | null; lastUsedAt: string | null }[];
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ user: 'alice', revokedAt: null });
    expect(keys[0]!.lastUsedAt).not.toBeNull();
    expect(keyB.startsWith(keys[0]!.prefix)).toBe(true);

    const show = await cli(['admin-secret', 'show'], { dataDir });
    const secret = show.stdout.trim();
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    // Stored sealed with the master key (mode 600), never in the clear.
    const settings = readDb((db) => db.prepare("SELECT key, value FROM settings WHERE key LIKE 'secret:%'").all() as { key: string; value: string }[]);
    expect(settings.find((r) => r.key === 'secret:admin-hmac-secret')?.value).toMatch(/^v1\./);
    expect(JSON.stringify(settings)).not.toContain(secret);
    expect(fs.statSync(path.join(dataDir, 'master.key')).mode & 0o777).toBe(0o600);
    // Reading the secret is audited (who read it and when), without the secret in the row.
    const shown = readDb((db) => db.prepare("SELECT event, user, extra FROM audit_log WHERE event = 'cli-admin-secret-show'").all() as { extra: string }[]);
    expect(shown.length).toBeGreaterThan(0);
    expect(JSON.stringify(shown)).not.toContain(secret);
    // Any GET endpoint that takes the admin HMAC (found in the API description, so this follows the plugins).
    const doc = (await (await get('/openapi.json')).json()) as { paths: Record<string, Record<string, { 'x-hmac-bucket'?: string }>> };
    const target = Object.entries(doc.paths)
      .flatMap(([p, ops]) => Object.entries(ops).map(([m, op]) => ({ p, m, bucket: op['x-hmac-bucket'] })))
      .find((o) => o.m === 'get' && o.bucket && !o.p.includes('{'));
    const host = new URL(serve.url).host;
    if (target) expect((await get(target.p, { 'X-Service-Admin-Signature': signAdminHmac(secret, target.bucket!, host) })).status).not.toBe(401);

    const [revoke, rot, revokeMissing] = await Promise.all([
      runCli(['apikey', 'revoke', keys[0]!.id], { dataDir }),
      runCli(['admin-secret', 'rotate'], { dataDir }),
      runCli(['apikey', 'revoke', 'key_doesnotexist'], { dataDir }),
    ]);
    expect(revoke.code, revoke.stderr).toBe(0);
    expect((await get('/api.ashx/v1/auditlog', withKey(keyB, 'office-b.example'))).status).toBe(401);
    expect(revokeMissing.code).toBe(1);
    expect(revokeMissing.stderr).toMatch(/no API key key_doesnotexist/);

    expect(rot.code, rot.stderr).toBe(0);
    const rotated = rot.stdout.trim();
    expect(rotated).toMatch(/^[0-9a-f]{64}$/);
    expect(rotated).not.toBe(secret);
    expect((await cli(['admin-secret', 'show'], { dataDir })).stdout.trim()).toBe(rotated);
    if (target) {
      expect((await get(target.p, { 'X-Service-Admin-Signature': signAdminHmac(secret, target.bucket!, host) })).status).toBe(401);
      expect((await get(target.p, { 'X-Service-Admin-Signature': signAdminHmac(rotated, target.bucket!, host) })).status).not.toBe(401);
    }
  });

  it('tenant set-primary and remove (the server follows: unknown hosts land on the new primary)', async () => {
    expect((await get('/api.ashx/v1/auditlog', withKey(adminKey, 'unknown.example'))).status).toBe(200);
    expect((await cli(['tenant', 'set-primary', 'office-b.example'], { dataDir })).code).toBe(0);
    // The server's tenant cache re-reads within 500 ms of another connection's write.
    await new Promise((r) => setTimeout(r, 600));
    expect((await get('/api.ashx/v1/auditlog', withKey(adminKey, 'unknown.example'))).status).toBe(401);
    const list = JSON.parse((await cli(['tenant', 'list', '--json'], { dataDir })).stdout) as { host: string; primary: boolean }[];
    expect(list.find((t) => t.primary)?.host).toBe('office-b.example');
    const refuse = await cli(['tenant', 'remove', 'office-b.example'], { dataDir });
    expect(refuse.code).toBe(1);
    expect(refuse.stderr).toMatch(/primary/);
    expect((await cli(['tenant', 'set-primary', 'localhost'], { dataDir })).code).toBe(0);
    const rm = await cli(['tenant', 'remove', 'office-b.example'], { dataDir });
    expect(rm.code, rm.stderr).toBe(0);
    expect(readDb((db) => db.prepare("SELECT COUNT(*) AS n FROM users WHERE name = 'alice'").get())).toEqual({ n: 0 });
    expect((await cli(['tenant', 'remove', 'office-b.example'], { dataDir })).code).toBe(1);
  });

  it('migrate and doctor run beside the server (doctor: one line per check); SIGTERM stops the server with exit 0', async () => {
    const mig = await cli(['migrate'], { dataDir });
    expect(mig.code, mig.stderr).toBe(0);
    expect(mig.stdout).toMatch(/up to date/);
    const doc = await cli(['doctor'], { dataDir });
    expect(doc.code, doc.stdout + doc.stderr).toBe(0);
    const lines = doc.stdout.trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(5);
    for (const l of lines) expect(l).toMatch(/^(ok|warn|FAIL) {2,}\S/);
    expect(doc.stdout).toMatch(/^ok +data dir .* is writable$/m);
    expect(doc.stdout).toMatch(/^ok +database quick_check ok$/m);
    expect(doc.stdout).toMatch(/port 127\.0\.0\.1:8080/);

    const exit = await serve.stop('SIGTERM');
    expect(exit).toEqual({ code: 0, signal: null });
    expect(serve.output().stderr).toMatch(/SIGTERM: stopping/);
    expect(readDb((db) => db.pragma('integrity_check', { simple: true }))).toBe('ok');
  });
});

describe('exit codes and failures', { timeout: 240_000 }, () => {
  it('child processes: 0 ok, 1 failure, 2 usage; a bad config.json stops serve with 1 and the key path', async () => {
    const d = dir();
    const bad = dir();
    fs.writeFileSync(path.join(bad, 'config.json'), JSON.stringify({ http: { port: 'abc' } }));
    const [unknown, badRole, srv] = await Promise.all([
      runCli(['frobnicate'], { dataDir: d }),
      runCli(['user', 'add', 'carol', '--role', 'owner'], { dataDir: d }),
      runCli(['serve'], { dataDir: bad }),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command: frobnicate/);
    expect(badRole.code).toBe(2);
    expect(badRole.stderr).toMatch(/--role.*owner/);
    expect(srv.code).toBe(1);
    expect(srv.stderr).toMatch(/config http\.port: /);
    for (const r of [unknown, badRole, srv]) expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('help (0), migrate with a bad config (1), a database from a newer version (1), doctor failing check (1)', async () => {
    const noUser = await cli(['apikey', 'create', '--user', 'nobody'], { dataDir: dataDir });
    expect(noUser.code).toBe(1);
    expect(noUser.stderr).toMatch(/--user: no user nobody/);
    const help = await cli(['help']);
    expect(help.code).toBe(0);
    for (const c of [
      'serve',
      'tenant add HOST',
      'tenant set-primary HOST',
      'user add NAME',
      'user passwd NAME',
      'apikey create --user NAME',
      'apikey revoke ID',
      'admin-secret rotate',
      'migrate',
      'doctor',
    ])
      expect(help.stdout).toContain(c);
    const bad = dir();
    fs.writeFileSync(path.join(bad, 'config.json'), JSON.stringify({ http: { port: 'abc' } }));
    const mig = await cli(['migrate'], { dataDir: bad });
    expect(mig.code).toBe(1);
    expect(mig.stderr).toMatch(/config http\.port: /);

    const d = dir();
    expect((await cli(['migrate'], { dataDir: d })).code).toBe(0);
    fs.chmodSync(path.join(d, 'master.key'), 0o644);
    const doc = await cli(['doctor'], { dataDir: d });
    expect(doc.code).toBe(1);
    expect(doc.stdout).toMatch(/^FAIL +master key .*mode 644/m);
    const db = new Database(path.join(d, 'appliance.db'));
    db.prepare("INSERT INTO schema_migrations (plugin, version, name, applied_at) VALUES ('audit', 99, 'future', 'x')").run();
    db.close();
    const newer = await cli(['migrate'], { dataDir: d });
    expect(newer.code).toBe(1);
    expect(newer.stderr).toMatch(/audit\/99.*newer/);
  });

  it('a data dir made world-readable (0755, database 0644) is made private on open; doctor fails one it cannot fix', async () => {
    const d = dir();
    fs.chmodSync(d, 0o755);
    expect((await cli(['migrate'], { dataDir: d })).code).toBe(0);
    fs.chmodSync(d, 0o755);
    fs.chmodSync(path.join(d, 'appliance.db'), 0o644);
    expect((await cli(['tenant', 'list'], { dataDir: d })).code).toBe(0);
    expect(fs.statSync(d).mode & 0o777).toBe(0o700);
    expect(fs.statSync(path.join(d, 'appliance.db')).mode & 0o777).toBe(0o600);
    const doc = await cli(['doctor'], { dataDir: d });
    expect(doc.stdout).toMatch(/^ok +data dir is private to its owner \(mode 700\)/m);
    expect(doc.stdout).toMatch(/^ok +database is private to its owner \(mode 600\)/m);
    if (process.getuid?.() === 0) {
      // Owned by someone else: left as it is, and doctor says what to do.
      fs.chmodSync(d, 0o755);
      fs.chownSync(d, 4321, 4321);
      const bad = await cli(['doctor'], { dataDir: d });
      expect(bad.code).toBe(1);
      expect(bad.stdout).toMatch(/^FAIL +data dir .* is readable by other local users \(mode 755\); chmod 700 it/m);
    }
  });
});

describe('usage errors in-process (same main(), no child process)', () => {
  const plugins = [audit as AnyPlugin];
  async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
    const out: string[] = [];
    const err: string[] = [];
    const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' };
    const code = await main(argv, io, { plugins });
    return { code, out: out.join('\n'), err: err.join('\n') };
  }

  it('names the bad argument for every command', async () => {
    const d = dir();
    // The first command initialises the fresh dir (primary tenant localhost, its admin), as serve would.
    expect((await run(['tenant', 'list', '--data-dir', d])).code).toBe(0);
    const cases: [string[], RegExp][] = [
      [['tenant'], /subcommand required/],
      [['tenant', 'nope'], /unknown subcommand nope/],
      [['tenant', 'add'], /HOST is required/],
      [['tenant', 'add', 'a.example', 'b.example'], /unexpected argument: b\.example/],
      [['tenant', 'remove'], /HOST is required/],
      [['tenant', 'set-primary'], /HOST is required/],
      [['user', 'set-role', 'x'], /NAME and ROLE/],
      [['user', 'set-role', 'x', 'root'], /ROLE.*root/],
      [['user', 'passwd'], /NAME is required/],
      [['user', 'add', 'x', '--password', 'p', '--password-stdin'], /exclude each other/],
      [['apikey', 'create'], /--user/],
      [['apikey', 'revoke'], /ID is required/],
      [['apikey', 'list', '--bogus'], /--bogus/],
      [['admin-secret'], /subcommand required/],
      [['admin-secret', 'show', 'extra'], /unexpected argument: extra/],
      [['migrate', 'now'], /unexpected argument: now/],
      [['doctor', '--fix'], /--fix/],
      [['serve', '--port', 'abc'], /--port.*abc/],
      [['serve', '--tls-cert', 'x.pem'], /--tls-cert and --tls-key/],
      [['frobnicate'], /unknown command: frobnicate/],
    ];
    for (const [argv, re] of cases) {
      const r = await run([...argv, '--data-dir', d]);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err, argv.join(' ')).toMatch(re);
    }
    expect((await run(['tenant', 'list', '--data-dir'])).code).toBe(2);
    expect((await run([])).code).toBe(2);
  });
});

describe('a fresh data dir and a closed pipe', () => {
  it('any command on a fresh data dir initialises it as the first serve would (admin password once, on stderr)', async () => {
    const d = tempDir();
    const first = await runCli(['user', 'list', '--json'], { dataDir: d });
    expect(first.code, first.stderr).toBe(0);
    // stdout stays data a script can parse; the one-time notice goes to stderr.
    expect((JSON.parse(first.stdout) as { name: string; role: string }[]).map((u) => [u.name, u.role])).toEqual([['admin', 'admin']]);
    expect(first.stderr).toMatch(/^First start: primary tenant \S+, administrator "admin"\.$/m);
    const password = /^ {2}password: (\S+)$/m.exec(first.stderr)![1]!;
    const db = new Database(path.join(d, 'appliance.db'), { readonly: true });
    const row = db.prepare("SELECT password_hash FROM users WHERE name = 'admin'").get() as { password_hash: string };
    db.close();
    expect(await verifyPassword(password, row.password_hash)).toBe(true);
    const again = await runCli(['tenant', 'list'], { dataDir: d });
    expect(again.code).toBe(0);
    expect(again.stderr).not.toMatch(/password/);
    // A table ends every line, the last one included.
    expect(again.stdout.endsWith('\n')).toBe(true);
    expect(again.stdout.split('\n').filter(Boolean)).toHaveLength(2);
  });

  it('`sovcomms --help | head -1`: the reader closes the pipe early; the CLI exits 0 without a stack trace', async () => {
    const child = spawn(process.execPath, [BIN, 'help'], { cwd: ROOT, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    // Close our end before the CLI writes (as `head -1` does once it has its line): its writes get EPIPE.
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(stderr).not.toMatch(/EPIPE|at .+:\d+:\d+/);
    expect(code).toBe(0);
  });
});

describe('changes made with the CLI are audited', () => {
  it('with the actor cli:<OS user>, the tenant and the target; never a password or a key', async () => {
    const d = tempDir();
    const run = (argv: string[]) => cli(argv, { dataDir: d });
    expect((await run(['tenant', 'add', 'branch.example', '--name', 'Branch'])).code).toBe(0);
    expect((await run(['user', 'add', 'carol', '--tenant', 'branch.example', '--role', 'admin', '--password', 'carol secret pw 1'])).code).toBe(0);
    expect((await run(['user', 'passwd', 'carol', '--tenant', 'branch.example', '--password', 'carol secret pw 2'])).code).toBe(0);
    const key = await run(['apikey', 'create', '--user', 'carol', '--tenant', 'branch.example']);
    expect(key.code).toBe(0);
    expect((await run(['user', 'list', '--tenant', 'branch.example'])).code).toBe(0);
    const db = new Database(path.join(d, 'appliance.db'), { readonly: true });
    const rows = db
      .prepare(
        "SELECT h.host AS tenant, a.event, a.user, a.extra FROM audit_log a JOIN tenant_hosts h ON h.tenant_id = a.tenant_id AND h.position = 0 WHERE a.event LIKE 'cli-%' ORDER BY a.id",
      )
      .all() as {
      tenant: string;
      event: string;
      user: string;
      extra: string;
    }[];
    db.close();
    expect(rows.map((r) => [r.tenant, r.event])).toEqual([
      ['localhost', 'cli-tenant-add'],
      ['branch.example', 'cli-user-add'],
      ['branch.example', 'cli-user-passwd'],
      ['branch.example', 'cli-apikey-create'],
    ]);
    for (const r of rows) expect(r.user).toMatch(/^cli:\S+$/);
    expect(rows[0]!.extra).toMatch(/target=branch\.example/);
    expect(rows[1]!.extra).toMatch(/target=carol/);
    const all = JSON.stringify(rows);
    expect(all).not.toMatch(/carol secret pw|ak_/);
  });
});
