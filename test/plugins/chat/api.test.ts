import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminToken } from '../admin/helpers.ts';
import { addUser, call, type ChatUser } from './support.ts';

let s: TestServer;
let alice: ChatUser;
let bob: ChatUser;
let carol: ChatUser;
let mallory: ChatUser; // another tenant
let admin: ChatUser;
let host: string;

beforeAll(async () => {
  s = await startTestServer();
  host = `127.0.0.1:${s.port}`;
  alice = await addUser(s, s.primary, 'alice', host);
  bob = await addUser(s, s.primary, 'bob', host);
  carol = await addUser(s, s.primary, 'carol', host);
  admin = { login: 'admin', id: s.appliance.core.users.byName(s.primary, 'admin')!.id, key: s.adminKey, host };
  const other = await s.addTenant('other.test');
  mallory = await addUser(s, other.tenant, 'mallory', `other.test:${s.port}`);
}, 60_000);
afterAll(() => s?.stop());

describe('chat: the spec operations', () => {
  it('op=me names the caller; an OIDC access token works like an ak_ key; no credential is 401', async () => {
    const me = await call(s, alice, 'GET', '/chat.ashx?op=me');
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: alice.id, login: 'alice', role: 'user', tenant: s.primary.host });
    const token = await adminToken(s, host, 'admin', s.adminPassword);
    const viaToken = await s.fetch('/chat.ashx?op=me', { headers: { Authorization: `Bearer ${token}` } });
    expect(viaToken.status).toBe(200);
    expect(((await viaToken.json()) as { login: string }).login).toBe('admin');
    const none = await s.fetch('/chat.ashx?op=me');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
  });

  it('op=send to a peer login makes one direct thread; list-threads shows it with last message and unread count', async () => {
    const m1 = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'hello <b>bob</b>' });
    expect(m1.status).toBe(200);
    expect(m1.body).toMatchObject({ text: 'hello <b>bob</b>', sender: { login: 'alice' }, deleted: false, file: null });
    expect(m1.headers.get('content-type')).toMatch(/^application\/json/);
    const m2 = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { Text: 'second' });
    expect(m2.status).toBe(200);
    expect(m2.body.threadId).toBe(m1.body.threadId);
    expect(m2.body.id).toBeGreaterThan(m1.body.id);
    const back = await call(s, bob, 'POST', '/chat.ashx?op=send&with=alice', { text: 'hi alice' });
    expect(back.body.threadId).toBe(m1.body.threadId);

    const bobs = await call(s, bob, 'GET', '/chat.ashx?op=list-threads');
    expect(bobs.status).toBe(200);
    const t = bobs.body.threads.find((x: { id: string }) => x.id === m1.body.threadId);
    expect(t).toMatchObject({ kind: 'direct', peer: { login: 'alice' }, unread: 2, lastMessage: { text: 'hi alice' } });
    const alices = await call(s, alice, 'GET', '/chat.ashx?op=list-threads');
    expect(alices.body.threads.find((x: { id: string }) => x.id === m1.body.threadId)).toMatchObject({ unread: 1, peer: { login: 'bob' } });

    // Read marker: unread drops to 0 and never moves back.
    const read = await call(s, bob, 'POST', `/chat.ashx?op=read&threadId=${m1.body.threadId}`, { upTo: m2.body.id });
    expect(read.body).toEqual({ threadId: m1.body.threadId, readUpTo: m2.body.id });
    const back2 = await call(s, bob, 'POST', `/chat.ashx?op=read&threadId=${m1.body.threadId}`, { upTo: m1.body.id });
    expect(back2.body.readUpTo).toBe(m2.body.id);
    const after = await call(s, bob, 'GET', '/chat.ashx?op=list-threads');
    expect(after.body.threads.find((x: { id: string }) => x.id === m1.body.threadId).unread).toBe(0);
  });

  it('op=send refuses a missing, blank, over-long or NUL text, two targets, and unknown peers', async () => {
    expect((await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', {})).status).toBe(400);
    expect((await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: '   ' })).status).toBe(400);
    expect((await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'x'.repeat(4001) })).body.error).toBe('invalid_request');
    expect((await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'a\u0000b' })).status).toBe(400);
    expect((await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob&groupId=g_0000000000000000', { text: 'x' })).status).toBe(400);
    expect((await call(s, alice, 'POST', '/chat.ashx?op=send', { text: 'x' })).status).toBe(400);
    const nobody = await call(s, alice, 'POST', '/chat.ashx?op=send&with=nobody', { text: 'x' });
    expect(nobody.status).toBe(404);
    expect(nobody.body.error).toBe('not_found');
    // A login of another tenant is nobody here.
    expect((await call(s, alice, 'POST', '/chat.ashx?op=send&with=mallory', { text: 'x' })).status).toBe(404);
  });
});

describe('chat: history, edits, deletes', () => {
  it('pages back with nextBefore and forward with after; every message once, in order', async () => {
    const first = await call(s, carol, 'POST', '/chat.ashx?op=send&with=bob', { text: 'm0' });
    const threadId = first.body.threadId as string;
    for (let i = 1; i < 25; i++) await call(s, carol, 'POST', `/chat.ashx?op=send&threadId=${threadId}`, { text: `m${i}` });
    const seen: string[] = [];
    let before: number | null | undefined;
    for (;;) {
      const page = await call(s, bob, 'GET', `/chat.ashx?op=history&threadId=${threadId}&limit=10${before ? `&before=${before}` : ''}`);
      expect(page.status).toBe(200);
      seen.unshift(...page.body.messages.map((m: { text: string }) => m.text));
      if (!page.body.hasMore) break;
      before = page.body.nextBefore;
    }
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => `m${i}`));
    const fwd = await call(s, bob, 'GET', `/chat.ashx?op=history&with=carol&after=${first.body.id}&limit=5`);
    expect(fwd.body.messages.map((m: { text: string }) => m.text)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5']);
    expect(fwd.body.hasMore).toBe(true);
    expect((await call(s, bob, 'GET', `/chat.ashx?op=history&threadId=${threadId}&before=5&after=2`)).status).toBe(400);
  });

  it('edit and delete only one’s own messages; a deleted message keeps its id without text', async () => {
    const m = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'typo' });
    const e = await call(s, alice, 'POST', '/chat.ashx?op=edit', { id: m.body.id, text: 'fixed' });
    expect(e.body).toMatchObject({ id: m.body.id, text: 'fixed' });
    expect(e.body.editedAt).not.toBeNull();
    expect((await call(s, bob, 'POST', '/chat.ashx?op=edit', { id: m.body.id, text: 'hijack' })).status).toBe(403);
    expect((await call(s, bob, 'POST', '/chat.ashx?op=delete', { id: m.body.id })).status).toBe(403);
    expect((await call(s, carol, 'POST', '/chat.ashx?op=delete', { id: m.body.id })).status).toBe(404);
    expect((await call(s, mallory, 'POST', '/chat.ashx?op=edit', { id: m.body.id, text: 'x' })).status).toBe(404);
    const d = await call(s, alice, 'POST', '/chat.ashx?op=delete', { id: m.body.id });
    expect(d.body).toMatchObject({ id: m.body.id, text: null, deleted: true });
    expect((await call(s, alice, 'POST', '/chat.ashx?op=edit', { id: m.body.id, text: 'again' })).status).toBe(409);
    const h = await call(s, bob, 'GET', `/chat.ashx?op=history&threadId=${m.body.threadId}&after=${m.body.id - 1}`);
    expect(h.body.messages[0]).toMatchObject({ id: m.body.id, text: null, deleted: true });
  });
});

describe('chat: isolation', () => {
  it('a third user of the tenant and a user of another tenant read nothing of a thread, by id or by peer', async () => {
    const m = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'private' });
    const tid = m.body.threadId as string;
    for (const [who, q] of [
      [carol, `threadId=${tid}`],
      [mallory, `threadId=${tid}`],
    ] as const) {
      expect((await call(s, who, 'GET', `/chat.ashx?op=history&${q}`)).status).toBe(404);
      expect((await call(s, who, 'POST', `/chat.ashx?op=send&${q}`, { text: 'in' })).status).toBe(404);
      expect((await call(s, who, 'POST', `/chat.ashx?op=read&${q}`, { upTo: m.body.id })).status).toBe(404);
      expect((await call(s, who, 'POST', `/chat.ashx?op=typing&${q}`)).status).toBe(404);
      const list = await call(s, who, 'GET', '/chat.ashx?op=list-threads');
      expect(list.body.threads.map((t: { id: string }) => t.id)).not.toContain(tid);
    }
    // Alice's key on the other tenant's host is not a credential there.
    expect((await s.fetch('/chat.ashx?op=me', { key: alice.key, host: `other.test:${s.port}` })).status).toBe(401);
    // A client-credentials style principal is not a chat user: the admin HMAC is refused outright.
    expect((await s.fetch('/chat.ashx?op=me', { headers: { 'X-Service-Admin-Signature': s.hmac('chat-me') } })).status).toBe(401);
  });
});

describe('chat: groups', () => {
  it('create, rename, add, remove, leave: rights, membership and audit', async () => {
    const g = await call(s, alice, 'POST', '/chat.ashx?op=group-create', { name: 'Front desk', members: ['bob'] });
    expect(g.status).toBe(200);
    const gid = g.body.id as string;
    expect(gid).toMatch(/^g_/);
    expect(g.body.members.map((m: { login: string; role: string }) => `${m.login}:${m.role}`).sort()).toEqual(['alice:owner', 'bob:member']);
    expect((await call(s, bob, 'POST', `/chat.ashx?op=send&groupId=${gid}`, { text: 'hi group' })).status).toBe(200);
    expect((await call(s, carol, 'GET', `/chat.ashx?op=history&groupId=${gid}`)).status).toBe(404);

    expect((await call(s, bob, 'POST', `/chat.ashx?op=group-rename&groupId=${gid}`, { name: 'x' })).status).toBe(403);
    expect((await call(s, alice, 'POST', `/chat.ashx?op=group-rename&groupId=${gid}`, { name: 'Reception' })).body.name).toBe('Reception');
    // Any member adds; only the owner removes.
    expect((await call(s, bob, 'POST', `/chat.ashx?op=group-add&groupId=${gid}`, { members: ['carol'] })).status).toBe(200);
    expect((await call(s, carol, 'GET', `/chat.ashx?op=history&groupId=${gid}`)).body.messages.map((m: { text: string }) => m.text)).toEqual(['hi group']);
    expect((await call(s, bob, 'POST', `/chat.ashx?op=group-remove&groupId=${gid}`, { members: ['carol'] })).status).toBe(403);
    expect((await call(s, mallory, 'POST', `/chat.ashx?op=group-add&groupId=${gid}`, { members: ['mallory'] })).status).toBe(404);
    expect((await call(s, alice, 'POST', `/chat.ashx?op=group-add&groupId=${gid}`, { members: ['mallory'] })).status).toBe(404);
    const rm = await call(s, alice, 'POST', `/chat.ashx?op=group-remove&groupId=${gid}`, { members: ['carol'] });
    expect(rm.body.removed.map((u: { login: string }) => u.login)).toEqual(['carol']);
    expect((await call(s, carol, 'GET', `/chat.ashx?op=history&groupId=${gid}`)).status).toBe(404);
    // The owner leaves: bob becomes owner.
    expect((await call(s, alice, 'POST', `/chat.ashx?op=leave&groupId=${gid}`)).status).toBe(200);
    expect((await call(s, alice, 'GET', `/chat.ashx?op=history&groupId=${gid}`)).status).toBe(404);
    expect((await call(s, bob, 'POST', `/chat.ashx?op=group-rename&groupId=${gid}`, { name: 'Bob’s' })).body.members).toEqual([
      expect.objectContaining({ login: 'bob', role: 'owner' }),
    ]);
    // A direct thread is not a group.
    const dm = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'dm' });
    expect((await call(s, alice, 'POST', `/chat.ashx?op=leave&groupId=${dm.body.threadId}`)).status).toBe(400);

    const audit = s.appliance.core.db.prepare("SELECT event, extra FROM audit_log WHERE event LIKE 'chat-group-%' ORDER BY rowid").all() as {
      event: string;
      extra: string;
    }[];
    expect(audit.map((a) => a.event)).toEqual([
      'chat-group-create',
      'chat-group-rename',
      'chat-group-add',
      'chat-group-remove',
      'chat-group-leave',
      'chat-group-rename',
    ]);
    expect(audit[2]!.extra).toContain('carol');
  });
});

describe('chat: tenant admin', () => {
  it('export of a thread as JSON, for admins only, audited', async () => {
    const m = await call(s, alice, 'POST', '/chat.ashx?op=send&with=carol', { text: 'for the record' });
    expect((await call(s, alice, 'GET', `/chat.ashx?op=export&threadId=${m.body.threadId}`)).status).toBe(403);
    const ex = await call(s, admin, 'GET', `/chat.ashx?op=export&threadId=${m.body.threadId}`);
    expect(ex.status).toBe(200);
    expect(ex.headers.get('content-disposition')).toMatch(/^attachment/);
    expect(ex.body).toMatchObject({ format: 'sovcomms-chat-export/1', thread: { id: m.body.threadId, kind: 'direct' } });
    expect(ex.body.messages.map((x: { text: string }) => x.text)).toContain('for the record');
    const otherAdmin = await s.addTenant('third.test');
    const res = await s.fetch(`/chat.ashx?op=export&threadId=${m.body.threadId}`, { key: otherAdmin.adminKey, host: `third.test:${s.port}` });
    expect(res.status).toBe(404);
    const audit = s.appliance.core.db.prepare("SELECT COUNT(*) AS n FROM audit_log WHERE event = 'chat-export'").get() as { n: number };
    expect(audit.n).toBe(1);
  });

  it('every chat operation is in /openapi.json', async () => {
    const doc = (await (await s.fetch('/openapi.json')).json()) as { paths: Record<string, unknown> };
    for (const op of [
      'me',
      'list-threads',
      'send',
      'upload',
      'download',
      'history',
      'group-create',
      'group-rename',
      'group-add',
      'group-remove',
      'leave',
      'read',
      'edit',
      'delete',
      'typing',
      'socket',
      'socket-ticket',
      'export',
      'settings',
    ]) {
      expect(Object.keys(doc.paths), op).toContain(`/chat.ashx?op=${op}`);
    }
  });
});
