import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { CLAIMS, createOffer, credentialRequest, cwtProof, errorOf, PRE_AUTH, preAuthToken } from './support.ts';
import { jwtProof, newHolder } from './wallet.ts';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ publicOrigin: true });
});
afterAll(async () => {
  await srv.stop();
});

const SDJWT = { format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1' };
const MDOC = { format: 'mso_mdoc', doctype: 'eu.europa.ec.eudi.pid.1' };

describe('wallet issuer credential endpoint: every error the issue names', () => {
  it('refuses a request without a credential access token (401 Bearer), and an OIDC or unknown token', async () => {
    const res = await srv.fetch('/vci.ashx?credential', { method: 'POST', json: SDJWT });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
    expect((await credentialRequest(srv, 'wat_nope', SDJWT)).status).toBe(401);
  });

  it('invalid_proof: jwt and cwt together, proof and proofs together, no proof, proofs of two kinds', async () => {
    const t = await preAuthToken(srv);
    const h = newHolder();
    const jwt = await jwtProof(h, { aud: srv.url, nonce: t.c_nonce });
    const cwt = cwtProof(h, { aud: srv.url, nonce: t.c_nonce });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'jwt', jwt, cwt } }))).toEqual({
      status: 400,
      error: 'invalid_proof',
    });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'jwt', jwt }, proofs: { jwt: [jwt] } }))).toEqual({
      status: 400,
      error: 'invalid_proof',
    });
    expect(await errorOf(await credentialRequest(srv, t.access_token, SDJWT))).toEqual({ status: 400, error: 'invalid_proof' });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { jwt } }))).toEqual({ status: 400, error: 'invalid_proof' });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'cwt', jwt } }))).toEqual({
      status: 400,
      error: 'invalid_proof',
    });
    expect(
      await errorOf(
        await credentialRequest(srv, t.access_token, { credential_configuration_id: 'eu.europa.ec.eudi.pid.1.sd-jwt', proofs: { jwt: [jwt], cwt: [cwt] } }),
      ),
    ).toEqual({
      status: 400,
      error: 'invalid_proof',
    });
  });

  it('invalid_proof: wrong typ, wrong aud, iat far off, alg other than ES256, a signature by another key', async () => {
    const t = await preAuthToken(srv);
    const h = newHolder();
    const bad = async (jwt: string) => errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'jwt', jwt } }));
    expect(await bad(await jwtProof(h, { aud: srv.url, nonce: t.c_nonce, typ: 'JWT' }))).toEqual({ status: 400, error: 'invalid_proof' });
    expect(await bad(await jwtProof(h, { aud: 'https://other.example', nonce: t.c_nonce }))).toEqual({ status: 400, error: 'invalid_proof' });
    expect(await bad(await jwtProof(h, { aud: srv.url, nonce: t.c_nonce, iat: Math.floor(Date.now() / 1000) - 3600 }))).toEqual({
      status: 400,
      error: 'invalid_proof',
    });
    // Header names one key, signature by another.
    const other = newHolder();
    const forged = await jwtProof({ ...other, jwk: h.jwk }, { aud: srv.url, nonce: t.c_nonce });
    expect(await bad(forged)).toEqual({ status: 400, error: 'invalid_proof' });
    expect(await bad('not-a-jwt')).toEqual({ status: 400, error: 'invalid_proof' });
    // The nonce survived all of these (no valid proof consumed it).
    const ok = await credentialRequest(srv, t.access_token, {
      ...SDJWT,
      proof: { proof_type: 'jwt', jwt: await jwtProof(h, { aud: srv.url, nonce: t.c_nonce }) },
    });
    expect(ok.status).toBe(200);
  });

  it('invalid_nonce: no nonce, an unknown nonce, a used one', async () => {
    const t = await preAuthToken(srv);
    const h = newHolder();
    const req = async (nonce?: string) =>
      errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'jwt', jwt: await jwtProof(h, { aud: srv.url, nonce }) } }));
    expect(await req(undefined)).toEqual({ status: 400, error: 'invalid_nonce' });
    expect(await req('made-up')).toEqual({ status: 400, error: 'invalid_nonce' });
    const fresh = ((await (await srv.fetch('/vci.ashx?nonce', { method: 'POST' })).json()) as { c_nonce: string }).c_nonce;
    const ok = await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'jwt', jwt: await jwtProof(h, { aud: srv.url, nonce: fresh }) } });
    expect(ok.status).toBe(200);
    expect(await req(fresh)).toEqual({ status: 400, error: 'invalid_nonce' });
  });

  it('unsupported_credential_type: an mdoc doctype other than the PID one, an SD-JWT vct other than urn:eudi:pid:1', async () => {
    const t = await preAuthToken(srv, { claims: CLAIMS, credential_configuration_ids: ['eu.europa.ec.eudi.pid.1.sd-jwt', 'eu.europa.ec.eudi.pid.1.mdoc'] });
    const jwt = await jwtProof(newHolder(), { aud: srv.url, nonce: t.c_nonce });
    expect(
      await errorOf(await credentialRequest(srv, t.access_token, { format: 'mso_mdoc', doctype: 'org.iso.18013.5.1.mDL', proof: { proof_type: 'jwt', jwt } })),
    ).toEqual({
      status: 400,
      error: 'unsupported_credential_type',
    });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { format: 'dc+sd-jwt', vct: 'urn:other', proof: { proof_type: 'jwt', jwt } }))).toEqual({
      status: 400,
      error: 'unsupported_credential_type',
    });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { format: 'ldp_vc', proof: { proof_type: 'jwt', jwt } }))).toEqual({
      status: 400,
      error: 'unsupported_credential_format',
    });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { credential_configuration_id: 'nope', proofs: { jwt: [jwt] } }))).toEqual({
      status: 400,
      error: 'unknown_credential_configuration',
    });
  });

  it('unsupported_proof_type: a cwt proof for mso_mdoc, and an unknown proof type; a cwt proof is accepted for SD-JWT', async () => {
    const t = await preAuthToken(srv, { claims: CLAIMS, credential_configuration_ids: ['eu.europa.ec.eudi.pid.1.sd-jwt', 'eu.europa.ec.eudi.pid.1.mdoc'] });
    const h = newHolder();
    const cwt = cwtProof(h, { aud: srv.url, nonce: t.c_nonce });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...MDOC, proof: { proof_type: 'cwt', cwt } }))).toEqual({
      status: 400,
      error: 'unsupported_proof_type',
    });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'ldp_vp', ldp_vp: {} } }))).toEqual({
      status: 400,
      error: 'unsupported_proof_type',
    });
    const ok = await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'cwt', cwt } });
    expect(ok.status).toBe(200);
    const sdjwt = ((await ok.json()) as { credential: string }).credential;
    const payload = JSON.parse(Buffer.from(sdjwt.split('.')[1]!, 'base64url').toString()) as { cnf: { jwk: unknown } };
    expect(payload.cnf.jwk).toEqual(h.jwk);
    // A cwt proof signed by another key than its COSE_Key.
    const forged = cwtProof({ ...newHolder(), jwk: h.jwk }, { aud: srv.url, nonce: t.c_nonce });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'cwt', cwt: forged } }))).toEqual({
      status: 400,
      error: 'invalid_proof',
    });
  });

  it('a token for the SD-JWT offer does not get an mdoc (403 insufficient_scope)', async () => {
    const t = await preAuthToken(srv);
    const jwt = await jwtProof(newHolder(), { aud: srv.url, nonce: t.c_nonce });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { ...MDOC, proof: { proof_type: 'jwt', jwt } }))).toEqual({
      status: 403,
      error: 'insufficient_scope',
    });
  });
});

describe('wallet issuer token endpoint errors (pre-authorized code)', () => {
  const token = (form: Record<string, string>) => srv.fetch('/vci.ashx?token', { method: 'POST', body: new URLSearchParams(form) });

  it('invalid_grant for an unknown code, invalid_request without one or with an unexpected tx_code, unsupported_grant_type', async () => {
    expect(await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': 'pac_unknown' }))).toEqual({ status: 400, error: 'invalid_grant' });
    expect(await errorOf(await token({ grant_type: PRE_AUTH }))).toEqual({ status: 400, error: 'invalid_request' });
    expect(await errorOf(await token({ grant_type: 'client_credentials' }))).toEqual({ status: 400, error: 'unsupported_grant_type' });
    const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: true });
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: Record<string, Record<string, string>> };
    const code = o.grants[PRE_AUTH]!['pre-authorized_code']!;
    expect(await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': code, tx_code: '123456' }))).toEqual({
      status: 400,
      error: 'invalid_request',
    });
  });

  it('burns the pre-authorized code after five wrong tx_codes', async () => {
    const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: true, tx_code: '4711' });
    expect(offer.tx_code).toBe('4711');
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: Record<string, Record<string, string>> };
    const code = o.grants[PRE_AUTH]!['pre-authorized_code']!;
    for (let i = 0; i < 5; i++)
      expect((await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': code, tx_code: '0000' }))).error).toBe('invalid_grant');
    expect((await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': code, tx_code: '4711' }))).error).toBe('invalid_grant');
  });
});

describe('wallet issuer offers', () => {
  it('create-offer needs an admin bearer or the HMAC header (401 without; ak_ keys refused 403), and checks its body', async () => {
    const none = await srv.fetch('/vci.ashx?create-offer', { method: 'POST', json: { claims: CLAIMS } });
    expect(none.status).toBe(401);
    const key = await srv.fetch('/vci.ashx?create-offer', { method: 'POST', json: { claims: CLAIMS }, key: srv.adminKey });
    expect(key.status).toBe(403);
    const hmac = { 'X-Service-Admin-Signature': srv.hmac('create-offer') };
    const bad = await srv.fetch('/vci.ashx?create-offer', { method: 'POST', json: { claims: CLAIMS, pre_authorized: false, tx_code: true }, headers: hmac });
    expect(bad.status).toBe(400);
    const noName = await srv.fetch('/vci.ashx?create-offer', { method: 'POST', json: { claims: { given_name: 'x' } }, headers: hmac });
    expect(noName.status).toBe(400);
    const tooLong = await srv.fetch('/vci.ashx?create-offer', { method: 'POST', json: { claims: CLAIMS, expires_in: 365 * 86_400 }, headers: hmac });
    expect(tooLong.status).toBe(400);
  });

  it('serves the offer object (404 unknown) and a page with the openid-credential-offer:// QR code', async () => {
    const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: false });
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as Record<string, unknown>;
    expect(o.credential_issuer).toBe(srv.url);
    expect(o.credential_configuration_ids).toEqual(['eu.europa.ec.eudi.pid.1.sd-jwt']);
    expect((o.grants as { authorization_code: { issuer_state: string } }).authorization_code.issuer_state).toMatch(/^ist_/);
    expect((await srv.fetch('/vci.ashx?offer=off_unknown')).status).toBe(404);
    const page = await srv.fetch(`/vci.ashx?offer-page=${offer.offer_id}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    const html = await page.text();
    expect(html).toContain('<svg');
    expect(html).toContain(
      `openid-credential-offer://?credential_offer_uri=${encodeURIComponent(`${srv.url}/vci.ashx?offer=${offer.offer_id}`)}`.replace(/&/g, '&#38;'),
    );
    expect((await srv.fetch('/vci.ashx?offer-page=off_unknown')).status).toBe(404);
  });

  it('keeps subject claims and codes encrypted at rest (no claim value or code in the database file)', async () => {
    const marker = 'Zyxwvutsrqponm';
    const offer = await createOffer(srv, { claims: { ...CLAIMS, family_name: marker }, pre_authorized: true });
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: Record<string, Record<string, string>> };
    const db = srv.appliance.core.db;
    const rows = JSON.stringify(db.prepare('SELECT * FROM wi_offer').all()) + JSON.stringify(db.prepare('SELECT * FROM wi_key').all());
    expect(rows).not.toContain(marker);
    expect(rows).not.toContain(o.grants[PRE_AUTH]!['pre-authorized_code']!);
    expect(rows).not.toMatch(/BEGIN PRIVATE KEY/);
  });
});

describe('wallet issuer access token reach', () => {
  it('one access token obtains at most credentialsPerToken credentials (403 credential_request_denied after)', async () => {
    const s2 = await startTestServer({ publicOrigin: true, overrides: { plugins: { 'wallet-issuer': { credentialsPerToken: 2 } } } });
    try {
      const t = await preAuthToken(s2);
      const h = newHolder();
      const once = async () => {
        const nonce = ((await (await s2.fetch('/vci.ashx?nonce', { method: 'POST' })).json()) as { c_nonce: string }).c_nonce;
        return credentialRequest(s2, t.access_token, { ...SDJWT, proof: { proof_type: 'jwt', jwt: await jwtProof(h, { aud: s2.url, nonce }) } });
      };
      expect((await once()).status).toBe(200);
      expect((await once()).status).toBe(200);
      expect(await errorOf(await once())).toEqual({ status: 403, error: 'credential_request_denied' });
    } finally {
      await s2.stop();
    }
  });
});

describe('wallet issuer per-IP rate limits', () => {
  it('429 with Retry-After on the credential and the offer endpoints', async () => {
    const limited = await startTestServer({ publicOrigin: true, overrides: { plugins: { 'wallet-issuer': { credentialPerMinute: 3, offerPerMinute: 3 } } } });
    try {
      const codes: number[] = [];
      let retry: string | null = null;
      for (let i = 0; i < 5; i++) {
        const r = await limited.fetch('/vci.ashx?credential', { method: 'POST', json: SDJWT, headers: { Authorization: 'Bearer wat_x' } });
        codes.push(r.status);
        if (r.status === 429) retry = r.headers.get('retry-after');
      }
      expect(codes.slice(0, 3)).toEqual([401, 401, 401]);
      expect(codes.slice(3)).toEqual([429, 429]);
      expect(Number(retry)).toBeGreaterThan(0);
      const offers: number[] = [];
      for (let i = 0; i < 4; i++) offers.push((await limited.fetch('/vci.ashx?offer=off_x')).status);
      expect(offers).toEqual([404, 404, 404, 429]);
    } finally {
      await limited.stop();
    }
  });
});
