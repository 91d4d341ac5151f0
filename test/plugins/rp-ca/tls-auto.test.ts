import 'reflect-metadata';
import crypto from 'node:crypto';
import { TLS_AUTO } from '../../../server/core-services.ts';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type tls from 'node:tls';
import { spawn, type ChildProcess } from 'node:child_process';
import * as x509 from '@peculiar/x509';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { openssl, REPO_ROOT, writeTemp } from './helpers.ts';
import { main } from '../../../server/cli.ts';
import type { TlsAutoService } from '../../../plugins/rp-ca/lazy.ts';
import type { RpCaServices } from '../../../plugins/rp-ca/index.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

interface Got {
  status: number;
  body: string;
  cert: tls.PeerCertificate;
}

/** GET over node:https with our own trust settings; a fresh connection every time (no agent). */
function get(url: string, opts: { ca?: string; insecure?: boolean; host?: string } = {}): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      url,
      { ca: opts.ca, rejectUnauthorized: !opts.insecure, agent: false, headers: opts.host ? { host: opts.host } : {}, timeout: 10_000 },
      (res) => {
        // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- an https request's socket is the TLSSocket its agent made
        const cert = (res.socket as tls.TLSSocket).getPeerCertificate();
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, cert }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

function lanAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flatMap((l) => l ?? [])
    .filter((a) => !a.internal && !/^fe80:/i.test(a.address))
    .map((a) => a.address);
}

/** The IP SANs as Node prints them (`IP Address:...`, IPv6 in full uncompressed upper case). */
function sanIps(cert: tls.PeerCertificate): string[] {
  return (cert.subjectaltname ?? '')
    .split(', ')
    .filter((n) => n.startsWith('IP Address:'))
    .map((n) => n.slice('IP Address:'.length));
}

/** IPv6 in one spelling (Node prints SAN addresses uncompressed and upper-case). */
function canonIp(ip: string): string {
  if (!ip.includes(':')) return ip;
  const [head, tail] = ip.toLowerCase().split('::');
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array<string>(8 - h.length - t.length).fill('0');
  return [...h, ...fill, ...t].map((g) => parseInt(g, 16).toString(16)).join(':');
}

function sameIp(a: string, b: string): boolean {
  return canonIp(a) === canonIp(b);
}

// Child processes (tsx start-up) and many signatures take long on the shared, loaded 2-core machine.
describe('serve --tls auto: the appliance serves HTTPS with a certificate from its own CA', { timeout: 120_000 }, () => {
  it('`sovcomms serve --tls auto` answers over HTTPS with a chain node:https accepts against the CA, for its names and LAN addresses', async () => {
    const dataDir = tempDir('rp-ca-tls-serve-');
    const child: ChildProcess = spawn(
      process.execPath,
      [path.join(REPO_ROOT, 'bin/sovcomms.mjs'), 'serve', '--tls', 'auto', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, SOVCOMMS_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    cleanups.push(async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    });
    let stdout = '';
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve did not start:\n${stdout}\n${stderr}`)), 60_000);
      child.stdout!.on('data', (c: Buffer) => {
        stdout += c.toString();
        const m = /listening on (https:\/\/\S+)/.exec(stdout);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      child.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${stdout}\n${stderr}`)));
    });
    expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);

    // Without the CA, the certificate is not trusted.
    await expect(get(`${url}/healthz`)).rejects.toThrow(/certificate|self.signed|issuer/i);
    // Bootstrap: fetch the CA (a LAN browser's first step), then check it out of band against `ca status`.
    const caPem = (await get(`${url}/rp-cert.ashx?ca`, { insecure: true })).body;
    const ca = new x509.X509Certificate(caPem);
    const out: string[] = [];
    expect(await main(['ca', 'status', '--json', '--data-dir', dataDir], { out: (l) => out.push(l), err: () => {}, stdin: async () => '' })).toBe(0);
    const status = JSON.parse(out.join('\n'));
    expect(status.fingerprintSha256.replace(/:/g, '').toLowerCase()).toBe(Buffer.from(await ca.getThumbprint('SHA-256')).toString('hex'));
    expect(status.key.kind).toBe('software');

    const ok = await get(`${url}/healthz`, { ca: caPem });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({ status: 'ok' });
    const port = new URL(url).port;
    const viaName = await get(`https://localhost:${port}/healthz`, { ca: caPem });
    expect(viaName.status).toBe(200);

    const names = viaName.cert.subjectaltname ?? '';
    expect(names).toContain('DNS:localhost');
    expect(names).toContain('IP Address:127.0.0.1');
    expect(names).toContain(`DNS:${os.hostname().toLowerCase()}`);
    const ips = sanIps(viaName.cert);
    for (const a of lanAddresses()) expect({ a, found: ips.some((ip) => sameIp(ip, a)) }).toEqual({ a, found: true });
    expect(ips.some((ip) => sameIp(ip, '::1'))).toBe(true);
    // The primary tenant's host name is in it too.
    expect(names).toContain(`DNS:${status.tenant}`);

    // A verifier no one here wrote agrees, and the certificate is a TLS server certificate.
    const leafPem = `-----BEGIN CERTIFICATE-----\n${viaName.cert.raw.toString('base64')}\n-----END CERTIFICATE-----\n`;
    const work = tempDir('rp-ca-tls-work-');
    cleanups.push(() => fs.rmSync(work, { recursive: true, force: true }));
    const v = await openssl(['verify', '-purpose', 'sslserver', '-CAfile', writeTemp(work, 'ca.pem', caPem), writeTemp(work, 'leaf.pem', leafPem)]);
    expect(v.out).toContain(': OK');

    // Another CA does not vouch for it.
    const other = await startOtherCa();
    await expect(get(`${url}/healthz`, { ca: other })).rejects.toThrow();
  });

  it('renewal: new host names and approaching expiry give a new certificate, and the running listener serves it', async () => {
    let offset = 0;
    const s: TestServer = await startTestServer({
      clock: { now: () => Date.now() + offset },
      overrides: { http: { port: 0, host: '127.0.0.1', drainMs: 500, tls: 'auto' } },
    });
    cleanups.push(() => s.stop());
    expect(s.url).toMatch(/^https:/);
    // The rp-ca plugin's provider (TLS_AUTO's implementation), with its renewal check and serial.
    const auto = s.appliance.host.provided(TLS_AUTO) as TlsAutoService;
    const ca = s.appliance.core.db.prepare('SELECT cert_der FROM rp_ca WHERE tenant_id = ?').get(s.primary.id) as { cert_der: Buffer };
    const caPem = `-----BEGIN CERTIFICATE-----\n${ca.cert_der.toString('base64')}\n-----END CERTIFICATE-----\n`;

    const first = await get(`${s.url}/healthz`, { ca: caPem });
    expect(first.status).toBe(200);
    expect(first.cert.serialNumber.toLowerCase()).toBe(auto.serial);
    // The renewal check is a durable job.
    const job = s.appliance.core.db.prepare("SELECT state FROM jobs WHERE queue = 'rp-ca.tls-renew'").get() as { state: string } | undefined;
    expect(job?.state).toBe('pending');

    // Nothing changed: no new certificate.
    expect(await auto.ensure()).toBe(false);

    await s.addTenant('new-office.example');
    expect(await auto.ensure()).toBe(true);
    const second = await get(`${s.url}/healthz`, { ca: caPem });
    expect(second.cert.serialNumber).not.toBe(first.cert.serialNumber);
    expect(second.cert.subjectaltname).toContain('DNS:new-office.example');

    // 65 days later (of 90), fewer than 30 are left: renewed.
    offset = 65 * 86_400_000;
    expect(await auto.ensure()).toBe(true);
    const third = await get(`${s.url}/healthz`, { insecure: true });
    expect(third.cert.serialNumber).not.toBe(second.cert.serialNumber);
    expect(Date.parse(third.cert.valid_to)).toBeGreaterThan(Date.now() + 150 * 86_400_000);

    // The HTTPS certificates are in the CA's list, marked tls.
    const list = s.appliance.core.db.prepare("SELECT COUNT(*) AS n FROM rp_cert WHERE purpose = 'tls'").get() as { n: number };
    expect(list.n).toBe(3);
    const keyRow = s.appliance.core.db.prepare('SELECT sealed_key FROM rp_tls').get() as { sealed_key: string };
    expect(keyRow.sealed_key).toMatch(/^v1\./);

    // A new CA (`ca init --force`, same subject, another key): the stored certificate no longer
    // chains to it, so the next check issues one from the new CA, which clients then accept.
    offset = 0;
    const quiet = { out: () => {}, err: () => {}, stdin: async () => '' };
    expect(await main(['ca', 'init', '--force', '--data-dir', s.dataDir], quiet)).toBe(0);
    const ca2 = s.appliance.core.db.prepare('SELECT cert_der FROM rp_ca WHERE tenant_id = ?').get(s.primary.id) as { cert_der: Buffer };
    expect(ca2.cert_der.equals(ca.cert_der)).toBe(false);
    expect(await auto.ensure()).toBe(true);
    const ca2Pem = new crypto.X509Certificate(ca2.cert_der).toString();
    const fourth = await get(`${s.url}/healthz`, { ca: ca2Pem });
    expect(fourth.status).toBe(200);
    expect(fourth.cert.serialNumber.toLowerCase()).toBe(auto.serial);
    expect(await auto.ensure()).toBe(false);
  });
});

describe('serve --tls auto on a restart', { timeout: 120_000 }, () => {
  it('adopts the stored certificate with node:crypto alone: the CA code is not loaded while nothing needs issuing', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const overrides = { http: { port: 0, host: '127.0.0.1', drainMs: 500, tls: 'auto' } };
    const first = await startTestServer({ dataDir, overrides });
    const serial = (first.appliance.host.provided(TLS_AUTO) as TlsAutoService).serial;
    expect((first.appliance.host.services('rp-ca') as RpCaServices).ca.loaded()).toBeDefined();
    await first.stop();

    const s = await startTestServer({ dataDir, overrides });
    cleanups.push(() => s.stop());
    const auto = s.appliance.host.provided(TLS_AUTO) as TlsAutoService;
    expect(auto.serial).toBe(serial);
    expect(await auto.ensure()).toBe(false);
    expect((s.appliance.host.services('rp-ca') as RpCaServices).ca.loaded()).toBeUndefined();
    const ca = s.appliance.core.db.prepare('SELECT cert_der FROM rp_ca WHERE tenant_id = ?').get(s.primary.id) as { cert_der: Buffer };
    const served = await get(`${s.url}/healthz`, { ca: new crypto.X509Certificate(ca.cert_der).toString() });
    expect(served.status).toBe(200);
    expect(served.cert.serialNumber.toLowerCase()).toBe(serial);
  });
});

/** A throwaway CA certificate that has nothing to do with the appliance. */
async function startOtherCa(): Promise<string> {
  const keys = await crypto.webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=Other CA',
    keys: keys as Parameters<typeof x509.X509CertificateGenerator.createSelfSigned>[0]['keys'],
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  });
  return cert.toString('pem');
}
