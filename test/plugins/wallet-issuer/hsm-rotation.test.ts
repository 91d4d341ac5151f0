import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../support/cli.ts';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { credentialRequest, preAuthToken } from './support.ts';
import { jwtProof, newHolder } from './wallet.ts';

const SOFTHSM_MODULE = '/usr/lib/softhsm/libsofthsm2.so';
const TOKEN = 'issuer-token';
const PIN = '1234';

function softHsm(): string {
  const dir = tempDir('wi-softhsm-');
  fs.mkdirSync(path.join(dir, 'tokens'));
  const conf = path.join(dir, 'softhsm2.conf');
  fs.writeFileSync(conf, `directories.tokendir = ${path.join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', TOKEN, '--so-pin', '87654321', '--pin', PIN], {
    env: { ...process.env, SOFTHSM2_CONF: conf },
    stdio: 'pipe',
  });
  return conf;
}

async function issueSdJwt(srv: TestServer): Promise<string> {
  const t = await preAuthToken(srv);
  const res = await credentialRequest(srv, t.access_token, {
    format: 'dc+sd-jwt',
    vct: 'urn:eudi:pid:1',
    proof: { proof_type: 'jwt', jwt: await jwtProof(newHolder(), { aud: srv.url, nonce: t.c_nonce }) },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { credential: string }).credential;
}

function headerOf(sdjwt: string): { kid: string; x5c: string[] } {
  return JSON.parse(Buffer.from(sdjwt.split('.')[0]!, 'base64url').toString()) as { kid: string; x5c: string[] };
}

/** Checks the JWS of an SD-JWT with the JWKS key its kid names. */
function verifiesWithJwks(sdjwt: string, jwks: { keys: (crypto.JsonWebKey & { kid: string })[] }): boolean {
  const jws = sdjwt.split('~')[0]!;
  const [h, p, s] = jws.split('.');
  const key = jwks.keys.find((k) => k.kid === headerOf(sdjwt).kid);
  if (!key) return false;
  return crypto.verify(
    'sha256',
    Buffer.from(`${h}.${p}`),
    { key: crypto.createPublicKey({ key, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
    Buffer.from(s!, 'base64url'),
  );
}

describe('wallet issuer keys in an HSM (SoftHSM2) after sovcomms issuer init', () => {
  let conf: string;
  let dataDir: string;
  let srv: TestServer;
  beforeAll(async () => {
    conf = softHsm();
    // libsofthsm2 reads SOFTHSM2_CONF when this process first loads it (the server below, in-process).
    process.env.SOFTHSM2_CONF = conf;
    dataDir = tempDir();
  });
  afterAll(async () => {
    await srv?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses a wrong PIN (the existing software keys stay) and flags without --hsm-module', async () => {
    const soft = await runCli(['issuer', 'init'], { dataDir });
    expect(soft.code, soft.stderr).toBe(0);
    const kidsBefore = (await runCli(['issuer', 'status'], { dataDir })).stdout;
    expect(kidsBefore).toMatch(/signing .* active {2}software/);
    const bad = await runCli(['issuer', 'init', '--hsm-module', SOFTHSM_MODULE, '--token-label', TOKEN, '--pin', '9999'], {
      dataDir,
      env: { SOFTHSM2_CONF: conf },
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/wrong PIN/);
    expect((await runCli(['issuer', 'status'], { dataDir })).stdout).toBe(kidsBefore);
    const usage = await runCli(['issuer', 'init', '--token-label', TOKEN], { dataDir });
    expect(usage.code).toBe(2);
    const noPin = await runCli(['issuer', 'init', '--hsm-module', SOFTHSM_MODULE, '--token-label', TOKEN], { dataDir });
    expect(noPin.code).toBe(2);
    // Six CLI processes: slow on a loaded machine.
  }, 120_000);

  it('makes the IACA and the signing key in the token (PIN from stdin); credentials chain to that IACA; no private key in the database', async () => {
    const r = await runCli(['issuer', 'init', '--hsm-module', SOFTHSM_MODULE, '--token-label', TOKEN, '--pin-stdin'], {
      dataDir,
      stdin: `${PIN}\n`,
      env: { SOFTHSM2_CONF: conf },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/made in the HSM/);
    const st = await runCli(['issuer', 'status'], { dataDir, env: { SOFTHSM2_CONF: conf } });
    expect(st.stdout).toMatch(/iaca .* active {2}HSM/);
    expect(st.stdout).toMatch(/signing .* active {2}HSM/);
    const objects = execFileSync(
      'pkcs11-tool',
      ['--module', SOFTHSM_MODULE, '--token-label', TOKEN, '--login', '--pin', PIN, '--list-objects', '--type', 'privkey'],
      {
        env: { ...process.env, SOFTHSM2_CONF: conf },
        encoding: 'utf8',
      },
    );
    expect(objects.match(/sovcomms-wi-(iaca|signing)-/g)?.length).toBe(2);

    srv = await startTestServer({ publicOrigin: true, dataDir });
    const sdjwt = await issueSdJwt(srv);
    const iaca = new crypto.X509Certificate(await (await srv.fetch('/vci.ashx?iaca')).text());
    const leaf = new crypto.X509Certificate(Buffer.from(headerOf(sdjwt).x5c[0]!, 'base64'));
    expect(leaf.checkIssued(iaca) && leaf.verify(iaca.publicKey)).toBe(true);
    const jwks = (await (await srv.fetch('/vci.ashx?jwks')).json()) as { keys: (crypto.JsonWebKey & { kid: string })[] };
    expect(verifiesWithJwks(sdjwt, jwks)).toBe(true);
    // The software keys of before are retired; the signing one stays published for the overlap.
    expect(jwks.keys).toHaveLength(2);
    const rows = srv.appliance.core.db.prepare('SELECT key_kind, sealed_key, sealed_pin FROM wi_key WHERE retired_at IS NULL').all() as {
      key_kind: string;
      sealed_key: string | null;
      sealed_pin: string;
    }[];
    expect(rows.map((x) => [x.key_kind, x.sealed_key])).toEqual([
      ['pkcs11', null],
      ['pkcs11', null],
    ]);
    expect(JSON.stringify(rows)).not.toContain(PIN + '"');
  }, 120_000);

  it('rotates the HSM signing key with overlap: the old key stays in the JWKS, old and new credentials verify', async () => {
    const before = await issueSdJwt(srv);
    const r = await runCli(['issuer', 'rotate'], { dataDir: srv.dataDir, env: { SOFTHSM2_CONF: conf } });
    expect(r.code, r.stderr).toBe(0);
    const after = await issueSdJwt(srv);
    expect(headerOf(after).kid).not.toBe(headerOf(before).kid);
    const jwks = (await (await srv.fetch('/vci.ashx?jwks')).json()) as { keys: (crypto.JsonWebKey & { kid: string })[] };
    // Active first, then the retired ones (this HSM key and the software key issuer init replaced).
    expect(jwks.keys.map((k) => k.kid).slice(0, 2)).toEqual([headerOf(after).kid, headerOf(before).kid]);
    expect(jwks.keys).toHaveLength(3);
    expect(verifiesWithJwks(before, jwks)).toBe(true);
    expect(verifiesWithJwks(after, jwks)).toBe(true);
  }, 60_000);
});

describe('wallet issuer software key rotation', () => {
  it('keeps a retired key published for the overlap, then drops it', async () => {
    const { ManualClock } = await import('../../../server/clock.ts');
    const clock = new ManualClock(Date.now());
    const srv = await startTestServer({
      publicOrigin: true,
      clock,
      overrides: { plugins: { 'wallet-issuer': { rotationOverlapDays: 2, credentialTtlDays: 1 } } },
    });
    try {
      const before = await issueSdJwt(srv);
      const api = srv.appliance.host.services('wallet-issuer') as { service: { keys: { rotate(t: unknown): Promise<{ retired: string; active: string }> } } };
      const rot = await api.service.keys.rotate(srv.primary);
      expect(rot.retired).toBe(headerOf(before).kid);
      const kids = async () => ((await (await srv.fetch('/vci.ashx?jwks')).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
      expect(await kids()).toEqual([rot.active, rot.retired]);
      clock.advance(2 * 86_400_000 + 1000);
      expect(await kids()).toEqual([rot.active]);
    } finally {
      await srv.stop();
    }
  });
});
