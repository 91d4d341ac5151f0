import crypto from 'node:crypto';
import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { body, openSession, VERIFIER_OVERRIDES } from './helpers.ts';

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ overrides: VERIFIER_OVERRIDES });
});
afterAll(async () => {
  await s?.stop();
});

const deepArray = (n: number) => '['.repeat(n) + '"x"' + ']'.repeat(n);
const deepObject = (n: number) => '{"a":'.repeat(n) + '"x"' + '}'.repeat(n);

describe('vp_token JSON is held to the request-body depth bound (64)', () => {
  it('a form field with 20,000 nested brackets or 5,000 nested objects answers 400 invalid_request, and the session still takes a response', async () => {
    const o = await openSession(s, 'preset=pid&response_mode=direct_post');
    for (const vp of [deepArray(20_000), deepObject(5_000), deepArray(65)]) {
      const r = await s.fetch(`/oidc.ashx?action=vp-response&session_id=${o.sessionId}`, {
        method: 'POST',
        body: new URLSearchParams({ vp_token: vp, state: o.state }),
      });
      expect(r.status, vp.slice(0, 20)).toBe(400);
      const b = await body(r);
      expect(b.error).toBe('invalid_request');
      expect(b.error_description).toMatch(/nested deeper than 64/);
    }
    // Not a verdict on the session: a shallow (if wrong) token still gets to the checks.
    const ok = await s.fetch(`/oidc.ashx?action=vp-response&session_id=${o.sessionId}`, {
      method: 'POST',
      body: new URLSearchParams({ vp_token: deepArray(63), state: o.state }),
    });
    expect(ok.status).toBe(400);
    expect((await body(ok)).error_description).not.toMatch(/nested deeper/);
  });

  it('the same bound holds inside an encrypted response (direct_post.jwt)', async () => {
    const o = await openSession(s);
    const plaintext = `{"state":${JSON.stringify(o.state)},"vp_token":${deepArray(20_000)}}`;
    const jwe = await new jose.CompactEncrypt(new TextEncoder().encode(plaintext))
      .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: o.encJwk!.kid })
      .encrypt(await jose.importJWK(o.encJwk!, 'ECDH-ES'));
    const r = await s.fetch(`/oidc.ashx?action=vp-response&session_id=${o.sessionId}`, { method: 'POST', body: new URLSearchParams({ response: jwe }) });
    expect(r.status).toBe(400);
    expect((await body(r)).error).toBe('invalid_request');
  });
});

describe('the QR page', () => {
  it('answers under a CSP without script, framing or unsafe-inline; its one style block is allowed by its hash', async () => {
    const st = await body(await s.fetch('/oidc.ashx?action=vp-start&preset=pid'));
    const r = await s.fetch(new URL(st.qr_page).pathname + new URL(st.qr_page).search);
    expect(r.status).toBe(200);
    const csp = r.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/(^|; )default-src 'none'(;|$)/);
    expect(csp).toMatch(/(^|; )frame-ancestors 'none'(;|$)/);
    expect(csp).toMatch(/(^|; )base-uri 'none'(;|$)/);
    expect(csp).not.toMatch(/unsafe-inline|script-src/);
    expect(r.headers.get('x-frame-options')).toBe('DENY');
    const html = await r.text();
    const styles = [...html.matchAll(/<style>([^<]*)<\/style>/g)].map((m) => m[1]!);
    expect(styles).toHaveLength(1);
    expect(csp).toContain(`style-src 'sha256-${crypto.createHash('sha256').update(styles[0]!).digest('base64')}'`);
    expect(html).not.toMatch(/<script|\sstyle="/);
  });
});
