/**
 * The slow crowd of bench/slow-clients.bench.ts, in a process of its own: SIZE loopback
 * connections that trickle one byte a second and never complete a request (half slow headers,
 * half slow bodies of a public POST), each replaced at once when the server closes it. Driven over
 * IPC: `start`, `count`, `stop` each answer `{open, closedByServer}` (closes since the last start).
 * Usage: slow-crowd.ts PORT SIZE.
 */
import net from 'node:net';

export interface CrowdReply {
  open: number;
  closedByServer: number;
}

const port = Number(process.argv[2]);
const size = Number(process.argv[3]);
const sockets = new Set<net.Socket>();
let stopped = true;
let closedByServer = 0;
let timer: NodeJS.Timeout | undefined;

function connect(i: number): void {
  if (stopped) return;
  // Source addresses 127.0.1.1-250: the per-IP connection cap would otherwise turn most away.
  const s = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.1.${(i % 250) + 1}` });
  s.setNoDelay(true);
  s.on('connect', () => {
    if (i % 2) s.write('POST /oidc.ashx/token HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 65536\r\n\r\n');
    else s.write('GET /api.ashx/v1/auditlog HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
  });
  s.on('data', () => undefined);
  s.on('error', () => undefined);
  s.on('close', () => {
    sockets.delete(s);
    if (stopped) return;
    closedByServer++;
    setTimeout(() => connect(i), 50);
  });
  sockets.add(s);
}

process.on('message', (cmd: 'start' | 'count' | 'stop') => {
  if (cmd === 'start' && stopped) {
    stopped = false;
    closedByServer = 0;
    for (let i = 0; i < size; i++) connect(i);
    timer = setInterval(() => {
      for (const s of sockets) if (s.writable) s.write('x');
    }, 1000);
  } else if (cmd === 'stop') {
    stopped = true;
    clearInterval(timer);
    for (const s of sockets) s.destroy();
    sockets.clear();
  }
  process.send!({ open: sockets.size, closedByServer } satisfies CrowdReply);
});
process.on('disconnect', () => process.exit(0));
