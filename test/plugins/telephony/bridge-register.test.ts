/** REGISTER with digest and refresh, OPTIONS keepalive: the UA against real SIPp registrars. */
import { describe, expect, it } from 'vitest';
import { SipTransport } from '../../../plugins/telephony/bridge/sip/transport.ts';
import { SipUserAgent } from '../../../plugins/telephony/bridge/sip/ua.ts';
import { startSipp, type SippRun } from '../../support/sipp.ts';
import { cleanupsAfterEach } from '../../support/cleanup.ts';

const cleanups = cleanupsAfterEach();

async function ua(): Promise<SipUserAgent> {
  const t = new SipTransport();
  await t.listen('127.0.0.1', 0);
  const u = new SipUserAgent(t, '127.0.0.1', { T1: 20, T2: 80, T4: 100 });
  cleanups.push(async () => {
    await u.shutdown();
    await t.close();
  });
  return u;
}
async function sipp(scenario: string, transport: 'udp' | 'tcp' = 'udp'): Promise<SippRun> {
  const s = await startSipp({ scenario, transport, timeoutSec: 15 });
  cleanups.push(() => s.stop());
  return s;
}
async function until(fn: () => boolean, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('trunk registration and keepalive', () => {
  it.each(['udp', 'tcp'] as const)('REGISTERs with digest over %s, refreshes before expiry, removes the binding on shutdown', async (transport) => {
    const s = await sipp('register', transport);
    const u = await ua();
    const trunk = { id: 'r1', host: '127.0.0.1', port: s.port, transport, username: 'alice', password: 's3cret', register: true, fromDomain: 'sipp.test' };
    await u.setTrunks([trunk], 0);
    await until(() => u.trunkStatus('r1').registered === true);
    expect(u.trunkStatus('r1')).toEqual({ registered: true, lastError: null });
    // The registrar granted 2 s: the refresh must come by itself, then shutdown sends Expires: 0.
    await new Promise((r) => setTimeout(r, 2500)); // refresh is due after 1 s
    await u.shutdown();
    const exit = await s.exited;
    expect(exit.code, exit.output).toBe(0);
  });

  it('a wrong password shows as not registered with the SIP status', async () => {
    const s = await sipp('register');
    const u = await ua();
    await u.setTrunks([{ id: 'r1', host: '127.0.0.1', port: s.port, transport: 'udp', username: 'alice', password: 'bad', register: true }], 0);
    await until(() => u.trunkStatus('r1').lastError !== null);
    expect(u.trunkStatus('r1')).toEqual({ registered: false, lastError: 'SIP 403 Forbidden' });
  });

  it('OPTIONS keepalive: answered keeps lastError null; a silent trunk gets a lastError', async () => {
    const s = await sipp('options');
    const u = await ua();
    await u.setTrunks([{ id: 'o1', host: '127.0.0.1', port: s.port, transport: 'udp', register: false }], 60_000);
    const exit = await s.exited; // it answered our first OPTIONS
    expect(exit.code, exit.output).toBe(0);
    expect(u.trunkStatus('o1')).toEqual({ registered: null, lastError: null });
    await u.setTrunks([{ id: 'o2', host: '127.0.0.1', port: s.port, transport: 'udp', register: false }], 60_000);
    await until(() => u.trunkStatus('o2').lastError !== null); // Timer F = 64*T1 = 1.3 s
    expect(u.trunkStatus('o2').lastError).toMatch(/^OPTIONS keepalive: SIP transaction timeout/);
  });
});
