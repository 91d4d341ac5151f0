import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Appliance, type ApplianceOptions } from '../../server/app.ts';
import type { Tenant } from '../../server/tenancy.ts';
import { signAdminHmac } from '../../server/auth.ts';
import { deepMerge } from '../../server/config.ts';

/**
 * fetch()-alike over node:http. undici's fetch silently drops a Host header, and tenancy is
 * chosen by Host, so tests need a client that sends it as given. Never follows redirects.
 */
export function httpFetch(
  url: string,
  init: { method?: string; headers?: Headers | Record<string, string>; body?: string | Buffer | URLSearchParams } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((v, k) => {
    headers[k] = v;
  });
  let body: Buffer | undefined;
  if (init.body instanceof URLSearchParams) {
    body = Buffer.from(init.body.toString());
    headers['content-type'] ??= 'application/x-www-form-urlencoded';
  } else if (init.body !== undefined) body = Buffer.isBuffer(init.body) ? init.body : Buffer.from(init.body);
  if (body) headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method ?? 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) {
          if (v === undefined) continue;
          for (const one of Array.isArray(v) ? v : [v]) h.append(k, one);
        }
        const status = res.statusCode ?? 500;
        const noBody = status === 204 || status === 304 || (init.method ?? 'GET') === 'HEAD';
        resolve(new Response(noBody ? null : Buffer.concat(chunks), { status, statusText: res.statusMessage, headers: h }));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export function tempDir(prefix = 'sovcomms-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Captures pino's JSON lines (redaction tests grep them). */
export class LogCapture extends Writable {
  lines: string[] = [];
  override _write(chunk: Buffer, _enc: string, cb: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    cb();
  }
  text(): string {
    return this.lines.join('\n');
  }
}

export interface TestServer {
  url: string;
  port: number;
  dataDir: string;
  appliance: Appliance;
  primary: Tenant;
  adminPassword: string;
  /** ak_ key of the primary tenant's admin. */
  adminKey: string;
  logs: LogCapture;
  /** fetch against the server; `host` sets the Host header (tenant selection). */
  fetch(
    pathAndQuery: string,
    init?: {
      method?: string;
      headers?: Record<string, string> | Headers;
      body?: string | Buffer | URLSearchParams;
      host?: string;
      json?: unknown;
      key?: string | null;
    },
  ): Promise<Response>;
  /** Admin HMAC signature for `bucket` on `host` (defaults to the primary host with port). */
  hmac(bucket: string, host?: string, bodyLen?: number): string;
  /** Adds a tenant with an admin and returns the admin's ak_ key. */
  addTenant(host: string): Promise<{ tenant: Tenant; adminKey: string }>;
  stop(): Promise<void>;
}

/**
 * Starts the real appliance on an ephemeral loopback port with a temporary data dir. Rate limits
 * are raised unless the test sets them (tests hammer one IP).
 */
export async function startTestServer(
  opts: ApplianceOptions & {
    keepDataDir?: boolean;
    /**
     * Configure the primary tenant's public origin as the URL the test talks to (as an operator
     * does with `sovcomms tenant set-origin` for the address wallets and relying parties use):
     * issuers, metadata and signed URLs then name http://127.0.0.1:PORT rather than localhost.
     */
    publicOrigin?: boolean;
  } = {},
): Promise<TestServer> {
  const dataDir = opts.dataDir ?? tempDir();
  const logs = new LogCapture();
  let adminPassword = '';
  // Tests talk only to loopback: the trusted-list plugin's scheduled upstream refresh is off
  // unless a test turns it on (a manual clock moved past its first run would reach the internet),
  // and no SIP bridge is spawned unless a test asks for one (the product default is embedded).
  const overrides = deepMerge(
    {
      http: { port: 0, host: '127.0.0.1', drainMs: 500 },
      rateLimit: { publicPerMinute: 100_000, authenticatedPerMinute: 100_000, sensitivePerMinute: 100_000, failedAuthPerMinute: 100_000 },
      jobs: { pollMs: 50 },
      log: { level: 'info' },
      plugins: { lotl: { autoRefresh: false }, telephony: { bridge: { mode: 'off' } } },
    },
    opts.overrides ?? {},
  );
  const appliance = await Appliance.create({
    ...opts,
    dataDir,
    overrides,
    env: opts.env ?? {},
    logDestination: opts.logDestination ?? logs,
    onFirstRun: (i) => {
      adminPassword = i.password;
    },
  });
  const { url, port } = await appliance.start();
  const core = appliance.core;
  if (opts.publicOrigin) core.tenants.setOrigin(core.tenants.primary()!.id, url);
  const primary = core.tenants.primary()!;
  const admin = core.users.byName(primary, 'admin')!;
  const adminKey = core.auth.createApiKey(primary, admin, { name: 'test', createdBy: 'test' }).key;
  const server: TestServer = {
    url,
    port,
    dataDir,
    appliance,
    primary,
    adminPassword,
    adminKey,
    logs,
    fetch(p, init = {}) {
      const headers = new Headers(init.headers);
      if (init.host) headers.set('Host', init.host);
      const key = init.key === undefined ? undefined : init.key;
      if (key) headers.set('Authorization', `Bearer ${key}`);
      let body = init.body;
      if (init.json !== undefined) {
        body = JSON.stringify(init.json);
        headers.set('Content-Type', 'application/json');
      }
      return httpFetch(url + p, { method: init.method ?? 'GET', headers, body: body as string | Buffer | URLSearchParams | undefined });
    },
    hmac(bucket, host = `127.0.0.1:${port}`, bodyLen) {
      return signAdminHmac(core.auth.adminSecret(), bucket, host, bodyLen);
    },
    async addTenant(host) {
      const tenant = core.tenants.add(host);
      const u = await core.users.add(tenant, { name: 'admin', role: 'admin', password: 'correct horse battery' });
      return { tenant, adminKey: core.auth.createApiKey(tenant, u, { createdBy: 'test' }).key };
    },
    async stop() {
      await appliance.stop();
      if (!opts.keepDataDir && !opts.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return server;
}
