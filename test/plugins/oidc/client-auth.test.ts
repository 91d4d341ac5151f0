import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../../server/cli.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { saveClient, tokenForm } from './helpers.ts';

// The token endpoint keeps parsed clients and their secret digests in memory (clients.ts). These
// tests pin down that the cache never outlives a change: a secret replaced or a client removed,
// through the admin surface or by the CLI in another connection, stops working for the very next
// request; and that client authentication stays as strict as before (method, tenant, encoding).

let s: TestServer;
let A: string;
let B: string;

const basic = (id: string, secret: string) => ({ Authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}` });

async function cli(...argv: string[]): Promise<{ code: number; out: string }> {
  const out: string[] = [];
  const code = await main([...argv, '--data-dir', s.dataDir], { out: (l) => out.push(l), err: (l) => out.push(l), stdin: async () => '' });
  return { code, out: out.join('\n') };
}

beforeAll(async () => {
  s = await startTestServer();
  A = `localhost:${s.port}`;
  B = `b.test:${s.port}`;
  await s.addTenant('b.test');
});
afterAll(async () => {
  await s?.stop();
});

describe('client secret cache', () => {
  it('a secret replaced by the CLI (another connection) fails on the next request, the new one works at once', async () => {
    const { client_secret: old } = await saveClient(s, A, {
      client_id: 'cli-rot',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    // Warm the cache with several successful requests.
    for (let i = 0; i < 3; i++) expect((await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('cli-rot', old!))).status).toBe(200);
    const r = await cli('client', 'secret', 'cli-rot', '--tenant', s.primary.host);
    expect(r.code).toBe(0);
    const fresh = /client_secret: (\S+)/.exec(r.out)![1]!;
    const stale = await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('cli-rot', old!));
    expect(stale.status).toBe(401);
    expect(stale.body.error).toBe('invalid_client');
    expect((await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('cli-rot', fresh))).status).toBe(200);
  });

  it('a client removed by the CLI is refused on the next request', async () => {
    const { client_secret: secret } = await saveClient(s, A, {
      client_id: 'cli-rm',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    expect((await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('cli-rm', secret!))).status).toBe(200);
    expect((await cli('client', 'remove', 'cli-rm', '--tenant', s.primary.host)).code).toBe(0);
    expect((await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('cli-rm', secret!))).status).toBe(401);
  });

  it('a secret replaced through the admin surface fails on the next request', async () => {
    const { client_secret: old } = await saveClient(s, A, {
      client_id: 'api-rot',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_post',
    });
    expect((await tokenForm(s, A, { grant_type: 'client_credentials', client_id: 'api-rot', client_secret: old! })).status).toBe(200);
    const json = JSON.stringify({ client_id: 'api-rot' });
    const g = await s.fetch('/signal.ashx?oidc-clients-genkey=1', {
      method: 'POST',
      host: A,
      json: { client_id: 'api-rot' },
      headers: { 'X-Service-Admin-Signature': s.hmac('oidc-clients-genkey', A, json.length) },
    });
    expect(g.status).toBe(200);
    const fresh = ((await g.json()) as { client_secret: string }).client_secret;
    expect((await tokenForm(s, A, { grant_type: 'client_credentials', client_id: 'api-rot', client_secret: old! })).status).toBe(401);
    expect((await tokenForm(s, A, { grant_type: 'client_credentials', client_id: 'api-rot', client_secret: fresh })).status).toBe(200);
  });
});

describe('client authentication stays strict', () => {
  it('the registered method only, per tenant, secrets compared whole', async () => {
    const { client_secret: secret } = await saveClient(s, A, {
      client_id: 'strict',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    expect((await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('strict', secret!))).status).toBe(200);
    // client_secret_post for a client_secret_basic client: refused even with the right secret.
    const post = await tokenForm(s, A, { grant_type: 'client_credentials', client_id: 'strict', client_secret: secret! });
    expect(post.status).toBe(401);
    expect(post.headers.get('www-authenticate')).toBeNull();
    // Tenant B has no such client: the same credentials are refused there.
    expect((await tokenForm(s, B, { grant_type: 'client_credentials' }, basic('strict', secret!))).status).toBe(401);
    // A prefix, an extension, and an empty secret are all wrong.
    for (const bad of [secret!.slice(0, -1), `${secret}x`, '']) {
      const r = await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('strict', bad));
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/^Basic/);
    }
    // Basic and client_secret_post at once: RFC 6749 §2.3 allows one method per request.
    const both = await tokenForm(s, A, { grant_type: 'client_credentials', client_secret: secret! }, basic('strict', secret!));
    expect(both.body.error).toBe('invalid_request');
    // Malformed Basic credentials (no colon).
    const mal = await tokenForm(s, A, { grant_type: 'client_credentials' }, { Authorization: `Basic ${Buffer.from('strict').toString('base64')}` });
    expect(mal.status).toBe(401);
    expect(mal.body.error_description).toMatch(/malformed/);
  });

  it('Basic credentials are form-urlencoded (RFC 6749 §2.3.1): a client_id with a colon works encoded', async () => {
    const { client_secret: secret } = await saveClient(s, A, {
      client_id: 'urn:svc:1',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    const ok = await tokenForm(s, A, { grant_type: 'client_credentials' }, basic(encodeURIComponent('urn:svc:1'), encodeURIComponent(secret!)));
    expect(ok.status).toBe(200);
    expect(ok.body.token_type).toBe('Bearer');
    // The scheme name is case-insensitive (RFC 9110 §11.1).
    const lower = await tokenForm(
      s,
      A,
      { grant_type: 'client_credentials' },
      { Authorization: `basic ${Buffer.from(`${encodeURIComponent('urn:svc:1')}:${secret}`).toString('base64')}` },
    );
    expect(lower.status).toBe(200);
  });

  it('every token has its own jti', async () => {
    const { client_secret: secret } = await saveClient(s, A, {
      client_id: 'jti',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
    });
    const jtis = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const r = await tokenForm(s, A, { grant_type: 'client_credentials' }, basic('jti', secret!));
      const claims = JSON.parse(Buffer.from(String(r.body.access_token).split('.')[1]!, 'base64url').toString()) as { jti: string };
      expect(claims.jti).toMatch(/^[A-Za-z0-9_-]{22}$/);
      jtis.add(claims.jti);
    }
    expect(jtis.size).toBe(20);
  });
});
