import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminCall, body, VERIFIER_OVERRIDES } from './helpers.ts';
import { issuePid, makeHolder, makeIssuerCa, presentPid, walletClient, type Holder, type TestCa } from './wallet.ts';

let s: TestServer;
let ca: TestCa;
let holder: Holder;
let rpCaDer: Buffer;

beforeAll(async () => {
  s = await startTestServer({ overrides: VERIFIER_OVERRIDES });
  ca = await makeIssuerCa();
  holder = await makeHolder();
  const r = await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors', { pem: ca.rootPem });
  expect(r.status).toBe(200);
  rpCaDer = Buffer.from(await (await s.fetch('/rp-cert.ashx?ca&format=der')).arrayBuffer());
});
afterAll(async () => {
  await s?.stop();
});

async function start(q = 'preset=pid') {
  const r = await s.fetch(`/oidc.ashx?action=vp-start&${q}`);
  expect(r.status).toBe(200);
  return body(r);
}

/** The wallet resolves the deep link (fetches and verifies our request object). */
async function resolve(url: string) {
  const wallet = walletClient(rpCaDer);
  const parsed = wallet.parseOpenid4vpAuthorizationRequest({ authorizationRequest: url });
  const resolved = await wallet.resolveOpenId4vpAuthorizationRequest({ authorizationRequestPayload: parsed.params as never });
  return { wallet, resolved };
}

async function answer(url: string, makeToken: (req: { client_id: string; nonce: string }) => Promise<string>) {
  const { wallet, resolved } = await resolve(url);
  const req = resolved.authorizationRequestPayload as { client_id: string; nonce: string; response_uri: string };
  const token = await makeToken(req);
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
  return { resp, req, resolved, wallet };
}

describe('SD-JWT VC presentation over OpenID4VP 1.0 direct_post.jwt', () => {
  it('vp-start -> request object (x5c from the RP CA) -> encrypted response -> verified with the disclosed claims', async () => {
    const st = await start();
    expect(st.openid4vp_url).toMatch(/^openid4vp:\/\/\?client_id=x509_hash%3A/);
    expect(st.expires_in).toBe(300);
    const { resp, req, resolved, wallet } = await answer(st.openid4vp_url, async (r) =>
      presentPid(await issuePid(ca, holder), holder, { aud: r.client_id, nonce: r.nonce }),
    );
    expect(resolved.client.prefix).toBe('x509_hash');
    expect(req.client_id).toBe(st.client_id);
    const submitted = await wallet.submitOpenid4vpAuthorizationResponse({
      authorizationRequestPayload: resolved.authorizationRequestPayload as { response_uri: string },
      authorizationResponsePayload: resp.authorizationResponsePayload,
      jarm: resp.jarm,
    });
    const out = await body(submitted.response);
    expect(submitted.response.status).toBe(200);
    expect(out).toMatchObject({
      status: 'verified',
      session_id: st.session_id,
      presentation: { format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1', claims: { family_name: 'Mustermann', given_name: 'Erika', birthdate: '1964-08-12' } },
    });
    expect(out.presentation.claims.nationalities).toBeUndefined();
    const polled = await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`));
    expect(polled.status).toBe('verified');
  });
});
