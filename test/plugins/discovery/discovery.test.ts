import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Bonjour, type Service } from 'bonjour-service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tenantsTxt } from '../../../plugins/discovery/advertiser.ts';
import { discoveryDecision, isLoopbackHost } from '../../../plugins/discovery/index.ts';
import { main } from '../../../server/cli.ts';
import { runCli } from '../../support/cli.ts';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { until } from '../../support/until.ts';

/**
 * mDNS on loopback only: `lo` gets the MULTICAST flag (Linux leaves it off), the advertiser and
 * the browsers join 224.0.0.251 on 127.0.0.1 with TTL 1, bound to the group address, on a random
 * port instead of 5353. Nothing reaches a real interface or a real LAN.
 */
const MDNS_PORT = 20000 + 2 * Math.floor(Math.random() * 10000);
const LOOPBACK_MDNS = { interface: '127.0.0.1', bind: '224.0.0.251', mdnsPort: MDNS_PORT, ttl: 1 };
const browserOpts = { interface: '127.0.0.1', bind: '224.0.0.251', port: MDNS_PORT, ttl: 1 };

let multicastOnLo = true;
const browsers: Bonjour[] = [];
const dirs: string[] = [];

beforeAll(() => {
  try {
    // Root in CI containers; elsewhere sudo without a password prompt, if allowed.
    if (process.getuid?.() === 0) execFileSync('ip', ['link', 'set', 'lo', 'multicast', 'on'], { stdio: 'pipe' });
    else execFileSync('sudo', ['-n', 'ip', 'link', 'set', 'lo', 'multicast', 'on'], { stdio: 'pipe' });
  } catch (e) {
    // Without CAP_NET_ADMIN the flag may already be set; the first test says so if it is not.
    multicastOnLo = execFileSync('ip', ['link', 'show', 'lo']).toString().includes('MULTICAST');
    if (!multicastOnLo) throw new Error(`cannot turn multicast on for lo: ${(e as Error).message}`, { cause: e });
  }
});

afterAll(() => {
  for (const b of browsers) b.destroy();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function browse(type: string): { up: Service[]; down: Service[] } {
  const b = new Bonjour(browserOpts, () => undefined);
  browsers.push(b);
  const seen = { up: [] as Service[], down: [] as Service[] };
  const br = b.find({ type });
  br.on('up', (s: Service) => seen.up.push(s));
  br.on('down', (s: Service) => seen.down.push(s));
  return seen;
}

describe('LAN discovery (mDNS on loopback)', () => {
  let s: TestServer;

  it('advertises _sovcomms._tcp with its TXT record and _http._tcp; both go away on stop', async () => {
    expect(multicastOnLo).toBe(true);
    s = await startTestServer({ overrides: { discovery: true, plugins: { discovery: { ...LOOPBACK_MDNS, name: 'Office Appliance' } } } });
    s.appliance.core.tenants.add('clinic.example', 'Clinic');
    const sov = browse('sovcomms');
    const web = browse('http');
    const found = await until(() => sov.up.find((x) => x.name === 'Office Appliance'), 10_000, '_sovcomms._tcp advertisement');
    expect(found.port).toBe(s.port);
    expect(found.type).toBe('sovcomms');
    expect(found.protocol).toBe('tcp');
    expect(found.txt).toEqual({
      version: expect.stringMatching(/^\d{8}\./),
      path: '/console/',
      api: '/api.ashx/v1',
      oidc: '/.well-known/openid-configuration',
      proto: 'http',
      tenants: 'localhost',
    });
    const http = await until(() => web.up.find((x) => x.name === 'Office Appliance'), 10_000, '_http._tcp advertisement');
    expect(http.port).toBe(s.port);
    expect(http.txt).toEqual({ path: '/console/' });
    const ready = (await (await s.fetch('/readyz')).json()) as { plugins: Record<string, { health?: { detail?: unknown } }> };
    expect(ready.plugins.discovery!.health!.detail).toEqual({ advertising: true, why: 'discovery: true' });

    await s.stop();
    await until(() => sov.down.find((x) => x.name === 'Office Appliance'), 10_000, 'goodbye of _sovcomms._tcp');
    await until(() => web.down.find((x) => x.name === 'Office Appliance'), 10_000, 'goodbye of _http._tcp');
  }, 60_000);

  it('`sovcomms discover --json` lists a running appliance; a bad --timeout-ms is a usage error', async () => {
    const srv = await startTestServer({ overrides: { discovery: true, plugins: { discovery: { ...LOOPBACK_MDNS, name: 'Front Desk' } } } });
    try {
      const dataDir = tempDir('sovcomms-discover-');
      dirs.push(dataDir);
      fs.writeFileSync(path.join(dataDir, 'config.json'), JSON.stringify({ plugins: { discovery: LOOPBACK_MDNS } }));
      const r = await runCli(['discover', '--timeout-ms', '2500', '--json'], { dataDir });
      expect(r.code, r.stderr).toBe(0);
      const list = JSON.parse(r.stdout) as { name: string; port: number; tenants: string[]; console: string; api: string; oidc: string; protocol: string }[];
      expect(list.find((x) => x.name === 'Front Desk')).toMatchObject({
        port: srv.port,
        tenants: ['localhost'],
        console: '/console/',
        api: '/api.ashx/v1',
        oidc: '/.well-known/openid-configuration',
        protocol: 'http',
      });
      const text = await runCli(['discover', '--timeout-ms', '2500'], { dataDir });
      expect(text.stdout).toMatch(new RegExp(`Front Desk\\s+http://\\S+:${srv.port}/console/`));
      // Usage errors in-process (the CLI's own main), one spawn less each on a loaded machine.
      for (const bad of ['abc', '10', '999999']) {
        const err: string[] = [];
        const code = await main(['discover', '--timeout-ms', bad, '--data-dir', dataDir], {
          out: () => undefined,
          err: (l) => err.push(l),
          stdin: async () => '',
        });
        expect(code, bad).toBe(2);
        expect(err.join('\n')).toContain('--timeout-ms: an integer from 100 to 60000');
      }
    } finally {
      await srv.stop();
    }
  }, 120_000);

  it('off by default on loopback (nothing on the wire); on by default on another address; the setting wins', async () => {
    expect(['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'a.localhost'].every(isLoopbackHost)).toBe(true);
    expect(['0.0.0.0', '::', '192.168.1.20', 'appliance.lan'].some(isLoopbackHost)).toBe(false);
    expect(discoveryDecision(undefined, '0.0.0.0')).toEqual({ enabled: true, reason: 'listening on 0.0.0.0' });
    expect(discoveryDecision(undefined, '192.168.1.20').enabled).toBe(true);
    expect(discoveryDecision(false, '0.0.0.0')).toEqual({ enabled: false, reason: 'discovery: false' });
    expect(discoveryDecision(true, '127.0.0.1')).toEqual({ enabled: true, reason: 'discovery: true' });
    // A server on loopback with the setting unset: nothing advertised (a browser would see nothing).
    const sov = browse('sovcomms');
    const off = await startTestServer({ overrides: { plugins: { discovery: { ...LOOPBACK_MDNS, name: 'Loopback Only' } } } });
    try {
      await new Promise((r) => setTimeout(r, 1500));
      expect(sov.up.filter((x) => x.name === 'Loopback Only')).toEqual([]);
      const ready = (await (await off.fetch('/readyz')).json()) as { plugins: Record<string, { health?: { detail?: unknown } }> };
      expect(ready.plugins.discovery!.health!.detail).toEqual({ advertising: false, why: 'listening on loopback (127.0.0.1) only' });
    } finally {
      await off.stop();
    }
  });

  it('TXT: tenant host names cut at whole names to fit one 255-byte string (RFC 6763 §6.1)', () => {
    const hosts = Array.from({ length: 40 }, (_, i) => `tenant-${i}.example.org`);
    const t = tenantsTxt(hosts);
    expect(Buffer.byteLength(`tenants=${t}`)).toBeLessThanOrEqual(255);
    expect(t.split(',')).toEqual(hosts.slice(0, t.split(',').length));
    expect(t.split(',').length).toBeGreaterThan(5);
  });
});
