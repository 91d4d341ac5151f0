/**
 * The wallet side of the tests: @openid4vc/openid4vci's client (a wallet library no one here
 * wrote), with a holder key and the callbacks it asks for. Requests go through httpFetch so the
 * Host header (tenant) is what the test says.
 */
import crypto from 'node:crypto';
import * as jose from 'jose';
import { clientAuthenticationNone, type HashAlgorithm, setGlobalConfig, type JwtSigner } from '@openid4vc/oauth2';
import { Openid4vciClient } from '@openid4vc/openid4vci';
import { httpFetch } from '../../support/server.ts';

// The test server speaks plain http on loopback; the library wants https unless told otherwise.
setGlobalConfig({ allowInsecureUrls: true });

export interface Holder {
  privateKey: crypto.KeyObject;
  jwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string };
}

export function newHolder(): Holder {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const j = publicKey.export({ format: 'jwk' });
  return { privateKey, jwk: { kty: 'EC', crv: 'P-256', x: String(j.x), y: String(j.y) } };
}

const fetchLike = (async (input: string | URL | Request, init?: RequestInit) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.toString() : input.url;
  const headers: Record<string, string> = {};
  new Headers(init?.headers).forEach((v, k) => {
    headers[k] = v;
  });
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- fetch bodies in these tests are strings
  const body = init?.body === undefined || init.body === null ? undefined : init.body instanceof URLSearchParams ? init.body : String(init.body);
  return httpFetch(url, { method: init?.method ?? 'GET', headers, body });
}) as typeof fetch;

export function walletClient(holder: Holder, clientId?: string): Openid4vciClient {
  return new Openid4vciClient({
    callbacks: {
      fetch: fetchLike,
      hash: (data: Uint8Array, alg: HashAlgorithm) => new Uint8Array(crypto.createHash(alg.replace('-', '').toLowerCase()).update(data).digest()),
      generateRandom: (n: number) => new Uint8Array(crypto.randomBytes(n)),
      clientAuthentication: clientAuthenticationNone({ clientId: clientId ?? 'wallet-dev' }),
      signJwt: async (signer: JwtSigner, { header, payload }) => {
        const jwt = await new jose.SignJWT(payload as jose.JWTPayload).setProtectedHeader(header as jose.JWTHeaderParameters).sign(holder.privateKey);
        // eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator -- the value is deliberately unused
        void signer;
        return { jwt, signerJwk: holder.jwk };
      },
    },
  });
}

/** A jwt proof as a wallet would make it by hand (for the seed-shaped and negative requests). */
export async function jwtProof(holder: Holder, o: { aud: string; nonce?: string; iat?: number; typ?: string; alg?: string }): Promise<string> {
  const payload: jose.JWTPayload = { aud: o.aud, iat: o.iat ?? Math.floor(Date.now() / 1000) };
  if (o.nonce !== undefined) payload.nonce = o.nonce;
  return new jose.SignJWT(payload).setProtectedHeader({ alg: o.alg ?? 'ES256', typ: o.typ ?? 'openid4vci-proof+jwt', jwk: holder.jwk }).sign(holder.privateKey);
}
