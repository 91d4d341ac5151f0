/**
 * Every absolute URL the appliance signs or publishes comes from the tenant's public origin, never
 * from the request's Host header (SECURITY.md, "Signed URLs and the Host header"). The attack this
 * guards against: a holder redeemed an ordinary offer with `Host: 127.0.0.77:18699`, got a
 * credential naming that address as issuer and status list, served an old genuine status list
 * from there after the revocation, and another verifier accepted the revoked credential.
 */
import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { adminToken } from '../plugins/admin/helpers.ts';
import { CLAIMS, createOffer, PRE_AUTH } from '../plugins/wallet-issuer/support.ts';
import { jwtProof, newHolder } from '../plugins/wallet-issuer/wallet.ts';

const FORGED = '127.0.0.77:18699';
let s: TestServer;
let own: string;

beforeAll(async () => {
  s = await startTestServer({ overrides: { plugins: { 'wallet-verifier': { perIpPerMinute: 100_000 } } } });
  own = `http://localhost:${s.port}`;
});
afterAll(async () => {
  await s?.stop();
});

async function json(r: Response): Promise<Record<string, unknown>> {
  expect(r.status).toBe(200);
  return (await r.json()) as Record<string, unknown>;
}

/** The whole pre-authorized redemption with every request carrying `host`, as the attacker did. */
async function redeem(host: string): Promise<{ iss: string; statusUri: string; offerIssuer: string }> {
  const offer = await createOffer(s, { claims: CLAIMS, pre_authorized: true });
  const o = await json(await s.fetch(`/vci.ashx?offer=${offer.offer_id}`, { host }));
  const code = (o.grants as Record<string, Record<string, string>>)[PRE_AUTH]!['pre-authorized_code']!;
  const token = await json(
    await s.fetch('/vci.ashx?token', {
      method: 'POST',
      host,
      body: new URLSearchParams({ grant_type: PRE_AUTH, 'pre-authorized_code': code, ...(offer.tx_code ? { tx_code: offer.tx_code } : {}) }),
    }),
  );
  const holder = newHolder();
  const jwt = await jwtProof(holder, { aud: String(o.credential_issuer), nonce: String(token.c_nonce) });
  const cred = await json(
    await s.fetch('/vci.ashx?credential', {
      method: 'POST',
      host,
      headers: { Authorization: `Bearer ${String(token.access_token)}` },
      json: { format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1', proof: { proof_type: 'jwt', jwt } },
    }),
  );
  const sdjwt = String(cred.credential);
  const payload = jose.decodeJwt(sdjwt.split('~')[0]!) as { iss: string; status: { status_list: { uri: string } } };
  return { iss: payload.iss, statusUri: payload.status.status_list.uri, offerIssuer: String(o.credential_issuer) };
}

async function published(host: string) {
  const meta = await s.fetch('/.well-known/openid-credential-issuer', { host });
  const discovery = await json(await s.fetch('/.well-known/openid-configuration', { host }));
  const federation = jose.decodeJwt(await (await s.fetch('/.well-known/openid-federation', { host })).text());
  const verifier = await json(await s.fetch('/.well-known/eudiw-verifier-metadata', { host }));
  return {
    vary: meta.headers.get('vary') ?? '',
    credentialIssuer: (await json(meta)).credential_issuer,
    oidcIssuer: discovery.issuer,
    federationIss: federation.iss,
    verifierResponseUri: String(verifier.response_uri_base),
  };
}

describe('signed and published URLs: the tenant origin, never the Host header', { timeout: 180_000 }, () => {
  it("a holder redeeming an offer with a forged Host gets a credential naming the tenant's own origin as issuer and status list", async () => {
    const got = await redeem(FORGED);
    expect(got.offerIssuer).toBe(own);
    expect(got.iss).toBe(own);
    expect(got.statusUri).toMatch(new RegExp(`^${own.replace(/[.]/g, '\\.')}/vci\\.ashx\\?status-list=\\d+$`));
    // The status list token names the same origin whatever Host asked for it.
    const list = jose.decodeJwt(await (await s.fetch(new URL(got.statusUri).search.replace(/^/, '/vci.ashx'), { host: FORGED })).text());
    expect(list.sub).toBe(got.statusUri);
  });

  it('metadata, discovery, federation and verifier metadata under a forged Host name the tenant origin; cacheable answers vary with Host', async () => {
    const p = await published(FORGED);
    expect(p).toMatchObject({ credentialIssuer: own, oidcIssuer: own, federationIss: own });
    expect(p.verifierResponseUri.startsWith(`${own}/`)).toBe(true);
    expect(p.vary).toMatch(/\bhost\b/i);
    // A port in the Host header is never taken either: the tenant's own name with another port.
    expect((await published(`localhost:1`)).credentialIssuer).toBe(own);
    // An address of this machine's own interfaces names this appliance (an admin typing its IP):
    // it is kept, with the listener's port, never the port the header names.
    expect((await published(`127.0.0.1:1`)).credentialIssuer).toBe(`http://127.0.0.1:${s.port}`);
  });

  it('a configured origin (admin API, then CLI) is used whatever the Host; a bad origin is 400 invalid_origin; --clear restores the default', async () => {
    const host = `localhost:${s.port}`;
    const token = await adminToken(s, host, 'admin', s.adminPassword);
    const set = (origin: string | null) => s.fetch(`/api.ashx/v1/tenants/${s.primary.id}/origin`, { method: 'POST', host, key: token, json: { origin } });
    // Only a super-admin's bearer: an ak_ key is refused.
    expect((await s.fetch(`/api.ashx/v1/tenants/${s.primary.id}/origin`, { method: 'POST', key: s.adminKey, json: { origin: null } })).status).toBe(403);
    for (const bad of ['https://issuer.example/path', 'ftp://issuer.example', 'https://user:pw@issuer.example', 'not a url', 'https://issuer.example?x=1']) {
      const r = await set(bad);
      expect(r.status, bad).toBe(400);
      expect(((await r.json()) as { error: string }).error).toBe('invalid_origin');
    }
    const ok = await json(await set('https://Issuer.Office.example:8443/'));
    expect(ok.origin).toBe('https://issuer.office.example:8443');
    for (const host of [FORGED, `localhost:${s.port}`, `127.0.0.1:${s.port}`]) {
      expect(await published(host)).toMatchObject({
        credentialIssuer: 'https://issuer.office.example:8443',
        oidcIssuer: 'https://issuer.office.example:8443',
        federationIss: 'https://issuer.office.example:8443',
      });
    }
    const audited = await json(await s.fetch('/api.ashx/v1/auditlog?event=tenant-set-origin', { key: s.adminKey }));
    expect(JSON.stringify(audited)).toContain('issuer.office.example');

    const cli = await runCli(['tenant', 'set-origin', 'localhost', 'https://wallet.office.example'], { dataDir: s.dataDir });
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain('https://wallet.office.example');
    expect((await published(FORGED)).credentialIssuer).toBe('https://wallet.office.example');
    const listed = JSON.parse((await runCli(['tenant', 'list', '--json'], { dataDir: s.dataDir })).stdout) as { host: string; origin: string | null }[];
    expect(listed.find((t) => t.host === 'localhost')?.origin).toBe('https://wallet.office.example');
    expect((await runCli(['tenant', 'set-origin', 'localhost'], { dataDir: s.dataDir })).code).toBe(2);

    expect((await runCli(['tenant', 'set-origin', 'localhost', '--clear'], { dataDir: s.dataDir })).code).toBe(0);
    expect((await published(FORGED)).credentialIssuer).toBe(own);
  });
});
