import fs from 'node:fs';
import path from 'node:path';
import * as jose from 'jose';
import * as oidc from 'openid-client';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../../server/cli.ts';
import { startTestServer, tempDir } from '../../support/server.ts';
import { rp } from './helpers.ts';

const dir = tempDir();
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...argv, '--data-dir', dir], { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('sovcomms client', () => {
  it('adds, lists, rotates the secret of and removes a client', async () => {
    expect((await run('tenant', 'add', 'office.test')).code).toBe(0);
    const add = await run(
      'client',
      'add',
      'crm',
      '--tenant',
      'office.test',
      '--redirect-uri',
      'https://crm.example/cb',
      '--redirect-uri',
      'https://crm.example/cb2',
      '--grant',
      'authorization_code',
      '--grant',
      'client_credentials',
    );
    expect(add.code).toBe(0);
    const secret = /client_secret: (\S+)/.exec(add.out)![1]!;
    expect(secret).toMatch(/^cs_/);
    const pub = await run('client', 'add', 'app', '--tenant', 'office.test', '--redirect-uri', 'com.example.app:/cb', '--public');
    expect(pub.out).not.toContain('client_secret');
    const list = await run('client', 'list', '--tenant', 'office.test', '--json');
    const clients = JSON.parse(list.out) as { client_id: string; redirect_uris: string[]; token_endpoint_auth_method: string }[];
    expect(clients.map((c) => c.client_id)).toEqual(['app', 'crm', 'sovcomms-console']);
    expect(clients.find((c) => c.client_id === 'crm')!.redirect_uris).toHaveLength(2);
    expect(clients.find((c) => c.client_id === 'app')!.token_endpoint_auth_method).toBe('none');
    expect(list.out).not.toContain(secret);
    const sec = await run('client', 'secret', 'crm', '--tenant', 'office.test');
    expect(sec.out).toMatch(/client_secret: cs_/);
    expect((await run('client', 'remove', 'crm', '--tenant', 'office.test')).code).toBe(0);
    expect((await run('client', 'remove', 'crm', '--tenant', 'office.test')).code).toBe(1);
    const bad = await run('client', 'add', 'x', '--tenant', 'office.test', '--redirect-uri', 'http://evil.example/cb');
    expect(bad.code).toBe(1);
    expect((await run('client', 'frobnicate')).code).toBe(2);
  });
});

describe('sovcomms client add --auth-method', () => {
  it('makes clients that authenticate as chosen (client_secret_post, private_key_jwt with --jwks-file), checked by openid-client', async () => {
    const s = await startTestServer();
    try {
      const A = `localhost:${s.port}`;
      const cli = async (...argv: string[]) => {
        const out: string[] = [];
        const err: string[] = [];
        const code = await main([...argv, '--data-dir', s.dataDir], { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' });
        return { code, out: out.join('\n'), err: err.join('\n') };
      };
      // client_secret_post: the secret in the form is accepted (a CLI client once took Basic only).
      const post = await cli('client', 'add', 'post-app', '--grant', 'client_credentials', '--auth-method', 'client_secret_post');
      expect(post.code).toBe(0);
      const secret = /client_secret: (\S+)/.exec(post.out)![1]!;
      const viaPost = await oidc.clientCredentialsGrant(await rp(s, A, 'post-app', {}, oidc.ClientSecretPost(secret)));
      expect(viaPost.access_token).toBeTruthy();
      // private_key_jwt with the public key set from a file: no secret is made.
      const kp = await jose.generateKeyPair('ES256', { extractable: true });
      const jwk = { ...(await jose.exportJWK(kp.publicKey)), kid: 'cli-1', alg: 'ES256', use: 'sig' };
      const file = path.join(s.dataDir, 'jwks.json');
      fs.writeFileSync(file, JSON.stringify({ keys: [jwk] }));
      const pkj = await cli('client', 'add', 'jwt-app', '--grant', 'client_credentials', '--auth-method', 'private_key_jwt', '--jwks-file', file);
      expect(pkj.code, pkj.err).toBe(0);
      expect(pkj.out).not.toContain('client_secret');
      const viaJwt = await oidc.clientCredentialsGrant(await rp(s, A, 'jwt-app', {}, oidc.PrivateKeyJwt({ key: kp.privateKey, kid: 'cli-1' })));
      expect(viaJwt.access_token).toBeTruthy();
      // Usage errors name the flag.
      const bad = await cli('client', 'add', 'x', '--auth-method', 'tls_client_auth');
      expect(bad.code).toBe(2);
      expect(bad.err).toMatch(/--auth-method: one of none, client_secret_basic, client_secret_post, private_key_jwt/);
      expect((await cli('client', 'add', 'y', '--auth-method', 'private_key_jwt', '--grant', 'client_credentials')).code).toBe(1);
    } finally {
      await s.stop();
    }
  });
});
