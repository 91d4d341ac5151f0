/**
 * Gemini Live API adapter (WebSocket `BidiGenerateContent`, v1beta), following the public
 * reference: first message `setup`, wait for `setupComplete`, then `realtimeInput` audio at
 * 16 kHz PCM16 and `serverContent` audio at 24 kHz. `goAway` is answered by opening a new
 * session with the latest `sessionResumptionUpdate` handle and swapping over.
 */
import { EventEmitter } from 'node:events';
import WebSocket from 'ws';
import { CALL_TOOLS, type EngineConfig, type EngineEvents, type ToolCall, type VoiceEngine } from './types.ts';
import { pcmFromBytes, pcmToBytes } from '../media/audio.ts';

export const GEMINI_LIVE_URL = 'wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';

/** Narrow view of the server messages we use (the API sends one top-level field per message). */
interface ServerMessage {
  setupComplete?: object;
  serverContent?: {
    modelTurn?: { parts?: { inlineData?: { mimeType?: string; data?: string }; text?: string }[] };
    inputTranscription?: { text?: string };
    outputTranscription?: { text?: string };
    interrupted?: boolean;
    turnComplete?: boolean;
    generationComplete?: boolean;
  };
  toolCall?: { functionCalls?: { id?: string; name?: string; args?: Record<string, unknown> }[] };
  toolCallCancellation?: { ids?: string[] };
  goAway?: { timeLeft?: string };
  sessionResumptionUpdate?: { newHandle?: string; resumable?: boolean };
  usageMetadata?: { promptTokenCount?: number; responseTokenCount?: number; totalTokenCount?: number };
}

export class GeminiLiveEngine extends EventEmitter<EngineEvents> implements VoiceEngine {
  readonly inputRate = 16000;
  readonly outputRate = 24000;
  private ws: WebSocket | null = null;
  private handle: string | null = null;
  private closing = false;
  private reconnecting = false;
  private pendingAudio: Int16Array[] = [];
  private pendingSamples = 0;
  /**
   * Samples per realtimeInput message: 80 ms batches (12.5 messages/s per call) keep the
   * WebSocket cost low at 200 calls while adding well under a syllable to barge-in detection.
   */
  private readonly batchSamples = 1280;

  constructor(
    private readonly cfg: EngineConfig,
    private readonly envUrl = process.env.SOVCOMMS_AI_ENGINE_URL,
    private readonly setupTimeoutMs = 10_000,
  ) {
    super();
  }

  private url(): string {
    const base = this.cfg.url || this.envUrl || GEMINI_LIVE_URL;
    const u = new URL(base);
    if (this.cfg.apiKey && !u.searchParams.has('key')) u.searchParams.set('key', this.cfg.apiKey);
    return u.toString();
  }

  private setupMessage(): object {
    const model = this.cfg.model.startsWith('models/') ? this.cfg.model : `models/${this.cfg.model}`;
    return {
      setup: {
        model,
        generationConfig: {
          responseModalities: ['AUDIO'],
          speechConfig: {
            voiceConfig: { prebuiltVoiceConfig: { voiceName: this.cfg.voice } },
            languageCode: this.cfg.language,
          },
        },
        systemInstruction: { parts: [{ text: this.cfg.systemPrompt }] },
        tools: [{ functionDeclarations: CALL_TOOLS }],
        inputAudioTranscription: {},
        outputAudioTranscription: {},
        sessionResumption: this.handle ? { handle: this.handle } : {},
      },
    };
  }

  /** Opens one socket and resolves on setupComplete; rejects with the close reason otherwise. */
  private open(onReady: (ws: WebSocket) => void): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url(), { perMessageDeflate: false, handshakeTimeout: this.setupTimeoutMs });
      let ready = false;
      const timer = setTimeout(() => {
        if (!ready) {
          ws.terminate();
          reject(new Error('AI engine setup timed out'));
        }
      }, this.setupTimeoutMs);
      ws.on('open', () => ws.send(JSON.stringify(this.setupMessage())));
      ws.on('message', (data: WebSocket.RawData) => {
        let msg: ServerMessage;
        try {
          msg = JSON.parse(Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8')) as ServerMessage;
        } catch {
          return; // not JSON: ignore rather than kill the call
        }
        if (!ready) {
          if (msg.setupComplete) {
            ready = true;
            clearTimeout(timer);
            // Swap synchronously: the next frames may already be in this same read.
            onReady(ws);
            resolve(ws);
          }
          return;
        }
        if (ws === this.ws) this.onMessage(msg);
      });
      ws.on('close', (code: number, reason: Buffer) => {
        clearTimeout(timer);
        const text = reason.toString('utf8') || `WebSocket closed (${code})`;
        if (!ready) {
          reject(new Error(`AI engine closed ${code}: ${text}`));
          return;
        }
        if (ws !== this.ws || this.closing) return;
        // 1000 after our own close is normal; anything else mid-call ends the session.
        this.ws = null;
        this.emit('closed', code === 1000 ? null : `AI engine closed ${code}: ${text}`);
      });
      ws.on('error', (err: Error) => {
        if (!ready) {
          clearTimeout(timer);
          reject(new Error(`AI engine connection failed: ${err.message}`));
        }
      });
    });
  }

  async connect(): Promise<void> {
    await this.open((ws) => {
      this.ws = ws;
      this.flushBacklog(ws);
    });
  }

  private onMessage(msg: ServerMessage): void {
    const sc = msg.serverContent;
    if (sc) {
      for (const part of sc.modelTurn?.parts ?? []) {
        const d = part.inlineData;
        if (d?.data && (d.mimeType ?? '').startsWith('audio/pcm')) this.emit('audio', pcmFromBytes(Buffer.from(d.data, 'base64')));
      }
      if (sc.inputTranscription?.text) this.emit('inputTranscript', sc.inputTranscription.text);
      if (sc.outputTranscription?.text) this.emit('outputTranscript', sc.outputTranscription.text);
      if (sc.interrupted) this.emit('interrupted');
      if (sc.turnComplete) this.emit('turnComplete');
    }
    if (msg.toolCall?.functionCalls?.length) {
      const calls: ToolCall[] = msg.toolCall.functionCalls.map((c) => ({ id: c.id ?? '', name: c.name ?? '', args: c.args ?? {} }));
      this.emit('toolCall', calls);
    }
    if (msg.usageMetadata) {
      const u = msg.usageMetadata;
      this.emit('usage', { promptTokens: u.promptTokenCount ?? 0, responseTokens: u.responseTokenCount ?? 0, totalTokens: u.totalTokenCount ?? 0 });
    }
    if (msg.sessionResumptionUpdate?.newHandle && msg.sessionResumptionUpdate.resumable !== false) this.handle = msg.sessionResumptionUpdate.newHandle;
    if (msg.goAway) void this.resume();
  }

  /** goAway: open a resumed session, then retire the old one (it stays usable until then). */
  private async resume(): Promise<void> {
    if (this.reconnecting || this.closing) return;
    this.reconnecting = true;
    const old = this.ws;
    try {
      await this.open((next) => {
        if (this.closing) {
          next.close(1000);
          return;
        }
        this.ws = next;
        old?.close(1000);
        this.flushBacklog(next);
      });
    } catch (err) {
      if (this.ws === old) {
        this.ws = null;
        old?.close(1000);
        this.emit('closed', `AI engine resumption failed: ${(err as Error).message}`);
      }
    } finally {
      this.reconnecting = false;
    }
  }

  /**
   * Messages sent before setupComplete (the far end often answers before the engine handshake
   * is done; DTMF or a quick "hello?" can come then) wait in a bounded backlog (~2 s of audio).
   */
  private backlog: string[] = [];
  private send(obj: object): void {
    const ws = this.ws;
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj));
    else if (!this.closing && this.backlog.length < 60) this.backlog.push(JSON.stringify(obj));
  }
  private flushBacklog(ws: WebSocket): void {
    for (const m of this.backlog.splice(0)) ws.send(m);
  }

  begin(): void {
    // clientContent with turnComplete makes the model take the first turn (it speaks first).
    this.send({
      clientContent: {
        turns: [{ role: 'user', parts: [{ text: 'The call has just been answered. Greet the person now and follow your instructions.' }] }],
        turnComplete: true,
      },
    });
  }

  sendAudio(pcm: Int16Array): void {
    this.pendingAudio.push(pcm);
    this.pendingSamples += pcm.length;
    if (this.pendingSamples < this.batchSamples) return;
    const all = new Int16Array(this.pendingSamples);
    let off = 0;
    for (const p of this.pendingAudio) {
      all.set(p, off);
      off += p.length;
    }
    this.pendingAudio = [];
    this.pendingSamples = 0;
    this.send({ realtimeInput: { audio: { data: pcmToBytes(all).toString('base64'), mimeType: `audio/pcm;rate=${this.inputRate}` } } });
  }

  sendToolResponse(call: ToolCall, response: Record<string, unknown>): void {
    this.send({ toolResponse: { functionResponses: [{ id: call.id, name: call.name, response }] } });
  }

  sendText(text: string): void {
    this.send({ realtimeInput: { text } });
  }

  close(): void {
    this.closing = true;
    const ws = this.ws;
    this.ws = null;
    if (ws && (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING)) ws.close(1000);
  }
}
