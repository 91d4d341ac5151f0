import fs from 'node:fs';
import https from 'node:https';
import { X509Certificate } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { parse, str, table } from './cli-args.ts';
import { Appliance, bootstrap, openCore, loadBuiltinPlugins, type CoreServices } from './app.ts';
import { defaultDataDir, loadConfig } from './config.ts';
import { ConfigError, MigrationError, AppError } from './errors.ts';
import { hostServices, makePaths, PluginHost } from './plugin-host.ts';
import { UsageError, type AnyPlugin, type CliContext } from './plugin.ts';
import { AUDIT_WRITER, TLS_AUTO } from './core-services.ts';
import { signAdminHmacV2 } from './auth.ts';
import { BUILD } from './build-info.ts';
import type { Role } from './users.ts';

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  stdin(): Promise<string>;
}

/**
 * A reader that stops early (`sovcomms --help | head -1`) closes the pipe: the next write fails
 * with EPIPE. That is the reader's choice, not a failure: stop writing and exit quietly, with the
 * code the command would have had.
 */
let pipeClosed = false;
function quietOnEpipe(stream: NodeJS.WriteStream): void {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    pipeClosed = true;
    // Buffered writes are gone anyway; the exit code set by the command (or 0) stands.
    process.exit(process.exitCode ?? 0);
  });
}
let epipeArmed = false;

const defaultIo: CliIo = {
  out: (l) => {
    if (!epipeArmed) {
      epipeArmed = true;
      quietOnEpipe(process.stdout);
      quietOnEpipe(process.stderr);
    }
    if (!pipeClosed) process.stdout.write(l + '\n');
  },
  err: (l) => {
    if (!pipeClosed) process.stderr.write(l + '\n');
  },
  stdin: async () => {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
};

const CORE_USAGE: Record<string, string[]> = {
  serve: ['serve [--host H] [--port P] [--tls-cert F --tls-key F | --tls auto]'],
  tenant: [
    'tenant add HOST [--name N]',
    'tenant list [--json]',
    'tenant remove HOST',
    'tenant set-primary HOST',
    'tenant add-host HOST --tenant HOST',
    'tenant set-origin HOST (URL | --clear)',
  ],
  user: [
    'user add NAME [--tenant HOST] [--role admin|user] [--email E] [--password P | --password-stdin]',
    'user list [--tenant HOST] [--json]',
    'user passwd NAME [--tenant HOST] [--password P | --password-stdin]',
    'user set-role NAME ROLE [--tenant HOST]',
  ],
  apikey: ['apikey create --user NAME [--tenant HOST] [--name LABEL]', 'apikey list [--tenant HOST] [--json]', 'apikey revoke ID'],
  'admin-secret': [
    'admin-secret show',
    'admin-secret rotate',
    'admin-secret sign BUCKET [--host H] [--body-file F]   (prints the X-Service-Admin-Signature-V2 header)',
  ],
  migrate: ['migrate'],
  doctor: ['doctor'],
};

interface Opened {
  core: CoreServices;
  host: PluginHost;
  plugins: AnyPlugin[];
  ctx(plugin: string | null, io: CliIo): CliContext;
  close(): void;
}

/** Opens the store for a CLI command: core and plugin migrations applied, events declared. */
async function openForCli(dataDir: string, io: CliIo, plugins?: AnyPlugin[]): Promise<Opened> {
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
  const list = plugins ?? (await loadBuiltinPlugins());
  const disabled = new Set(core.config.disabledPlugins);
  const host = new PluginHost(
    list.filter((p) => !disabled.has(p.name)),
    hostServices(core),
  );
  try {
    host.configure();
    host.migrateAll();
    host.declareEvents();
    // The same setup as the server's: a command runs on the very services the server would build.
    await host.setupAll();
    core.audit.target = host.provided(AUDIT_WRITER);
  } catch (e) {
    core.db.close();
    throw e;
  }
  return {
    core,
    host,
    plugins: list,
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

/** Subcommands that only read or print: everything else changes something and is audited. */
const READ_ONLY = new Set(['list', 'show', 'status', 'sign', 'discover', 'help']);
/** Options whose value is safe to keep in the audit log (targets and labels, never secrets). */
const AUDITED_OPTIONS = new Set(['tenant', 'name', 'role', 'user', 'url', 'events', 'host', 'grant', 'auth-method', 'format', 'id', 'email']);

/**
 * Every change made with the CLI is audited like one made over HTTP: the actor is `cli:<OS user>`
 * (the console machine's account), the tenant the one the command named (else the primary), the
 * target its positional arguments and its non-secret options. Passwords, PINs, keys and secrets
 * given on the command line never reach the log (the audit writer drops secret-looking keys too).
 */
function auditCliChange(o: Opened, cmd: string, args: string[]): void {
  if (cmd === 'migrate' || cmd === 'doctor' || cmd === 'serve') return;
  const [sub = '', ...rest] = args;
  if (READ_ONLY.has(sub)) return;
  const extra: Record<string, string> = {};
  const target: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (!a.startsWith('--')) {
      target.push(a);
      continue;
    }
    const [flag, inline] = a.slice(2).split('=', 2) as [string, string | undefined];
    const next = rest[i + 1];
    const value = inline ?? (next !== undefined && !next.startsWith('--') ? (i++, next) : 'true');
    if (AUDITED_OPTIONS.has(flag)) extra[flag] = extra[flag] ? `${extra[flag]},${value}` : value;
  }
  if (target.length) extra.target = target.join(' ');
  let osUser = process.env.USER ?? '';
  try {
    osUser = os.userInfo().username;
  } catch {
    // No passwd entry (a container's numeric user): $USER, or unknown.
  }
  let tenant;
  try {
    tenant = o.core.tenants.require(extra.tenant);
  } catch {
    tenant = o.core.tenants.primary();
  }
  if (!tenant) return;
  try {
    o.core.audit.write(tenant, { event: `cli-${cmd}${sub ? `-${sub}` : ''}`.slice(0, 64), user: `cli:${osUser || 'unknown'}`, extra });
  } catch (e) {
    // The change is made; a failing audit write is reported, not turned into a failed command.
    o.core.log.warn({ err: (e as Error).message, cmd, sub }, 'audit entry for a CLI change not written');
  }
}

/** What the first start says, once: the primary tenant and the generated administrator password. */
function firstRunLines({ host, user, password }: { host: string; user: string; password: string }): string[] {
  return [
    `First start: primary tenant ${host}, administrator "${user}".`,
    `  password: ${password}`,
    `  (shown once; change it with: sovcomms user passwd ${user})`,
  ];
}

async function readPassword(values: Record<string, unknown>, io: CliIo): Promise<string | undefined> {
  if (values['password-stdin']) {
    if (values.password !== undefined) throw new UsageError('--password and --password-stdin exclude each other');
    return (await io.stdin()).replace(/\r?\n$/, '');
  }
  return str(values.password);
}

async function cmdServe(args: string[], io: CliIo): Promise<number> {
  const { values } = parse(
    args,
    {
      host: { type: 'string' },
      port: { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      tls: { type: 'string' },
    },
    0,
  );
  const http: Record<string, unknown> = {};
  if (values.host) http.host = values.host;
  if (values.port !== undefined) {
    const p = Number(values.port);
    if (!Number.isInteger(p) || p < 0 || p > 65535) throw new UsageError(`--port: not a port number: ${values.port}`);
    http.port = p;
  }
  if (values['tls-cert'] || values['tls-key']) {
    if (!values['tls-cert'] || !values['tls-key']) throw new UsageError('--tls-cert and --tls-key go together');
    http.tls = { cert: path.resolve(String(values['tls-cert'])), key: path.resolve(String(values['tls-key'])) };
  } else if (values.tls !== undefined) {
    if (values.tls !== 'auto') throw new UsageError(`--tls: only "auto" is accepted, got ${values.tls}`);
    http.tls = 'auto';
  }
  const appliance = await Appliance.create({
    dataDir: str(values['data-dir']),
    overrides: Object.keys(http).length ? { http } : {},
    onFirstRun: (first) => {
      for (const line of firstRunLines(first)) io.out(line);
    },
  });
  const { url } = await appliance.start();
  io.out(`sovcomms ${BUILD} listening on ${url}`);
  const parentPort = (
    process as unknown as {
      parentPort?: {
        postMessage(m: unknown): void;
        on(e: 'message', cb: (ev: { data: unknown }) => void): void;
        off?(e: 'message', cb: (ev: { data: unknown }) => void): void;
      };
    }
  ).parentPort;
  // The desktop shell pins the certificate it is told here (over the parent channel, not the network).
  const certFingerprint256 = serverCertFingerprint(appliance);
  const started = { type: 'server-started', url, ...(certFingerprint256 ? { certFingerprint256 } : {}) };
  // Same readiness signal headless and under Electron's utilityProcess (actualbudget's idea).
  parentPort?.postMessage(started);
  process.send?.(started);
  let release = () => {
    // Replaced once the listeners below are set.
  };
  await new Promise<void>((resolve) => {
    const stop = (why: string) => {
      io.err(`${why}: stopping`);
      void appliance.stop().then(resolve, resolve);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    // A utilityProcess has no signal on Windows (kill() terminates it): the parent asks by message.
    const onMessage = (m: unknown) => {
      if ((m as { type?: string } | null)?.type === 'shutdown') stop('shutdown requested');
    };
    const onPortMessage = (ev: { data: unknown }) => onMessage(ev.data);
    parentPort?.on('message', onPortMessage);
    process.on('message', onMessage);
    // Listening keeps the channel (and the process) alive: let go once stopped.
    release = () => {
      parentPort?.off?.('message', onPortMessage);
      process.off('message', onMessage);
    };
  });
  release();
  return 0;
}

/** SHA-256 (hex with colons) of the certificate the listener serves, when it serves HTTPS. */
function serverCertFingerprint(appliance: Appliance): string | undefined {
  if (!(appliance.server instanceof https.Server)) return undefined;
  const tls = appliance.core.config.http.tls;
  const pem =
    tls === 'auto'
      ? appliance.host.provided(TLS_AUTO)?.getCredentials().cert
      : tls
        ? fs.readFileSync(path.resolve(appliance.core.config.dataDir, tls.cert))
        : undefined;
  if (!pem) return undefined;
  try {
    return new X509Certificate(pem).fingerprint256;
  } catch {
    return undefined;
  }
}

async function cmdTenant(args: string[], io: CliIo, o: Opened): Promise<number> {
  const [sub, ...rest] = args;
  const t = o.core.tenants;
  switch (sub) {
    case 'add': {
      const { values, positionals } = parse(rest, { name: { type: 'string' } }, 1);
      if (!positionals[0]) throw new UsageError('tenant add: HOST is required');
      const tenant = t.add(positionals[0], str(values.name));
      io.out(`tenant ${tenant.host} added (id ${tenant.id}${tenant.isPrimary ? ', primary' : ''})`);
      return 0;
    }
    case 'add-host': {
      const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 1);
      if (!positionals[0]) throw new UsageError('tenant add-host: HOST is required');
      const tenant = t.require(str(values.tenant));
      t.addHost(tenant.id, positionals[0]);
      io.out(`host ${positionals[0]} now serves tenant ${tenant.host}`);
      return 0;
    }
    case 'list': {
      const { values } = parse(rest, { json: { type: 'boolean' } }, 0);
      const list = t.list().map((x) => ({ id: x.id, host: x.host, name: x.name, primary: x.isPrimary, hosts: x.hosts, origin: x.publicOrigin ?? null }));
      if (values.json) io.out(JSON.stringify(list, null, 2));
      else
        for (const l of table(
          list.map((x) => ({ ...x, primary: x.primary ? 'yes' : '', hosts: x.hosts.join(','), origin: x.origin ?? '(default)' })),
          ['host', 'name', 'id', 'primary', 'hosts', 'origin'],
        ))
          io.out(l);
      return 0;
    }
    case 'remove': {
      const { positionals } = parse(rest, {}, 1);
      if (!positionals[0]) throw new UsageError('tenant remove: HOST is required');
      const removed = t.remove(positionals[0]);
      io.out(`tenant ${removed.host} removed with all its data`);
      return 0;
    }
    case 'set-primary': {
      const { positionals } = parse(rest, {}, 1);
      if (!positionals[0]) throw new UsageError('tenant set-primary: HOST is required');
      io.out(`tenant ${t.setPrimary(positionals[0]).host} is now primary`);
      return 0;
    }
    case 'set-origin': {
      const { values, positionals } = parse(rest, { clear: { type: 'boolean' } }, 2);
      if (!positionals[0]) throw new UsageError('tenant set-origin: HOST is required');
      if (!positionals[1] === !values.clear) throw new UsageError('tenant set-origin: give the origin URL (https://name[:port]) or --clear');
      const tenant = t.setOrigin(t.require(positionals[0]).id, values.clear ? null : positionals[1]!);
      io.out(
        tenant.publicOrigin
          ? `tenant ${tenant.host} now signs and publishes its URLs under ${tenant.publicOrigin}`
          : `tenant ${tenant.host} uses the default origin (its host name on the listening scheme and port)`,
      );
      return 0;
    }
    default:
      throw new UsageError(sub ? `tenant: unknown subcommand ${sub}` : 'tenant: subcommand required (add, add-host, list, remove, set-primary, set-origin)');
  }
}

async function cmdUser(args: string[], io: CliIo, o: Opened): Promise<number> {
  const [sub, ...rest] = args;
  const users = o.core.users;
  switch (sub) {
    case 'add': {
      const { values, positionals } = parse(
        rest,
        {
          tenant: { type: 'string' },
          role: { type: 'string' },
          email: { type: 'string' },
          password: { type: 'string' },
          'password-stdin': { type: 'boolean' },
        },
        1,
      );
      if (!positionals[0]) throw new UsageError('user add: NAME is required');
      const role = str(values.role) ?? 'user';
      if (role !== 'admin' && role !== 'user') throw new UsageError(`--role: must be admin or user, got ${role}`);
      const tenant = o.core.tenants.require(str(values.tenant));
      const password = await readPassword(values, io);
      const u = await users.add(tenant, { name: positionals[0], role, email: str(values.email) ?? null, password: password ?? null });
      io.out(`user ${u.name} added to ${tenant.host} (role ${u.role}${u.status === 'invited' ? ', invited: no password yet' : ''})`);
      return 0;
    }
    case 'list': {
      const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
      const tenant = o.core.tenants.require(str(values.tenant));
      const list = users.list(tenant).map((u) => ({ id: u.id, name: u.name, email: u.email, role: u.role, status: u.status, createdAt: u.createdAt }));
      if (values.json) io.out(JSON.stringify(list, null, 2));
      else for (const l of table(list, ['name', 'role', 'status', 'email', 'id'])) io.out(l);
      return 0;
    }
    case 'passwd': {
      const { values, positionals } = parse(rest, { tenant: { type: 'string' }, password: { type: 'string' }, 'password-stdin': { type: 'boolean' } }, 1);
      if (!positionals[0]) throw new UsageError('user passwd: NAME is required');
      const tenant = o.core.tenants.require(str(values.tenant));
      const password = await readPassword(values, io);
      if (!password) throw new UsageError('user passwd: --password or --password-stdin is required');
      await users.setPassword(tenant, positionals[0], password);
      io.out(`password of ${positionals[0]} changed`);
      return 0;
    }
    case 'set-role': {
      const { values, positionals } = parse(rest, { tenant: { type: 'string' } }, 2);
      if (!positionals[0] || !positionals[1]) throw new UsageError('user set-role: NAME and ROLE are required');
      const role = positionals[1];
      if (role !== 'admin' && role !== 'user') throw new UsageError(`ROLE: must be admin or user, got ${role}`);
      const tenant = o.core.tenants.require(str(values.tenant));
      users.setRole(tenant, positionals[0], role as Role);
      io.out(`${positionals[0]} is now ${role}`);
      return 0;
    }
    default:
      throw new UsageError(sub ? `user: unknown subcommand ${sub}` : 'user: subcommand required (add, list, passwd, set-role)');
  }
}

async function cmdApiKey(args: string[], io: CliIo, o: Opened): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'create': {
      const { values } = parse(rest, { user: { type: 'string' }, tenant: { type: 'string' }, name: { type: 'string' } }, 0);
      if (!values.user) throw new UsageError('apikey create: --user NAME is required');
      const tenant = o.core.tenants.require(str(values.tenant));
      const user = o.core.users.byName(tenant, String(values.user));
      if (!user) throw new AppError(404, 'not_found', `--user: no user ${values.user} in ${tenant.host}`);
      const { key, info } = o.core.auth.createApiKey(tenant, user, { name: str(values.name), createdBy: 'cli' });
      io.out(key);
      io.err(`API key ${info.id} for ${user.name} (${user.role}) created; the key above is shown once.`);
      return 0;
    }
    case 'list': {
      const { values } = parse(rest, { tenant: { type: 'string' }, json: { type: 'boolean' } }, 0);
      const tenant = o.core.tenants.require(str(values.tenant));
      const list = o.core.auth
        .listApiKeys(tenant)
        .map((k) => ({ id: k.id, user: k.userName, name: k.name, prefix: k.prefix, createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, revokedAt: k.revokedAt }));
      if (values.json) io.out(JSON.stringify(list, null, 2));
      else
        for (const l of table(
          list.map((k) => ({ ...k, status: k.revokedAt ? 'revoked' : 'active' })),
          ['id', 'user', 'name', 'prefix', 'status', 'lastUsedAt'],
        ))
          io.out(l);
      return 0;
    }
    case 'revoke': {
      const { positionals } = parse(rest, {}, 1);
      if (!positionals[0]) throw new UsageError('apikey revoke: ID is required');
      const k = o.core.auth.revokeApiKey(null, positionals[0]);
      io.out(`API key ${k.id} revoked`);
      return 0;
    }
    default:
      throw new UsageError(sub ? `apikey: unknown subcommand ${sub}` : 'apikey: subcommand required (create, list, revoke)');
  }
}

async function cmdAdminSecret(args: string[], io: CliIo, o: Opened): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'sign') {
    // For scripts: `curl -H "$(sovcomms admin-secret sign whitelist-add --body-file b.json)" --data-binary @b.json ...`
    const { values, positionals } = parse(rest, { host: { type: 'string' }, 'body-file': { type: 'string' } }, 1);
    const bucket = positionals[0];
    if (!bucket) throw new UsageError('admin-secret sign: BUCKET is required');
    if (!/^[a-z0-9][a-z0-9._-]{0,63}$/.test(bucket)) throw new UsageError(`BUCKET: not a bucket name: ${bucket}`);
    // The Host header exactly as the client will send it; by default the address `serve` listens on.
    const c = o.core.config.http;
    const host = str(values.host) ?? `${c.host.includes(':') ? `[${c.host}]` : c.host}:${c.port}`;
    const file = str(values['body-file']);
    let body: Buffer = Buffer.alloc(0);
    if (file) {
      try {
        body = fs.readFileSync(file);
      } catch (e) {
        throw new UsageError(`--body-file: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      }
    }
    io.out(`X-Service-Admin-Signature-V2: ${signAdminHmacV2(o.core.auth.adminSecret(), bucket, host, body)}`);
    return 0;
  }
  parse(rest, {}, 0);
  if (sub === 'show') io.out(o.core.auth.adminSecret());
  else if (sub === 'rotate') {
    io.out(o.core.auth.rotateAdminSecret());
    io.err('admin HMAC secret rotated; signatures made with the old one are refused from now on');
  } else throw new UsageError(sub ? `admin-secret: unknown subcommand ${sub}` : 'admin-secret: subcommand required (show, rotate, sign)');
  return 0;
}

async function cmdDoctor(o: Opened, io: CliIo): Promise<number> {
  let failures = 0;
  const ok = (m: string) => io.out(`ok    ${m}`);
  const warn = (m: string) => io.out(`warn  ${m}`);
  const fail = (m: string) => {
    failures++;
    io.out(`FAIL  ${m}`);
  };
  const c = o.core.config;
  try {
    fs.accessSync(c.dataDir, fs.constants.W_OK);
    ok(`data dir ${c.dataDir} is writable`);
  } catch {
    fail(`data dir ${c.dataDir} is not writable`);
  }
  // Only the owner may read the data dir and the store (sealed secrets, hashes, call records).
  for (const [what, p] of [
    ['data dir', c.dataDir],
    ['database', path.join(c.dataDir, 'appliance.db')],
  ] as const) {
    const mode = fs.statSync(p).mode & 0o777;
    if (mode & 0o077) fail(`${what} ${p} is readable by other local users (mode ${mode.toString(8)}); chmod ${what === 'data dir' ? '700' : '600'} it`);
    else ok(`${what} is private to its owner (mode ${mode.toString(8)})`);
  }
  const keyFile = path.join(c.dataDir, 'master.key');
  if (o.core.keys.source === 'file') {
    const mode = fs.statSync(keyFile).mode & 0o777;
    if (mode & 0o077) fail(`master key ${keyFile} is readable by others (mode ${mode.toString(8)}); chmod 600 it`);
    else ok('master key file has mode 600');
  } else ok(`master key from ${o.core.keys.source}`);
  const integrity = o.core.db.pragma('quick_check', { simple: true });
  if (integrity === 'ok') ok('database quick_check ok');
  else fail(`database quick_check: ${String(integrity)}`);
  const tenants = o.core.tenants.list();
  if (!tenants.length) warn('no tenants yet: `sovcomms serve` creates the primary tenant on first start');
  else ok(`${tenants.length} tenant(s), primary ${tenants.find((t) => t.isPrimary)?.host ?? '(none!)'}`);
  const portFree = await new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(c.http.port, c.http.host, () => s.close(() => resolve(true)));
  });
  if (portFree) ok(`port ${c.http.host}:${c.http.port} is free`);
  else warn(`port ${c.http.host}:${c.http.port} is in use (the appliance may already be running)`);
  for (const [tool, why] of [
    ['sipp', 'SIP trunk tests (Debian sip-tester)'],
    ['softhsm2-util', 'HSM tests (Debian softhsm2)'],
    ['chromium', 'browser tests (Debian chromium)'],
    ['openssl', 'certificate checks'],
  ] as const) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
      ok(`${tool} found`);
    } catch {
      warn(`${tool} not found: needed for ${why}`);
    }
  }
  for (const p of o.plugins) ok(`plugin ${p.name} loaded`);
  return failures ? 1 : 0;
}

/** Every usage line, core commands first, then each plugin's. */
export async function cliUsage(plugins?: AnyPlugin[]): Promise<string[]> {
  const list = plugins ?? (await loadBuiltinPlugins());
  return [...Object.values(CORE_USAGE).flat(), ...list.flatMap((p) => Object.values(p.cli ?? {}).flatMap((c) => c.usage))];
}

async function help(io: CliIo, plugins: AnyPlugin[]): Promise<void> {
  io.out('usage: sovcomms <command> [options]   (every command takes --data-dir DIR; default ./data or $SOVCOMMS_DATA_DIR)');
  for (const l of await cliUsage(plugins)) io.out(`  sovcomms ${l}`);
}

/** Runs one CLI invocation; returns the exit code (0 ok, 1 failure, 2 usage). */
export async function main(argv: string[], io: CliIo = defaultIo, opts: { plugins?: AnyPlugin[] } = {}): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    if (!cmd || cmd === 'help' || cmd === '--help' || cmd === '-h') {
      await help(io, opts.plugins ?? (await loadBuiltinPlugins()));
      return cmd ? 0 : 2;
    }
    if (cmd === '--version' || cmd === 'version') {
      io.out(BUILD);
      return 0;
    }
    if (cmd === 'serve') return await cmdServe(rest, io);
    const dataDir = dataDirOf(rest);
    const plugins = opts.plugins ?? (await loadBuiltinPlugins());
    const pluginCmd = plugins.map((p) => ({ p, c: p.cli?.[cmd] })).find((x) => x.c);
    if (!CORE_USAGE[cmd] && !pluginCmd) throw new UsageError(`unknown command: ${cmd} (see sovcomms help)`);
    if (cmd === 'migrate') loadConfig({ dataDir });
    const o = await openForCli(dataDir, io, plugins);
    try {
      const args = stripDataDir(rest);
      const run = async (): Promise<number> => {
        switch (cmd) {
          case 'tenant':
            return await cmdTenant(args, io, o);
          case 'user':
            return await cmdUser(args, io, o);
          case 'apikey':
            return await cmdApiKey(args, io, o);
          case 'admin-secret':
            return await cmdAdminSecret(args, io, o);
          case 'migrate': {
            parse(args, {}, 0);
            io.out(`database ${path.join(o.core.config.dataDir, 'appliance.db')} is up to date`);
            return 0;
          }
          case 'doctor':
            parse(args, {}, 0);
            return await cmdDoctor(o, io);
          default:
            return await pluginCmd!.c!.run(args, o.ctx(pluginCmd!.p.name, io), o.host.services(pluginCmd!.p.name));
        }
      };
      const code = await run();
      if (code === 0) auditCliChange(o, cmd, args);
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
