import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HsmError, Pkcs11Signer, probeToken, SoftwareSigner, type Signer } from '../../server/p256-signer.ts';
import { tempDir } from '../support/server.ts';

/**
 * The core's P-256 signers, shared by the RP CA and the wallet issuer. The PKCS#11 library is
 * loaded and initialised once per process: one plugin closing its last key must not finalize the
 * library under the other's open sessions (two private registries did exactly that).
 */
const MODULE = '/usr/lib/softhsm/libsofthsm2.so';
const TOKEN = 'shared-token';
const PIN = '1234';
let dir: string;

const verifies = (s: Signer, data: Buffer, sig: Buffer) =>
  crypto.verify('sha256', data, { key: crypto.createPublicKey({ key: s.spki, format: 'der', type: 'spki' }), dsaEncoding: 'ieee-p1363' }, sig);

beforeAll(() => {
  dir = tempDir('p256-softhsm-');
  fs.mkdirSync(path.join(dir, 'tokens'));
  const conf = path.join(dir, 'softhsm2.conf');
  fs.writeFileSync(conf, `directories.tokendir = ${path.join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', TOKEN, '--so-pin', '87654321', '--pin', PIN], {
    env: { ...process.env, SOFTHSM2_CONF: conf },
    stdio: 'pipe',
  });
  // libsofthsm2 reads SOFTHSM2_CONF when this process first loads it.
  process.env.SOFTHSM2_CONF = conf;
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('P-256 signers', () => {
  it('two keys of two owners on one token: closing the first leaves the second signing', async () => {
    const ca = Pkcs11Signer.open({ module: MODULE, tokenLabel: TOKEN, pin: PIN, keyLabel: 'rp-ca-test' }, { create: true });
    const issuer = Pkcs11Signer.open({ module: MODULE, tokenLabel: TOKEN, pin: PIN, keyLabel: 'wi-signing-test' }, { create: true });
    expect(ca.created && issuer.created).toBe(true);
    const data = Buffer.from('to be signed');
    expect(verifies(ca.signer, data, await ca.signer.sign(data))).toBe(true);
    ca.signer.close();
    expect(ca.signer.usable).toBe(false);
    await expect(ca.signer.sign(data)).rejects.toThrow(HsmError);
    const sig = await issuer.signer.sign(data);
    expect(sig).toHaveLength(64);
    expect(verifies(issuer.signer, data, sig)).toBe(true);
    expect(issuer.signer.usable).toBe(true);
    // Re-opened after the other closed: the same key (found by label), not a new one.
    const again = Pkcs11Signer.open({ module: MODULE, tokenLabel: TOKEN, pin: PIN, keyLabel: 'rp-ca-test' });
    expect(again.created).toBe(false);
    expect(again.signer.spki.equals(ca.signer.spki)).toBe(true);
    again.signer.close();
    issuer.signer.close();
  });

  it('names what is wrong: a wrong PIN, an unknown token, a missing key; never the PIN', () => {
    expect(() => probeToken({ module: MODULE, tokenLabel: TOKEN, pin: '9999' })).toThrow(/wrong PIN/);
    expect(() => probeToken({ module: MODULE, tokenLabel: 'no-such-token', pin: PIN })).toThrow(/no token labelled "no-such-token"/);
    expect(() => Pkcs11Signer.open({ module: MODULE, tokenLabel: TOKEN, pin: PIN, keyLabel: 'absent' })).toThrow(/no private key labelled "absent"/);
    expect(() => Pkcs11Signer.open({ module: '/nonexistent/libpkcs11.so', tokenLabel: TOKEN, pin: PIN, keyLabel: 'x' })).toThrow(/cannot load PKCS#11 module/);
    try {
      probeToken({ module: MODULE, tokenLabel: TOKEN, pin: '9999' });
    } catch (e) {
      expect(String(e)).not.toContain('9999');
    }
    expect(() => probeToken({ module: MODULE, tokenLabel: TOKEN, pin: PIN })).not.toThrow();
  });

  it('a software key signs in the same form and refuses anything but P-256', async () => {
    const { signer, pkcs8 } = SoftwareSigner.generate();
    const data = Buffer.from('x');
    expect(verifies(signer, data, await signer.sign(data))).toBe(true);
    expect(new SoftwareSigner(pkcs8).spki.equals(signer.spki)).toBe(true);
    const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ format: 'der', type: 'pkcs8' });
    expect(() => new SoftwareSigner(rsa)).toThrow(/P-256/);
  });
});
