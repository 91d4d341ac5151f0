import crypto from 'node:crypto';
import * as jose from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';

/**
 * A tenant's first signing keys are made on first use, off the event loop (the libuv thread
 * pool, as rotation does), and a burst of first requests for one tenant waits for one key pair
 * per algorithm instead of making one each.
 */
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
});
afterEach(() => {
  vi.restoreAllMocks();
});

describe('OIDC signing keys: first use', () => {
  it('a burst of first requests for a new tenant makes one key per algorithm, asynchronously, and every token verifies with it', async () => {
    const host = 'first-keys.test';
    await s.addTenant(host);
    const tenantId = s.appliance.core.tenants.resolve(host).id;
    const sync = vi.spyOn(crypto, 'generateKeyPairSync');
    const async = vi.spyOn(crypto, 'generateKeyPair');
    const count = () =>
      s.appliance.core.db.prepare("SELECT alg, COUNT(*) AS n FROM oidc_keys WHERE tenant_id = ? AND state = 'active' GROUP BY alg").all(tenantId);
    expect(count()).toEqual([]);

    // The event loop keeps turning while the first keys are made: count its turns meanwhile.
    let turns = 0;
    let turning = true;
    const spin = (): void => {
      turns++;
      if (turning) setImmediate(spin);
    };
    setImmediate(spin);
    const jwks = Array.from({ length: 10 }, () => s.fetch('/.well-known/jwks.json', { host }));
    const grants = Array.from({ length: 3 }, () =>
      s.fetch('/oauth2/v1/token', {
        host,
        body: new URLSearchParams({
          grant_type: 'password',
          client_id: 'sovcomms-console',
          username: 'admin',
          password: 'correct horse battery',
          scope: 'openid',
        }),
        method: 'POST',
      }),
    );
    const fed = s.fetch('/.well-known/openid-federation', { host });
    const answers = await Promise.all([...jwks, ...grants, fed]);
    turning = false;
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    expect(turns).toBeGreaterThan(1);

    expect(sync).not.toHaveBeenCalled();
    expect(async).toHaveBeenCalledTimes(2);
    expect(count()).toEqual([
      { alg: 'ES256', n: 1 },
      { alg: 'RS256', n: 1 },
    ]);
    const sets = (await Promise.all(answers.slice(0, 10).map((r) => r.json()))) as { keys: jose.JWK[] }[];
    for (const set of sets) expect(set).toEqual(sets[0]);
    expect(sets[0]!.keys.map((k) => k.alg).sort()).toEqual(['ES256', 'RS256']);
    const keySet = jose.createLocalJWKSet(sets[0]!);
    for (const r of answers.slice(10, 13)) {
      const t = (await r.json()) as { access_token: string; id_token: string };
      await jose.jwtVerify(t.access_token, keySet);
      await jose.jwtVerify(t.id_token, keySet);
    }
    await jose.jwtVerify(await answers[13]!.text(), keySet, { typ: 'entity-statement+jwt' });

    // Later requests find the keys made: nothing more is generated.
    expect((await s.fetch('/.well-known/jwks.json', { host })).status).toBe(200);
    expect(async).toHaveBeenCalledTimes(2);
  });
});
