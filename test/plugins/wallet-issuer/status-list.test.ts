import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digest } from '@sd-jwt/crypto-nodejs';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import { WALLET_ISSUER } from '../../../plugins/wallet-issuer/api.ts';
import { runCli } from '../../support/cli.ts';
import { httpFetch, startTestServer, type TestServer } from '../../support/server.ts';
import { CLAIMS, credentialRequest, errorOf, preAuthToken } from './support.ts';
import { jwtProof, newHolder } from './wallet.ts';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ publicOrigin: true });
});
afterAll(async () => {
  await srv.stop();
});

async function issue(): Promise<{ sdjwt: string; offerId: string; status: { idx: number; uri: string } }> {
  const t = await preAuthToken(srv);
  const res = await credentialRequest(srv, t.access_token, {
    format: 'dc+sd-jwt',
    vct: 'urn:eudi:pid:1',
    proof: { proof_type: 'jwt', jwt: await jwtProof(newHolder(), { aud: srv.url, nonce: t.c_nonce }) },
  });
  expect(res.status).toBe(200);
  const sdjwt = ((await res.json()) as { credential: string }).credential;
  const payload = JSON.parse(Buffer.from(sdjwt.split('.')[1]!, 'base64url').toString()) as { status: { status_list: { idx: number; uri: string } } };
  return { sdjwt, offerId: t.offer_id, status: payload.status.status_list };
}

/** A verifier that trusts only the IACA and fetches the status list over HTTP, as a relying party does. */
async function verifier(): Promise<SDJwtVcInstance> {
  const iaca = new crypto.X509Certificate(await (await srv.fetch('/vci.ashx?iaca')).text());
  const byX5c = async (data: string, sig: string) => {
    const header = JSON.parse(Buffer.from(data.split('.')[0]!, 'base64url').toString()) as { x5c: string[] };
    const leaf = new crypto.X509Certificate(Buffer.from(header.x5c[0]!, 'base64'));
    if (!leaf.checkIssued(iaca) || !leaf.verify(iaca.publicKey)) return false;
    return crypto.verify('sha256', Buffer.from(data), { key: leaf.publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(sig, 'base64url'));
  };
  return new SDJwtVcInstance({
    hasher: digest,
    verifier: byX5c,
    statusListFetcher: async (uri: string) => {
      const r = await httpFetch(uri, { headers: { Accept: 'application/statuslist+jwt' } });
      expect(r.headers.get('content-type')).toMatch(/application\/statuslist\+jwt/);
      return r.text();
    },
  });
}

describe('wallet issuer: Token Status List and revocation', () => {
  it('every credential has its own index; the list is a signed statuslist+jwt whose sub is its URI', async () => {
    const a = await issue();
    const b = await issue();
    expect(a.status.uri).toBe(`${srv.url}/vci.ashx?status-list=1`);
    expect(b.status.idx).not.toBe(a.status.idx);
    const jwt = await (await srv.fetch('/vci.ashx?status-list=1')).text();
    const [h, p] = jwt
      .split('.')
      .slice(0, 2)
      .map((x) => JSON.parse(Buffer.from(x, 'base64url').toString()) as Record<string, unknown>);
    expect(h!.typ).toBe('statuslist+jwt');
    expect(p!.sub).toBe(a.status.uri);
    expect(p!.ttl).toBeGreaterThan(0);
    expect(getListFromStatusListJWT(jwt).getStatus(a.status.idx)).toBe(0);
    await (await verifier()).verify(a.sdjwt);
  });

  it('revoked through the admin API: the status list says INVALID and @sd-jwt/sd-jwt-vc refuses the credential; the service ref agrees', async () => {
    const a = await issue();
    const b = await issue();
    const list = (await (
      await srv.fetch(`/vci.ashx?credentials&offer_id=${a.offerId}`, { headers: { 'X-Service-Admin-Signature': srv.hmac('vci-credentials') } })
    ).json()) as { data: { id: string; statusIndex: number; revokedAt: string | null }[] };
    expect(list.data).toHaveLength(1);
    expect(list.data[0]!.statusIndex).toBe(a.status.idx);
    const res = await srv.fetch('/vci.ashx?revoke', {
      method: 'POST',
      json: { credential_id: list.data[0]!.id },
      headers: { 'X-Service-Admin-Signature': srv.hmac('vci-revoke') },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { revoked: string[] }).revoked).toEqual([list.data[0]!.id]);
    await expect((await verifier()).verify(a.sdjwt)).rejects.toThrow(/Status is not valid/);
    await (await verifier()).verify(b.sdjwt);

    const api = srv.appliance.host.provided(WALLET_ISSUER)!;
    expect(api.credentialStatus(srv.primary, a.status)).toBe(1);
    expect(api.credentialStatus(srv.primary, b.status)).toBe(0);
    expect(api.credentialStatus(srv.primary, { uri: 'https://elsewhere.example/list', idx: 0 })).toBeUndefined();
    expect((await api.iaca(srv.primary)).pem).toMatch(/BEGIN CERTIFICATE/);
  });

  it('revoke: 404 for an unknown credential or offer, 400 for both or neither, 401 without credentials', async () => {
    const post = (json: unknown, sig = true) =>
      srv.fetch('/vci.ashx?revoke', { method: 'POST', json, headers: sig ? { 'X-Service-Admin-Signature': srv.hmac('vci-revoke') } : {} });
    expect(await errorOf(await post({ credential_id: 'cred_nope' }))).toEqual({ status: 404, error: 'not_found' });
    expect(await errorOf(await post({ offer_id: 'off_nope' }))).toEqual({ status: 404, error: 'not_found' });
    expect((await post({})).status).toBe(400);
    expect((await post({ credential_id: 'a', offer_id: 'b' })).status).toBe(400);
    expect((await post({ credential_id: 'a' }, false)).status).toBe(401);
  });

  it('sovcomms issuer revoke --offer revokes from the CLI; the running server serves the new list at once', async () => {
    const a = await issue();
    expect(getListFromStatusListJWT(await (await srv.fetch('/vci.ashx?status-list=1')).text()).getStatus(a.status.idx)).toBe(0);
    const r = await runCli(['issuer', 'revoke', '--offer', a.offerId], { dataDir: srv.dataDir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^revoked: cred_/);
    expect(getListFromStatusListJWT(await (await srv.fetch('/vci.ashx?status-list=1')).text()).getStatus(a.status.idx)).toBe(1);
    const usage = await runCli(['issuer', 'revoke'], { dataDir: srv.dataDir });
    expect(usage.code).toBe(2);
  }, 60_000);

  it('sovcomms issuer offer create prints the offer URI and the tx_code once; a wallet redeems it', async () => {
    const file = path.join(srv.dataDir, 'claims.json');
    fs.writeFileSync(file, JSON.stringify(CLAIMS));
    const r = await runCli(['issuer', 'offer', 'create', '--claims-file', file, '--format', 'mso_mdoc', '--pre-authorized', '--tx-code', '--origin', srv.url], {
      dataDir: srv.dataDir,
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^openid-credential-offer:\/\/\?credential_offer_uri=/);
    const txCode = /tx_code:\s+(\d{6})/.exec(r.stdout)![1]!;
    const offerUrl = new URL(decodeURIComponent(lines[0]!.split('credential_offer_uri=')[1]!));
    const o = (await (await srv.fetch(offerUrl.pathname + offerUrl.search)).json()) as {
      credential_configuration_ids: string[];
      grants: Record<string, Record<string, string>>;
    };
    expect(o.credential_configuration_ids).toEqual(['eu.europa.ec.eudi.pid.1.mdoc']);
    const code = o.grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']!['pre-authorized_code']!;
    const tok = await srv.fetch('/vci.ashx?token', {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': code, tx_code: txCode }),
    });
    expect(tok.status).toBe(200);
    const bad = await runCli(['issuer', 'offer', 'create', '--claims-file', file, '--tx-code'], { dataDir: srv.dataDir });
    expect(bad.code).toBe(2);
    fs.writeFileSync(file, '{"given_name": 1}');
    const badClaims = await runCli(['issuer', 'offer', 'create', '--claims-file', file], { dataDir: srv.dataDir });
    expect(badClaims.code).toBe(2);
  }, 60_000);
});
