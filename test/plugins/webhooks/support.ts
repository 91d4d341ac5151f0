import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { definePlugin, type PluginManifest, type AnyPlugin } from '../../../server/plugin.ts';
import audit from '../../../plugins/audit/index.ts';
import webhooks from '../../../plugins/webhooks/index.ts';
import type { TestServer } from '../../support/server.ts';

/**
 * A stand-in for the telephony plugin (written elsewhere): it only declares `call.ended`, so
 * tests can emit it through the real EventBus.
 */
export const callEvents = definePlugin({
  name: 'test-calls',
  description: 'declares call.ended for webhook tests',
  events: { 'call.ended': z.object({ callId: z.string() }).loose() },
});

export function testPlugins(): PluginManifest[] {
  return [audit, webhooks, callEvents] as AnyPlugin[];
}

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  path: string;
  at: number;
}

type Responder = (r: Received) => { status: number; headers?: Record<string, string>; body?: string; delayMs?: number } | 'hang';

/** A real HTTP receiver on loopback that records every request and answers as told. */
export class Receiver {
  readonly received: Received[] = [];
  respond: Responder = () => ({ status: 200, body: 'ok' });
  #server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), path: req.url ?? '', at: Date.now() };
      this.received.push(r);
      const a = this.respond(r);
      if (a === 'hang') return; // never answers: the sender's timeout must end it
      const send = () => {
        res.writeHead(a.status, a.headers ?? {});
        res.end(a.body ?? '');
      };
      if (a.delayMs) setTimeout(send, a.delayMs);
      else send();
    });
  });
  url = '';

  async start(): Promise<this> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }
}

export { until } from '../../support/until.ts';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Calls an admin verb on /signal.ashx with the admin HMAC header (bucket `webhooks-<verb>`). */
export async function admin(
  s: { fetch: TestServer['fetch']; hmac: TestServer['hmac'] },
  verb: string,
  opts: { body?: unknown; query?: string; host?: string } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test assertions read the admin answers freely
): Promise<{ status: number; json: any }> {
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const sig = s.hmac(`webhooks-${verb}`, opts.host, body ? Buffer.byteLength(body) : undefined);
  const headers: Record<string, string> = { 'X-Service-Admin-Signature': sig };
  if (body) headers['Content-Type'] = 'application/json';
  const r = await s.fetch(`/signal.ashx?webhooks=${verb}${opts.query ?? ''}`, { method: body ? 'POST' : 'GET', headers, body, host: opts.host });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}
