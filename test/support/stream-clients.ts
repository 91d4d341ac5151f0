/**
 * Stream clients in a process of their own (test/security/stream-burst.test.ts): opening a
 * thousand WebSockets keeps an event loop busy, and the test measures the server's latency from
 * its own loop, which must not be the one doing it. Commands arrive as JSON lines on stdin, each
 * answered by one JSON line on stdout with the same id:
 * - {id, ws: [{addr, auth}]}: chat socket attempts, all at once → outcomes
 * - {id, sse: [{addr, auth}]}: console live-feed attempts, all at once → outcomes
 * - {id, close: true}: closes every held socket and stream → {}
 * An outcome is 'open' (held), an HTTP status (refused), or 'reset' (closed with no answer).
 */
import http from 'node:http';
import readline from 'node:readline';
import WebSocket from 'ws';

type Outcome = 'open' | 'reset' | number;
const port = Number(process.argv[2]);
const sockets: WebSocket[] = [];
const streams: http.ClientRequest[] = [];

function ws(addr: string, auth: string | null): Promise<Outcome> {
  return new Promise((resolve) => {
    const s = new WebSocket(`ws://127.0.0.1:${port}/chat.ashx?op=socket`, {
      localAddress: addr,
      headers: auth ? { authorization: auth } : {},
      handshakeTimeout: 30_000,
    });
    s.on('open', () => {
      sockets.push(s);
      resolve('open');
    });
    s.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      s.terminate();
    });
    s.on('error', () => resolve('reset'));
  });
}

function sse(addr: string, auth: string | null): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = http.get(
      { host: '127.0.0.1', port, path: '/api.ashx/v1/events', localAddress: addr, agent: false, headers: auth ? { authorization: auth } : {} },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          resolve(res.statusCode ?? 0);
          return;
        }
        streams.push(req);
        res.once('data', () => resolve('open'));
      },
    );
    req.on('error', () => resolve('reset'));
  });
}

interface Command {
  id: number;
  ws?: { addr: string; auth: string | null }[];
  sse?: { addr: string; auth: string | null }[];
  close?: boolean;
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const c = JSON.parse(line) as Command;
  const answer = (body: object) => process.stdout.write(JSON.stringify({ id: c.id, ...body }) + '\n');
  if (c.ws) void Promise.all(c.ws.map((a) => ws(a.addr, a.auth))).then((outcomes) => answer({ outcomes }));
  else if (c.sse) void Promise.all(c.sse.map((a) => sse(a.addr, a.auth))).then((outcomes) => answer({ outcomes }));
  else if (c.close) {
    for (const s of sockets.splice(0)) s.close();
    for (const r of streams.splice(0)) r.destroy();
    answer({});
  }
});
process.stdin.on('end', () => process.exit(0));
