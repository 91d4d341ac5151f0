import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpFetch, startTestServer, type TestServer } from '../support/server.ts';

/**
 * Connection limits (loopback only: 127.0.0.2.. stand in for LAN clients; 127.0.0.1 is the
 * appliance's own console and health checks): silent sockets are closed, one address cannot hold
 * more than its share, and a reserve keeps the server reachable from its own host.
 */
let s: TestServer;
const open: net.Socket[] = [];
beforeAll(async () => {
  s = await startTestServer({ overrides: { http: { firstByteTimeoutMs: 1500, maxConnectionsPerIp: 5, maxConnections: 20, loopbackReserve: 5 } } });
});
afterAll(async () => {
  for (const c of open) c.destroy();
  await s?.stop();
});

/** A connection from `localAddress` that sends nothing; resolves with it once connected (or closed at once). */
function silent(localAddress: string): Promise<{ socket: net.Socket; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const socket = net.connect({ host: '127.0.0.1', port: s.port, localAddress });
    const closed = new Promise<number>((r) => socket.once('close', () => r(Date.now() - t0)));
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', (e) => (e.message.includes('ECONNRESET') ? resolve({ socket, closed }) : reject(e)));
    open.push(socket);
  });
}

/** Whether the server still answers on this socket's peer address: closed within `ms` means refused. */
async function closedWithin(c: { closed: Promise<number> }, ms: number): Promise<boolean> {
  return Promise.race([c.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
}

describe('connection limits', () => {
  it('a connection that sends nothing is closed after firstByteTimeoutMs; one that talks is served', async () => {
    const c = await silent('127.0.0.2');
    const ms = await c.closed;
    expect(ms).toBeGreaterThanOrEqual(1400);
    expect(ms).toBeLessThan(5000);
    expect((await httpFetch(`${s.url}/healthz`)).status).toBe(200);
  });

  it('a connection that has sent a byte is not taken for silent: the header timeout bounds it, not firstByteTimeoutMs', async () => {
    const c = await silent('127.0.0.4');
    c.socket.write('G');
    expect(await closedWithin(c, 2500)).toBe(false);
    c.socket.destroy();
  });

  it('one client address holds at most maxConnectionsPerIp; the next is closed at once, others still get in', async () => {
    const five = await Promise.all([1, 2, 3, 4, 5].map(() => silent('127.0.0.3')));
    const sixth = await silent('127.0.0.3');
    expect(await closedWithin(sixth, 500)).toBe(true);
    for (const c of five) expect(await closedWithin(c, 50)).toBe(false);
    expect((await httpFetch(`${s.url}/healthz`)).status).toBe(200);
    for (const c of five) c.socket.destroy();
  });

  it("past maxConnections less the reserve, clients are refused but the appliance's own loopback still gets /healthz", async () => {
    const held: { socket: net.Socket; closed: Promise<number> }[] = [];
    // 15 = maxConnections 20 - loopbackReserve 5, spread over addresses under the per-IP cap.
    for (let i = 0; i < 15; i++) held.push(await silent(`127.0.1.${10 + Math.floor(i / 4)}`));
    const refused = await silent('127.0.2.1');
    expect(await closedWithin(refused, 500)).toBe(true);
    expect((await httpFetch(`${s.url}/healthz`)).status).toBe(200);
    for (const c of held) c.socket.destroy();
  });

  it('a client that hangs up mid-body is its own mistake: no error-level log, no stack, for the router and the token endpoint alike', async () => {
    const before = s.logs.lines.length;
    for (const path of ['/oidc.ashx/token', '/api.ashx/v1/webhooks']) {
      await new Promise<void>((resolve) => {
        const c = net.connect({ host: '127.0.0.1', port: s.port, localAddress: '127.0.0.9' }, () => {
          c.write(
            `POST ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${s.adminKey}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"a":`,
          );
          setTimeout(() => c.destroy(), 300);
        });
        c.on('close', () => resolve());
        c.on('error', () => undefined);
      });
    }
    await new Promise((r) => setTimeout(r, 300));
    const lines = s.logs.lines.slice(before);
    expect(lines.filter((l) => /"level":(50|60)/.test(l))).toEqual([]);
    expect(lines.join('\n')).not.toContain('"stack"');
  });
});
