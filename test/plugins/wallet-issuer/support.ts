import crypto from 'node:crypto';
import { encode as cborEncode } from 'cbor-x';
import { expect } from 'vitest';
import type { TestServer } from '../../support/server.ts';
import type { Holder } from './wallet.ts';

export const CLAIMS = { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1984-01-26', nationalities: ['DE'], email: 'erika@example.org' };
export const PRE_AUTH = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';

export async function createOffer(srv: TestServer, body: Record<string, unknown>, host?: string): Promise<Record<string, string>> {
  const res = await srv.fetch('/vci.ashx?create-offer', {
    method: 'POST',
    json: body,
    host,
    headers: { 'X-Service-Admin-Signature': host ? srv.hmac('create-offer', host) : srv.hmac('create-offer') },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, string>;
}

/** Offer → pre-authorized code → access token and c_nonce, as a wallet does it over HTTP. */
export async function preAuthToken(
  srv: TestServer,
  offerBody: Record<string, unknown> = { claims: CLAIMS },
): Promise<{ access_token: string; c_nonce: string; offer_id: string }> {
  const offer = await createOffer(srv, { pre_authorized: true, ...offerBody });
  const o = (await (await srv.fetch(`/vci.ashx?offer=${offer.offer_id}`)).json()) as { grants: Record<string, Record<string, string>> };
  const code = o.grants[PRE_AUTH]!['pre-authorized_code']!;
  const res = await srv.fetch('/vci.ashx?token', {
    method: 'POST',
    body: new URLSearchParams({ grant_type: PRE_AUTH, 'pre-authorized_code': code, ...(offer.tx_code ? { tx_code: offer.tx_code } : {}) }),
  });
  expect(res.status).toBe(200);
  return { ...((await res.json()) as { access_token: string; c_nonce: string }), offer_id: offer.offer_id! };
}

export async function credentialRequest(srv: TestServer, token: string, body: unknown): Promise<Response> {
  return srv.fetch('/vci.ashx?credential', { method: 'POST', headers: { Authorization: `Bearer ${token}` }, json: body });
}

export async function errorOf(res: Response): Promise<{ status: number; error: string }> {
  const b = (await res.json()) as { error: string };
  return { status: res.status, error: b.error };
}

/**
 * A `cwt` proof: COSE_Sign1 (RFC 9052) signed ES256 by the holder, protected header with alg -7,
 * content type openid4vci-proof+cwt and the holder key as COSE_Key; payload a CWT claim set with
 * aud (3), iat (6) and nonce (10).
 */
export function cwtProof(holder: Holder, o: { aud: string; nonce: string; iat?: number }): string {
  const coseKey = new Map<number, unknown>([
    [1, 2],
    [-1, 1],
    [-2, Buffer.from(holder.jwk.x, 'base64url')],
    [-3, Buffer.from(holder.jwk.y, 'base64url')],
  ]);
  const prot = cborEncode(
    new Map<number | string, unknown>([
      [1, -7],
      [3, 'openid4vci-proof+cwt'],
      ['COSE_Key', coseKey],
    ]),
  );
  const payload = cborEncode(
    new Map<number, unknown>([
      [3, o.aud],
      [6, o.iat ?? Math.floor(Date.now() / 1000)],
      [10, o.nonce],
    ]),
  );
  const tbs = cborEncode(['Signature1', prot, Buffer.alloc(0), payload]);
  const sig = crypto.sign('sha256', tbs, { key: holder.privateKey, dsaEncoding: 'ieee-p1363' });
  return Buffer.from(cborEncode([prot, new Map(), payload, sig])).toString('base64url');
}
