import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../../../server/errors.ts';
import { createLogger } from '../../../server/log.ts';
import { BridgeLink } from '../../../plugins/telephony/bridge-link/link.ts';
import { ControlAnswerTooLarge, ControlHttp, MAX_ANSWER_BYTES } from '../../../plugins/telephony/bridge-link/control-http.ts';
import { telephonyConfig } from '../../../plugins/telephony/schemas.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';

// The core's control requests to the bridge (bridge-link/control-http.ts over node:http): every way
// a bridge can fail to answer maps to the error codes the REST layer renders (CONTROL-API.md).

const TOKEN = 'bridge-link-http-test-token-000001';
const log = createLogger({ level: 'silent' });
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

function link(url: string, over: Record<string, unknown> = {}): BridgeLink {
  const cfg = telephonyConfig.parse({ bridge: { mode: 'remote', url, token: TOKEN, requestTimeoutMs: 300, ...over } }).bridge;
  const l = new BridgeLink(cfg, log, { onReady: async () => {}, onDied: () => {} });
  closers.push(() => l.stop());
  return l;
}

/** A loopback server whose every request is handled by `handle`; counts TCP connections. */
async function server(handle: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<{ url: string; connections: () => number }> {
  const srv = http.createServer(handle);
  let n = 0;
  srv.on('connection', () => n++);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  closers.push(
    () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  );
  return { url: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`, connections: () => n };
}

async function failure(p: Promise<unknown>): Promise<AppError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(AppError);
  return e as AppError;
}

describe('bridge link: control requests over node:http', () => {
  it('a closed port is 502 bridge_unreachable naming the address and ECONNREFUSED', async () => {
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const port = (srv.address() as net.AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const e = await failure(link(`http://127.0.0.1:${port}`).health());
    expect([e.status, e.code]).toEqual([502, 'bridge_unreachable']);
    expect(e.message).toBe(`the telephony bridge at http://127.0.0.1:${port} did not answer (ECONNREFUSED)`);
  });

  it('a bridge that takes the request and never answers is 502 bridge_unreachable (TimeoutError) after requestTimeoutMs', async () => {
    const s = await server(() => {
      // never answers
    });
    const e = await failure(link(s.url).health());
    expect([e.status, e.code]).toEqual([502, 'bridge_unreachable']);
    expect(e.message).toBe(`the telephony bridge at ${s.url} did not answer (TimeoutError)`);
  });

  it('the deadline covers the body: headers then silence is 502 bridge_unreachable (TimeoutError)', async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"status":');
    });
    const e = await failure(link(s.url).health());
    expect([e.status, e.code]).toEqual([502, 'bridge_unreachable']);
    expect(e.message).toContain('(TimeoutError)');
  });

  it('a connection dropped in the middle of the body is 502 bridge_unreachable', async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"status":"ok"', () => res.destroy());
    });
    const e = await failure(link(s.url).health());
    expect([e.status, e.code]).toEqual([502, 'bridge_unreachable']);
  });

  it('a 2xx outside the contract is 502 bridge_protocol; an error answer is 502 bridge_error', async () => {
    const s = await server((req, res) => {
      res.writeHead(req.url === '/health' ? 200 : 500, { 'content-type': 'application/json' });
      res.end(req.url === '/health' ? '{"trunks":"many"}' : '{"error":"boom","error_description":"x"}');
    });
    const l = link(s.url);
    const e = await failure(l.health());
    expect([e.status, e.code]).toEqual([502, 'bridge_protocol']);
    const e2 = await failure(l.listCalls());
    expect([e2.status, e2.code]).toEqual([502, 'bridge_error']);
    expect(e2.message).toContain('500 boom');
  });

  it('an answer past the bound is refused, not buffered: 502 bridge_protocol at the link', async () => {
    const body = `{"status":"ok","trunks":[],"pad":"${'x'.repeat(64 * 1024)}"}`;
    const s = await server((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.url === '/calls' ? Buffer.alloc(MAX_ANSWER_BYTES + 1, 32) : body);
    });
    const h = new ControlHttp(16 * 1024);
    closers.push(async () => h.close());
    await expect(h.request('GET', `${s.url}/health`, {}, undefined, 2000)).rejects.toBeInstanceOf(ControlAnswerTooLarge);
    // Within the bound the same answer is read whole.
    const big = new ControlHttp(1024 * 1024);
    closers.push(async () => big.close());
    expect((await big.request('GET', `${s.url}/health`, {}, undefined, 2000)).text).toBe(body);
    const e = await failure(link(s.url, { requestTimeoutMs: 10_000 }).listCalls());
    expect([e.status, e.code]).toEqual([502, 'bridge_protocol']);
  });

  it('the real contract: the bearer is sent, bodies are JSON, and requests share one kept-alive connection', async () => {
    const fake = new FakeBridge(TOKEN, '');
    await fake.start();
    closers.push(() => fake.stop());
    const l = link(fake.url, { requestTimeoutMs: 5000 });
    expect((await l.health()).status).toBeTruthy();
    const put = await l.putTrunks([]);
    expect(put.ok).toBe(true);

    let seenAuth = '';
    const s = await server((req, res) => {
      seenAuth = req.headers.authorization ?? '';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok","trunks":[]}');
    });
    const l2 = link(s.url);
    for (let i = 0; i < 3; i++) expect((await l2.health()).status).toBe('ok');
    expect(seenAuth).toBe(`Bearer ${TOKEN}`);
    expect(s.connections()).toBe(1);
  });

  it('an idle kept-alive connection is closed by the client before the server would, and a slow answer is not cut by that', async () => {
    const s = await server((req, res) => {
      // The slow one answers after three idle periods of the client's agent.
      setTimeout(() => res.end('{"status":"ok","trunks":[]}'), req.url === '/slow' ? 600 : 0);
    });
    const h = new ControlHttp(MAX_ANSWER_BYTES, 200);
    closers.push(async () => h.close());
    expect((await h.request('GET', `${s.url}/slow`, {}, undefined, 5000)).status).toBe(200);
    expect(s.connections()).toBe(1);
    await new Promise((r) => setTimeout(r, 1000));
    expect((await h.request('GET', `${s.url}/health`, {}, undefined, 5000)).status).toBe(200);
    expect(s.connections()).toBe(2);
  });

  it('mode off is 503 bridge_not_configured without any request', async () => {
    const cfg = telephonyConfig.parse({ bridge: { mode: 'off' } }).bridge;
    const e = await failure(new BridgeLink(cfg, log, { onReady: async () => {}, onDied: () => {} }).health());
    expect([e.status, e.code]).toEqual([503, 'bridge_not_configured']);
  });
});
