import crypto from 'node:crypto';
import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminCall, body, openSession, sendEncrypted, VERIFIER_OVERRIDES, type OpenSession } from './helpers.ts';
import { issuePid, makeHolder, makeIssuerCa, presentPid, type Holder, type TestCa } from './wallet.ts';

let s: TestServer;
let ca: TestCa;
let holder: Holder;
let credential: string;
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  s = await startTestServer({ clock, overrides: VERIFIER_OVERRIDES });
  ca = await makeIssuerCa();
  holder = await makeHolder();
  credential = await issuePid(ca, holder);
  expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem })).status).toBe(200);
});
afterAll(async () => {
  await s?.stop();
});

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const sdHash = (p: string) => crypto.createHash('sha256').update(p).digest('base64url');

/** A KB-JWT made by hand (to break one field at a time). */
async function kbJwt(withoutKb: string, o: OpenSession, over: { header?: Record<string, unknown>; payload?: Record<string, unknown>; key?: jose.JWK } = {}) {
  const payload = { iat: Math.floor(clock.now() / 1000), aud: o.clientId, nonce: o.nonce, sd_hash: sdHash(withoutKb), ...over.payload };
  return new jose.SignJWT(payload)
    .setProtectedHeader({ alg: 'ES256', typ: 'kb+jwt', ...over.header } as jose.JWTHeaderParameters)
    .sign(await jose.importJWK(over.key ?? holder.privateJwk, 'ES256'));
}

/** Splits a presentation made by @sd-jwt into issuer JWT, disclosures and KB-JWT. */
function split(p: string) {
  const parts = p.split('~');
  return { jwt: parts[0]!, disclosures: parts.slice(1, -1), kb: parts[parts.length - 1]! };
}

async function expectFailure(o: OpenSession, token: string, check: string, code = 'invalid_presentation') {
  const r = await sendEncrypted(s, o, token);
  const out = await body(r);
  expect({ status: r.status, error: out.error, check: out.check }).toEqual({ status: 400, error: code, check });
  expect(out.status).toBe('error');
  expect(out.error_description).toContain(check);
  // The session still waits (anyone who saw the QR code could have sent it) and names the check.
  const polled = await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${o.sessionId}`));
  expect(polled).toMatchObject({ status: 'pending', refused_responses: 1, check });
}

describe('vp-response refuses a presentation that fails any single check', () => {
  it('baseline: the unmodified presentation verifies', async () => {
    const o = await openSession(s);
    const r = await sendEncrypted(s, o, await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) }));
    expect(r.status).toBe(200);
    expect((await body(r)).status).toBe('verified');
  });

  it('issuer JWT with alg none', async () => {
    const o = await openSession(s);
    const { jwt, disclosures } = split(await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce }));
    const [h, p] = jwt.split('.');
    const none = `${b64({ ...JSON.parse(Buffer.from(h!, 'base64url').toString()), alg: 'none' })}.${p}.`;
    const w = `${none}~${disclosures.join('~')}~`;
    await expectFailure(o, w + (await kbJwt(w, o)), 'issuer_signature');
  });

  it('issuer signature broken (payload changed after signing)', async () => {
    const o = await openSession(s);
    const { jwt, disclosures } = split(await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce }));
    const [h, p, sig] = jwt.split('.');
    const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const w = `${h}.${b64({ ...payload, iss: 'https://evil.example' })}.${sig}~${disclosures.join('~')}~`;
    await expectFailure(o, w + (await kbJwt(w, o)), 'issuer_signature');
  });

  it('issuer certificate from a CA this tenant does not trust', async () => {
    const other = await makeIssuerCa('Untrusted Provider');
    const o = await openSession(s);
    await expectFailure(
      o,
      await presentPid(await issuePid(other, holder), holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) }),
      'x5c',
    );
  });

  it('vct not requested by the preset', async () => {
    const o = await openSession(s);
    await expectFailure(
      o,
      await presentPid(await issuePid(ca, holder, { vct: 'urn:example:loyalty:1' }), holder, {
        aud: o.clientId,
        nonce: o.nonce,
        iat: Math.floor(clock.now() / 1000),
      }),
      'vct',
    );
  });

  it('expired credential (exp in the past)', async () => {
    const o = await openSession(s);
    const exp = Math.floor(clock.now() / 1000) - 10;
    await expectFailure(
      o,
      await presentPid(await issuePid(ca, holder, { exp }), holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) }),
      'exp',
    );
  });

  it('tampered disclosure (value changed: its digest is no longer in the credential)', async () => {
    const o = await openSession(s);
    const { jwt, disclosures } = split(await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce }));
    const d0 = JSON.parse(Buffer.from(disclosures[0]!, 'base64url').toString());
    const tampered = [b64([d0[0], d0[1], 'Forged']), ...disclosures.slice(1)];
    const w = `${jwt}~${tampered.join('~')}~`;
    await expectFailure(o, w + (await kbJwt(w, o)), 'disclosure');
  });

  it('unreferenced disclosure (an extra claim no digest points at; @sd-jwt 0.19 would accept it)', async () => {
    const o = await openSession(s);
    const { jwt, disclosures } = split(await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce }));
    const w = `${jwt}~${[...disclosures, b64([crypto.randomBytes(16).toString('base64url'), 'is_admin', true])].join('~')}~`;
    await expectFailure(o, w + (await kbJwt(w, o)), 'disclosure');
  });

  it('duplicate disclosure', async () => {
    const o = await openSession(s);
    const { jwt, disclosures } = split(await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce }));
    const w = `${jwt}~${[...disclosures, disclosures[0]].join('~')}~`;
    await expectFailure(o, w + (await kbJwt(w, o)), 'disclosure');
  });

  it('no key binding JWT', async () => {
    const o = await openSession(s);
    const { jwt, disclosures } = split(await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce }));
    await expectFailure(o, `${jwt}~${disclosures.join('~')}~`, 'kb_jwt');
  });

  const kbCases: [string, string, (w: string, o: OpenSession) => Promise<string>][] = [
    ['KB-JWT typ not kb+jwt', 'kb_jwt', (w, o) => kbJwt(w, o, { header: { typ: 'JWT' } })],
    ['KB-JWT signed by another key than cnf', 'kb_jwt', async (w, o) => kbJwt(w, o, { key: (await makeHolder()).privateJwk })],
    [
      'KB-JWT with alg none',
      'kb_jwt',
      async (w, o) =>
        `${b64({ alg: 'none', typ: 'kb+jwt' })}.${b64({ iat: Math.floor(clock.now() / 1000), aud: o.clientId, nonce: o.nonce, sd_hash: sdHash(w) })}.`,
    ],
    ['wrong aud', 'aud', (w, o) => kbJwt(w, o, { payload: { aud: 'x509_san_dns:other.example' } })],
    ['wrong nonce', 'nonce', (w, o) => kbJwt(w, o, { payload: { nonce: 'not-the-session-nonce' } })],
    ['iat far in the past', 'iat', (w, o) => kbJwt(w, o, { payload: { iat: Math.floor(clock.now() / 1000) - 3600 } })],
    ['iat in the future', 'iat', (w, o) => kbJwt(w, o, { payload: { iat: Math.floor(clock.now() / 1000) + 3600 } })],
    ['sd_hash over other disclosures', 'sd_hash', (w, o) => kbJwt(w, o, { payload: { sd_hash: sdHash(w.split('~')[0] + '~') } })],
  ];
  for (const [name, check, make] of kbCases) {
    it(name, async () => {
      const o = await openSession(s);
      const { jwt, disclosures } = split(await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce }));
      const w = `${jwt}~${disclosures.join('~')}~`;
      await expectFailure(o, w + (await make(w, o)), check);
    });
  }

  it('state that is not the session state', async () => {
    const o = await openSession(s);
    const r = await sendEncrypted(s, o, await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) }), {
      state: 'forged',
    });
    expect(r.status).toBe(400);
    expect((await body(r)).check).toBe('state');
  });
});

describe('sessions: expired, finished, unknown, replayed, request fetched again', () => {
  it('a response after the session expired is refused (session_expired)', async () => {
    const o = await openSession(s);
    const token = await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) });
    clock.advance(301_000);
    try {
      const r = await sendEncrypted(s, o, token);
      expect(r.status).toBe(400);
      expect((await body(r)).error).toBe('session_expired');
    } finally {
      clock.advance(-301_000);
    }
  });

  it('replay: the same presentation again is refused, in its session (finished) and in a fresh one (replayed)', async () => {
    const o = await openSession(s);
    const token = await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) });
    expect((await sendEncrypted(s, o, token)).status).toBe(200);
    const again = await sendEncrypted(s, o, token);
    expect(again.status).toBe(400);
    expect((await body(again)).error).toBe('session_finished');
    const o2 = await openSession(s);
    const replay = await sendEncrypted(s, o2, token);
    expect(replay.status).toBe(400);
    expect(await body(replay)).toMatchObject({ error: 'replayed_presentation', check: 'replay' });
  });

  it('an unknown session is 404 at vp-request, vp-response and vp-result', async () => {
    expect((await s.fetch('/oidc.ashx?action=vp-request&session_id=nope')).status).toBe(404);
    expect((await s.fetch('/oidc.ashx?action=vp-result&session_id=nope')).status).toBe(404);
    const r = await s.fetch('/oidc.ashx?action=vp-response&session_id=nope', { method: 'POST', body: new URLSearchParams({ vp_token: 'x', state: 'y' }) });
    expect(r.status).toBe(404);
  });

  it('the request object can be fetched again while the session waits: same nonce, state and key, and the wallet still verifies', async () => {
    const first = await openSession(s);
    // Someone who saw the QR code fetches it first; the wallet fetches it after.
    const again = await s.fetch(`/oidc.ashx?action=vp-request&session_id=${first.sessionId}`);
    expect(again.status).toBe(200);
    const { payload } = await jose.jwtVerify(await again.text(), new crypto.X509Certificate(Buffer.from(first.header.x5c![0]!, 'base64')).publicKey);
    expect(payload).toMatchObject({ nonce: first.nonce, state: first.state, response_uri: first.responseUri });
    const key = (payload.client_metadata as { jwks: { keys: jose.JWK[] } }).jwks.keys[0]!;
    expect(key).toEqual(first.encJwk);
    const o = { ...first, encJwk: key };
    const r = await sendEncrypted(s, o, await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) }));
    expect(r.status).toBe(200);
    expect((await body(r)).status).toBe('verified');
    // Finished: no request object any more.
    expect((await body(await s.fetch(`/oidc.ashx?action=vp-request&session_id=${o.sessionId}`))).error).toBe('session_finished');
  });
});

describe('whoever sees the QR code cannot end the session', () => {
  const bogus = (o: OpenSession, form: Record<string, string>) =>
    s.fetch(`/oidc.ashx?action=vp-response&session_id=${o.sessionId}`, { method: 'POST', body: new URLSearchParams(form) });

  it('a bogus vp-response (vp_token=x&state=wrong) leaves the session pending, and the real wallet still verifies', async () => {
    for (const q of ['preset=pid', 'preset=pid&response_mode=direct_post']) {
      const o = await openSession(s, q);
      const r = await bogus(o, { vp_token: 'x', state: 'wrong' });
      expect(r.status).toBe(400);
      expect(await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${o.sessionId}`))).toMatchObject({ status: 'pending', refused_responses: 1 });
      const token = await presentPid(credential, holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) });
      const ok = o.encJwk ? await sendEncrypted(s, o, token) : await bogus(o, { vp_token: JSON.stringify({ pid_sd_jwt: [token] }), state: o.state });
      expect(ok.status).toBe(200);
      expect((await body(ok)).status).toBe('verified');
      expect((await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${o.sessionId}`))).status).toBe('verified');
    }
  });

  it('refused responses are counted: the fifth ends the session with a clear reason', async () => {
    const o = await openSession(s, 'preset=pid&response_mode=direct_post');
    for (let i = 1; i <= 4; i++) {
      expect((await bogus(o, { vp_token: `x${i}`, state: 'wrong' })).status).toBe(400);
      expect((await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${o.sessionId}`))).refused_responses).toBe(i);
    }
    expect((await bogus(o, { vp_token: 'x5', state: o.state })).status).toBe(400);
    const ended = await body(await s.fetch(`/oidc.ashx?action=vp-result&session_id=${o.sessionId}`));
    expect(ended).toMatchObject({ status: 'error', check: 'too_many_responses', error: 'invalid_presentation' });
    expect(ended.error_description).toMatch(/5 responses to this session were refused/);
    const late = await bogus(o, { vp_token: 'x6', state: o.state });
    expect((await body(late)).error).toBe('session_finished');
  });
});
