import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../../server/cli.ts';
import telephony from '../../../plugins/telephony/index.ts';
import type { AnyPlugin } from '../../../server/plugin.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adm, j } from './helpers.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s?.stop();
});

/** `sovcomms ...` in-process, against the running server's data dir (WAL: both see the same rows). */
async function cli(args: string[], stdin = ''): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => stdin };
  const code = await main([...args, '--data-dir', s.dataDir], io, { plugins: [telephony as AnyPlugin] });
  return { code, out, err };
}

describe('sovcomms trunk', () => {
  it('add (password from stdin, sealed), list (no password), remove', async () => {
    const a = await cli(
      [
        'trunk',
        'add',
        '--id',
        'carrier',
        '--name',
        'Carrier',
        '--host',
        'sip.carrier.test',
        '--transport',
        'tcp',
        '--username',
        'acct',
        '--password-stdin',
        '--register',
        '--default',
      ],
      'cli-secret-pw\n',
    );
    expect(a).toMatchObject({ code: 0, out: [`trunk carrier saved for ${s.primary.host} (default)`] });
    const l = await cli(['trunk', 'list']);
    expect(l.out[0]).toContain('carrier (default)\tCarrier\ttcp://sip.carrier.test:5060\tuser=acct\tpassword=set\tregister=true');
    expect(l.out.join('\n')).not.toContain('cli-secret-pw');
    const http = (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body;
    expect(http.trunks[0]).toMatchObject({ id: 'carrier', hasPassword: true, transport: 'tcp' });
    expect((await j(adm(s, '/signal.ashx?telephony=settings', 'telephony-settings'))).body.defaultTrunkId).toBe('carrier');
    expect((await cli(['trunk', 'remove', 'carrier'])).code).toBe(0);
    expect((await cli(['trunk', 'list'])).out).toEqual([]);
  });
  it('--srv: the host is a domain located by its SIP SRV records', async () => {
    expect((await cli(['trunk', 'add', '--id', 'srv', '--name', 'Provider', '--host', 'provider.example', '--srv'])).code).toBe(0);
    expect((await cli(['trunk', 'list'])).out[0]).toContain('udp://provider.example (SRV)	');
    const http = (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body;
    expect(http.trunks.find((t: { id: string }) => t.id === 'srv')).toMatchObject({ dnsSrv: true, host: 'provider.example' });
    expect((await cli(['trunk', 'remove', 'srv'])).code).toBe(0);
  });
  it('bad input is a usage error (exit 2) naming the problem', async () => {
    const r = await cli(['trunk', 'add', '--name', 'X', '--host', 'h', '--transport', 'sctp']);
    expect(r.code).toBe(2);
    expect(r.err[0]).toContain('transport');
    expect((await cli(['trunk', 'add', '--bogus'])).code).toBe(2);
    expect((await cli(['trunk', 'remove', 'nope'])).code).toBe(1);
  });
});

describe('sovcomms number', () => {
  it('add (engine key from stdin, never shown), list, remove; GET /numbers sees it', async () => {
    expect(
      (await cli(['number', 'add', '+4930777000', '--name', 'Reception', '--voice', 'Kore', '--visibility', 'public', '--api-key-stdin'], 'AIza-cli-key\n'))
        .code,
    ).toBe(0);
    const l = await cli(['number', 'list']);
    expect(l.out[0]).toContain('+4930777000\tReception\tlive-voice-ai\tKore\ten-US\tpublic\tmax=3500s\tkey=set');
    expect(l.out.join('\n')).not.toContain('AIza-cli-key');
    const v1 = (await j(s.fetch('/api.ashx/v1/numbers', { key: s.adminKey }))).body;
    expect(v1.data[0]).toMatchObject({ number: '+4930777000', name: 'Reception', visibility: 'public' });
    expect(JSON.stringify(v1)).not.toContain('AIza-cli-key');
    expect((await cli(['number', 'remove', '+4930777000'])).code).toBe(0);
    expect((await cli(['number', 'list'])).out).toEqual([]);
  });
});
