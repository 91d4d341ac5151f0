/**
 * A local stand-in for the Gemini Live API (BidiGenerateContent) speaking its wire protocol:
 * JSON in binary WebSocket frames, `setup` (or `config`) first, `setupComplete`, `serverContent`
 * with 24 kHz PCM audio sent faster than real time, input/output transcriptions, `toolCall`,
 * `interrupted`, `turnComplete`, `usageMetadata`, `goAway`, `sessionResumptionUpdate`, and close
 * 1007 on a bad setup or key. It plays scripted conversations so tests never touch the internet.
 */
import { WebSocketServer, type WebSocket } from 'ws';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';

export type ScriptStep =
  /** Model speech: output transcription + `audioMs` of 24 kHz tone (`hz`, default 440), then turnComplete + usage. */
  | { say: string; audioMs?: number; chunkMs?: number; hz?: number }
  /** Waits until the caller has sent `ms` of audio (16 kHz PCM), then transcribes it as `text`. */
  | { hear: string; ms: number; timeoutMs?: number }
  /** A function call; waits for the matching toolResponse. */
  | { tool: 'end_call' | 'transfer_to_user' | 'report_voicemail' | 'callback_later'; args?: Record<string, unknown> }
  | { interrupted: true }
  | { goAway: true }
  | { wait: number }
  | { close: number; reason: string };

export interface FakeOptions {
  apiKey?: string;
  script: ScriptStep[];
  /** A script per API key (sessions with another key play `script`): several AIs from one fake. */
  scriptsByKey?: Record<string, ScriptStep[]>;
  /** Tokens reported in each usageMetadata. */
  usage?: { prompt: number; response: number };
  /** Keep the first this many ms of each session's incoming audio in `audioIn` (default 0: none). */
  keepAudioMs?: number;
}

export interface FakeSessionLog {
  setup: Record<string, unknown>;
  key: string | null;
  resumedFrom: string | null;
  audioBytesIn: number;
  realtimeMessages: number;
  clientContent: number;
  toolResponses: { id: string; name: string; response: unknown }[];
  /** realtimeInput.text messages (e.g. DTMF digits the bridge forwards). */
  texts: string[];
  /** WebSocket close code once the session closed. */
  closedWith: number | null;
  /** The caller's audio as received (16 kHz PCM16 LE), when `keepAudioMs` asks for it: its first ms. */
  audioIn: Buffer[];
}

interface Conversation {
  step: number;
  audioBytesIn: number;
  handle: string;
}

const SAMPLE_RATE_OUT = 24000;

export class GeminiLiveFake {
  private wss: WebSocketServer | null = null;
  readonly sessions: FakeSessionLog[] = [];
  private readonly conversations = new Map<string, Conversation>();
  url = '';

  constructor(private readonly o: FakeOptions) {}

  async start(): Promise<string> {
    this.wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
    await new Promise<void>((r) => this.wss!.once('listening', () => r()));
    const port = (this.wss.address() as AddressInfo).port;
    this.wss.on('connection', (ws, req) => this.onConnection(ws, new URL(req.url ?? '/', 'http://x')));
    this.url = `ws://127.0.0.1:${port}/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent`;
    return this.url;
  }

  async stop(): Promise<void> {
    if (!this.wss) return;
    for (const c of this.wss.clients) c.terminate();
    await new Promise<void>((r) => this.wss!.close(() => r()));
    this.wss = null;
  }

  private onConnection(ws: WebSocket, url: URL): void {
    const log: FakeSessionLog = {
      setup: {},
      key: url.searchParams.get('key'),
      resumedFrom: null,
      audioBytesIn: 0,
      realtimeMessages: 0,
      clientContent: 0,
      toolResponses: [],
      texts: [],
      closedWith: null,
      audioIn: [],
    };
    this.sessions.push(log);
    let conv: Conversation | null = null;
    let toolWaiter: ((id: string) => void) | null = null;
    let audioWaiter: (() => void) | null = null;
    let running = false;
    let closed = false;
    ws.on('close', (code) => {
      closed = true;
      log.closedWith = code;
    });
    const send = (msg: object) => {
      if (!closed) ws.send(Buffer.from(JSON.stringify(msg)), { binary: true });
    };

    const run = async () => {
      if (running || !conv) return;
      running = true;
      const c = conv;
      const script = (log.key !== null ? this.o.scriptsByKey?.[log.key] : undefined) ?? this.o.script;
      while (c.step < script.length && !closed) {
        const s = script[c.step];
        c.step++;
        if ('say' in s) {
          send({ serverContent: { outputTranscription: { text: s.say } } });
          const total = Math.round(((s.audioMs ?? 600) * SAMPLE_RATE_OUT) / 1000);
          const chunk = Math.round(((s.chunkMs ?? 100) * SAMPLE_RATE_OUT) / 1000);
          for (let off = 0; off < total && !closed; off += chunk) {
            const pcm = tone(off, Math.min(chunk, total - off), s.hz);
            send({ serverContent: { modelTurn: { parts: [{ inlineData: { mimeType: 'audio/pcm;rate=24000', data: pcm.toString('base64') } }] } } });
            // Faster than real time, as the real service: yield between chunks only.
            await new Promise((r) => setImmediate(r));
          }
          send({ serverContent: { generationComplete: true } });
          send({ serverContent: { turnComplete: true } });
          const u = this.o.usage ?? { prompt: 100, response: 50 };
          send({ usageMetadata: { promptTokenCount: u.prompt, responseTokenCount: u.response, totalTokenCount: u.prompt + u.response } });
        } else if ('hear' in s) {
          const need = (s.ms * 16000 * 2) / 1000;
          const deadline = Date.now() + (s.timeoutMs ?? 10_000);
          while (c.audioBytesIn < need && Date.now() < deadline && !closed) {
            await new Promise<void>((r) => {
              audioWaiter = r;
              setTimeout(r, 50);
            });
          }
          send({ serverContent: { inputTranscription: { text: s.hear } } });
        } else if ('tool' in s) {
          const id = `fc-${randomBytes(4).toString('hex')}`;
          const got = new Promise<void>((r) => {
            toolWaiter = (rid) => {
              if (rid === id) r();
            };
          });
          send({ toolCall: { functionCalls: [{ id, name: s.tool, args: s.args ?? {} }] } });
          await Promise.race([got, new Promise((r) => setTimeout(r, 10_000))]);
        } else if ('interrupted' in s) {
          send({ serverContent: { interrupted: true } });
        } else if ('goAway' in s) {
          send({ goAway: { timeLeft: '5s' } });
          running = false;
          return; // the client resumes on a new socket; the script continues there
        } else if ('wait' in s) {
          await new Promise((r) => setTimeout(r, s.wait));
        } else if ('close' in s) {
          ws.close(s.close, s.reason);
          return;
        }
      }
      running = false;
    };

    ws.on('message', (data: Buffer, isBinary: boolean) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
      } catch {
        ws.close(1007, 'Request contains an invalid argument.');
        return;
      }
      // eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator -- the parameter is deliberately unused
      void isBinary;
      if (!conv) {
        const setup = (msg.setup ?? msg.config) as Record<string, unknown> | undefined;
        const problem = validateSetup(setup);
        if (problem) return ws.close(1007, problem);
        if (this.o.apiKey !== undefined && log.key !== this.o.apiKey && !(log.key !== null && this.o.scriptsByKey?.[log.key])) {
          return ws.close(1007, 'API key not valid. Please pass a valid API key.');
        }
        log.setup = setup as Record<string, unknown>;
        const handle = (setup as { sessionResumption?: { handle?: string } }).sessionResumption?.handle ?? null;
        const prior = handle ? this.conversations.get(handle) : undefined;
        if (handle && !prior) return ws.close(1007, 'Invalid session resumption handle.');
        log.resumedFrom = handle;
        conv = prior ?? { step: 0, audioBytesIn: 0, handle: `h-${randomBytes(6).toString('hex')}` };
        this.conversations.set(conv.handle, conv);
        send({ setupComplete: {} });
        send({ sessionResumptionUpdate: { newHandle: conv.handle, resumable: true } });
        if (prior) void run();
        return;
      }
      if (msg.realtimeInput) {
        const ri = msg.realtimeInput as { audio?: { data?: string; mimeType?: string }; text?: string };
        log.realtimeMessages++;
        if (typeof ri.text === 'string') log.texts.push(ri.text);
        if (ri.audio?.data && ri.audio.mimeType === 'audio/pcm;rate=16000') {
          const bytes = Buffer.from(ri.audio.data, 'base64');
          const n = bytes.length;
          if (log.audioBytesIn < ((this.o.keepAudioMs ?? 0) * 32000) / 1000) log.audioIn.push(bytes);
          log.audioBytesIn += n;
          conv.audioBytesIn += n;
          (audioWaiter as (() => void) | null)?.();
        }
      } else if (msg.clientContent) {
        log.clientContent++;
        void run();
      } else if (msg.toolResponse) {
        const fr = (msg.toolResponse as { functionResponses?: { id: string; name: string; response: unknown }[] }).functionResponses ?? [];
        for (const r of fr) {
          log.toolResponses.push(r);
          (toolWaiter as ((id: string) => void) | null)?.(r.id);
        }
      }
    });
  }
}

function validateSetup(setup: Record<string, unknown> | undefined): string | null {
  if (!setup || typeof setup !== 'object') return 'Invalid JSON payload: the first message must be setup.';
  if (typeof setup.model !== 'string' || !setup.model.startsWith('models/')) return 'Invalid argument: model must be models/{model}.';
  const gc = setup.generationConfig as { responseModalities?: unknown } | undefined;
  if (gc?.responseModalities !== undefined && (!Array.isArray(gc.responseModalities) || !gc.responseModalities.every((m) => m === 'AUDIO' || m === 'TEXT'))) {
    return 'Invalid argument: generation_config.response_modalities.';
  }
  return null;
}

/** A tone (440 Hz unless told; PCM16 LE) continuing at sample offset `from`, so chunks join smoothly. */
function tone(from: number, n: number, hz = 440): Buffer {
  const buf = Buffer.allocUnsafe(n * 2);
  for (let i = 0; i < n; i++) buf.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * hz * (from + i)) / SAMPLE_RATE_OUT)), 2 * i);
  return buf;
}
