import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { until } from '../../support/until.ts';
import { contentDisposition, parseRange, safeName } from '../../../plugins/chat/files.ts';
import { addUser, call, download, multipart, upload, type ChatUser } from './support.ts';

const LIMIT = 1024 * 1024;
let s: TestServer;
let alice: ChatUser;
let bob: ChatUser;
let carol: ChatUser;
let mallory: ChatUser;
let admin: ChatUser;

beforeAll(async () => {
  s = await startTestServer({ overrides: { plugins: { chat: { maxUploadBytes: LIMIT, retentionEveryMs: 1000 } } } });
  const host = `127.0.0.1:${s.port}`;
  alice = await addUser(s, s.primary, 'alice', host);
  bob = await addUser(s, s.primary, 'bob', host);
  carol = await addUser(s, s.primary, 'carol', host);
  admin = { login: 'admin', id: '', key: s.adminKey, host };
  const other = await s.addTenant('other.test');
  mallory = await addUser(s, other.tenant, 'mallory', `other.test:${s.port}`);
}, 60_000);
afterAll(() => s?.stop());

const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

/** Every regular file under a folder, relative to it. */
function walk(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

function chatDir(): string {
  return path.join(s.dataDir, 'tenants', s.primary.id, 'chat');
}

/** A one-entry zip (PKZIP APPNOTE 4.3) whose entry inflates to `size` zero bytes. */
function zipBomb(size: number): Buffer {
  const data = zlib.deflateRawSync(Buffer.alloc(size), { level: 9 });
  const crc = zlib.crc32 ? zlib.crc32(Buffer.alloc(size)) : 0;
  const name = Buffer.from('zeros.bin');
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(8, 8);
  local.writeUInt32LE(crc >>> 0, 14);
  local.writeUInt32LE(data.length, 18);
  local.writeUInt32LE(size, 22);
  local.writeUInt16LE(name.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt16LE(8, 10);
  central.writeUInt32LE(crc >>> 0, 16);
  central.writeUInt32LE(data.length, 20);
  central.writeUInt32LE(size, 24);
  central.writeUInt16LE(name.length, 28);
  const cdOffset = local.length + name.length + data.length;
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(central.length + name.length, 12);
  end.writeUInt32LE(cdOffset, 16);
  return Buffer.concat([local, name, data, central, name, end]);
}

describe('chat files: upload and download', () => {
  it('a file shared in a direct thread downloads whole and by range, as an attachment, for both members only', async () => {
    const bytes = crypto.randomBytes(200_000);
    const up = await upload(s, alice, 'with=bob', 'report Q3.pdf', bytes, 'application/pdf');
    expect(up.status).toBe(200);
    expect(up.body.file).toEqual({ sha: sha256(bytes), name: 'report Q3.pdf', size: bytes.length, type: 'application/octet-stream' });
    // On disk by hash under the tenant's folder, nothing left in tmp.
    expect(walk(chatDir())).toEqual([path.join('files', sha256(bytes).slice(0, 2), sha256(bytes))]);

    for (const who of [alice, bob]) {
      const d = await download(s, who, sha256(bytes));
      expect(d.status).toBe(200);
      expect(sha256(d.body)).toBe(sha256(bytes));
      expect(d.headers['content-disposition']).toBe(`attachment; filename="report Q3.pdf"; filename*=UTF-8''report%20Q3.pdf`);
      expect(d.headers['x-content-type-options']).toBe('nosniff');
      expect(d.headers['accept-ranges']).toBe('bytes');
    }
    const r = await download(s, bob, sha256(bytes), { Range: 'bytes=10-19' });
    expect(r.status).toBe(206);
    expect(r.headers['content-range']).toBe(`bytes 10-19/${bytes.length}`);
    expect(r.body).toEqual(bytes.subarray(10, 20));
    const tail = await download(s, bob, sha256(bytes), { Range: 'bytes=-5' });
    expect(tail.status).toBe(206);
    expect(tail.body).toEqual(bytes.subarray(bytes.length - 5));
    const open = await download(s, bob, sha256(bytes), { Range: `bytes=${bytes.length - 3}-` });
    expect(open.body).toEqual(bytes.subarray(bytes.length - 3));
    const out = await download(s, bob, sha256(bytes), { Range: `bytes=${bytes.length}-` });
    expect(out.status).toBe(416);
    expect(out.headers['content-range']).toBe(`bytes */${bytes.length}`);
    const multi = await download(s, bob, sha256(bytes), { Range: 'bytes=0-1,5-6' });
    expect(multi.status).toBe(200);
    expect(multi.body.length).toBe(bytes.length);

    // Not a member, another tenant, a malformed sha: nothing.
    expect((await download(s, carol, sha256(bytes))).status).toBe(404);
    expect((await download(s, mallory, sha256(bytes))).status).toBe(404);
    expect((await download(s, alice, '../../appliance.db')).status).toBe(400);
    expect((await download(s, alice, sha256(Buffer.from('never uploaded')))).status).toBe(404);
    // Uploads into someone else's thread are refused before a byte is stored.
    expect((await upload(s, carol, `threadId=${up.body.threadId}`, 'x.txt', Buffer.from('x'))).status).toBe(404);
    expect((await upload(s, mallory, `threadId=${up.body.threadId}`, 'x.txt', Buffer.from('x'))).status).toBe(404);
  });

  it('the same bytes twice are one file; deleting the last message sharing it ends its download', async () => {
    const bytes = Buffer.from(`same bytes ${Date.now()}`);
    const a = await upload(s, alice, 'with=carol', 'a.txt', bytes);
    const b = await upload(s, carol, 'with=alice', 'b.txt', bytes);
    expect(a.body.file.sha).toBe(b.body.file.sha);
    expect(walk(chatDir()).filter((f) => f.endsWith(sha256(bytes)))).toHaveLength(1);
    expect((await download(s, alice, sha256(bytes))).headers['content-disposition']).toContain('b.txt');
    await call(s, carol, 'POST', '/chat.ashx?op=delete', { id: b.body.id });
    expect((await download(s, alice, sha256(bytes))).headers['content-disposition']).toContain('a.txt');
    await call(s, alice, 'POST', '/chat.ashx?op=delete', { id: a.body.id });
    expect((await download(s, alice, sha256(bytes))).status).toBe(404);
    // The retention job (every second here) removes the now unreferenced bytes.
    await until(() => !walk(chatDir()).some((f) => f.endsWith(sha256(bytes))), 10_000, 'unreferenced file removed');
  });

  it('path traversal in names stays a display name: files land by hash only, names lose their paths', async () => {
    const cases: [string, string][] = [
      ['../../../../etc/passwd', 'passwd'],
      ['..\\..\\windows\\evil.exe', 'evil.exe'],
      ['/abs/olute.txt', 'olute.txt'],
      ['..', 'file'],
      ['.htaccess', 'htaccess'],
      ['ok\u202Etxt.exe', 'oktxt.exe'],
    ];
    const before = new Set(walk(s.dataDir));
    for (const [raw, shown] of cases) {
      const bytes = Buffer.from(`traversal ${raw}`);
      const up = await upload(s, alice, 'with=bob', raw, bytes);
      expect(up.status, raw).toBe(200);
      expect(up.body.file.name, raw).toBe(shown);
      const d = await download(s, bob, up.body.file.sha);
      expect(d.headers['content-disposition']).toMatch(/^attachment; filename="[^"\\]*"; filename\*=UTF-8''[A-Za-z0-9%._~!$&+,;=:@-]*$/);
    }
    const added = walk(s.dataDir).filter((f) => !before.has(f) && !/^appliance\.db/.test(f));
    for (const f of added) expect(f).toMatch(new RegExp(`^tenants/${s.primary.id}/chat/files/[0-9a-f]{2}/[0-9a-f]{64}$`));
  });

  it('HTML and SVG are stored untyped and served only as attachments, never inline', async () => {
    const html = Buffer.from('<!doctype html><html><body><script>alert(document.cookie)</script></body></html>');
    const svg = Buffer.from('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>');
    for (const [name, bytes, declared] of [
      ['page.html', html, 'text/html'],
      ['logo.svg', svg, 'image/svg+xml'],
    ] as const) {
      const up = await upload(s, alice, 'with=bob', name, bytes, declared);
      expect(up.body.file.type).not.toMatch(/html|svg/);
      const d = await download(s, bob, up.body.file.sha);
      expect(d.status).toBe(200);
      expect(d.headers['content-type']).toBe('application/octet-stream');
      expect(d.headers['content-disposition']).toMatch(/^attachment;/);
      expect(d.headers['x-content-type-options']).toBe('nosniff');
      expect(d.headers['content-security-policy']).toContain('sandbox');
    }
    // A sniffed image keeps its type (still as an attachment).
    const png = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(64)]);
    const up = await upload(s, alice, 'with=bob', 'pic.txt', png, 'text/plain');
    expect(up.body.file.type).toBe('image/png');
    expect((await download(s, bob, up.body.file.sha)).headers['content-type']).toBe('image/png');
  });

  it('a zip bomb is stored as the opaque bytes sent, never inflated', async () => {
    const bomb = zipBomb(64 * 1024 * 1024);
    expect(bomb.length).toBeLessThan(LIMIT);
    const up = await upload(s, alice, 'with=bob', 'bomb.zip', bomb);
    expect(up.status).toBe(200);
    expect(up.body.file).toMatchObject({ sha: sha256(bomb), size: bomb.length, type: 'application/zip' });
    const d = await download(s, bob, sha256(bomb));
    expect(d.body.equals(bomb)).toBe(true);
    for (const f of walk(chatDir())) expect(fs.statSync(path.join(chatDir(), f)).size).toBeLessThan(LIMIT);
  });

  it('an upload over the limit is 413 (declared or chunked) and leaves no file, row or message', async () => {
    const rows = () => (s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM chat_files').get() as { n: number }).n;
    const msgs = () => (s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM chat_messages').get() as { n: number }).n;
    const [r0, m0, f0] = [rows(), msgs(), walk(chatDir()).length];
    const big = crypto.randomBytes(LIMIT + 1);
    const declared = await upload(s, alice, 'with=bob', 'big.bin', big);
    expect(declared.status).toBe(413);
    expect(declared.body.error).toBe('payload_too_large');

    // Chunked: no Content-Length, so the stream itself must be cut at the limit.
    const mp = multipart('big.bin', Buffer.concat([big, big]));
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${s.url}/chat.ashx?op=upload&with=bob`, {
        method: 'POST',
        agent: false,
        headers: { Authorization: `Bearer ${alice.key}`, 'Content-Type': mp.contentType, 'Transfer-Encoding': 'chunked' },
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      for (let i = 0; i < mp.body.length; i += 65_536) req.write(mp.body.subarray(i, i + 65_536));
      req.end();
    });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body).error).toBe('payload_too_large');
    await until(() => walk(path.join(chatDir(), 'tmp')).length === 0, 5000, 'temp file removed');
    expect([rows(), msgs(), walk(chatDir()).length]).toEqual([r0, m0, f0]);

    // Exactly at the limit passes.
    const exact = await upload(s, alice, 'with=bob', 'exact.bin', crypto.randomBytes(LIMIT));
    expect(exact.status).toBe(200);
  });

  it('refuses a non-multipart body (415), no file part (400) and two file parts (400)', async () => {
    const plain = await s.fetch('/chat.ashx?op=upload&with=bob', { method: 'POST', key: alice.key, json: { text: 'x' } });
    expect(plain.status).toBe(415);
    const boundary = 'b0';
    const fieldOnly = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n--${boundary}--\r\n`);
    const none = await s.fetch('/chat.ashx?op=upload&with=bob', {
      method: 'POST',
      key: alice.key,
      body: fieldOnly,
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(none.status).toBe(400);
    const part = (n: string) => `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${n}"\r\n\r\n${n}\r\n`;
    const two = await s.fetch('/chat.ashx?op=upload&with=bob', {
      method: 'POST',
      key: alice.key,
      body: Buffer.from(part('one') + part('two') + `--${boundary}--\r\n`),
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(two.status).toBe(400);
    // No boundary, garbage, a body cut before its closing boundary: 400, never a 500.
    for (const [ct, body] of [
      ['multipart/form-data', part('x')],
      [`multipart/form-data; boundary=${boundary}`, '\u0000\u0001 not multipart at all'],
      [`multipart/form-data; boundary=${boundary}`, part('cut')],
    ] as const) {
      const r = await s.fetch('/chat.ashx?op=upload&with=bob', { method: 'POST', key: alice.key, body: Buffer.from(body), headers: { 'Content-Type': ct } });
      expect(r.status, `${ct} ${JSON.stringify(body)}`).toBe(400);
      expect(((await r.json()) as { error: string }).error).toBe('invalid_request');
    }
    expect(walk(path.join(chatDir(), 'tmp'))).toEqual([]);
  });
});

describe('chat files: names and ranges', () => {
  it('safeName keeps only a last component without control, format or separator characters', () => {
    expect(safeName('a\u0007b\u0000c\r\n.txt')).toBe('abc.txt');
    expect(safeName('C:\\Users\\x\\..\\y.doc')).toBe('y.doc');
    expect(safeName('...')).toBe('file');
    expect(safeName(undefined)).toBe('file');
    expect(safeName('x'.repeat(500))).toHaveLength(200);
    expect(contentDisposition('Ünïcødé "q".txt')).toBe(`attachment; filename="_n_c_d_ _q_.txt"; filename*=UTF-8''%C3%9Cn%C3%AFc%C3%B8d%C3%A9%20%22q%22.txt`);
  });

  it('parseRange: one range, suffix, open end; several or malformed ranges mean the whole file', () => {
    expect(parseRange('bytes=0-0', 10)).toEqual({ start: 0, end: 0 });
    expect(parseRange('bytes=5-100', 10)).toEqual({ start: 5, end: 9 });
    expect(parseRange('bytes=-3', 10)).toEqual({ start: 7, end: 9 });
    expect(parseRange('bytes=-30', 10)).toEqual({ start: 0, end: 9 });
    expect(parseRange('bytes=10-', 10)).toBe('unsatisfiable');
    expect(parseRange('bytes=-0', 10)).toBe('unsatisfiable');
    expect(parseRange('bytes=5-2', 10)).toBeNull();
    expect(parseRange('bytes=0-1,3-4', 10)).toBeNull();
    expect(parseRange('items=0-1', 10)).toBeNull();
    expect(parseRange(undefined, 10)).toBeNull();
  });
});

describe('chat retention', () => {
  it('admins set days or forever (audited); the job deletes older messages and their files', async () => {
    expect((await call(s, alice, 'POST', '/chat.ashx?op=settings', { retentionDays: 1 })).status).toBe(403);
    expect((await call(s, admin, 'GET', '/chat.ashx?op=settings')).body).toEqual({ retentionDays: null, inherited: true });
    const bytes = Buffer.from(`old file ${Date.now()}`);
    const old = await upload(s, alice, 'with=bob', 'old.txt', bytes);
    const oldText = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'old text' });
    const fresh = await call(s, alice, 'POST', '/chat.ashx?op=send&with=bob', { text: 'fresh text' });
    const db = s.appliance.core.db;
    const twoDaysAgo = Date.now() - 2 * 86_400_000;
    db.prepare('UPDATE chat_messages SET created_at = ? WHERE id IN (?, ?)').run(twoDaysAgo, old.body.id, oldText.body.id);
    db.prepare('UPDATE chat_events SET created_at = ? WHERE seq IN (?, ?)').run(twoDaysAgo, old.body.id, oldText.body.id);

    // Forever (the default): the job leaves them.
    await new Promise((r) => setTimeout(r, 2500));
    expect((await call(s, bob, 'GET', `/chat.ashx?op=history&threadId=${fresh.body.threadId}&after=${old.body.id - 1}`)).body.messages).toHaveLength(3);

    const set = await call(s, admin, 'POST', '/chat.ashx?op=settings', { retentionDays: 1 });
    expect(set.body).toEqual({ retentionDays: 1, inherited: false });
    await until(() => !walk(chatDir()).some((f) => f.endsWith(sha256(bytes))), 10_000, 'old file removed by the job');
    const h = await call(s, bob, 'GET', `/chat.ashx?op=history&threadId=${fresh.body.threadId}&after=${old.body.id - 1}`);
    expect(h.body.messages.map((m: { text: string }) => m.text)).toEqual(['fresh text']);
    expect((await download(s, bob, sha256(bytes))).status).toBe(404);
    const audit = db.prepare("SELECT extra FROM audit_log WHERE event = 'chat-retention'").all() as { extra: string }[];
    expect(audit.map((a) => a.extra).join()).toContain('1');
    expect((await call(s, admin, 'POST', '/chat.ashx?op=settings', { retentionDays: null })).body.retentionDays).toBeNull();
    expect((await call(s, admin, 'POST', '/chat.ashx?op=settings', { retentionDays: 0 })).status).toBe(400);
  });
});
