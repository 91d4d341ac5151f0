import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as jose from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { OidcServices } from '../../../plugins/oidc/services.ts';
import { SignThread } from '../../../plugins/oidc/sign-thread.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { saveClient, tokenForm } from './helpers.ts';

/**
 * Under load, JWS signatures are made on a thread beside the event loop, a turn's worth per
 * message (sign-thread.ts). These tests pin down that the thread starts only under load, that
 * what it signs verifies for both algorithms and every key, that the event loop then makes no
 * signature itself, and that a thread that cannot start or dies costs no token.
 */
const es = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const es2 = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const rs = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const ES = { key: es.privateKey, dsaEncoding: 'ieee-p1363' } as const;
const ES2 = { key: es2.privateKey, dsaEncoding: 'ieee-p1363' } as const;
const RS = { key: rs.privateKey };

const b64 = (s: string) => Buffer.from(s).toString('base64url');
const inputFor = (alg: string, i: number) => `${b64(JSON.stringify({ alg, typ: 'JWT' }))}.${b64(JSON.stringify({ i, sub: `s${i}` }))}`;

async function verifies(jws: string, key: crypto.KeyObject, alg: 'ES256' | 'RS256', i: number): Promise<void> {
  const { payload } = await jose.compactVerify(jws, key, { algorithms: [alg] });
  expect(JSON.parse(Buffer.from(payload).toString())).toEqual({ i, sub: `s${i}` });
}

/** Signs until the thread is up (it starts after `startAfter` signatures within a second). */
async function warm(t: SignThread): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!t.threaded) {
    if (Date.now() > deadline) throw new Error('the signing thread did not start');
    await t.sign(ES, inputFor('ES256', 0));
    await new Promise((r) => setTimeout(r, 5));
  }
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sign-thread-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

describe('SignThread', () => {
  it('stays on the event loop while quiet: no thread below startAfter signatures a second', async () => {
    const t = new SignThread({ startAfter: 1000 });
    for (let i = 0; i < 50; i++) await verifies(await t.sign(ES, inputFor('ES256', i)), es.publicKey, 'ES256', i);
    await new Promise((r) => setTimeout(r, 300));
    expect(t.threaded).toBe(false);
    await t.close();
  });

  it('under load signs a turn of ES256 and RS256 inputs with several keys on the thread, and each verifies', async () => {
    const t = new SignThread({ startAfter: 5 });
    await warm(t);
    const onLoop = vi.spyOn(crypto, 'sign');
    const keys = [
      [ES, es.publicKey, 'ES256'],
      [ES2, es2.publicKey, 'ES256'],
      [RS, rs.publicKey, 'RS256'],
    ] as const;
    const jobs = Array.from({ length: 90 }, (_, i) => {
      const [k, pub, alg] = keys[i % 3]!;
      return t.sign(k, inputFor(alg, i)).then((jws) => verifies(jws, pub, alg, i));
    });
    await Promise.all(jobs);
    // The loop made none of them (the thread has its own node:crypto; the spy sees this one only).
    expect(onLoop).not.toHaveBeenCalled();
    expect(t.threaded).toBe(true);
    await t.close();
    expect(t.threaded).toBe(false);
    // Closed: signed on the loop, same result.
    await verifies(await t.sign(RS, inputFor('RS256', 7)), rs.publicKey, 'RS256', 7);
  });

  it('under load finishes ES256 signatures from presignatures: each verifies, no nonce twice, RS256 never', async () => {
    const t = new SignThread({ startAfter: 5 });
    await warm(t);
    const seenR = new Set<string>();
    let es256 = 0;
    const deadline = Date.now() + 20_000;
    // Bursts until a good share came from presignatures (the pool fills after the first asks).
    for (let round = 0; t.presigned < 1000 || round < 5; round++) {
      if (Date.now() > deadline) throw new Error(`only ${t.presigned} presigned signatures`);
      const jobs = Array.from({ length: 100 }, (_, j) => {
        const i = round * 100 + j;
        const [k, pub, alg] = j % 10 === 0 ? ([RS, rs.publicKey, 'RS256'] as const) : ([ES, es.publicKey, 'ES256'] as const);
        if (alg === 'ES256') es256++;
        return t.sign(k, inputFor(alg, i)).then(async (jws) => {
          await verifies(jws, pub, alg, i);
          if (alg === 'ES256') seenR.add(Buffer.from(jws.split('.')[2]!, 'base64url').subarray(0, 32).toString('hex'));
        });
      });
      await Promise.all(jobs);
      await new Promise((r) => setTimeout(r, 2));
    }
    // ECDSA's r is x(k·G): the same r twice would be the same nonce twice.
    expect(seenR.size).toBe(es256);
    expect(t.presigned).toBeLessThanOrEqual(es256);
    await t.close();
    // Closed: what was left in the pool is gone, signatures are made on the loop.
    const before = t.presigned;
    await verifies(await t.sign(ES, inputFor('ES256', 1)), es.publicKey, 'ES256', 1);
    expect(t.presigned).toBe(before);
  });

  it('a thread that dies while signatures are owed: each is signed on the loop instead, and so is everything after', async () => {
    const entry = path.join(tmp, 'dies.mjs');
    // Says it is ready, then exits at the first batch without answering.
    fs.writeFileSync(
      entry,
      "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', (m) => { if (m.t === 'sign') process.exit(3); });\nparentPort.postMessage({ t: 'ready' });\n",
    );
    const t = new SignThread({ startAfter: 2, entry: new URL(`file://${entry}`) });
    await warm(t);
    const owed = Array.from({ length: 20 }, (_, i) => t.sign(ES, inputFor('ES256', i)));
    const jws = await Promise.all(owed);
    await Promise.all(jws.map((j, i) => verifies(j, es.publicKey, 'ES256', i)));
    expect(t.threaded).toBe(false);
    await verifies(await t.sign(ES, inputFor('ES256', 99)), es.publicKey, 'ES256', 99);
    await t.close();
  });

  it('a thread that cannot start: signing stays on the loop', async () => {
    const t = new SignThread({ startAfter: 1, entry: new URL(`file://${path.join(tmp, 'missing.mjs')}`) });
    for (let i = 0; i < 30; i++) await verifies(await t.sign(RS, inputFor('RS256', i)), rs.publicKey, 'RS256', i);
    await new Promise((r) => setTimeout(r, 500));
    expect(t.threaded).toBe(false);
    for (let i = 0; i < 10; i++) await verifies(await t.sign(ES, inputFor('ES256', i)), es.publicKey, 'ES256', i);
    await t.close();
  });
});

describe('token endpoint under load', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('a burst of client_credentials requests moves signing to the thread; every token verifies with the JWKS', async () => {
    const host = `localhost:${s.port}`;
    const { client_secret: secret } = await saveClient(s, host, {
      client_id: 'burst-svc',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    const auth = { Authorization: `Basic ${Buffer.from(`burst-svc:${secret!}`).toString('base64')}` };
    const keys = (s.appliance.host.services('oidc') as OidcServices).provider.keys;
    const tokens: string[] = [];
    const deadline = Date.now() + 30_000;
    // Bursts of 40 concurrent requests until the thread is up, then one more burst on it.
    let onThread = 0;
    while (onThread < 2) {
      if (Date.now() > deadline) throw new Error('signing never moved to the thread');
      if (keys.signingOnThread) onThread++;
      const answers = await Promise.all(Array.from({ length: 40 }, () => tokenForm(s, host, { grant_type: 'client_credentials' }, auth)));
      for (const a of answers) {
        expect(a.status).toBe(200);
        tokens.push((a.body as { access_token: string }).access_token);
      }
    }
    expect(keys.signingOnThread).toBe(true);
    // Then tokens are signed from presignatures.
    while (keys.presignedSignatures === 0) {
      if (Date.now() > deadline) throw new Error('no token was signed from a presignature');
      const answers = await Promise.all(Array.from({ length: 40 }, () => tokenForm(s, host, { grant_type: 'client_credentials' }, auth)));
      for (const a of answers) tokens.push((a.body as { access_token: string }).access_token);
    }
    const jwks = jose.createLocalJWKSet((await (await s.fetch('/.well-known/jwks.json', { host })).json()) as jose.JSONWebKeySet);
    for (const t of tokens) {
      const { payload, protectedHeader } = await jose.jwtVerify(t, jwks, { typ: 'at+jwt', algorithms: ['ES256'] });
      expect(protectedHeader.alg).toBe('ES256');
      expect(payload.client_id).toBe('burst-svc');
    }
    expect(new Set(tokens).size).toBe(tokens.length);
  });
});
