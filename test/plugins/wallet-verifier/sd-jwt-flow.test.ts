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
  const r = await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem });
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
    // The session id is in the QR code: alone it gives the status, never the claims; the result
    // key that only vp-start returned gives them; a wrong key is refused.
    const polled = await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`));
    expect(polled).toMatchObject({ status: 'verified', presentation: {} });
    expect(JSON.stringify(polled)).not.toContain('Mustermann');
    expect(st.result_key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const owner = await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`, { headers: { 'X-Sovcomms-Result-Key': st.result_key } }));
    expect(owner.presentation.claims).toMatchObject({ family_name: 'Mustermann', given_name: 'Erika' });
    const wrong = await s.fetch(`/oidc.ashx?action=vp-result&session_id=${st.session_id}`, { headers: { 'X-Sovcomms-Result-Key': 'x'.repeat(43) } });
    expect(wrong.status).toBe(403);
    expect(JSON.stringify(await body(wrong))).not.toContain('Mustermann');
    // At rest the result (personal data) is sealed; the key is kept only as a hash.
    const stored = s.appliance.core.db.prepare('SELECT result, result_key_hash FROM vp_session WHERE id = ?').get(st.session_id) as {
      result: string;
      result_key_hash: string;
    };
    expect(stored.result).not.toContain('Mustermann');
    expect(stored.result_key_hash).not.toContain(st.result_key);

    // The verifier audit trail, newest first, admin only.
    const ev = await body(await adminCall(s, 'GET', '/signal.ashx?list-vp-events&limit=10', 'list-vp-events'));
    const mine = ev.events.filter((e: { extra: string }) => e.extra.includes(`session=${st.session_id}`)).map((e: { event: string }) => e.event);
    expect(mine).toEqual(['vp-verify-result', 'vp-response-arrived', 'vp-request', 'vp-start']);
    expect(ev.events[0]).toMatchObject({ tenant: s.primary.host, ip: expect.any(String), ts: expect.any(String) });
    expect((await s.fetch('/signal.ashx?list-vp-events')).status).toBe(401);
    const future = await body(
      await adminCall(s, 'GET', `/signal.ashx?list-vp-events&since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`, 'list-vp-events'),
    );
    expect(future.events).toEqual([]);
    // The same entries reach the appliance audit log.
    const audit = await body(await s.fetch('/api.ashx/v1/auditlog?limit=50', { key: s.adminKey }));
    expect(JSON.stringify(audit)).toContain('vp-verify-result');

    // The webhook event, written in the same transaction (the webhooks plugin delivers every event).
    const row = s.appliance.core.db.prepare("SELECT data FROM events WHERE name = 'presentation.verified' ORDER BY id DESC LIMIT 1").get() as { data: string };
    expect(JSON.parse(row.data)).toEqual({
      sessionId: st.session_id,
      preset: 'pid',
      format: 'dc+sd-jwt',
      clientId: st.client_id,
      claimNames: ['birthdate', 'family_name', 'given_name'],
    });
  });
});
