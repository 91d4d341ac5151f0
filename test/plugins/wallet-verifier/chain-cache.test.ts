import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verifySdJwtVc } from '../../../plugins/wallet-verifier/sd-jwt.ts';
import { type Anchor, CheckFailed, sha256Hex, validateChain } from '../../../plugins/wallet-verifier/x509.ts';
import { issuePid, makeHolder, makeIssuerCa, presentPid } from './wallet.ts';

/**
 * The verifier keeps a verified issuer chain per chain and anchor set (and the checked issuer JWT
 * header per header text). These caches must never let one tenant's trust answer for another's,
 * and must keep every per-presentation check.
 */
const anchorOf = (der: Buffer): Anchor => ({ sha256: sha256Hex(der), cert: new crypto.X509Certificate(der), source: 'tenant' });

describe('wallet verifier: issuer chain and header caches', () => {
  it("a chain verified under one tenant's anchors is not served to another tenant by appending an anchor fingerprint to it", async () => {
    const a = await makeIssuerCa('Tenant One Trusts');
    const b = await makeIssuerCa('Both Trust');
    const leaf = Buffer.from(a.x5c[0]!, 'base64');
    const anchorA = anchorOf(a.rootDer);
    const anchorB = anchorOf(b.rootDer);
    const now = Date.now();
    // Tenant 1 trusts A and B: the chain to A is verified and kept.
    expect(validateChain([leaf], [anchorA, anchorB], now).anchor.sha256).toBe(anchorA.sha256);
    // Tenant 2 trusts only B. The certificate with A's fingerprint appended spells, byte for
    // byte, what the chain plus tenant 1's anchors would hash to; it must be checked afresh.
    const forged = Buffer.concat([leaf, Buffer.from(anchorA.sha256, 'latin1')]);
    expect(() => validateChain([forged], [anchorB], now)).toThrow(CheckFailed);
    expect(() => validateChain([leaf], [anchorB], now)).toThrow(/does not lead to a trust anchor/);
    // As base64 x5c texts the same holds.
    expect(() => validateChain([forged], [anchorB], now, [forged.toString('base64')])).toThrow(CheckFailed);
  });

  it('presentations of one issuer share the header and chain but each is checked: another holder, nonce, tampering', async () => {
    const ca = await makeIssuerCa();
    const anchors = [anchorOf(ca.rootDer)];
    const x = { vctValues: ['urn:eudi:pid:1'], audience: 'x509_hash:cache', nonce: 'n1', now: Date.now(), iatWindowSeconds: 300, anchors };
    const holders = [await makeHolder(), await makeHolder()];
    const creds = await Promise.all(holders.map((h) => issuePid(ca, h)));
    const p0 = await presentPid(creds[0]!, holders[0]!, { aud: x.audience, nonce: 'n1' });
    const p1 = await presentPid(creds[1]!, holders[1]!, { aud: x.audience, nonce: 'n1' });
    expect(p0.split('.')[0]).toBe(p1.split('.')[0]);
    expect((await verifySdJwtVc(p0, x)).vct).toBe('urn:eudi:pid:1');
    expect((await verifySdJwtVc(p1, x)).vct).toBe('urn:eudi:pid:1');
    // Holder 0's credential with holder 1's key binding: the cnf key decides, not the cache.
    const kb1 = p1.slice(p1.lastIndexOf('~') + 1);
    await expect(verifySdJwtVc(p0.slice(0, p0.lastIndexOf('~') + 1) + kb1, x)).rejects.toMatchObject({ check: 'kb_jwt' });
    await expect(verifySdJwtVc(p0, { ...x, nonce: 'n2' })).rejects.toMatchObject({ check: 'nonce' });
    // A cnf.jwk that is not a point on the curve is named as such (check cnf, not kb_jwt).
    const offCurve = { ...holders[0]!.publicJwk, x: Buffer.alloc(32, 7).toString('base64url') };
    const badCnf = await issuePid(ca, holders[0]!, { extraPayload: { cnf: { jwk: offCurve } } });
    await expect(verifySdJwtVc(await presentPid(badCnf, holders[0]!, { aud: x.audience, nonce: 'n1' }), x)).rejects.toMatchObject({ check: 'cnf' });
    // A signature that does not fit the cnf key type is a kb_jwt failure, not cnf.
    const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' });
    const rsaCnf = await issuePid(ca, holders[0]!, { extraPayload: { cnf: { jwk: rsa } } });
    await expect(verifySdJwtVc(await presentPid(rsaCnf, holders[0]!, { aud: x.audience, nonce: 'n1' }), x)).rejects.toMatchObject({ check: 'kb_jwt' });
    const [jwt, ...rest] = p0.split('~');
    const [, payload, sig] = jwt!.split('.');
    // An issuer header the checks refuse is refused every time (not kept).
    const noneHeader = Buffer.from(JSON.stringify({ alg: 'none', typ: 'dc+sd-jwt' })).toString('base64url');
    for (let i = 0; i < 2; i++)
      await expect(verifySdJwtVc(`${noneHeader}.${payload}.${sig}~${rest.join('~')}`, x)).rejects.toMatchObject({ check: 'issuer_signature' });
  });
});
