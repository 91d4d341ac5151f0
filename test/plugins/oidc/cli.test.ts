import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../../server/cli.ts';
import { tempDir } from '../../support/server.ts';

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
    const add = await run('client', 'add', 'crm', '--tenant', 'office.test', '--redirect-uri', 'https://crm.example/cb', '--redirect-uri', 'https://crm.example/cb2', '--grant', 'authorization_code', '--grant', 'client_credentials');
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
