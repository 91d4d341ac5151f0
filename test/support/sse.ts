import http from 'node:http';

/** One Server-Sent Events frame as the console reads it. */
export interface Frame {
  event: string;
  id?: string;
  data: unknown;
}

export interface LiveStream {
  frames: Frame[];
  status: Promise<number>;
  close(): void;
  ended: Promise<void>;
}

/** Opens the live feed (GET /api.ashx/v1/events) on loopback and collects its frames until closed. */
export function openLive(port: number, host: string, key: string, headers: Record<string, string> = {}): LiveStream {
  const frames: Frame[] = [];
  let resolveStatus!: (n: number) => void;
  let resolveEnd!: () => void;
  const status = new Promise<number>((r) => (resolveStatus = r));
  const ended = new Promise<void>((r) => (resolveEnd = r));
  const req = http.get({ host: '127.0.0.1', port, path: '/api.ashx/v1/events', headers: { Host: host, Authorization: `Bearer ${key}`, ...headers } }, (res) => {
    resolveStatus(res.statusCode ?? 0);
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => {
      buf += c;
      let cut: number;
      while ((cut = buf.indexOf('\n\n')) !== -1) {
        const raw = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const f: Frame = { event: 'message', data: null };
        for (const line of raw.split('\n')) {
          if (line.startsWith('event: ')) f.event = line.slice(7);
          else if (line.startsWith('id: ')) f.id = line.slice(4);
          else if (line.startsWith('data: ')) f.data = JSON.parse(line.slice(6));
        }
        if (f.data !== null) frames.push(f);
      }
    });
    res.on('end', () => resolveEnd());
    res.on('close', () => resolveEnd());
  });
  req.on('error', () => resolveEnd());
  return { frames, status, close: () => req.destroy(), ended };
}
