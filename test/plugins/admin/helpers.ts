import { expect } from 'vitest';
import type { TestServer } from '../../support/server.ts';
import { tokenForm } from '../oidc/helpers.ts';

// Response bodies are checked field by field; `any` keeps those checks short.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export async function j(r: Response | Promise<Response>): Promise<{ status: number; body: Json }> {
  const res = await r;
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** An access token from the password grant of the built-in console client on `host`. */
export async function adminToken(s: TestServer, host: string, username: string, password: string): Promise<string> {
  const t = await tokenForm(s, host, { grant_type: 'password', client_id: 'sovcomms-console', username, password, scope: 'openid' });
  expect(t.status, JSON.stringify(t.body)).toBe(200);
  return t.body.access_token as string;
}

/** RFC 6749 §2.3.1 client_secret_basic. */
export function basic(id: string, secret: string): string {
  return 'Basic ' + Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64');
}
