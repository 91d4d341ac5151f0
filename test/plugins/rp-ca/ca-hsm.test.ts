import 'reflect-metadata';
import fs from 'node:fs';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { adminCall, body, databaseBytes, grepDatabase, makeSoftHsmToken, openssl, registerClient, SOFTHSM_MODULE, sovcomms, writeTemp } from './helpers.ts';
import { Pkcs11Signer } from '../../../server/p256-signer.ts';
import { main } from '../../../server/cli.ts';

const TOKEN = 'sovcomms-test-ca';
const PIN = '4711-2026';

let hsm: { conf: string; dir: string };
let s: TestServer;
let dataDir: string;
let work: string;
let caFile: string;
const env = () => ({ SOFTHSM2_CONF: hsm.conf });

beforeAll(async () => {
  hsm = makeSoftHsmToken(TOKEN, PIN);
  // libsofthsm2 reads SOFTHSM2_CONF when this process first loads it (the server below, in-process).
  process.env.SOFTHSM2_CONF = hsm.conf;
  dataDir = tempDir('rp-ca-hsm-data-');
  work = tempDir('rp-ca-hsm-work-');
  s = await startTestServer({ dataDir });
});
afterAll(async () => {
  await s?.stop();
  for (const d of [hsm?.dir, dataDir, work]) if (d) fs.rmSync(d, { recursive: true, force: true });
});

/** The same CLI code in this process (no tsx start-up): for the steps that are not the headline subprocess runs. */
async function inProcess(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const hsmArgs = (extra: string[] = []) => ['--data-dir', dataDir, '--hsm-module', SOFTHSM_MODULE, '--token-label', TOKEN, ...extra];

// Child processes (tsx start-up) and many signatures take long on the shared, loaded 2-core machine.
describe('RP certificate authority with its key in SoftHSM2 (PKCS#11)', { timeout: 120_000 }, () => {
  it('`sovcomms ca init --hsm-module ... --pin-stdin` generates the CA key in the token; `ca status` shows where it lives', async () => {
    const r = await sovcomms(['ca', 'init', ...hsmArgs(['--pin-stdin'])], { env: env(), stdin: `${PIN}\n` });
    expect(r.code).toBe(0);
    expect(r.err + r.out).not.toContain(PIN);
    expect(r.out).toContain('a new key generated in the HSM');
    const keyLabel = `rp-ca-${s.primary.host}`;
    expect(r.out).toContain(`HSM: module ${SOFTHSM_MODULE}, token "${TOKEN}", key "${keyLabel}"`);

    const st = await sovcomms(['ca', 'status', '--data-dir', dataDir], { env: env() });
    expect(st.code).toBe(0);
    expect(st.out).toContain(`key:          HSM: module ${SOFTHSM_MODULE}, token "${TOKEN}", key "${keyLabel}"`);
    expect(st.out).toMatch(/subject:\s+CN=RP CA /);
    expect(st.out).toMatch(/fingerprint:\s+SHA-256 ([0-9A-F]{2}:){31}[0-9A-F]{2}/);
    expect(st.out).toContain('key reachable: yes');
    const json = JSON.parse((await inProcess(['ca', 'status', '--json', '--data-dir', dataDir])).out);
    expect(json).toMatchObject({ initialised: true, keyReachable: true, key: { kind: 'pkcs11', module: SOFTHSM_MODULE, token: TOKEN, label: keyLabel } });

    // The key is in the token, non-extractable, and it is the CA's key.
    const { signer } = Pkcs11Signer.open({ module: SOFTHSM_MODULE, tokenLabel: TOKEN, pin: PIN, keyLabel });
    try {
      const ca = new x509.X509Certificate(await (await s.fetch('/rp-cert.ashx?ca')).text());
      expect(Buffer.from(ca.publicKey.rawData).equals(signer.spki)).toBe(true);
      expect(json.fingerprintSha256).toBe(
        Buffer.from(await ca.getThumbprint('SHA-256'))
          .toString('hex')
          .toUpperCase()
          .match(/../g)!
          .join(':'),
      );
    } finally {
      signer.close();
    }
  });

  it('the PIN is sealed at rest: it is not in the database file', () => {
    s.appliance.core.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(grepDatabase(dataDir, PIN)).toBe(false);
    expect(grepDatabase(dataDir, 'rp-ca-')).toBe(true); // the key label is there, in the clear: grep works
    for (const bytes of databaseBytes(dataDir)) expect(bytes.includes(Buffer.from(PIN))).toBe(false);
  });

  it('certificates signed by the token verify with openssl and X509ChainBuilder, with the same extensions', async () => {
    const caPem = await (await s.fetch('/rp-cert.ashx?ca')).text();
    caFile = writeTemp(work, 'ca.pem', caPem);
    const ca = new x509.X509Certificate(caPem);
    expect(ca.getExtension(x509.BasicConstraintsExtension)?.ca).toBe(true);
    expect(ca.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign);
    expect((await openssl(['verify', '-CAfile', caFile, caFile])).code).toBe(0);

    for (let i = 0; i < 5; i++) {
      await registerClient(s, `x509_san_dns:hsm-rp${i}.example`);
      const r = await adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', {
        json: { client_id: `x509_san_dns:hsm-rp${i}.example`, include_key: true, days: 10 + i },
      });
      expect(r.status).toBe(200);
      const out = await body(r);
      const leafFile = writeTemp(work, `leaf${i}.pem`, out.certificate);
      const v = await openssl(['verify', '-CAfile', caFile, leafFile]);
      expect(v.out).toContain(': OK');
      const leaf = new x509.X509Certificate(out.certificate);
      const chain = await new x509.X509ChainBuilder({ certificates: [ca] }).build(leaf);
      expect(chain).toHaveLength(2);
      expect(await leaf.verify({ publicKey: ca.publicKey })).toBe(true);
      const text = (await openssl(['x509', '-in', leafFile, '-noout', '-text'])).out;
      expect(text).toMatch(/Key Usage: critical\s+Digital Signature\s/);
      expect(text).toContain(`DNS:hsm-rp${i}.example`);
      expect(text).toMatch(/Authority Key Identifier:/);
      expect(text).toMatch(/Subject Key Identifier:/);
      expect(text).toMatch(/Policy: [0-9.]+\s+CPS: https:/);
      expect(text).toMatch(/Signature Algorithm: ecdsa-with-SHA256/);
    }
  });

  it('revocation: the CRL the token signs lists the serial and verifies with openssl crl -CAfile', async () => {
    await registerClient(s, 'hsm-revoked.example');
    const out = await body(
      await adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', { json: { client_id: 'hsm-revoked.example', include_key: true } }),
    );
    const r = await adminCall(s, 'POST', '/rp-cert.ashx?revoke', 'rp-cert-revoke', { json: { serial: out.serial, reason: 'cessationOfOperation' } });
    expect(r.status).toBe(200);
    const crlFile = writeTemp(work, 'crl.der', Buffer.from(await (await s.fetch('/rp-cert.ashx?crl')).arrayBuffer()));
    const text = (await openssl(['crl', '-inform', 'DER', '-in', crlFile, '-noout', '-text'])).out;
    expect(text).toContain(`Serial Number: ${out.serial.toUpperCase()}`);
    expect(text).toContain('Cessation Of Operation');
    expect((await openssl(['crl', '-inform', 'DER', '-in', crlFile, '-CAfile', caFile, '-noout'])).out).toMatch(/verify OK/);
  });

  it('a second `ca init` with the same key changes nothing; another appliance on the same token adopts the key', async () => {
    const again = await inProcess(['ca', 'init', ...hsmArgs(['--pin', PIN])]);
    expect(again.code).toBe(0);
    expect(again.out).toContain('already uses this HSM key');
    const caBefore = await (await s.fetch('/rp-cert.ashx?ca')).text();

    const other = tempDir('rp-ca-hsm-other-');
    try {
      // The first command initialises the fresh dir (its primary tenant); the tenant must exist there too.
      const listed = await inProcess(['tenant', 'list', '--json', '--data-dir', other]);
      expect(listed.code).toBe(0);
      if (!(JSON.parse(listed.out) as { host: string }[]).some((t) => t.host === s.primary.host)) {
        expect((await inProcess(['tenant', 'add', s.primary.host, '--data-dir', other])).code).toBe(0);
      }
      const adopt = await inProcess([
        'ca',
        'init',
        '--data-dir',
        other,
        '--hsm-module',
        SOFTHSM_MODULE,
        '--token-label',
        TOKEN,
        '--pin',
        PIN,
        '--key-label',
        `rp-ca-${s.primary.host}`,
      ]);
      expect(adopt.code).toBe(0);
      expect(adopt.out).toContain('the existing HSM key adopted');
      // Same key, so the other appliance's CA certificate carries the same public key.
      const st = JSON.parse((await inProcess(['ca', 'status', '--json', '--data-dir', other])).out);
      expect(st.keyReachable).toBe(true);
      const mine = new x509.X509Certificate(caBefore);
      const thumbOfKey = Buffer.from(mine.publicKey.rawData).toString('hex');
      const { signer } = Pkcs11Signer.open({ module: SOFTHSM_MODULE, tokenLabel: TOKEN, pin: PIN, keyLabel: `rp-ca-${s.primary.host}` });
      try {
        expect(signer.spki.toString('hex')).toBe(thumbOfKey);
      } finally {
        signer.close();
      }
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
    // The first appliance's CA has issued certificates: replacing it needs --force.
    const replace = await inProcess(['ca', 'init', ...hsmArgs(['--pin', PIN, '--key-label', 'another-key'])]);
    expect(replace.code).toBe(1);
    expect(replace.err).toMatch(/--force/);
    expect(await (await s.fetch('/rp-cert.ashx?ca')).text()).toBe(caBefore);
  });

  it('each tenant gets its own key on the token and its own CA', async () => {
    await s.addTenant('branch.example');
    const r = await inProcess(['ca', 'init', '--tenant', 'branch.example', ...hsmArgs(['--pin', PIN])]);
    expect(r.err).not.toMatch(/sovcomms:/);
    expect(r.code).toBe(0);
    expect(r.out).toContain('key "rp-ca-branch.example"');
    const a = new x509.X509Certificate(await (await s.fetch('/rp-cert.ashx?ca')).text());
    const bPem = await (await s.fetch('/rp-cert.ashx?ca', { host: 'branch.example' })).text();
    const b = new x509.X509Certificate(bPem);
    expect(Buffer.from(a.publicKey.rawData).equals(Buffer.from(b.publicKey.rawData))).toBe(false);
    await registerClient(s, 'branch-rp.example', 'branch.example');
    const out = await body(
      await adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', {
        host: 'branch.example',
        json: { client_id: 'branch-rp.example', include_key: true },
      }),
    );
    const leafFile = writeTemp(work, 'branch-leaf.pem', out.certificate);
    expect((await openssl(['verify', '-CAfile', writeTemp(work, 'branch-ca.pem', bPem), leafFile])).code).toBe(0);
    expect((await openssl(['verify', '-CAfile', caFile, leafFile])).code).not.toBe(0);
  });

  it('a token that cannot be reached: ?ca answers 503 ca_unavailable, `ca status` says so, and it recovers', async () => {
    const db = s.appliance.core.db;
    const row = db.prepare('SELECT hsm_token, updated_at FROM rp_ca WHERE tenant_id = ?').get(s.primary.id) as { hsm_token: string; updated_at: string };
    db.prepare('UPDATE rp_ca SET hsm_token = ?, updated_at = ? WHERE tenant_id = ?').run('unplugged-token', new Date().toISOString(), s.primary.id);
    const r = await s.fetch('/rp-cert.ashx?ca');
    expect(r.status).toBe(503);
    const err = await body(r);
    expect(err.error).toBe('ca_unavailable');
    expect(err.reason).toBe('key_unreachable');
    expect(err.error_description).not.toContain('unplugged-token');
    expect(JSON.stringify(err)).not.toContain('unplugged-token');
    expect(r.headers.get('retry-after')).toBe('30');
    const st = await inProcess(['ca', 'status', '--data-dir', dataDir]);
    expect(st.code).toBe(1);
    expect(st.out).toMatch(/key reachable: NO: .*no token labelled "unplugged-token"/);
    const api = await body(await adminCall(s, 'GET', '/rp-cert.ashx?status', 'rp-cert-status'));
    expect(api).toMatchObject({ initialized: true, key_store: 'hsm', key_ready: false });
    expect(api.key_problem).toMatch(/no token labelled "unplugged-token"/);
    db.prepare('UPDATE rp_ca SET hsm_token = ?, updated_at = ? WHERE tenant_id = ?').run(
      row.hsm_token,
      new Date(Date.now() + 1000).toISOString(),
      s.primary.id,
    );
    expect((await s.fetch('/rp-cert.ashx?ca')).status).toBe(200);
    expect(await body(await adminCall(s, 'GET', '/rp-cert.ashx?status', 'rp-cert-status'))).toMatchObject({ key_store: 'hsm', key_ready: true });
  });

  it('HSM mistakes are clear errors: wrong PIN, unknown token, missing PIN, module without token label', async () => {
    const wrongPin = await sovcomms(['ca', 'init', ...hsmArgs(['--pin', '0000', '--key-label', 'x', '--force'])], { env: env() });
    expect(wrongPin.code).toBe(1);
    expect(wrongPin.err).toMatch(/wrong PIN/);
    // Argument mistakes never reach the token.
    const noToken = await inProcess(['ca', 'init', '--data-dir', dataDir, '--hsm-module', SOFTHSM_MODULE, '--token-label', 'no-such-token', '--pin', PIN]);
    expect(noToken.code).toBe(1);
    expect(noToken.err).toMatch(/no token labelled "no-such-token"/);
    const noPin = await inProcess(['ca', 'init', ...hsmArgs()]);
    expect(noPin.code).toBe(2);
    expect(noPin.err).toMatch(/--pin/);
    const noLabel = await inProcess(['ca', 'init', '--data-dir', dataDir, '--hsm-module', SOFTHSM_MODULE, '--pin', PIN]);
    expect(noLabel.code).toBe(2);
    expect(noLabel.err).toMatch(/--token-label/);
    const stray = await inProcess(['ca', 'init', '--data-dir', dataDir, '--pin', PIN]);
    expect(stray.code).toBe(2);
    expect(stray.err).toMatch(/--pin needs --hsm-module/);
    const badModule = await inProcess(['ca', 'init', '--data-dir', dataDir, '--hsm-module', '/nonexistent/lib.so', '--token-label', TOKEN, '--pin', PIN]);
    expect(badModule.code).toBe(2);
  });
});
