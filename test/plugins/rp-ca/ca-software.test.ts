import 'reflect-metadata';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { adminCall, body, databaseBytes, grepDatabase, openssl, registerClient, tryRegisterClient, writeTemp } from './helpers.ts';
import { DEFAULT_POLICY_OID } from '../../../plugins/rp-ca/schemas.ts';
import { normalizeSerial } from '../../../plugins/rp-ca/service.ts';
import { randomSerialHex } from '../../../plugins/rp-ca/x509.ts';

let s: TestServer;
let dir: string;
let caPem: string;
let caFile: string;

beforeAll(async () => {
  s = await startTestServer();
  dir = tempDir('rp-ca-sw-');
});
afterAll(async () => {
  await s?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Issues as an admin, the client id registered first as an OIDC client of the tenant (the CA issues only for one). */
const issue = async (json: unknown, host?: string) => {
  await tryRegisterClient(s, (json as { client_id?: unknown } | null)?.client_id, host);
  return adminCall(s, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', { json, host });
};
const b64url = (b: Buffer) => b.toString('base64url');

function ecPublicPem(): { pub: string; priv: crypto.KeyObject } {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { pub: publicKey.export({ format: 'pem', type: 'spki' }) as string, priv: privateKey };
}

// Child processes (tsx start-up) and many signatures take long on the shared, loaded 2-core machine.
describe('RP certificate authority with a software key', { timeout: 120_000 }, () => {
  it('GET ?status: {initialized: false} before first use (and none is made), then the software key, ready, with its counts; admin only', async () => {
    const fresh = await startTestServer();
    try {
      const before = await adminCall(fresh, 'GET', '/rp-cert.ashx?status', 'rp-cert-status');
      expect(before.status).toBe(200);
      expect(await body(before)).toEqual({ initialized: false });
      expect(fresh.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM rp_ca').get()).toEqual({ n: 0 });
      await registerClient(fresh, 'status.example');
      expect((await adminCall(fresh, 'POST', '/rp-cert.ashx?issue', 'rp-cert-issue', { json: { client_id: 'status.example' } })).status).toBe(200);
      const st = await body(await adminCall(fresh, 'GET', '/rp-cert.ashx?status', 'rp-cert-status'));
      expect(st).toMatchObject({ initialized: true, key_store: 'software', key_ready: true, issued: 1, revoked: 0, generation: 1 });
      expect(st.key_problem).toBeUndefined();
      expect(Date.parse(st.not_after)).toBeGreaterThan(Date.now());
      expect((await fresh.fetch('/rp-cert.ashx?status')).status).toBe(401);
    } finally {
      await fresh.stop();
    }
  });

  it('GET ?ca answers the root as PEM by default and DER on request: CA, keyCertSign + cRLSign, SKI, self-signed', async () => {
    const r = await s.fetch('/rp-cert.ashx?ca');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/x-pem-file/);
    caPem = await r.text();
    caFile = writeTemp(dir, 'ca.pem', caPem);
    const ca = new x509.X509Certificate(caPem);
    expect(ca.subject).toBe(ca.issuer);
    expect(await ca.verify({ signatureOnly: true })).toBe(true);
    const bc = ca.getExtension(x509.BasicConstraintsExtension)!;
    expect(bc.ca).toBe(true);
    expect(bc.critical).toBe(true);
    const ku = ca.getExtension(x509.KeyUsagesExtension)!;
    expect(ku.usages).toBe(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign);
    expect(ca.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId).toMatch(/^[0-9a-f]{40}$/);
    expect(ca.publicKey.algorithm).toMatchObject({ name: 'ECDSA', namedCurve: 'P-256' });

    const d = await s.fetch('/rp-cert.ashx?ca&format=der');
    expect(d.headers.get('content-type')).toBe('application/pkix-cert');
    expect(Buffer.from(await d.arrayBuffer()).equals(Buffer.from(ca.rawData))).toBe(true);

    const text = await openssl(['x509', '-in', caFile, '-noout', '-text']);
    expect(text.out).toMatch(/CA:TRUE/);
    expect(text.out).toMatch(/Certificate Sign, CRL Sign/);
    expect(text.out).toMatch(/ecdsa-with-SHA256/);

    const bad = await s.fetch('/rp-cert.ashx?ca&format=xml');
    expect(bad.status).toBe(400);
    expect((await body(bad)).error).toBe('invalid_request');
  });

  it('POST ?issue with include_key: openssl verify and X509ChainBuilder accept the leaf; extensions read back', async () => {
    const r = await issue({ client_id: 'x509_san_dns:verifier.example', include_key: true });
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const out = await body(r);
    expect(out.client_id).toBe('x509_san_dns:verifier.example');
    const leaf = new x509.X509Certificate(out.certificate);
    const der = Buffer.from(leaf.rawData);
    expect(out.x509_hash).toBe(b64url(crypto.createHash('sha256').update(der).digest()));
    expect(out.x509_hash).not.toMatch(/=/);
    expect(out.x509_hash_client_id).toBe(`x509_hash:${out.x509_hash}`);
    expect(out.x5c).toEqual([der.toString('base64')]);
    expect(out.chain).toHaveLength(2);
    expect(out.chain[1]).toBe(caPem);
    expect(out.serial).toBe(leaf.serialNumber.toLowerCase());
    const days = (Date.parse(out.not_after) - Date.parse(out.not_before)) / 86_400_000;
    expect(days).toBeGreaterThan(89.9);
    expect(days).toBeLessThan(90.1);

    const leafFile = writeTemp(dir, 'leaf1.pem', out.certificate);
    const v = await openssl(['verify', '-CAfile', caFile, leafFile]);
    expect(v.out).toContain(': OK');
    expect(v.code).toBe(0);

    const ca = new x509.X509Certificate(caPem);
    const chain = await new x509.X509ChainBuilder({ certificates: [ca] }).build(leaf);
    expect(chain.map((c) => c.subject)).toEqual([leaf.subject, ca.subject]);
    expect(await leaf.verify({ publicKey: ca.publicKey })).toBe(true);

    // Extensions as a verifier no one here wrote reads them.
    const text = (await openssl(['x509', '-in', leafFile, '-noout', '-text'])).out;
    expect(text).toMatch(/Key Usage: critical\s+Digital Signature\s/);
    expect(text).toMatch(/Subject Alternative Name:\s+DNS:verifier\.example\s/);
    expect(text).toContain(`Policy: ${DEFAULT_POLICY_OID}`);
    expect(text).toMatch(/CPS: https:\/\/.+\/rp-cert\.ashx\?cps/);
    expect(text).toMatch(/CRL Distribution Points:[\s\S]*URI:https:\/\/.+\/rp-cert\.ashx\?crl/);
    const caSki = ca.getExtension(x509.SubjectKeyIdentifierExtension)!.keyId;
    const aki = leaf.getExtension(x509.AuthorityKeyIdentifierExtension)!;
    expect(aki.keyId).toBe(caSki);
    const ski = leaf.getExtension(x509.SubjectKeyIdentifierExtension)!.keyId;
    expect(ski).toMatch(/^[0-9a-f]{40}$/);
    expect(ski).not.toBe(caSki);
    expect(leaf.getExtension(x509.BasicConstraintsExtension)?.ca).toBe(false);

    // The returned private key is the certificate's key.
    const priv = crypto.createPrivateKey(out.private_key);
    const pub = crypto.createPublicKey({ key: Buffer.from(leaf.publicKey.rawData), format: 'der', type: 'spki' });
    const sig = crypto.sign('sha256', Buffer.from('x'), priv);
    expect(crypto.verify('sha256', Buffer.from('x'), pub, sig)).toBe(true);
  });

  it('a bare host, a CSR (openssl req) and a public key (PEM, JWK) are accepted; the CSR key is what gets certified', async () => {
    const keyFile = path.join(dir, 'csr-key.pem');
    const csrFile = path.join(dir, 'req.csr');
    const g = await openssl([
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      keyFile,
      '-subj',
      '/CN=ignored.example',
      '-out',
      csrFile,
    ]);
    expect(g.code).toBe(0);
    const viaCsr = await issue({ client_id: 'wallet-rp.example', csr: fs.readFileSync(csrFile, 'utf8'), days: 30 });
    expect(viaCsr.status).toBe(200);
    const c1 = await body(viaCsr);
    expect(c1.client_id).toBe('x509_san_dns:wallet-rp.example');
    expect(c1.private_key).toBeUndefined();
    const leaf = new x509.X509Certificate(c1.certificate);
    expect(leaf.subject).toBe('CN=wallet-rp.example');
    const csrPub = crypto.createPublicKey(fs.readFileSync(keyFile, 'utf8')).export({ format: 'der', type: 'spki' });
    expect(Buffer.from(leaf.publicKey.rawData).equals(csrPub)).toBe(true);
    expect((Date.parse(c1.not_after) - Date.parse(c1.not_before)) / 86_400_000).toBeCloseTo(30, 0);

    const { pub } = ecPublicPem();
    const viaPem = await issue({ client_id: 'x509_san_dns:Pem.Example', public_key: pub, days: 825 });
    expect(viaPem.status).toBe(200);
    expect((await body(viaPem)).client_id).toBe('x509_san_dns:pem.example');
    const jwk = crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ format: 'jwk' });
    const viaJwk = await issue({ client_id: 'jwk.example', public_key: jwk });
    expect(viaJwk.status).toBe(200);
  });

  it('bad input answers 400 with a clear error code, never 500', async () => {
    const { pub } = ecPublicPem();
    const rsa1024 = crypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'pem', type: 'spki' });
    const csr = fs.readFileSync(path.join(dir, 'req.csr'), 'utf8');
    // Change one letter of the signed subject (CN=ignored.example): the CSR still parses, its signature must fail.
    const csrDer = Buffer.from(csr.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    csrDer[csrDer.indexOf('ignored.example')] ^= 0x01;
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${csrDer.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    // The generic codes carry the stable cause (`reason`) and the refused field, for the console's words.
    const cases: [unknown, string, Record<string, string>?][] = [
      [{ include_key: true }, 'invalid_request'],
      [{ client_id: 'a.example', include_key: true, days: 0 }, 'invalid_request'],
      [{ client_id: 'a.example', include_key: true, days: 826 }, 'invalid_request'],
      [{ client_id: 'a.example', include_key: true, days: 1.5 }, 'invalid_request'],
      [{ client_id: 'a.example', include_key: true, public_key: pub }, 'invalid_request'],
      [{ client_id: 'a.example', public_key: pub, csr: 'x' }, 'invalid_request'],
      [{ client_id: 'x509_hash:abc', include_key: true }, 'invalid_client_id'],
      [{ client_id: 'redirect_uri:https://a.example/cb', include_key: true }, 'invalid_client_id'],
      [{ client_id: '10.0.0.1', include_key: true }, 'invalid_client_id'],
      [{ client_id: 'bad_host!.example', include_key: true }, 'invalid_client_id'],
      [{ client_id: 'a.example', public_key: 'not a key' }, 'invalid_key', { reason: 'not_a_key', field: 'public_key' }],
      [{ client_id: 'a.example', public_key: rsa1024 }, 'invalid_key', { reason: 'unsupported_key', field: 'public_key' }],
      [{ client_id: 'a.example', csr: 'garbage' }, 'invalid_csr', { reason: 'not_pem', field: 'csr' }],
      [{ client_id: 'a.example', csr: tampered }, 'invalid_csr', { reason: 'bad_signature', field: 'csr' }],
      [{ client_id: 'a.example', include_key: true, extra: 1 }, 'invalid_request'],
    ];
    for (const [json, code, cause] of cases) {
      const r = await issue(json);
      const err = await body(r);
      expect({ json, status: r.status, error: err.error }).toEqual({ json, status: 400, error: code });
      if (cause) expect({ json, reason: err.reason, field: err.field }).toEqual({ json, ...cause });
      expect(err.error_description).toBeTruthy();
    }
  });

  it('serial numbers are positive, at least 64 random bits, and unique: 80 issues over HTTP, 100 000 draws of the generator', async () => {
    const { pub } = ecPublicPem();
    const serials: string[] = [];
    for (let batch = 0; batch < 4; batch++) {
      const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => issue({ client_id: `s${batch}-${i}.example`, public_key: pub, days: 1 })));
      for (const r of rs) {
        expect(r.status).toBe(200);
        serials.push((await body(r)).serial);
      }
    }
    expect(new Set(serials).size).toBe(80);
    const draws = Array.from({ length: 100_000 }, () => randomSerialHex());
    expect(new Set(draws).size).toBe(100_000);
    for (const sn of [...serials, ...draws.slice(0, 1000)]) {
      // 16 bytes, high bit clear (positive), first byte non-zero (minimal DER encoding)
      expect(sn).toMatch(/^(0[1-9a-f]|[1-7][0-9a-f])[0-9a-f]{30}$/);
    }
  });

  it('issue, list and revoke need the admin signature (or an admin bearer); ca and crl are public', async () => {
    expect((await s.fetch('/rp-cert.ashx?issue', { method: 'POST', json: { client_id: 'a.example', include_key: true } })).status).toBe(401);
    expect((await s.fetch('/rp-cert.ashx?list')).status).toBe(401);
    expect((await s.fetch('/rp-cert.ashx?revoke', { method: 'POST', json: { serial: '01' } })).status).toBe(401);
    // A signature for another bucket does not open this one.
    const wrong = await adminCall(s, 'GET', '/rp-cert.ashx?list', 'rp-cert-issue');
    expect(wrong.status).toBe(401);
    expect((await body(wrong)).error).toBe('invalid_signature');
    expect((await s.fetch('/rp-cert.ashx?crl')).status).toBe(200);
    // ak_ keys are not the spec's "B or H".
    expect((await s.fetch('/rp-cert.ashx?list', { key: s.adminKey })).status).toBe(403);
  });

  it('revocation: the CRL lists the serial with its reason, openssl verifies the CRL signature and then refuses the leaf', async () => {
    const a = await body(await issue({ client_id: 'revoke-me.example', include_key: true }));
    const b = await body(await issue({ client_id: 'keep-me.example', include_key: true }));
    const crl0 = Buffer.from(await (await s.fetch('/rp-cert.ashx?crl')).arrayBuffer());
    const n0 = new x509.X509Crl(crl0);

    const colonSerial = a.serial.toUpperCase().match(/../g).join(':');
    const r = await adminCall(s, 'POST', '/rp-cert.ashx?revoke', 'rp-cert-revoke', { json: { serial: colonSerial, reason: 'keyCompromise' } });
    expect(r.status).toBe(200);
    expect(await body(r)).toMatchObject({ serial: a.serial, status: 'revoked', revocation_reason: 'keyCompromise' });
    const again = await adminCall(s, 'POST', '/rp-cert.ashx?revoke', 'rp-cert-revoke', { json: { serial: a.serial } });
    expect(again.status).toBe(409);
    expect((await body(again)).error).toBe('already_revoked');
    const unknown = await adminCall(s, 'POST', '/rp-cert.ashx?revoke', 'rp-cert-revoke', { json: { serial: '0123456789abcdef' } });
    expect(unknown.status).toBe(404);
    // Serial forms: colons, case and leading zero bytes do not matter.
    expect(normalizeSerial('0B:0A:FF')).toBe('0b0aff');
    expect(normalizeSerial('000b0aff')).toBe('0b0aff');
    expect(normalizeSerial('B0AFF')).toBe('0b0aff');
    const badReason = await adminCall(s, 'POST', '/rp-cert.ashx?revoke', 'rp-cert-revoke', { json: { serial: a.serial, reason: 'certificateHold' } });
    expect(badReason.status).toBe(400);

    const cr = await s.fetch('/rp-cert.ashx?crl');
    expect(cr.headers.get('content-type')).toBe('application/pkix-crl');
    const crlDer = Buffer.from(await cr.arrayBuffer());
    const crlFile = writeTemp(dir, 'crl.der', crlDer);
    const text = (await openssl(['crl', '-inform', 'DER', '-in', crlFile, '-noout', '-text'])).out;
    expect(text).toContain(`Serial Number: ${a.serial.toUpperCase()}`);
    expect(text).toMatch(/Key Compromise/);
    expect(text).not.toContain(b.serial.toUpperCase());
    const number = Number(/CRL Number:\s*\n?\s*(\d+)/.exec(text)![1]);
    expect(number).toBeGreaterThan(
      Number(/CRL Number:\s*\n?\s*(\d+)/.exec((await openssl(['crl', '-inform', 'DER', '-in', writeTemp(dir, 'crl0.der', crl0), '-noout', '-text'])).out)![1]),
    );
    expect(n0.entries.length).toBe(0);
    const sigOk = await openssl(['crl', '-inform', 'DER', '-in', crlFile, '-CAfile', caFile, '-noout']);
    expect(sigOk.out).toMatch(/verify OK/);

    const crlPem = writeTemp(dir, 'crl.pem', `-----BEGIN X509 CRL-----\n${crlDer.toString('base64')}\n-----END X509 CRL-----\n`);
    const revoked = await openssl(['verify', '-crl_check', '-CAfile', caFile, '-CRLfile', crlPem, writeTemp(dir, 'a.pem', a.certificate)]);
    expect(revoked.code).not.toBe(0);
    expect(revoked.out).toMatch(/certificate revoked/);
    const kept = await openssl(['verify', '-crl_check', '-CAfile', caFile, '-CRLfile', crlPem, writeTemp(dir, 'b.pem', b.certificate)]);
    expect(kept.out).toContain(': OK');

    const list = await body(await adminCall(s, 'GET', '/rp-cert.ashx?list&limit=500', 'rp-cert-list'));
    const byserial = new Map<string, { status: string; revocation_reason: string | null }>(list.data.map((c: { serial: string }) => [c.serial, c]));
    expect(byserial.get(a.serial)).toMatchObject({ status: 'revoked', revocation_reason: 'keyCompromise' });
    expect(byserial.get(b.serial)).toMatchObject({ status: 'valid' });
    expect(list.total).toBeGreaterThan(80);
  });

  it("tenant isolation: each tenant has its own CA; tenant B cannot list or revoke A's certificates", async () => {
    await s.addTenant('office-b.example');
    const host = 'office-b.example';
    const caB = await (await s.fetch('/rp-cert.ashx?ca', { host })).text();
    expect(caB).not.toBe(caPem);
    const certA = new x509.X509Certificate(caPem);
    const certB = new x509.X509Certificate(caB);
    expect(Buffer.from(certA.publicKey.rawData).equals(Buffer.from(certB.publicKey.rawData))).toBe(false);
    expect(certB.subject).toContain('office-b.example');

    const a = await body(await issue({ client_id: 'only-a.example', include_key: true }));
    const listB = await body(await adminCall(s, 'GET', '/rp-cert.ashx?list', 'rp-cert-list', { host }));
    expect(listB.total).toBe(0);
    const revokeB = await adminCall(s, 'POST', '/rp-cert.ashx?revoke', 'rp-cert-revoke', { host, json: { serial: a.serial } });
    expect(revokeB.status).toBe(404);

    const b = await body(await issue({ client_id: 'only-b.example', include_key: true }, host));
    const bLeaf = writeTemp(dir, 'b-leaf.pem', b.certificate);
    expect((await openssl(['verify', '-CAfile', writeTemp(dir, 'caB.pem', caB), bLeaf])).code).toBe(0);
    // A's CA does not vouch for B's certificates.
    expect((await openssl(['verify', '-CAfile', caFile, bLeaf])).code).not.toBe(0);
    const listA = await body(await adminCall(s, 'GET', '/rp-cert.ashx?list&limit=500', 'rp-cert-list'));
    expect(listA.data.some((c: { serial: string }) => c.serial === b.serial)).toBe(false);
    // B's CRL is signed by B's CA.
    const crlB = writeTemp(dir, 'crlB.der', Buffer.from(await (await s.fetch('/rp-cert.ashx?crl', { host })).arrayBuffer()));
    expect((await openssl(['crl', '-inform', 'DER', '-in', crlB, '-CAfile', path.join(dir, 'caB.pem'), '-noout'])).out).toMatch(/verify OK/);
  });

  it('client_id alone (the spec shape): the key pair is generated here and its private key is not returned', async () => {
    for (const json of [{ client_id: 'alone.example' }, { client_id: 'x509_san_dns:alone2.example', include_key: false }]) {
      const r = await issue(json);
      expect(r.status).toBe(200);
      const out = await body(r);
      expect(out.private_key).toBeUndefined();
      expect(out.client_id).toBe(`x509_san_dns:${json.client_id.replace('x509_san_dns:', '')}`);
      const cert = new x509.X509Certificate(out.certificate);
      expect(cert.getExtension(x509.SubjectAlternativeNameExtension)!.names.items.map((n) => n.value)).toEqual([json.client_id.replace('x509_san_dns:', '')]);
      const list = await body(await adminCall(s, 'GET', '/rp-cert.ashx?list', 'rp-cert-list'));
      expect(list.data.find((c: { serial: string }) => c.serial === out.serial).key_source).toBe('generated');
    }
    const withKey = await body(await issue({ client_id: 'alone3.example', include_key: true }));
    const cert = new x509.X509Certificate(withKey.certificate);
    const pub = crypto.createPublicKey(withKey.private_key).export({ format: 'der', type: 'spki' });
    expect(Buffer.from(cert.publicKey.rawData).equals(pub)).toBe(true);
  });

  it('include_key: the private key is returned once and is nowhere in the database file', async () => {
    const out = await body(await issue({ client_id: 'secret-key.example', include_key: true }));
    const jwk = crypto.createPrivateKey(out.private_key).export({ format: 'jwk' });
    const d = Buffer.from(jwk.d!, 'base64url');
    const pkcs8 = crypto.createPrivateKey(out.private_key).export({ format: 'der', type: 'pkcs8' });
    s.appliance.core.db.pragma('wal_checkpoint(TRUNCATE)');
    expect(grepDatabase(s.dataDir, out.private_key.split('\n')[1])).toBe(false);
    expect(grepDatabase(s.dataDir, out.serial)).toBe(true); // the certificate row is there: grep works
    for (const bytes of databaseBytes(s.dataDir)) {
      expect(bytes.includes(d)).toBe(false);
      expect(bytes.includes(pkcs8)).toBe(false);
    }
    // The list shows where the key came from, never the key.
    const list = await body(await adminCall(s, 'GET', '/rp-cert.ashx?list', 'rp-cert-list'));
    const item = list.data.find((c: { serial: string }) => c.serial === out.serial);
    expect(item.key_source).toBe('generated');
    expect(JSON.stringify(list)).not.toContain('PRIVATE KEY');
    expect(s.logs.text()).not.toContain(out.private_key.split('\n')[1]);
  });

  it('issue and revoke are written to the audit log', async () => {
    const r = await s.fetch('/api.ashx/v1/auditlog?event=rp-cert&limit=500', { key: s.adminKey });
    const audit = await body(r);
    const events = audit.data.map((e: { event: string }) => e.event);
    expect(events).toContain('rp-cert-issue');
    expect(events).toContain('rp-cert-revoke');
    const rev = audit.data.find((e: { event: string }) => e.event === 'rp-cert-revoke');
    expect(rev.extra).toMatch(/serial=[0-9a-f]+ reason=keyCompromise/);
    expect(rev.user).toBe('admin-hmac');
  });

  it('the routes appear in /openapi.json', async () => {
    const doc = await body(await s.fetch('/openapi.json'));
    const paths = Object.keys(doc.paths).join('\n');
    for (const v of ['ca', 'issue', 'list', 'revoke', 'crl']) expect(paths).toContain(`/rp-cert.ashx?${v}`);
  });
});
