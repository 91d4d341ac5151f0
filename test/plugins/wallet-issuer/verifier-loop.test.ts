/**
 * The loop through our own verifier, end to end with real client libraries: the wallet
 * (@openid4vc/openid4vci) takes a PID SD-JWT VC from the issuer (pre-authorized), presents it to
 * the verifier (@openid4vc/openid4vp: vp-start with the pid preset, resolve the request, KB-JWT
 * with @sd-jwt/sd-jwt-vc, response encrypted as the request asks) and it is verified; revoked
 * (CLI, then the admin API for a second credential), the same presentation is refused for its status.
 */
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digest, ES256 } from '@sd-jwt/crypto-nodejs';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import { runCli } from '../../support/cli.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { walletClient as vpWallet } from '../wallet-verifier/wallet.ts';
import { CLAIMS, createOffer } from './support.ts';
import { newHolder, walletClient, type Holder } from './wallet.ts';

let srv: TestServer;
let rpCaDer: Buffer;

const hmacCall = (method: 'GET' | 'POST', address: string, bucket: string, json?: unknown) => {
  const body = json === undefined ? undefined : JSON.stringify(json);
  return srv.fetch(address, {
    method,
    body,
    headers: {
      'X-Service-Admin-Signature': srv.hmac(bucket, undefined, body ? Buffer.byteLength(body) : undefined),
      ...(body ? { 'Content-Type': 'application/json' } : {}),
    },
  });
};

beforeAll(async () => {
  // The verifier re-reads a status list at every check (ttlSeconds 0), so a revocation shows at once.
  srv = await startTestServer({
    publicOrigin: true,
    // The verifier fetches the issuer's status list from this appliance, on loopback here: the
    // outbound policy (the webhooks') is told to allow it.
    overrides: {
      plugins: { 'wallet-verifier': { perIpPerMinute: 100_000, statusList: { ttlSeconds: 0, timeoutMs: 5000 } }, webhooks: { allowLoopback: true } },
    },
  });
  // The verifier trusts our issuer: its IACA (GET /vci.ashx?iaca) added as a verifier anchor
  // through the documented admin API (the CLI's `verifier anchors add` does the same).
  const iaca = await (await srv.fetch('/vci.ashx?iaca')).text();
  expect(iaca).toContain('BEGIN CERTIFICATE');
  const r = await hmacCall('POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: iaca });
  expect(r.status).toBe(200);
  rpCaDer = Buffer.from(await (await srv.fetch('/rp-cert.ashx?ca&format=der')).arrayBuffer());
});
afterAll(async () => {
  await srv?.stop();
});

/** The wallet takes a PID SD-JWT VC from a pre-authorized offer. */
async function issue(holder: Holder): Promise<{ sdjwt: string; offerId: string }> {
  const offer = await createOffer(srv, { claims: CLAIMS, pre_authorized: true });
  const wallet = walletClient(holder);
  const credentialOffer = await wallet.resolveCredentialOffer(offer.offer_uri!);
  const issuerMetadata = await wallet.resolveIssuerMetadata(credentialOffer.credential_issuer);
  const { accessTokenResponse } = await wallet.retrievePreAuthorizedCodeAccessTokenFromOffer({ credentialOffer, issuerMetadata });
  const { c_nonce } = await wallet.requestNonce({ issuerMetadata });
  const proof = await wallet.createCredentialRequestJwtProof({
    issuerMetadata,
    credentialConfigurationId: 'eu.europa.ec.eudi.pid.1.sd-jwt',
    nonce: c_nonce,
    signer: { method: 'jwk', alg: 'ES256', publicJwk: holder.jwk },
  });
  const res = await wallet.retrieveCredentials({
    issuerMetadata,
    accessToken: accessTokenResponse.access_token,
    credentialConfigurationId: 'eu.europa.ec.eudi.pid.1.sd-jwt',
    proofs: { jwt: [proof.jwt] },
  });
  return { sdjwt: (res.credentialResponse as { credentials: { credential: string }[] }).credentials[0]!.credential, offerId: offer.offer_id! };
}

/** One presentation to our verifier: vp-start (pid preset) → request resolved → KB-JWT → encrypted direct_post.jwt. */
async function present(sdjwt: string, holder: Holder): Promise<{ status: number; body: Record<string, unknown>; polled: Record<string, unknown> }> {
  const st = (await (await srv.fetch('/oidc.ashx?action=vp-start&preset=pid')).json()) as { openid4vp_url: string; session_id: string };
  const wallet = vpWallet(rpCaDer);
  const parsed = wallet.parseOpenid4vpAuthorizationRequest({ authorizationRequest: st.openid4vp_url });
  const resolved = await wallet.resolveOpenId4vpAuthorizationRequest({ authorizationRequestPayload: parsed.params as never });
  const req = resolved.authorizationRequestPayload as { client_id: string; nonce: string; response_uri: string };
  const sd = new SDJwtVcInstance({
    hasher: digest,
    hashAlg: 'sha-256',
    kbSigner: await ES256.getSigner(holder.privateKey.export({ format: 'jwk' })),
    kbSignAlg: 'ES256',
  });
  const token = await sd.present(
    sdjwt,
    { given_name: true, family_name: true, birthdate: true },
    { kb: { payload: { aud: req.client_id, nonce: req.nonce, iat: Math.floor(Date.now() / 1000) } } },
  );
  const resp = await wallet.createOpenid4vpAuthorizationResponse({
    authorizationRequestPayload: resolved.authorizationRequestPayload,
    authorizationResponsePayload: { vp_token: { pid_sd_jwt: [token] } },
    jarm: {
      encryption: { nonce: crypto.randomBytes(16).toString('base64url') },
      serverMetadata: {
        authorization_signing_alg_values_supported: [],
        authorization_encryption_alg_values_supported: ['ECDH-ES'],
        authorization_encryption_enc_values_supported: ['A128GCM', 'A256GCM'],
      },
    },
  });
  const submitted = await wallet.submitOpenid4vpAuthorizationResponse({
    authorizationRequestPayload: resolved.authorizationRequestPayload as { response_uri: string },
    authorizationResponsePayload: resp.authorizationResponsePayload,
    jarm: resp.jarm,
  });
  const body = (await submitted.response.json()) as Record<string, unknown>;
  const polled = (await (await srv.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`)).json()) as Record<string, unknown>;
  return { status: submitted.response.status, body, polled };
}

async function credentialIdOf(offerId: string): Promise<string> {
  const list = (await (await hmacCall('GET', `/vci.ashx?credentials&offer_id=${offerId}`, 'vci-credentials')).json()) as { data: { id: string }[] };
  expect(list.data).toHaveLength(1);
  return list.data[0]!.id;
}

describe('issuer → our verifier → revoke → refused', () => {
  it('an issued PID is verified by our verifier, and refused for its status once revoked with `sovcomms issuer revoke`', async () => {
    const holder = newHolder();
    const { sdjwt, offerId } = await issue(holder);
    const ok = await present(sdjwt, holder);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      status: 'verified',
      presentation: { format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1', claims: { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1984-01-26' } },
    });
    expect(ok.polled.status).toBe('verified');

    const id = await credentialIdOf(offerId);
    const r = await runCli(['issuer', 'revoke', '--credential', id], { dataDir: srv.dataDir });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(id);

    const refused = await present(sdjwt, holder);
    expect(refused.status).toBe(400);
    // A refused response leaves the verifier's session waiting, naming the check.
    expect(refused.polled).toMatchObject({ status: 'pending', refused_responses: 1, check: 'status' });
    expect(refused.body).toMatchObject({ status: 'error', check: 'status' });
    expect(String(refused.body.error_description)).toContain('revoked');
  });

  it('the same through the admin API (POST /vci.ashx?revoke)', async () => {
    const holder = newHolder();
    const { sdjwt, offerId } = await issue(holder);
    expect((await present(sdjwt, holder)).body.status).toBe('verified');
    const id = await credentialIdOf(offerId);
    const r = await hmacCall('POST', '/vci.ashx?revoke', 'vci-revoke', { credential_id: id });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ revoked: [id] });
    const refused = await present(sdjwt, holder);
    expect(refused.status).toBe(400);
    expect(refused.polled).toMatchObject({ status: 'pending', refused_responses: 1, check: 'status' });
  });
});
