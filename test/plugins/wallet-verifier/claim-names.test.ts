import crypto from 'node:crypto';
import { CompactSign, importJWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { verifySdJwtVc } from '../../../plugins/wallet-verifier/sd-jwt.ts';
import { sha256Hex } from '../../../plugins/wallet-verifier/x509.ts';
import { makeHolder, makeIssuerCa } from './wallet.ts';

/**
 * Claim names are data: a disclosed claim named `__proto__` is an own property of the result, not
 * its prototype, and one named `toString` is not taken for a claim that is already there. The SD-JWT
 * is built by hand (no library would write these names), signed as an issuer and a holder would.
 */
const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64url');
const digestOf = (d: string) => crypto.createHash('sha256').update(d, 'ascii').digest('base64url');

async function sign(header: Record<string, unknown>, payload: Record<string, unknown>, jwk: Record<string, unknown>): Promise<string> {
  return new CompactSign(Buffer.from(JSON.stringify(payload))).setProtectedHeader(header as { alg: string }).sign(await importJWK(jwk, 'ES256'));
}

describe('wallet verifier: disclosed claim names', () => {
  it('__proto__ and toString are claims like any other', async () => {
    const ca = await makeIssuerCa('Claim Names');
    const holder = await makeHolder();
    const disclosures = [b64(JSON.stringify(['salt-1', 'toString', 'a claim'])), b64(JSON.stringify(['salt-2', '__proto__', { polluted: true }]))];
    const now = Math.floor(Date.now() / 1000);
    const payload = {
      iss: 'https://pid-provider.example',
      iat: now,
      exp: now + 3600,
      vct: 'urn:eudi:pid:1',
      cnf: { jwk: holder.publicJwk },
      _sd_alg: 'sha-256',
      _sd: disclosures.map(digestOf),
    };
    const jwt = await sign({ alg: 'ES256', typ: 'dc+sd-jwt', x5c: ca.x5c }, payload, ca.issuerJwk as Record<string, unknown>);
    const presented = `${jwt}~${disclosures.join('~')}~`;
    const kb = await sign(
      { alg: 'ES256', typ: 'kb+jwt' },
      { aud: 'x509_hash:names', nonce: 'n', iat: now, sd_hash: crypto.createHash('sha256').update(presented, 'ascii').digest('base64url') },
      holder.privateJwk as Record<string, unknown>,
    );
    const anchors = [{ sha256: sha256Hex(ca.rootDer), cert: new crypto.X509Certificate(ca.rootDer), source: 'tenant' as const }];
    const r = await verifySdJwtVc(presented + kb, {
      vctValues: ['urn:eudi:pid:1'],
      audience: 'x509_hash:names',
      nonce: 'n',
      now: Date.now(),
      iatWindowSeconds: 300,
      anchors,
    });
    expect(Object.getPrototypeOf(r.claims)).toBe(Object.prototype);
    expect(Object.hasOwn(r.claims, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(r.claims, '__proto__')!.value).toEqual({ polluted: true });
    expect(Object.getOwnPropertyDescriptor(r.claims, 'toString')!.value).toBe('a claim');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
