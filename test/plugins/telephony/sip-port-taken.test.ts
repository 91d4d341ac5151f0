import dgram from 'node:dgram';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adm, j, until, type Json } from './helpers.ts';

/**
 * The SIP port is taken (another appliance, a PBX on the machine): the real embedded bridge
 * cannot bind it. The core says so in one line per attempt (the address, the port, the setting
 * to change, the bridge's real exit status; no stack trace), /readyz shows telephony degraded
 * with that reason, restarts back off to the cap, and once the port is free the bridge comes up.
 */
let s: TestServer | undefined;
const holders: { close(): void }[] = [];
afterAll(async () => {
  await s?.stop();
  for (const h of holders) h.close();
});

async function takePort(): Promise<number> {
  // UDP and TCP both, as another SIP server holds them.
  const udp = dgram.createSocket('udp4');
  await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
  const port = udp.address().port;
  const tcp = net.createServer();
  await new Promise<void>((r) => tcp.listen(port, '127.0.0.1', () => r()));
  holders.push(udp, tcp);
  return port;
}

function failures(t: TestServer): Json[] {
  return t.logs.lines.map((l) => JSON.parse(l) as Json).filter((l) => String(l.msg).startsWith('telephony bridge could not start'));
}

describe('the SIP port is taken', () => {
  it('one clear line per attempt, degraded with that reason, backed-off restarts, up once the port is free', async () => {
    const port = await takePort();
    s = await startTestServer({
      overrides: { plugins: { telephony: { bridge: { mode: 'embedded', sipPort: port, restartMinMs: 100, restartMaxMs: 200, readyTimeoutMs: 20_000 } } } },
    });
    const t = s;
    await until(() => failures(t).length >= 3, 90_000, 'three failed starts');
    const lines = failures(t);
    for (const l of lines) {
      expect(l.msg).toContain(`SIP port 127.0.0.1:${port} (UDP) is already in use`);
      expect(l.msg).toContain('plugins.telephony.bridge.sipPort');
      expect(l.msg).toContain('plugins.telephony.bridge.sipHost');
      // The bridge's real exit status, not "[redacted]".
      expect(l).toMatchObject({ level: 50, code: 3, signal: null, reason: 'sip_port_in_use', address: '127.0.0.1', port });
    }
    // Exponential, capped at restartMaxMs.
    expect(lines.slice(0, 3).map((l) => l.retryInMs)).toEqual([100, 200, 200]);
    // Nothing else from the bridge: no stack trace, no line per stderr line.
    const text = t.logs.text();
    expect(text).not.toContain('bridge stderr');
    expect(text).not.toMatch(/ExceptionWithHostPort|\s{4}at /);
    expect(text).not.toContain('[redacted]');

    const ready = await j(t.fetch('/readyz'));
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe('degraded');
    expect(ready.body.plugins.telephony.health).toMatchObject({
      status: 'degraded',
      reason: expect.stringContaining(`SIP port 127.0.0.1:${port} (UDP) is already in use`),
      detail: { failure: 'sip_port_in_use' },
    });
    const st = (await j(adm(t, '/signal.ashx?bridge=status', 'bridge-status'))).body;
    expect(st).toMatchObject({ ok: false, lastExit: 'bridge exited (code 3)', lastFailure: expect.stringContaining('plugins.telephony.bridge.sipPort') });

    // The other program goes away: the next attempt binds, and the reason is gone.
    for (const h of holders.splice(0)) h.close();
    const up = await until(
      async () => {
        const r = (await j(t.fetch('/readyz'))).body;
        return r.plugins.telephony.health.status === 'ok' ? r : null;
      },
      30_000,
      'bridge up once the port is free',
    );
    expect(up.plugins.telephony.health.reason).toBeUndefined();
    expect((await j(adm(t, '/signal.ashx?bridge=status', 'bridge-status'))).body).toMatchObject({ ok: true, lastFailure: null, health: { sip: { port } } });
  }, 120_000);
});
