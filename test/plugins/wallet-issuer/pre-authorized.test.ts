import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digest } from '@sd-jwt/crypto-nodejs';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { jwtProof, newHolder, walletClient } from './wallet.ts';

const CLAIMS = { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1984-01-26', nationalities: ['DE'], email: 'erika@example.org' };

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ publicOrigin: true });
});
afterAll(async () => {
  await srv.stop();
});

async function createOffer(body: Record<string, unknown>): Promise<Record<string, string>> {
  const res = await srv.fetch('/vci.ashx?create-offer', { method: 'POST', json: body, headers: { 'X-Service-Admin-Signature': srv.hmac('create-offer') } });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, string>;
}

async function iacaAnchoredVerifier(extra: ConstructorParameters<typeof SDJwtVcInstance>[0] = {}): Promise<SDJwtVcInstance> {
  const pem = await (await srv.fetch('/vci.ashx?iaca')).text();
  const iaca = new crypto.X509Certificate(pem);
  return new SDJwtVcInstance({
    ...extra,
    hasher: digest,
    // The issuer key comes from the x5c header; it must chain to the IACA we were configured with.
    verifier: async (data: string, sig: string) => {
      const [h] = data.split('.');
      const header = JSON.parse(Buffer.from(h!, 'base64url').toString()) as { x5c: string[] };
      const leaf = new crypto.X509Certificate(Buffer.from(header.x5c[0]!, 'base64'));
      if (!leaf.verify(iaca.publicKey) || leaf.issuer !== iaca.subject) return false;
      return crypto.verify('sha256', Buffer.from(data), { key: leaf.publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(sig, 'base64url'));
    },
  });
}

describe('wallet issuer: metadata, keys and the pre-authorized code flow', () => {
  it('serves issuer metadata at both addresses, 1.0 shapes and the seed fields', async () => {
    const a = (await (await srv.fetch('/vci.ashx?metadata')).json()) as Record<string, unknown>;
    const b = (await (await srv.fetch('/.well-known/openid-credential-issuer')).json()) as Record<string, unknown>;
    expect(a).toEqual(b);
    expect(a.credential_issuer).toBe(srv.url);
    expect(a.nonce_endpoint).toBe(`${srv.url}/vci.ashx?nonce`);
    expect(a.credential_endpoint).toBe(`${srv.url}/vci.ashx?credential`);
    expect(a.code_challenge_methods_supported).toEqual(['S256']);
    expect(a.response_types_supported).toEqual(['code']);
    expect(a.token_endpoint_auth_methods_supported).toEqual(['none']);
    expect(a.grant_types_supported).toEqual(['authorization_code', 'urn:ietf:params:oauth:grant-type:pre-authorized_code']);
    expect(a.pushed_authorization_request_endpoint).toBeTypeOf('string');
    const configs = a.credential_configurations_supported as Record<string, Record<string, unknown>>;
    expect(Object.values(configs).map((c) => [c.format, c.vct ?? c.doctype])).toEqual([
      ['dc+sd-jwt', 'urn:eudi:pid:1'],
      ['mso_mdoc', 'eu.europa.ec.eudi.pid.1'],
    ]);
    expect((a.display as unknown[]).length).toBeGreaterThan(0);
    const as = (await (await srv.fetch('/.well-known/oauth-authorization-server/vci')).json()) as Record<string, unknown>;
    expect(as.issuer).toBe(`${srv.url}/vci`);
    expect(as.code_challenge_methods_supported).toEqual(['S256']);
    expect(as.token_endpoint_auth_methods_supported).toEqual(['none']);
  });

  it('serves the JWKS at both addresses and the IACA as PEM; the signing certificate chains to the IACA', async () => {
    const j1 = (await (await srv.fetch('/vci.ashx?jwks')).json()) as { keys: { kid: string; x5c: string[]; d?: string }[] };
    const j2 = (await (await srv.fetch('/.well-known/openid-credential-issuer/jwks')).json()) as typeof j1;
    expect(j1).toEqual(j2);
    expect(j1.keys).toHaveLength(1);
    expect(j1.keys[0]!.d).toBeUndefined();
    const res = await srv.fetch('/vci.ashx?iaca');
    expect(res.headers.get('content-type')).toMatch(/application\/x-pem-file/);
    const iaca = new crypto.X509Certificate(await res.text());
    expect(iaca.ca).toBe(true);
    const ds = new crypto.X509Certificate(Buffer.from(j1.keys[0]!.x5c[0]!, 'base64'));
    expect(ds.verify(iaca.publicKey)).toBe(true);
    expect(ds.ca).toBe(false);
  });

  it('issues a PID SD-JWT VC to @openid4vc/openid4vci: offer, token, nonce, jwt proof, credential; verified with @sd-jwt/sd-jwt-vc', async () => {
    const offer = await createOffer({ claims: CLAIMS, pre_authorized: true });
    expect(offer.offer_uri).toMatch(/^openid-credential-offer:\/\/\?credential_offer_uri=/);
    const holder = newHolder();
    const wallet = walletClient(holder);
    const credentialOffer = await wallet.resolveCredentialOffer(offer.offer_uri!);
    const issuerMetadata = await wallet.resolveIssuerMetadata(credentialOffer.credential_issuer);
    const { accessTokenResponse } = await wallet.retrievePreAuthorizedCodeAccessTokenFromOffer({ credentialOffer, issuerMetadata });
    expect(accessTokenResponse.token_type).toBe('Bearer');
    expect(accessTokenResponse.c_nonce).toBeTypeOf('string');
    const { c_nonce } = await wallet.requestNonce({ issuerMetadata });
    const configId = credentialOffer.credential_configuration_ids[0]!;
    const proof = await wallet.createCredentialRequestJwtProof({
      issuerMetadata,
      credentialConfigurationId: configId,
      nonce: c_nonce,
      signer: { method: 'jwk', alg: 'ES256', publicJwk: holder.jwk },
    });
    const res = await wallet.retrieveCredentials({
      issuerMetadata,
      accessToken: accessTokenResponse.access_token,
      credentialConfigurationId: configId,
      proofs: { jwt: [proof.jwt] },
    });
    const body = res.credentialResponse as { credentials: { credential: string }[]; credential: string; format: string };
    expect(body.format).toBe('dc+sd-jwt');
    const sdjwt = body.credentials[0]!.credential;
    expect(body.credential).toBe(sdjwt);

    const verified = await (await iacaAnchoredVerifier()).verify(sdjwt);
    const p = verified.payload as Record<string, unknown>;
    expect(p.vct).toBe('urn:eudi:pid:1');
    expect(p.iss).toBe(srv.url);
    expect(p.given_name).toBe('Erika');
    expect(p.birthdate).toBe('1984-01-26');
    expect((p.cnf as { jwk: unknown }).jwk).toEqual(holder.jwk);
    expect((p.status as { status_list: { uri: string; idx: number } }).status_list.uri).toBe(`${srv.url}/vci.ashx?status-list=1`);
    // The holder presents with a key binding JWT signed by the proof key; a verifier that requires
    // key binding accepts it, with only the disclosed claim.
    const holderSd = new SDJwtVcInstance({
      hasher: digest,
      kbSignAlg: 'ES256',
      kbSigner: (data: string) => crypto.sign('sha256', Buffer.from(data), { key: holder.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url'),
    });
    const presentation = await holderSd.present(
      sdjwt,
      { given_name: true },
      { kb: { payload: { aud: 'https://verifier.example', nonce: 'n-1', iat: Math.floor(Date.now() / 1000) } } },
    );
    const rp = await iacaAnchoredVerifier({
      kbVerifier: async (data: string, sig: string, payload) =>
        crypto.verify(
          'sha256',
          Buffer.from(data),
          { key: crypto.createPublicKey({ key: (payload.cnf as { jwk: crypto.JsonWebKey }).jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
          Buffer.from(sig, 'base64url'),
        ),
    });
    const seen = await rp.verify(presentation, { requiredClaimKeys: ['given_name'], keyBindingNonce: 'n-1' });
    expect(seen.kb?.payload.aud).toBe('https://verifier.example');
    expect((seen.payload as Record<string, unknown>).family_name).toBeUndefined();
    // Another key cannot make the key binding.
    const thief = newHolder();
    const stolen = await new SDJwtVcInstance({
      hasher: digest,
      kbSignAlg: 'ES256',
      kbSigner: (data: string) => crypto.sign('sha256', Buffer.from(data), { key: thief.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url'),
    }).present(sdjwt, { given_name: true }, { kb: { payload: { aud: 'https://verifier.example', nonce: 'n-1', iat: Math.floor(Date.now() / 1000) } } });
    await expect(rp.verify(stolen, { keyBindingNonce: 'n-1' })).rejects.toThrow();

    // Selectively disclosable: the signed payload holds digests, not the claims.
    const signed = JSON.parse(Buffer.from(sdjwt.split('~')[0]!.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    expect(signed.given_name).toBeUndefined();
    expect((signed._sd as string[]).length).toBeGreaterThanOrEqual(5);
  });

  it('accepts the seed shape (format + vct + singular proof with the token-response c_nonce) and refuses the used nonce', async () => {
    const offer = await createOffer({ claims: CLAIMS, pre_authorized: true });
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: Record<string, Record<string, string>> };
    const code = o.grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']!['pre-authorized_code']!;
    const tok = await srv.fetch('/vci.ashx?token', {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': code }),
    });
    expect(tok.status).toBe(200);
    const t = (await tok.json()) as { access_token: string; c_nonce: string; c_nonce_expires_in: number; token_type: string; expires_in: number };
    expect(t.c_nonce_expires_in).toBeGreaterThan(0);
    const holder = newHolder();
    const request = async (nonce: string) =>
      srv.fetch('/vci.ashx?credential', {
        method: 'POST',
        headers: { Authorization: `Bearer ${t.access_token}` },
        json: { format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1', proof: { proof_type: 'jwt', jwt: await jwtProof(holder, { aud: srv.url, nonce }) } },
      });
    const ok = await request(t.c_nonce);
    expect(ok.status).toBe(200);
    const body = (await ok.json()) as { credential: string; format: string; c_nonce: string };
    expect(body.format).toBe('dc+sd-jwt');
    expect(body.credential.split('~').length).toBeGreaterThan(2);
    const again = await request(t.c_nonce);
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: string }).error).toBe('invalid_nonce');
    // The code was single use.
    const second = await srv.fetch('/vci.ashx?token', {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': code }),
    });
    expect(((await second.json()) as { error: string }).error).toBe('invalid_grant');
  });

  it('accepts the pre-authorized grant at the OIDC token endpoint too, with the tx_code the offer set', async () => {
    const offer = await createOffer({ claims: CLAIMS, pre_authorized: true, tx_code: true });
    expect(offer.tx_code).toMatch(/^\d{6}$/);
    const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as {
      grants: Record<string, { 'pre-authorized_code': string; tx_code: { length: number } }>;
    };
    const g = o.grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']!;
    expect(g.tx_code.length).toBe(6);
    const token = (extra: Record<string, string>) =>
      srv.fetch('/oauth2/v1/token', {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code',
          'pre-authorized_code': g['pre-authorized_code'],
          ...extra,
        }),
      });
    const missing = await token({});
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: string }).error).toBe('invalid_request');
    const wrong = await token({ tx_code: offer.tx_code === '000000' ? '111111' : '000000' });
    expect(((await wrong.json()) as { error: string }).error).toBe('invalid_grant');
    const ok = await token({ tx_code: offer.tx_code! });
    expect(ok.status).toBe(200);
    const t = (await ok.json()) as { access_token: string; c_nonce: string };
    expect(t.access_token).toMatch(/^wat_/);
    expect(t.c_nonce).toBeTypeOf('string');
  });
});
