import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { until } from '../../support/until.ts';
import { addUser, call, Client, download, refusedStatus, upload, type ChatUser, type Json } from './support.ts';

let s: TestServer;
let alice: ChatUser;
let bob: ChatUser;
let carol: ChatUser;
let mallory: ChatUser;
let host: string;
const clients: Client[] = [];

async function open(u: ChatUser, opts: { since?: number; ticket?: string } = {}): Promise<Client> {
  const c = await Client.open(s, u, opts);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  s = await startTestServer({ overrides: { plugins: { chat: { socketFramesPerMinute: 100_000, ticketTtlMs: 1000 } } } });
  host = `127.0.0.1:${s.port}`;
  alice = await addUser(s, s.primary, 'alice', host);
  bob = await addUser(s, s.primary, 'bob', host);
  carol = await addUser(s, s.primary, 'carol', host);
  const other = await s.addTenant('other.test');
  mallory = await addUser(s, other.tenant, 'mallory', `other.test:${s.port}`);
}, 60_000);
afterAll(async () => {
  for (const c of clients) c.ws.terminate();
  await s?.stop();
});

describe('chat socket: live delivery', () => {
  it('two users exchange messages and a file live; typing reaches only the other; a third user and another tenant see nothing', async () => {
    const a = await open(alice);
    const b = await open(bob);
    const c = await open(carol);
    const m = await open(mallory);
    for (const x of [a, b, c, m]) await until(() => x.frames.some((f) => f.type === 'hello'), 5000, 'hello');
    expect(a.frames[0]).toMatchObject({ type: 'hello', user: { login: 'alice' } });

    const sent = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'live hello' });
    await until(() => b.messages().some((x) => x.id === sent.body.id), 5000, 'bob gets the message');
    // The sender's own sockets get it too (other tabs), and the new thread is announced first.
    await until(() => a.messages().some((x) => x.id === sent.body.id), 5000, 'alice gets her own message');
    expect(b.events('thread')[0]).toMatchObject({ threadId: sent.body.threadId, thread: { kind: 'direct' } });
    const threadId = sent.body.threadId as string;

    // Over the socket: send with an ack, typing to the other member only.
    b.send({ type: 'send', threadId, text: 'from the socket', clientId: 'c1' });
    await until(() => b.frames.some((f) => f.type === 'ack' && f.clientId === 'c1'), 5000, 'ack');
    const ackId = b.frames.find((f) => f.type === 'ack').id as number;
    await until(() => a.messages().some((x) => x.id === ackId && x.text === 'from the socket'), 5000, 'alice gets the socket message');
    a.send({ type: 'typing', threadId });
    await until(() => b.frames.some((f) => f.type === 'typing' && f.user.login === 'alice'), 5000, 'typing');
    expect(a.frames.some((f) => f.type === 'typing')).toBe(false);

    // A file, live.
    const bytes = crypto.randomBytes(50_000);
    const up = await upload(s, bob, `threadId=${threadId}`, 'scan.jpg', bytes);
    const fileMsg = await until(() => a.messages().find((x) => x.id === up.body.id), 5000, 'alice gets the file message');
    expect(fileMsg.file).toMatchObject({ name: 'scan.jpg', size: bytes.length });
    expect((await download(s, alice, fileMsg.file.sha)).body.equals(bytes)).toBe(true);

    // Edits and deletes are events too.
    await call(s, alice, 'POST', '/chat.ashx?op=edit', { id: sent.body.id, text: 'live hello (edited)' });
    await until(() => b.events('message.edit').some((f) => f.message.text === 'live hello (edited)'), 5000, 'edit event');
    await call(s, alice, 'POST', '/chat.ashx?op=delete', { id: sent.body.id });
    await until(() => b.events('message.delete').some((f) => f.message.id === sent.body.id && f.message.text === null), 5000, 'delete event');

    // Nothing of it reached carol (same tenant) or mallory (other tenant); their resume from 0 shows nothing either.
    await new Promise((r) => setTimeout(r, 200));
    for (const [x, u] of [
      [c, carol],
      [m, mallory],
    ] as const) {
      expect(x.events().filter((f) => f.threadId === threadId)).toEqual([]);
      expect(x.frames.some((f) => f.type === 'typing')).toBe(false);
      const replay = await open(u, { since: 0 });
      await until(() => replay.frames.some((f) => f.type === 'ready'), 5000, 'ready');
      expect(replay.events().filter((f) => f.threadId === threadId)).toEqual([]);
    }
    // Their socket frames at the thread are refused like the HTTP operations.
    c.send({ type: 'send', threadId, text: 'let me in', clientId: 'x' });
    c.send({ type: 'typing', threadId });
    await until(() => c.frames.filter((f) => f.type === 'error').length >= 2, 5000, 'errors');
    expect(c.frames.filter((f) => f.type === 'error').map((f: Json) => f.error)).toEqual(['not_found', 'not_found']);
    const h = await call(s, alice, 'GET', `/chat.ashx?op=history&threadId=${threadId}&limit=200`);
    expect(h.body.messages.map((x: Json) => x.text)).not.toContain('let me in');
  });

  it('a member removed from a group is told once and hears nothing after', async () => {
    const g = await call(s, alice, 'POST', '/chat.ashx?op=group-create', { name: 'ops', members: ['bob', 'carol'] });
    const c = await open(carol);
    await call(s, alice, 'POST', `/chat.ashx?op=send&groupId=${g.body.id}`, { text: 'before' });
    await until(() => c.messages().some((x) => x.text === 'before'), 5000, 'carol gets before');
    await call(s, alice, 'POST', `/chat.ashx?op=group-remove&groupId=${g.body.id}`, { members: ['carol'] });
    await until(() => c.events('member.remove').length === 1, 5000, 'removal notice');
    expect(c.events('member.remove')[0]).toMatchObject({ threadId: g.body.id, members: [{ login: 'carol' }], by: { login: 'alice' } });
    await call(s, alice, 'POST', `/chat.ashx?op=send&groupId=${g.body.id}`, { text: 'after' });
    await new Promise((r) => setTimeout(r, 200));
    expect(c.messages().map((x) => x.text)).not.toContain('after');
    expect(c.events('member.remove')).toHaveLength(1);
  });
});

describe('chat socket: resume', () => {
  it('a socket dropped mid-burst reconnects with since and gets every message exactly once, in order', async () => {
    const first = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'burst start' });
    const threadId = first.body.threadId as string;
    const sender = await open(alice);
    let b = await open(bob);
    await until(() => b.frames.some((f) => f.type === 'hello'), 5000, 'hello');
    const received: Json[] = [];
    const N = 600;
    // The burst is paced (10 frames per millisecond tick) so the drop lands inside it.
    const burst = (async () => {
      for (let i = 0; i < N; i++) {
        sender.send({ type: 'send', threadId, text: `burst ${i}`, clientId: String(i) });
        if (i % 10 === 9) await new Promise((r) => setTimeout(r, 2));
      }
    })();
    // Drop the socket abruptly once part of the burst arrived.
    await until(() => b.messages().filter((m) => m.text?.startsWith('burst ')).length >= 50, 10_000, 'part of the burst');
    b.ws.terminate();
    received.push(...b.events());
    const since = received.reduce((mx, f) => Math.max(mx, f.seq), 0);
    expect(received.filter((f) => f.type === 'message').length).toBeLessThan(N);
    await new Promise((r) => setTimeout(r, 30));
    b = await open(bob, { since });
    await burst;
    await until(() => sender.frames.filter((f) => f.type === 'ack').length === N, 20_000, 'every send acknowledged');
    const lastId = Math.max(...sender.frames.filter((f) => f.type === 'ack').map((f) => f.id as number));
    await until(() => [...received, ...b.events()].some((f) => f.seq >= lastId), 20_000, 'the last message after resume');
    // The server sent the new socket only what came after `since`.
    expect(b.events().every((f) => f.seq > since)).toBe(true);
    const all = [...received, ...b.events()].filter((f) => f.type === 'message' && f.threadId === threadId);
    const texts = all.map((f) => f.message.text).filter((t: string) => /^burst \d+$/.test(t));
    expect(texts).toEqual(Array.from({ length: N }, (_, i) => `burst ${i}`));
    const seqs = all.map((f) => f.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
    expect(b.frames.findIndex((f) => f.type === 'ready')).toBeGreaterThan(0);
  });

  it('resume replays edits, deletes and read markers after the cursor; a message id works as the cursor', async () => {
    const m1 = await call(s, alice, 'POST', '/chat.ashx?op=send&with=carol', { text: 'one' });
    const m2 = await call(s, alice, 'POST', '/chat.ashx?op=send&with=carol', { text: 'two' });
    await call(s, alice, 'POST', '/chat.ashx?op=edit', { id: m2.body.id, text: 'two!' });
    await call(s, carol, 'POST', `/chat.ashx?op=read&threadId=${m1.body.threadId}`, { upTo: m2.body.id });
    const c = await open(carol, { since: m1.body.id });
    await until(() => c.frames.some((f) => f.type === 'ready'), 5000, 'ready');
    const ev = c.events().filter((f) => f.threadId === m1.body.threadId);
    expect(ev.map((f) => f.type)).toEqual(['message', 'message.edit', 'read']);
    expect(ev[0].message).toMatchObject({ id: m2.body.id, text: 'two!' });
    expect(ev[2]).toMatchObject({ upTo: m2.body.id });
    // A cursor from the future (a restored database) is told to resync and then hears live events.
    const future = await open(carol, { since: 10_000_000 });
    await until(() => future.frames.some((f) => f.type === 'resync'), 5000, 'resync');
    const m3 = await call(s, alice, 'POST', '/chat.ashx?op=send&with=carol', { text: 'three' });
    await until(() => future.messages().some((x) => x.id === m3.body.id), 5000, 'live after resync');
    // Alice's sockets never see carol's read marker.
    const a = await open(alice, { since: m1.body.id });
    await until(() => a.frames.some((f) => f.type === 'ready'), 5000, 'ready');
    expect(a.events('read').filter((f) => f.threadId === m1.body.threadId)).toEqual([]);
  });
});

describe('chat socket: authentication', () => {
  it('needs a bearer or a one-time ticket of this tenant; plain GET is 426; unknown upgrade paths 404', async () => {
    expect(await refusedStatus(s, host, 'op=socket')).toBe(401);
    expect(await refusedStatus(s, host, 'op=socket', { Authorization: 'Bearer ak_nope' })).toBe(401);
    expect(await refusedStatus(s, host, 'op=socket', { Authorization: `Bearer ${mallory.key}` })).toBe(401);
    expect(await refusedStatus(s, host, 'op=socket&since=abc', { Authorization: `Bearer ${alice.key}` })).toBe(400);
    expect(await refusedStatus(s, host, 'op=nothing', { Authorization: `Bearer ${alice.key}` })).toBe(404);
    expect((await s.fetch('/chat.ashx?op=socket', { key: alice.key })).status).toBe(426);

    const t = await call(s, alice, 'POST', '/chat.ashx?op=socket-ticket');
    expect(t.status).toBe(200);
    expect(t.body.ticket).toMatch(/^wst_/);
    // Another tenant's host does not take it (and that use spends it).
    expect(await refusedStatus(s, `other.test:${s.port}`, `op=socket&ticket=${encodeURIComponent(t.body.ticket)}`)).toBe(401);
    const t2 = (await call(s, alice, 'POST', '/chat.ashx?op=socket-ticket')).body.ticket as string;
    const c = await open(alice, { ticket: t2 });
    await until(() => c.frames.some((f) => f.type === 'hello'), 5000, 'hello');
    expect(c.frames[0].user.login).toBe('alice');
    expect(await refusedStatus(s, host, `op=socket&ticket=${encodeURIComponent(t2)}`)).toBe(401);
    const t3 = (await call(s, alice, 'POST', '/chat.ashx?op=socket-ticket')).body.ticket as string;
    await new Promise((r) => setTimeout(r, 1100));
    expect(await refusedStatus(s, host, `op=socket&ticket=${encodeURIComponent(t3)}`)).toBe(401);
  });

  it('a malformed frame closes the socket with 1008', async () => {
    const c = await open(bob);
    c.ws.send('not json');
    expect((await c.closed).code).toBe(1008);
  });
});

describe('chat socket: credentials that stop holding', () => {
  it('a revoked key, a disabled user and a ticket socket of a disabled user are closed with 4003 within a heartbeat', async () => {
    const t = await startTestServer({ overrides: { plugins: { chat: { heartbeatMs: 300 } } } });
    try {
      const h = `127.0.0.1:${t.port}`;
      const dave = await addUser(t, t.primary, 'dave', h);
      const erin = await addUser(t, t.primary, 'erin', h);
      const frank = await addUser(t, t.primary, 'frank', h);
      const d = await Client.open(t, dave);
      const e = await Client.open(t, erin);
      const ticket = (await call(t, frank, 'POST', '/chat.ashx?op=socket-ticket')).body.ticket as string;
      const f = await Client.open(t, frank, { ticket });
      clients.push(d, e, f);
      const core = t.appliance.core;
      core.auth.revokeApiKey(t.primary, core.auth.listApiKeys(t.primary).find((k) => k.userName === 'dave')!.id);
      core.users.setStatus(t.primary, frank.id, 'disabled');
      expect((await d.closed).code).toBe(4003);
      expect((await f.closed).code).toBe(4003);
      // Erin's key still holds: her socket stays and still gets messages.
      await new Promise((r) => setTimeout(r, 700));
      expect(e.ws.readyState).toBe(e.ws.OPEN);
      const m = await call(t, erin, 'POST', '/chat.ashx?op=send&with=erin', { text: 'note to self' });
      await until(() => e.messages().some((x) => x.id === m.body.id), 5000, 'erin still live');
    } finally {
      await t.stop();
    }
  });
});
