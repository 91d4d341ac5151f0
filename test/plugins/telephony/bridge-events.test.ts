import { describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventSender } from '../../../plugins/telephony/bridge/events.ts';
import { BridgeEventSchema } from '../../../plugins/telephony/control.ts';
import { cleanupsAfterEach } from '../../support/cleanup.ts';

const cleanups = cleanupsAfterEach();

describe('bridge → core event delivery', () => {
  it('retries until a 2xx, keeps seq and order, sends the token and the instance id', async () => {
    const got: { seq: number; type: string; auth: string | undefined; instance: string | undefined }[] = [];
    let failures = 3;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const ev = JSON.parse(body) as { seq: number; type: string };
        got.push({ seq: ev.seq, type: ev.type, auth: req.headers.authorization, instance: req.headers['x-bridge-instance'] as string | undefined });
        res.writeHead(failures-- > 0 ? 503 : 204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const sender = new EventSender(`http://127.0.0.1:${(server.address() as AddressInfo).port}/e`, 'tok', 'inst-1', 10, 40);
    cleanups.push(() => sender.stop());
    sender.emit('dialing', 'c1', { trunkId: 't' });
    sender.emit('ended', 'c1', { outcome: 'finished', endedAt: new Date().toISOString() });
    const t0 = Date.now();
    while (sender.pending && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 10));
    expect(sender.pending).toBe(0);
    // Three failed tries of seq 1 (10, 20, 40 ms backoff), then 1 and 2 in order.
    expect(got.map((g) => g.seq)).toEqual([1, 1, 1, 1, 2]);
    expect(got.every((g) => g.auth === 'Bearer tok' && g.instance === 'inst-1')).toBe(true);
  });

  it('puts every kind of event on the wire as the control contract reads it', async () => {
    const bodies: unknown[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        bodies.push(JSON.parse(body));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const sender = new EventSender(`http://127.0.0.1:${(server.address() as AddressInfo).port}/e`, 'tok', 'inst-2', 10, 40);
    cleanups.push(() => sender.stop());
    // The fields are typed by control.ts (a missing or misspelt field does not compile); the
    // core's parse of what arrives is the runtime half of the same contract.
    sender.emit('dialing', 'c2', { trunkId: 't1' });
    sender.emit('answered', 'c2', { trunkId: 't1', answeredAt: new Date().toISOString(), answerMs: 812 });
    sender.emit('transferred', 'c2', { toUser: 'alice', toPhone: '', transferType: 'outbound-to-user', trunkId: 't1' });
    sender.emit('ended', 'c2', {
      outcome: 'empty-room',
      answered: false,
      answeredAt: null,
      endedAt: new Date().toISOString(),
      talkSec: 0,
      trunkId: null,
      errorDetail: '',
      sipStatus: null,
      transcript: { turns: [], tokensTotal: 0, tokensPrompt: 0, inputTurns: 0, outputTurns: 0, model: 'm', voice: 'Aoede', language: 'en-US' },
    });
    const t0 = Date.now();
    while (sender.pending && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 10));
    expect(bodies).toHaveLength(4);
    for (const b of bodies) expect(BridgeEventSchema.safeParse(b).error).toBeUndefined();
    expect(bodies.map((b) => (b as { type: string }).type)).toEqual(['dialing', 'answered', 'transferred', 'ended']);
  });
});
