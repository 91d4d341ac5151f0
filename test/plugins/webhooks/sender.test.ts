import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { verify } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { mergePolicy } from '../../../plugins/webhooks/net-policy.ts';
import { deliveryHeaders, newSecret, retryAfterMs, send } from '../../../plugins/webhooks/sender.ts';
import type { TLSSocket } from 'node:tls';

const loopback = mergePolicy({ allowLoopback: true });

describe('webhook sender', () => {
  it('one whsec_ secret serves both signatures, checked by the libraries of each scheme', async () => {
    const secret = newSecret();
    const body = JSON.stringify({ event: 'call.ended', tenant: 'a.example', ts: '2026-01-01T00:00:00.000Z', data: { callId: 'x' } });
    const h = deliveryHeaders({
      url: 'http://x/',
      body,
      event: 'call.ended',
      deliveryId: 'd-1',
      attempt: 2,
      secret,
      timestampSec: Math.floor(Date.now() / 1000),
    });
    expect(await verify(secret, body, h['X-Service-Signature']!)).toBe(true);
    expect(
      new Webhook(secret).verify(body, {
        'webhook-id': h['webhook-id']!,
        'webhook-timestamp': h['webhook-timestamp']!,
        'webhook-signature': h['webhook-signature']!,
      }),
    ).toMatchObject({ event: 'call.ended' });
    expect(() =>
      new Webhook(newSecret()).verify(body, {
        'webhook-id': h['webhook-id']!,
        'webhook-timestamp': h['webhook-timestamp']!,
        'webhook-signature': h['webhook-signature']!,
      }),
    ).toThrow();
    expect(h['X-Service-Attempt']).toBe('2');
  });

  it('reads Retry-After as seconds or an HTTP-date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs('120', now)).toBe(120_000);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });

  it('a kept-alive connection the receiver dropped is retried once on a new one', async () => {
    // Answers the first request on each connection, then resets that connection on the next one.
    let connections = 0;
    const server = net.createServer((sock) => {
      connections++;
      let served = 0;
      sock.on('data', () => {
        if (served++ === 0) sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
        else sock.resetAndDestroy();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const agents = { http: new http.Agent({ keepAlive: true }), https: new (await import('node:https')).Agent({ keepAlive: true }) };
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const d = { url, body: '{}', event: 'e', deliveryId: 'd', attempt: 1, secret: 'whsec_AAAA', timestampSec: 1 };
      const o = { policy: loopback, timeoutMs: 2000, maxResponseBytes: 100, agents };
      expect((await send(d, o)).status).toBe(200);
      const second = await send(d, o);
      expect(second.status).toBe(200);
      expect(connections).toBe(2);
    } finally {
      agents.http.destroy();
      agents.https.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('https: verifies the certificate against the URL name (office CA trusted via ca) while connecting to the checked address', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wh-tls-'));
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          path.join(dir, 'k.pem'),
          '-out',
          path.join(dir, 'c.pem'),
          '-days',
          '1',
          '-subj',
          '/CN=localhost',
          '-addext',
          'subjectAltName=DNS:localhost',
        ],
        { stdio: 'ignore' },
      );
      const cert = fs.readFileSync(path.join(dir, 'c.pem'), 'utf8');
      const seen: { host?: string; sni?: string }[] = [];
      const server = https.createServer({ cert, key: fs.readFileSync(path.join(dir, 'k.pem')) }, (req, res) => {
        // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- the https server's socket is a TLSSocket
        seen.push({ host: req.headers.host, sni: (req.socket as TLSSocket).servername || undefined });
        req.resume();
        req.on('end', () => res.end('ok'));
      });
      // IPv4 only: if "localhost" resolves to ::1 first, the sender must move on to 127.0.0.1.
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      const port = (server.address() as AddressInfo).port;
      const resolve = async () => [
        { address: '::1', family: 6 },
        { address: '127.0.0.1', family: 4 },
      ];
      const d = { url: `https://localhost:${port}/hook`, body: '{}', event: 'e', deliveryId: 'd', attempt: 1, secret: 'whsec_AAAA', timestampSec: 1 };
      try {
        const untrusted = await send(d, { policy: loopback, timeoutMs: 3000, maxResponseBytes: 100, resolve });
        expect(untrusted.status).toBeNull();
        expect(untrusted.error).toMatch(/certificate/i);
        const ok = await send(d, { policy: loopback, timeoutMs: 3000, maxResponseBytes: 100, resolve, ca: [cert] });
        expect(ok.status).toBe(200);
        expect(seen.at(-1)).toEqual({ host: `localhost:${port}`, sni: 'localhost' });
      } finally {
        await new Promise<void>((r) => server.close(() => r()));
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
