/** Main-thread side of the media thread: one Worker for all calls, a MediaLeg proxy per call. */
import { Worker } from 'node:worker_threads';
import type { LegHandlers, LegMetrics, LegStart, MediaHost, MediaLeg } from './leg.ts';
import type { ToThread } from './thread.ts';

type FromThread =
  | { op: 'opened'; id: number; port: number }
  | { op: 'error'; id: number; message: string }
  | { op: 'audio'; id: number; pcm: Int16Array }
  | { op: 'dtmf'; id: number; digit: string }
  | { op: 'queue'; id: number; ms: number; plays: number }
  | { op: 'stopped'; id: number; metrics: LegMetrics | null };

const EMPTY: LegMetrics = { sendJitterP99Ms: 0, sendJitterMaxMs: 0, intervals: 0, lateFrames: 0, skippedSlots: 0, packetsSent: 0, packetsReceived: 0, rxLost: 0, firstAudioSentAt: null };

class ThreadLeg implements MediaLeg {
  handlers: LegHandlers | null = null;
  private plays = 0;
  private queued = 0;
  firstAudioSentAt: bigint | null = null;
  stopWaiter: ((m: LegMetrics) => void) | null = null;
  private stopping: Promise<LegMetrics> | null = null;

  constructor(
    private readonly host: ThreadMediaHost,
    readonly id: number,
    readonly port: number,
  ) {}

  start(o: LegStart, h: LegHandlers): void {
    this.handlers = h;
    this.host.post({ op: 'start', id: this.id, o });
  }
  play(pcm8k: Int16Array): void {
    if (pcm8k.length === 0) return;
    this.plays++;
    this.queued += pcm8k.length / 8;
    this.host.post({ op: 'play', id: this.id, pcm: pcm8k }, [pcm8k.buffer as ArrayBuffer]);
  }
  flush(): void {
    this.queued = 0;
    this.host.post({ op: 'flush', id: this.id });
  }
  /** A report counts only when the thread had seen every play we sent (no stale zero). */
  onQueue(ms: number, plays: number): void {
    if (plays === this.plays) this.queued = ms;
  }
  get queuedMs(): number {
    return this.queued;
  }
  stop(): Promise<LegMetrics> {
    if (!this.stopping) {
      this.stopping = new Promise<LegMetrics>((resolve) => {
        const t = setTimeout(() => resolve(EMPTY), 2000);
        this.stopWaiter = (m) => {
          clearTimeout(t);
          this.firstAudioSentAt = m.firstAudioSentAt;
          resolve(m);
        };
      });
      this.host.post({ op: 'stop', id: this.id });
    }
    return this.stopping;
  }
}

export class ThreadMediaHost implements MediaHost {
  private readonly worker: Worker;
  private nextId = 1;
  private readonly opening = new Map<number, { resolve: (l: MediaLeg) => void; reject: (e: Error) => void }>();
  private readonly legs = new Map<number, ThreadLeg>();
  private failed: Error | null = null;

  /** `nice`: scheduling priority asked for the media thread (Linux, needs CAP_SYS_NICE; 0 = leave). */
  constructor(min: number, max: number, host: string, nice = 0) {
    const boot = new URL('./worker-boot.mjs', import.meta.url);
    const entry = new URL(`./thread${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
    this.worker = new Worker(boot, { workerData: { entry, min, max, host, nice } });
    this.worker.on('message', (m: FromThread) => this.onMessage(m));
    this.worker.on('error', (err) => {
      // The media thread died: every call's media is gone. Fail fast instead of hanging.
      this.failed = err;
      for (const o of this.opening.values()) o.reject(err);
      this.opening.clear();
      throw err;
    });
  }

  post(m: ToThread, transfer: ArrayBuffer[] = []): void {
    this.worker.postMessage(m, transfer);
  }

  private onMessage(m: FromThread): void {
    switch (m.op) {
      case 'opened': {
        const o = this.opening.get(m.id);
        this.opening.delete(m.id);
        const leg = new ThreadLeg(this, m.id, m.port);
        this.legs.set(m.id, leg);
        o?.resolve(leg);
        return;
      }
      case 'error': {
        const o = this.opening.get(m.id);
        this.opening.delete(m.id);
        o?.reject(new Error(m.message));
        return;
      }
      case 'audio':
        this.legs.get(m.id)?.handlers?.onAudio16k(m.pcm);
        return;
      case 'dtmf':
        this.legs.get(m.id)?.handlers?.onDtmf(m.digit);
        return;
      case 'queue':
        this.legs.get(m.id)?.onQueue(m.ms, m.plays);
        return;
      case 'stopped': {
        const leg = this.legs.get(m.id);
        this.legs.delete(m.id);
        leg?.stopWaiter?.(m.metrics ?? EMPTY);
        return;
      }
    }
  }

  open(): Promise<MediaLeg> {
    if (this.failed) return Promise.reject(this.failed);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.opening.set(id, { resolve, reject });
      this.post({ op: 'open', id });
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
