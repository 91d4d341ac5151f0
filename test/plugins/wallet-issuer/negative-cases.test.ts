/**
 * The error cases of issue 15 that the other files leave out: what expires (pre-authorized code,
 * authorization code, c_nonce, access token), PAR's access_denied and invalid_scope, the token
 * endpoint's invalid_client for a client outside the whitelist and invalid_request cases, the
 * OIDC token endpoint's answers for the pre-authorized grant, invalid_credential_request, and 429
 * with Retry-After at the token endpoint.
 */
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { authorizeThrough, TestBrowser } from '../oidc/helpers.ts';
import { CLAIMS, createOffer, credentialRequest, errorOf, PRE_AUTH, preAuthToken } from './support.ts';
import { jwtProof, newHolder } from './wallet.ts';

const REDIRECT = 'https://wallet.example/cb';
const alice = { username: 'alice', password: 'alice password 1' };
const clock = new ManualClock(Date.now());
let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ publicOrigin: true, clock });
  await srv.appliance.core.users.add(srv.primary, { name: alice.username, role: 'user', password: alice.password });
});
afterAll(async () => {
  await srv.stop();
});

const SDJWT = { format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1' };
const token = (form: Record<string, string>, path = '/vci.ashx?token') => srv.fetch(path, { method: 'POST', body: new URLSearchParams(form) });
const par = (form: Record<string, string>) => srv.fetch('/vci.ashx?par', { method: 'POST', body: new URLSearchParams(form) });

async function preAuthCode(body: Record<string, unknown> = {}): Promise<{ code: string; tx_code?: string }> {
  const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: true, ...body });
  const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: Record<string, Record<string, string>> };
  return { code: o.grants[PRE_AUTH]!['pre-authorized_code']!, tx_code: offer.tx_code };
}

async function issuerState(body: Record<string, unknown> = {}): Promise<string> {
  const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: false, ...body });
  const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: { authorization_code: { issuer_state: string } } };
  return o.grants.authorization_code.issuer_state;
}

function pkce(): { verifier: string; challenge: string } {
  const verifier = crypto.randomBytes(32).toString('base64url');
  return { verifier, challenge: crypto.createHash('sha256').update(verifier).digest('base64url') };
}

describe('wallet issuer: the remaining negative cases', () => {
  it('pre-authorized: tx_code missing (invalid_request), the code used or expired (invalid_grant), at /vci.ashx?token and /oauth2/v1/token alike', async () => {
    const withTx = await preAuthCode({ tx_code: true });
    expect(await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': withTx.code }))).toEqual({ status: 400, error: 'invalid_request' });
    expect(await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': withTx.code }, '/oauth2/v1/token'))).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    // The right tx_code still works after those (a missing code is no guess).
    expect((await token({ grant_type: PRE_AUTH, 'pre-authorized_code': withTx.code, tx_code: withTx.tx_code! })).status).toBe(200);
    // Used: refused at both addresses.
    for (const path of ['/vci.ashx?token', '/oauth2/v1/token']) {
      expect(await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': withTx.code, tx_code: withTx.tx_code! }, path))).toEqual({
        status: 400,
        error: 'invalid_grant',
      });
    }
    // Expired: the offer's lifetime is the code's.
    const short = await preAuthCode({ expires_in: 60 });
    clock.advance(61_000);
    expect(await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': short.code }))).toEqual({ status: 400, error: 'invalid_grant' });
    expect(await errorOf(await token({ grant_type: PRE_AUTH, 'pre-authorized_code': short.code }, '/oauth2/v1/token'))).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
  });

  it('authorization_code: no code (invalid_request), an unknown code (invalid_grant), a client outside the whitelist (401 invalid_client), an expired code (invalid_grant)', async () => {
    expect(await errorOf(await token({ grant_type: 'authorization_code', client_id: 'wallet-dev', redirect_uri: REDIRECT }))).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    const v = 'v'.repeat(43);
    expect(
      await errorOf(await token({ grant_type: 'authorization_code', code: 'wac_unknown', client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: v })),
    ).toEqual({ status: 400, error: 'invalid_grant' });
    expect(
      await errorOf(await token({ grant_type: 'authorization_code', code: 'wac_unknown', client_id: 'evil-wallet', redirect_uri: REDIRECT, code_verifier: v })),
    ).toEqual({ status: 401, error: 'invalid_client' });
    // A real code, signed in, exchanged after its codeTtlSec (60 s).
    const p = pkce();
    const r = await par({
      response_type: 'code',
      client_id: 'wallet-dev',
      redirect_uri: REDIRECT,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
      issuer_state: await issuerState(),
    });
    const { request_uri } = (await r.json()) as { request_uri: string };
    const back = new URL(
      await authorizeThrough(
        new TestBrowser(srv, `127.0.0.1:${srv.port}`),
        `/vci/authorize?client_id=wallet-dev&request_uri=${encodeURIComponent(request_uri)}`,
        alice,
      ),
    );
    const code = back.searchParams.get('code')!;
    expect(code).toMatch(/^wac_/);
    clock.advance(61_000);
    expect(
      await errorOf(await token({ grant_type: 'authorization_code', code, client_id: 'wallet-dev', redirect_uri: REDIRECT, code_verifier: p.verifier })),
    ).toEqual({
      status: 400,
      error: 'invalid_grant',
    });
  });

  it('PAR: an unknown, used or expired offer is access_denied; a credential the offer does not hold is invalid_scope; a bad authorization_details is invalid_request', async () => {
    const p = pkce();
    const base = { response_type: 'code', client_id: 'wallet-dev', redirect_uri: REDIRECT, code_challenge: p.challenge, code_challenge_method: 'S256' };
    expect(await errorOf(await par({ ...base, issuer_state: 'ist_unknown' }))).toEqual({ status: 400, error: 'access_denied' });
    const expiring = await issuerState({ expires_in: 60 });
    clock.advance(61_000);
    expect(await errorOf(await par({ ...base, issuer_state: expiring }))).toEqual({ status: 400, error: 'access_denied' });
    const sdOnly = await issuerState();
    const mdocDetails = JSON.stringify([{ type: 'openid_credential', credential_configuration_id: 'eu.europa.ec.eudi.pid.1.mdoc' }]);
    expect(await errorOf(await par({ ...base, issuer_state: sdOnly, authorization_details: mdocDetails }))).toEqual({ status: 400, error: 'invalid_scope' });
    expect(await errorOf(await par({ ...base, issuer_state: sdOnly, scope: 'eu.europa.ec.eudi.pid.1.mdoc' }))).toEqual({ status: 400, error: 'invalid_scope' });
    expect(await errorOf(await par({ ...base, issuer_state: sdOnly, authorization_details: '{not json' }))).toEqual({ status: 400, error: 'invalid_request' });
    expect(
      await errorOf(
        await par({ ...base, issuer_state: sdOnly, authorization_details: JSON.stringify([{ type: 'openid_credential', credential_configuration_id: 'x' }]) }),
      ),
    ).toEqual({ status: 400, error: 'invalid_request' });
  });

  it('credential: an expired c_nonce (invalid_nonce), format with credential_configuration_id (invalid_credential_request), neither (invalid_credential_request), an expired access token (401)', async () => {
    const t = await preAuthToken(srv);
    const h = newHolder();
    clock.advance(301_000);
    expect(
      await errorOf(
        await credentialRequest(srv, t.access_token, {
          ...SDJWT,
          proof: { proof_type: 'jwt', jwt: await jwtProof(h, { aud: srv.url, nonce: t.c_nonce, iat: clock.now() / 1000 }) },
        }),
      ),
    ).toEqual({ status: 400, error: 'invalid_nonce' });
    const fresh = ((await (await srv.fetch('/vci.ashx?nonce', { method: 'POST' })).json()) as { c_nonce: string }).c_nonce;
    const jwt = await jwtProof(h, { aud: srv.url, nonce: fresh, iat: Math.floor(clock.now() / 1000) });
    expect(
      await errorOf(
        await credentialRequest(srv, t.access_token, { ...SDJWT, credential_configuration_id: 'eu.europa.ec.eudi.pid.1.sd-jwt', proofs: { jwt: [jwt] } }),
      ),
    ).toEqual({ status: 400, error: 'invalid_credential_request' });
    expect(await errorOf(await credentialRequest(srv, t.access_token, { proofs: { jwt: [jwt] } }))).toEqual({
      status: 400,
      error: 'invalid_credential_request',
    });
    clock.advance(3601_000);
    expect((await credentialRequest(srv, t.access_token, { ...SDJWT, proof: { proof_type: 'jwt', jwt } })).status).toBe(401);
  });
});

describe('wallet issuer: 429 at the token endpoint', () => {
  it('answers 429 with Retry-After once the per-IP token limit is spent', async () => {
    const limited = await startTestServer({ publicOrigin: true, overrides: { plugins: { 'wallet-issuer': { tokenPerMinute: 2 } } } });
    try {
      const codes: number[] = [];
      let retry: string | null = null;
      for (let i = 0; i < 4; i++) {
        const r = await limited.fetch('/vci.ashx?token', {
          method: 'POST',
          body: new URLSearchParams({ grant_type: PRE_AUTH, 'pre-authorized_code': 'pac_x' }),
        });
        codes.push(r.status);
        if (r.status === 429) retry = r.headers.get('retry-after');
      }
      expect(codes).toEqual([400, 400, 429, 429]);
      expect(Number(retry)).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });
});
