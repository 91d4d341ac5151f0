import crypto from 'node:crypto';
import * as jose from 'jose';
import type { TestServer } from '../../support/server.ts';

/** An admin-HMAC signed call (the "H" of "B or H"). */
export function adminCall(s: TestServer, method: 'GET' | 'POST', pathAndQuery: string, bucket: string, json?: unknown, tenantHost?: string): Promise<Response> {
  const host = tenantHost ?? `127.0.0.1:${s.port}`;
  const body = json === undefined ? undefined : JSON.stringify(json);
  const headers: Record<string, string> = { 'x-service-admin-signature': s.hmac(bucket, host, body ? Buffer.byteLength(body) : undefined) };
  if (body) headers['content-type'] = 'application/json';
  return s.fetch(pathAndQuery, { method, host, headers, body });
}

/** A response body as JSON; assertions check it field by field, so a loose type keeps them readable. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see the comment above
export async function body(r: Response): Promise<any> {
  return r.json();
}

/** What a wallet learns from our request object (verified against its x5c leaf). */
export interface OpenSession {
  sessionId: string;
  clientId: string;
  nonce: string;
  state: string;
  responseUri: string;
  encJwk?: jose.JWK;
  header: jose.ProtectedHeaderParameters;
  payload: Record<string, unknown>;
}

/** vp-start then vp-request, decoded and signature-checked with the x5c leaf. */
export async function openSession(s: TestServer, q = 'preset=pid', host?: string): Promise<OpenSession> {
  const st = await body(await s.fetch(`/oidc.ashx?action=vp-start&${q}`, { host }));
  const jwt = await (await s.fetch(`/oidc.ashx?action=vp-request&session_id=${st.session_id}`, { host })).text();
  const header = jose.decodeProtectedHeader(jwt);
  const leaf = new crypto.X509Certificate(Buffer.from(header.x5c![0]!, 'base64'));
  const { payload } = await jose.jwtVerify(jwt, leaf.publicKey, { typ: 'oauth-authz-req+jwt' });
  const meta = payload.client_metadata as { jwks?: { keys: jose.JWK[] } };
  return {
    sessionId: st.session_id,
    clientId: payload.client_id as string,
    nonce: payload.nonce as string,
    state: payload.state as string,
    responseUri: payload.response_uri as string,
    encJwk: meta.jwks?.keys[0],
    header,
    payload,
  };
}

/** OpenID4VP 1.0 direct_post.jwt by hand: the JWE of {vp_token, state} posted as form field `response`. */
export async function sendEncrypted(s: TestServer, o: OpenSession, token: string, opts: { state?: string } = {}, host?: string): Promise<Response> {
  const jwe = await new jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: { pid_sd_jwt: [token] }, state: opts.state ?? o.state })))
    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: o.encJwk!.kid })
    .encrypt(await jose.importJWK(o.encJwk!, 'ECDH-ES'));
  const u = new URL(o.responseUri);
  return s.fetch(u.pathname + u.search, { method: 'POST', host, body: new URLSearchParams({ response: jwe }) });
}

/** Tests hammer one IP: the verifier's own per-IP limit is raised unless a test sets it. */
export const VERIFIER_OVERRIDES = { plugins: { 'wallet-verifier': { perIpPerMinute: 100_000 } } };
