import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, tempDir } from '../../support/server.ts';
import { until } from '../../support/until.ts';
import type { ChatServices } from '../../../plugins/chat/index.ts';
import { addUser, call, download, multipart, upload } from './support.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const CHILD = path.join(ROOT, 'test/plugins/chat/crash-child.ts');
const RUN_TS = path.join(ROOT, 'bin/run-ts.mjs');

const children = new Set<ChildProcess>();
const dirs: string[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

interface Child {
  child: ChildProcess;
  url: string;
  alice: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

function startChild(dataDir: string): Promise<Child> {
  const child = spawn(process.execPath, [RUN_TS, CHILD, dataDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, stderr })),
  );
  return new Promise((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new Error(`child not ready in 90 s; stderr: ${stderr}`)), 90_000);
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
      const line = stdout.split('\n').find((l) => l.includes('"ready"'));
      if (line) {
        clearTimeout(timer);
        const j = JSON.parse(line) as { ready: string; alice: string };
        resolve({ child, url: j.ready, alice: j.alice, exited });
      }
    });
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`child exited (${code}) before ready: ${stderr}`));
    });
  });
}

function post(url: string, key: string, body: Buffer, contentType: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': contentType, 'Content-Length': body.length },
    });
    req.on('response', (res) => {
      let b = '';
      res.on('data', (c: Buffer) => (b += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: b }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

/** Every file row and message file reference, and whether its bytes on disk are whole. */
function referenced(dataDir: string): { sha: string; staged: string | null; whole: boolean }[] {
  const db = new Database(path.join(dataDir, 'appliance.db'), { readonly: true, fileMustExist: true });
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const rows = db.prepare('SELECT tenant_id, sha, staged FROM chat_files').all() as { tenant_id: string; sha: string; staged: string | null }[];
    const dangling = db
      .prepare(
        'SELECT m.file_sha FROM chat_messages m LEFT JOIN chat_files f ON f.tenant_id = m.tenant_id AND f.sha = m.file_sha WHERE m.file_sha IS NOT NULL AND f.sha IS NULL',
      )
      .all();
    expect(dangling).toEqual([]);
    return rows.map((r) => {
      const p = path.join(dataDir, 'tenants', r.tenant_id, 'chat', 'files', r.sha.slice(0, 2), r.sha);
      return { sha: r.sha, staged: r.staged, whole: fs.existsSync(p) && sha256(fs.readFileSync(p)) === r.sha };
    });
  } finally {
    db.close();
  }
}

describe('chat uploads across a crash (real child processes)', () => {
  it('SIGKILL mid-upload leaves no row naming a partial file; the restart clears the partial bytes', { timeout: 240_000 }, async () => {
    const dataDir = tempDir('sovcomms-chat-crash-');
    dirs.push(dataDir);
    const first = await startChild(dataDir);

    // One complete upload before the crash: it must survive whole.
    const done = crypto.randomBytes(300_000);
    const mp = multipart('done.bin', done);
    const ok = await post(`${first.url}/chat.ashx?op=upload&with=bob`, first.alice, mp.body, mp.contentType);
    expect(ok.status, ok.body).toBe(200);

    // A 32 MiB upload, declared in full but sent only in part: the child is killed mid-stream.
    const big = crypto.randomBytes(32 * 1024 * 1024);
    const bigMp = multipart('big.bin', big);
    const req = http.request(`${first.url}/chat.ashx?op=upload&with=bob`, {
      method: 'POST',
      agent: false,
      headers: { Authorization: `Bearer ${first.alice}`, 'Content-Type': bigMp.contentType, 'Content-Length': bigMp.body.length },
    });
    req.on('error', () => undefined);
    req.write(bigMp.body.subarray(0, 4 * 1024 * 1024));
    const tmp = path.join(dataDir, 'tenants');
    const partBytes = () => {
      for (const t of fs.readdirSync(tmp)) {
        const d = path.join(tmp, t, 'chat', 'tmp');
        if (!fs.existsSync(d)) continue;
        for (const f of fs.readdirSync(d)) if (f.endsWith('.part')) return fs.statSync(path.join(d, f)).size;
      }
      return 0;
    };
    await until(() => partBytes() > 1024 * 1024, 30_000, 'a partial upload on disk');
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    req.destroy();

    // After the crash: the partial bytes exist, but no row names them; every row's file is whole.
    expect(partBytes()).toBeGreaterThan(0);
    const after = referenced(dataDir);
    expect(after.map((r) => r.sha)).toEqual([sha256(done)]);
    expect(after.every((r) => r.whole && r.staged === null)).toBe(true);
    expect(after.some((r) => r.sha === sha256(big))).toBe(false);

    // The restart removes the partial bytes; the complete file still downloads.
    const second = await startChild(dataDir);
    expect(partBytes()).toBe(0);
    const d = await new Promise<Buffer>((resolve, reject) => {
      http
        .get(`${second.url}/chat.ashx?op=download&sha=${sha256(done)}`, { headers: { Authorization: `Bearer ${second.alice}` }, agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve(Buffer.concat(chunks)));
        })
        .on('error', reject);
    });
    expect(sha256(d)).toBe(sha256(done));
    second.child.kill('SIGTERM');
    const e2 = await second.exited;
    expect(e2.code, e2.stderr).toBe(0);
  });
});

describe('chat upload recovery at start', () => {
  it('a row committed before its rename is finished from the whole temp file; one without whole bytes is dropped with its message', async () => {
    const s = await startTestServer();
    try {
      const host = `127.0.0.1:${s.port}`;
      const alice = await addUser(s, s.primary, 'alice', host);
      await addUser(s, s.primary, 'bob', host);
      const chat = s.appliance.host.services('chat') as ChatServices;
      const db = s.appliance.core.db;
      // Two uploads, then put both back into the state a crash between commit and rename leaves.
      const whole = crypto.randomBytes(10_000);
      const torn = crypto.randomBytes(10_000);
      const a = await upload(s, alice, 'with=bob', 'whole.bin', whole);
      const b = await upload(s, alice, 'with=bob', 'torn.bin', torn);
      const tmpDir = path.join(s.dataDir, 'tenants', s.primary.id, 'chat', 'tmp');
      fs.mkdirSync(tmpDir, { recursive: true });
      fs.renameSync(chat.files.finalPath(s.primary, sha256(whole)), path.join(tmpDir, 'w.part'));
      fs.rmSync(chat.files.finalPath(s.primary, sha256(torn)));
      fs.writeFileSync(path.join(tmpDir, 't.part'), torn.subarray(0, 5000));
      db.prepare("UPDATE chat_files SET staged = 'w.part' WHERE sha = ?").run(sha256(whole));
      db.prepare("UPDATE chat_files SET staged = 't.part' WHERE sha = ?").run(sha256(torn));
      fs.writeFileSync(path.join(tmpDir, 'orphan.part'), 'half an upload');
      // Staged rows are not downloadable.
      expect((await download(s, alice, sha256(whole))).status).toBe(404);

      expect(chat.files.recover(s.appliance.core.tenants.list())).toEqual({ finished: 1, dropped: 1, partsRemoved: 2 });
      expect(fs.readdirSync(tmpDir)).toEqual([]);
      const dw = await download(s, alice, sha256(whole));
      expect(dw.status).toBe(200);
      expect(dw.body.equals(whole)).toBe(true);
      expect((await download(s, alice, sha256(torn))).status).toBe(404);
      const h = await call(s, alice, 'GET', `/chat.ashx?op=history&threadId=${a.body.threadId}`);
      const byId = new Map(h.body.messages.map((m: { id: number }) => [m.id, m]));
      expect(byId.get(a.body.id)).toMatchObject({ deleted: false, file: { name: 'whole.bin' } });
      expect(byId.get(b.body.id)).toMatchObject({ deleted: true, file: null });
    } finally {
      await s.stop();
    }
  });
});
