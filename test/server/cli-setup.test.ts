import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../server/cli.ts';
import { sipAddressChoices } from '../../server/cli/setup.ts';
import { loadConfig } from '../../server/config.ts';
import { telephonyConfig } from '../../plugins/telephony/schemas.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
function dataDir(config?: unknown): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'setup-'));
  dirs.push(d);
  if (config !== undefined) fs.writeFileSync(path.join(d, 'config.json'), JSON.stringify(config));
  return d;
}
async function setup(args: string[], answers?: string[]): Promise<{ code: number; out: string[]; err: string[]; asked: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const asked: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: () => Promise.resolve('') };
  if (answers) {
    io.ask = (q) => {
      asked.push(q);
      return Promise.resolve(answers.shift() ?? '');
    };
  }
  return { code: await main(['setup', ...args], io), out, err, asked };
}
const readCfg = (d: string) => JSON.parse(fs.readFileSync(path.join(d, 'config.json'), 'utf8'));

describe('sovcomms setup: the address SIP listens on', () => {
  it("offers the machine's LAN addresses first (IPv4, then IPv6 without link-local), then every interface, then loopback", () => {
    const choices = sipAddressChoices({
      lo: [{ address: '127.0.0.1', netmask: '255.0.0.0', family: 'IPv4', mac: '00:00:00:00:00:00', internal: true, cidr: '127.0.0.1/8' }],
      eth0: [
        { address: 'fe80::1', netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6', mac: '02:00:00:00:00:01', internal: false, cidr: 'fe80::1/64', scopeid: 2 },
        {
          address: '2001:db8::10',
          netmask: 'ffff:ffff:ffff:ffff::',
          family: 'IPv6',
          mac: '02:00:00:00:00:01',
          internal: false,
          cidr: '2001:db8::10/64',
          scopeid: 0,
        },
        { address: '192.168.1.20', netmask: '255.255.255.0', family: 'IPv4', mac: '02:00:00:00:00:01', internal: false, cidr: '192.168.1.20/24' },
      ],
    });
    expect(choices.map((c) => c.address)).toEqual(['192.168.1.20', '2001:db8::10', '0.0.0.0', '127.0.0.1']);
    expect(choices[0]!.label).toBe('eth0, IPv4');
  });

  it('--sip-host writes plugins.telephony.bridge.sipHost into config.json, keeping every other setting; the server reads it', async () => {
    const d = dataDir({ http: { port: 8443 }, plugins: { telephony: { mail: { host: 'mail.example', from: 'a@example.com', pass: 'relay-pw' } } } });
    const r = await setup(['--sip-host', '127.0.0.1', '--sip-port', '5070', '--data-dir', d]);
    expect(r.code, r.err.join('\n')).toBe(0);
    expect(r.out[0]).toContain('SIP listens on 127.0.0.1:5070 (UDP and TCP)');
    expect(r.out[1]).toBe('A desk phone registers as: server 127.0.0.1, port 5070, transport UDP or TCP, user and password from "sovcomms phone add USER"');
    const cfg = readCfg(d);
    expect(cfg).toEqual({
      http: { port: 8443 },
      plugins: { telephony: { mail: { host: 'mail.example', from: 'a@example.com', pass: 'relay-pw' }, bridge: { sipHost: '127.0.0.1', sipPort: 5070 } } },
    });
    // Owner-only: the file may hold the relay's password.
    expect(fs.statSync(path.join(d, 'config.json')).mode & 0o077).toBe(0);
    const loaded = loadConfig({ dataDir: d, env: {} }) as unknown as { plugins: { telephony: unknown } };
    expect(telephonyConfig.parse(loaded.plugins.telephony).bridge).toMatchObject({ sipHost: '127.0.0.1', sipPort: 5070 });
  });

  it('interactive on a terminal: lists the addresses and takes a number or an address; a wrong answer is asked again', async () => {
    const d = dataDir();
    const choices = sipAddressChoices();
    const loopback = choices.findIndex((c) => c.address === '127.0.0.1') + 1;
    const r = await setup(['--data-dir', d], ['99', 'not-an-address', String(loopback)]);
    expect(r.code, r.err.join('\n')).toBe(0);
    expect(r.out[0]).toBe('Which address should SIP (desk phones, carriers) listen on?');
    expect(r.out.slice(1, 1 + choices.length)).toEqual(choices.map((c, i) => `  ${i + 1}) ${c.address}  (${c.label})`));
    expect(r.out).toContain('Not one of the addresses above: 99');
    expect(r.asked).toHaveLength(3);
    expect(readCfg(d).plugins.telephony.bridge.sipHost).toBe('127.0.0.1');
  });

  it('refuses, exit 2 with the reason and nothing written: no terminal and no flag, an address of another machine, a bad port', async () => {
    const d = dataDir();
    const none = await setup(['--data-dir', d]);
    expect(none.code).toBe(2);
    expect(none.err.join('\n')).toMatch(/give --sip-host ADDR \(this machine has .*127\.0\.0\.1/);
    const other = await setup(['--sip-host', '203.0.113.9', '--data-dir', d]);
    expect(other.code).toBe(2);
    expect(other.err.join('\n')).toContain('203.0.113.9 is not an address of this machine');
    expect((await setup(['--sip-host', '127.0.0.1', '--sip-port', '70000', '--data-dir', d])).code).toBe(2);
    expect(fs.existsSync(path.join(d, 'config.json'))).toBe(false);
    const broken = dataDir();
    fs.writeFileSync(path.join(broken, 'config.json'), '{not json');
    const bad = await setup(['--sip-host', '127.0.0.1', '--data-dir', broken]);
    expect(bad.code).toBe(2);
    expect(fs.readFileSync(path.join(broken, 'config.json'), 'utf8')).toBe('{not json');
  });
});
