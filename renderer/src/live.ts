import { accessToken } from './auth.ts';
import { tenantHeaders } from './tenant.ts';

export interface LiveEvent {
  id: number;
  name: string;
  data: Record<string, unknown>;
  ts: string;
}

export interface PluginStatus {
  state: string;
  required: boolean;
  error?: string;
  health?: { status: string; reason?: string; detail?: Record<string, unknown> };
}

/** A passing change that is not a stored event (not replayed after a reconnect). */
export interface LiveNotice {
  name: string;
  data: Record<string, unknown>;
}

export interface LiveHandlers {
  onEvent(e: LiveEvent): void;
  onNotice(n: LiveNotice): void;
  onStatus(s: Record<string, PluginStatus>, masterKey: string | undefined): void;
  onReset(): void;
  onConnection(up: boolean): void;
}

/**
 * The appliance's live feed (GET /api.ashx/v1/events, text/event-stream) read with fetch, so the
 * bearer goes in a header. It reconnects by itself with backoff and resumes after the last event
 * id it saw: the server replays what was missed, so no event is lost across a drop.
 */
export function connectLive(h: LiveHandlers): () => void {
  let lastId: number | undefined;
  let stopped = false;
  let ctrl: AbortController | undefined;
  let delay = 500;

  const frame = (raw: string) => {
    let event = 'message';
    let id: string | undefined;
    const data: string[] = [];
    for (const line of raw.split('\n')) {
      if (line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const k = i === -1 ? line : line.slice(0, i);
      const v = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (k === 'event') event = v;
      else if (k === 'id') id = v;
      else if (k === 'data') data.push(v);
    }
    if (!data.length) return;
    const body = JSON.parse(data.join('\n')) as unknown;
    if (event === 'hello') lastId ??= (body as { lastId: number }).lastId;
    else if (event === 'status') {
      const st = body as { plugins: Record<string, PluginStatus>; masterKey?: string };
      h.onStatus(st.plugins, st.masterKey);
    } else if (event === 'reset') h.onReset();
    else if (event === 'notice') h.onNotice(body as LiveNotice);
    else {
      if (id) lastId = Number(id);
      h.onEvent(body as LiveEvent);
    }
  };

  const run = async () => {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const token = await accessToken();
        const headers: Record<string, string> = { Accept: 'text/event-stream' };
        if (token) headers.Authorization = `Bearer ${token}`;
        Object.assign(headers, tenantHeaders('/api.ashx/v1/events'));
        if (lastId !== undefined) headers['Last-Event-ID'] = String(lastId);
        const r = await fetch('/api.ashx/v1/events', { headers, signal: ctrl.signal });
        if (r.status === 401) await accessToken(true);
        if (!r.ok || !r.body) throw new Error(`live feed answered ${r.status}`);
        h.onConnection(true);
        delay = 500;
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) !== -1) {
            frame(buf.slice(0, cut));
            buf = buf.slice(cut + 2);
          }
        }
      } catch {
        // Dropped or refused: fall through to the backoff and try again.
      }
      if (stopped) return;
      h.onConnection(false);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  };
  void run();
  return () => {
    stopped = true;
    ctrl?.abort();
  };
}
