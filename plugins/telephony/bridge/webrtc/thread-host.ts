/**
 * The main thread's side of the WebRTC thread (thread.ts): one worker for every room, and a
 * `RoomLeg` per room that forwards to it. Started on the first room, so a bridge that carries
 * only SIP calls never loads werift.
 */
import { Worker } from 'node:worker_threads';
import { EMPTY_WEBRTC_METRICS, type PlayRate, type RoomLeg, type WebRtcCodec, type WebRtcHandlers, type WebRtcMetrics, type WebRtcOptions } from './leg.ts';
import type { ToWebRtcThread, WebRtcThreadData } from './thread.ts';
import type { GcStats } from './gc-stats.ts';

type FromThread =
  | { op: 'priority'; priority: string }
  | { op: 'gc'; stats: GcStats }
  | { op: 'answer'; id: number; sdp: string; codec: WebRtcCodec | null }
  | { op: 'error'; id: number; message: string }
  | { op: 'audio'; id: number; pcm: Int16Array }
  | { op: 'connected'; id: number }
  | { op: 'gone'; id: number; why: string }
  | { op: 'voice'; id: number }
  | { op: 'drained'; id: number }
  | { op: 'stopped'; id: number; metrics: WebRtcMetrics | null };

export interface WebRtcThreadOptions {
  webrtc: WebRtcOptions;
  nice?: number;
  rtPriority?: number;
  onPriority?: (priority: string) => void;
}

class ThreadLeg implements RoomLeg {
  codec: WebRtcCodec | null = null;
  /** Milliseconds of audio posted since the thread last reported the queue empty. */
  private queued = 0;
  private answered: { resolve: (sdp: string) => void; reject: (e: Error) => void } | null = null;
  private stopped: ((m: WebRtcMetrics) => void) | null = null;
  private stopping: Promise<WebRtcMetrics> | null = null;

  constructor(
    readonly id: number,
    private readonly host: WebRtcThreadHost,
    readonly h: WebRtcHandlers,
    private readonly mediaTimeoutMs: number,
  ) {}

  answer(offerSdp: string): Promise<string> {
    return new Promise((resolve, reject) => {
      this.answered = { resolve, reject };
      this.host.post({ op: 'open', id: this.id, offerSdp, mediaTimeoutMs: this.mediaTimeoutMs });
    });
  }
  play(pcm: Int16Array, rate: PlayRate = 8000): void {
    if (pcm.length === 0 || this.stopping) return;
    this.queued += pcm.length / (rate / 1000);
    this.host.post({ op: 'play', id: this.id, pcm, rate }, [pcm.buffer as ArrayBuffer]);
  }
  flush(): void {
    this.queued = 0;
    this.host.post({ op: 'flush', id: this.id });
  }
  /** What was queued since the thread last reported the queue empty (an upper bound). */
  get queuedMs(): number {
    return this.queued;
  }
  stop(): Promise<WebRtcMetrics> {
    this.stopping ??= new Promise((resolve) => {
      this.stopped = resolve;
      this.host.post({ op: 'stop', id: this.id });
    });
    return this.stopping;
  }

  onMessage(m: FromThread): void {
    switch (m.op) {
      case 'answer':
        this.codec = m.codec;
        this.answered?.resolve(m.sdp);
        return;
      case 'error':
        this.answered?.reject(new Error(m.message));
        this.host.forget(this.id);
        return;
      case 'audio':
        this.h.onAudio16k(m.pcm);
        return;
      case 'connected':
        this.h.onConnected();
        return;
      case 'gone':
        this.h.onGone(m.why);
        return;
      case 'voice':
        this.h.onVoice();
        return;
      case 'drained':
        this.queued = 0;
        this.h.onDrained?.();
        return;
      case 'stopped':
        this.host.forget(this.id);
        this.stopped?.(m.metrics ?? EMPTY_WEBRTC_METRICS);
        return;
      case 'gc':
      case 'priority':
        return; // the thread's own reports, read by the host, never a leg's
    }
  }
}

export class WebRtcThreadHost {
  private worker: Worker | null = null;
  private readonly legs = new Map<number, ThreadLeg>();
  private nextId = 1;
  priority = 'default';
  /** The thread's GC pauses so far (reported every second), null before it started. */
  gc: GcStats | null = null;

  constructor(private readonly o: WebRtcThreadOptions) {}

  /** Legs this thread carries (or is opening). */
  get size(): number {
    return this.legs.size;
  }
  get started(): boolean {
    return this.worker !== null;
  }

  open(h: WebRtcHandlers, mediaTimeoutMs = 10_000): RoomLeg {
    const leg = new ThreadLeg(this.nextId++, this, h, mediaTimeoutMs);
    this.legs.set(leg.id, leg);
    return leg;
  }

  post(m: ToWebRtcThread, transfer: ArrayBuffer[] = []): void {
    this.start().postMessage(m, transfer);
  }

  forget(id: number): void {
    this.legs.delete(id);
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const boot = new URL('../media/worker-boot.mjs', import.meta.url);
    const entry = new URL(`./thread${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
    const data: WebRtcThreadData = { entry, nice: this.o.nice ?? 0, rtPriority: this.o.rtPriority ?? 0, webrtc: this.o.webrtc };
    const w = new Worker(boot, { workerData: data, name: 'webrtc' });
    w.on('message', (m: FromThread) => {
      if (m.op === 'priority') {
        this.priority = m.priority;
        this.o.onPriority?.(m.priority);
        return;
      }
      if (m.op === 'gc') {
        this.gc = m.stats;
        return;
      }
      this.legs.get(m.id)?.onMessage(m);
    });
    w.on('error', (err) => {
      // The thread died: every room's media is gone. End them (as the visitors' leaving) and
      // start a new thread for the next room.
      this.worker = null;
      for (const leg of [...this.legs.values()]) {
        leg.onMessage({ op: 'error', id: leg.id, message: err.message });
        leg.onMessage({ op: 'gone', id: leg.id, why: `WebRTC thread failed: ${err.message}` });
        leg.onMessage({ op: 'stopped', id: leg.id, metrics: null });
      }
    });
    this.worker = w;
    return w;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate();
  }
}
