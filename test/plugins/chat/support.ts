import http from 'node:http';
import WebSocket from 'ws';
import type { TestServer } from '../../support/server.ts';
import type { Tenant } from '../../../server/tenancy.ts';

// Response bodies are checked field by field; `any` keeps those checks short.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface ChatUser {
  login: string;
  id: string;
  key: string;
  host: string;
}

/** A user with an ak_ key in `tenant` (host as the Host header to send). */
export async function addUser(s: TestServer, tenant: Tenant, login: string, host: string, role: 'user' | 'admin' = 'user'): Promise<ChatUser> {
  const core = s.appliance.core;
  const u = await core.users.add(tenant, { name: login, role, password: 'correct horse battery staple' });
  const key = core.auth.createApiKey(tenant, u, { createdBy: 'test' }).key;
  return { login, id: u.id, key, host };
}

export async function call(
  s: TestServer,
  u: ChatUser,
  method: string,
  pathAndQuery: string,
  json?: unknown,
): Promise<{ status: number; body: Json; headers: Headers }> {
  const res = await s.fetch(pathAndQuery, { method, key: u.key, host: u.host, ...(json !== undefined ? { json } : {}) });
  const text = await res.text();
  let body: Json = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON (a file): keep the text
  }
  return { status: res.status, body, headers: res.headers };
}

/** A multipart/form-data body with one file part (the filename as given, unescaped but for quotes). */
export function multipart(filename: string, content: Buffer, type = 'application/octet-stream'): { body: Buffer; contentType: string } {
  const boundary = '----chattest' + Math.random().toString(16).slice(2);
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename.replace(/"/g, '%22')}"\r\nContent-Type: ${type}\r\n\r\n`,
    'utf8',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return { body: Buffer.concat([head, content, tail]), contentType: `multipart/form-data; boundary=${boundary}` };
}

export async function upload(
  s: TestServer,
  u: ChatUser,
  query: string,
  filename: string,
  content: Buffer,
  type?: string,
): Promise<{ status: number; body: Json; headers: Headers }> {
  const mp = multipart(filename, content, type);
  const res = await s.fetch(`/chat.ashx?op=upload&${query}`, {
    method: 'POST',
    key: u.key,
    host: u.host,
    body: mp.body,
    headers: { 'Content-Type': mp.contentType },
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

/** Raw GET with extra headers, answering the body bytes (downloads). */
export function download(
  s: TestServer,
  u: ChatUser,
  sha: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Buffer; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${s.url}/chat.ashx?op=download&sha=${sha}`,
      { headers: { Host: u.host, Authorization: `Bearer ${u.key}`, ...headers }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A ws client collecting every JSON frame. */
export class Client {
  readonly frames: Json[] = [];
  ws!: WebSocket;
  closed: Promise<{ code: number; reason: string }> = Promise.resolve({ code: 0, reason: '' });

  static async open(s: TestServer, u: ChatUser, opts: { since?: number; ticket?: string; noAuth?: boolean } = {}): Promise<Client> {
    const c = new Client();
    const q = new URLSearchParams({ op: 'socket' });
    if (opts.since !== undefined) q.set('since', String(opts.since));
    if (opts.ticket) q.set('ticket', opts.ticket);
    const headers: Record<string, string> = { Host: u.host };
    if (!opts.ticket && !opts.noAuth) headers.Authorization = `Bearer ${u.key}`;
    c.ws = new WebSocket(`${s.url.replace('http', 'ws')}/chat.ashx?${q.toString()}`, { headers });
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a ws text frame arrives as one Buffer
    c.ws.on('message', (d) => c.frames.push(JSON.parse(String(d))));
    c.closed = new Promise((r) => c.ws.on('close', (code, reason) => r({ code, reason: String(reason) })));
    await new Promise<void>((resolve, reject) => {
      c.ws.once('open', () => resolve());
      c.ws.once('error', reject);
      c.ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    return c;
  }

  events(type?: string): Json[] {
    return this.frames.filter((f) => typeof f.seq === 'number' && (type === undefined || f.type === type));
  }

  messages(): Json[] {
    return this.events('message').map((f) => f.message);
  }

  lastSeq(): number {
    return this.events().reduce((m, f) => Math.max(m, f.seq), 0);
  }

  send(frame: unknown): void {
    this.ws.send(JSON.stringify(frame));
  }

  close(): void {
    this.ws.close();
  }
}

/** The status of a refused socket handshake. */
export function refusedStatus(s: TestServer, host: string, query: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${s.url.replace('http', 'ws')}/chat.ashx?${query}`, { headers: { Host: host, ...headers } });
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(101);
      ws.close();
    });
    ws.on('error', () => resolve(-1));
  });
}
