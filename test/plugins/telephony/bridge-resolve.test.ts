/** Trunk server location by DNS (RFC 3263 §4.2, RFC 2782) against a loopback DNS server. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderSrv, SipResolver } from '../../../plugins/telephony/bridge/sip/resolve.ts';
import { DnsServer } from '../../support/dns-server.ts';

const dns = new DnsServer();
let resolver: SipResolver;
beforeAll(async () => {
  await dns.start();
  resolver = new SipResolver(`127.0.0.1:${dns.port}`);
});
afterAll(() => dns.stop());

describe('SRV order (RFC 2782)', () => {
  const r = (name: string, priority: number, weight: number) => ({ name, port: 5060, priority, weight });
  it('lowest priority first; within one, weighted random', () => {
    const recs = [r('c', 20, 1), r('a', 10, 90), r('b', 10, 10)];
    expect(orderSrv(recs, () => 0).map((x) => x.name)).toEqual(['a', 'b', 'c']);
    expect(orderSrv(recs, () => 0.95).map((x) => x.name)).toEqual(['b', 'a', 'c']); // 0.95 × 100 falls in b's 10
    expect(orderSrv([r('z', 5, 0), r('y', 5, 0)], () => 0.5).map((x) => x.name)).toHaveLength(2);
  });
});

describe('SipResolver', () => {
  it("follows SRV to the target's address and port, per transport", async () => {
    dns.records.set('_sip._tcp.pbx.example.test', [{ type: 'SRV', priority: 1, weight: 1, port: 5070, target: 'tcp1.example.test' }]);
    dns.records.set('_sip._udp.pbx.example.test', [{ type: 'SRV', priority: 1, weight: 1, port: 5062, target: 'udp1.example.test' }]);
    dns.records.set('tcp1.example.test', [{ type: 'A', address: '127.0.0.2' }]);
    dns.records.set('udp1.example.test', [{ type: 'A', address: '127.0.0.3' }]);
    expect(await resolver.locate('pbx.example.test', 'tcp', 5060)).toEqual({ host: '127.0.0.2', port: 5070, via: 'srv' });
    expect(await resolver.locate('pbx.example.test', 'udp', 5060)).toEqual({ host: '127.0.0.3', port: 5062, via: 'srv' });
  });
  it("skips a target without an address; without SRV uses the host's address and the configured port", async () => {
    dns.records.set('_sip._udp.two.example.test', [
      { type: 'SRV', priority: 1, weight: 1, port: 1111, target: 'gone.example.test' },
      { type: 'SRV', priority: 2, weight: 1, port: 2222, target: 'here.example.test' },
    ]);
    dns.records.set('here.example.test', [{ type: 'A', address: '127.0.0.4' }]);
    expect(await resolver.locate('two.example.test', 'udp', 5060)).toEqual({ host: '127.0.0.4', port: 2222, via: 'srv' });
    dns.records.set('plain.example.test', [{ type: 'A', address: '127.0.0.5' }]);
    expect(await resolver.locate('plain.example.test', 'udp', 5099)).toEqual({ host: '127.0.0.5', port: 5099, via: 'address' });
    expect(await resolver.locate('10.1.2.3', 'udp', 5060)).toEqual({ host: '10.1.2.3', port: 5060, via: 'address' });
  });
  it('a "." target means no SIP service there; an unknown name is an error naming it', async () => {
    dns.records.set('_sip._udp.nosip.example.test', [{ type: 'SRV', priority: 0, weight: 0, port: 0, target: '.' }]);
    dns.records.set('nosip.example.test', [{ type: 'A', address: '127.0.0.6' }]); // an address, but no SIP
    await expect(resolver.locate('nosip.example.test', 'udp', 5060)).rejects.toThrow(/offers no SIP service/);
    await expect(resolver.locate('missing.example.test', 'udp', 5060)).rejects.toThrow(/missing\.example\.test|ENOTFOUND/);
  });
});
