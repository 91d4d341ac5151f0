import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SipTransport } from '../../../plugins/telephony/bridge/sip/transport.ts';
import { SipUserAgent } from '../../../plugins/telephony/bridge/sip/ua.ts';
import { SipTlsTrunk } from '../../support/sip-tls-trunk.ts';
import { makeCa } from '../../support/test-ca.ts';
import { until } from '../../support/until.ts';

/**
 * RFC 5626 §4.4.1 on a TLS trunk, at the user agent: the registrar asks for keepalives
 * (Flow-Timer: 1) and then stops answering the pings; 10 s after an unanswered ping the flow is
 * closed and the trunk registers again at once, over a new connection (§4.5); a registrar that
 * answers its pings keeps the one flow. The trunk's peer is a Node `tls` server speaking SIP
 * (Debian's SIPp has no TLS).
 */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-sip-tls-'));
let trunk: SipTlsTrunk;
const transport = new SipTransport();
let ua: SipUserAgent;
let ca = '';

beforeAll(async () => {
  const c = makeCa(dir, 'flowca');
  ca = c.ca;
  trunk = new SipTlsTrunk(c.issue('flow', 'IP:127.0.0.1'), { flowTimerSec: 1, toneHz: 700, pong: false });
  await trunk.start();
  await transport.listen('127.0.0.1', 0);
  ua = new SipUserAgent(transport, '127.0.0.1');
});

afterAll(async () => {
  await ua?.shutdown();
  await transport.close();
  await trunk?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('SIP over TLS: RFC 5626 flow keepalive', () => {
  it('a ping without a pong within 10 s closes the flow and registers again over a new connection', async () => {
    const target = {
      id: 't.flow',
      host: '127.0.0.1',
      port: trunk.port,
      transport: 'tls' as const,
      register: true,
      username: 'acme',
      password: 'pw',
      tlsCaPem: ca,
    };
    await ua.setTrunks([target], 0);
    await until(() => ua.trunkStatus('t.flow').registered, 5000, 'registered');
    expect(trunk.connections).toHaveLength(1);
    await until(() => trunk.connections[0]!.pings >= 1, 3000, 'first ping');
    // No pong: the flow fails 10 s after the ping and the registration starts over, on a new connection.
    await until(() => trunk.connections.length === 2 && trunk.connections[1]!.requests.some((r) => r.method === 'REGISTER'), 15_000, 'second flow');
    expect(trunk.connections[0]!.pings).toBe(1);
    await until(() => ua.trunkStatus('t.flow').registered, 5000, 'registered again');
  }, 30_000);

  it('a registrar that asks (Require: outbound, Flow-Timer) and answers each ping keeps one flow: pings every 80-100 % of Flow-Timer, no reconnect', async () => {
    const c = makeCa(dir, 'okca');
    const live = new SipTlsTrunk(c.issue('live', 'IP:127.0.0.1'), { flowTimerSec: 1, toneHz: 700 });
    await live.start();
    try {
      await ua.setTrunks(
        [{ id: 't.live', host: '127.0.0.1', port: live.port, transport: 'tls', register: true, username: 'acme', password: 'pw', tlsCaPem: c.ca }],
        0,
      );
      await until(() => ua.trunkStatus('t.live').registered, 5000, 'registered');
      const reg = live.requests.filter((r) => r.method === 'REGISTER').at(-1)!;
      // RFC 5626 §4.2.1: the REGISTER makes a flow the registrar can ask keepalives for.
      expect(reg.headers.get('Contact')).toMatch(/;reg-id=1;\+sip\.instance="<urn:uuid:[0-9a-f-]{36}>"$/);
      expect(reg.headers.getAll('Supported').join(',')).toMatch(/\boutbound\b/);
      const t0 = Date.now();
      await until(() => live.connections[0]!.pings >= 3, 6000, 'three pings');
      // Three pings at 0.8-1 s each: not before 2.4 s; each answered, so the flow stays.
      expect(Date.now() - t0).toBeGreaterThanOrEqual(2000);
      expect(live.connections).toHaveLength(1);
      expect(ua.trunkStatus('t.live').registered).toBe(true);
    } finally {
      await ua.setTrunks([], 0);
      await live.stop();
    }
  }, 30_000);
});
