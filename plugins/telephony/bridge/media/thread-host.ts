/**
 * Main-thread side of the media threads (media/thread.ts): on Linux a sending thread and a
 * receiving thread sharing each call's RTP port, elsewhere one thread doing both; a MediaLeg
 * proxy per call.
 */
import { Worker } from 'node:worker_threads';
import { EMPTY_METRICS, type LegHandlers, type LegMetrics, type LegStart, type LegTarget, type MediaHost, type MediaLeg } from './leg.ts';
import type { MediaRole, ThreadData, ToThread } from './thread.ts';
import { RingWriter, ringFor } from './ring.ts';
import { legRate } from './audio.ts';
import { ToLegRate } from './resample.ts';
import type { PlayRate } from './leg.ts';
import { deriveSdes } from './sdes.ts';

type FromThread =
  | { op: 'priority'; priority: string }
  | { op: 'opened'; id: number; port: number }
  | { op: 'reserved'; id: number; port: number }
  | { op: 'error'; id: number; message: string }
  | { op: 'audio'; id: number; pcm: Int16Array }
  | { op: 'dtmf'; id: number; digit: string }
  | { op: 'timeout'; id: number }
  | { op: 'stopped'; id: number; metrics: Partial<LegMetrics> | null };

/** Bind attempts per call when another process takes a reserved port in between. */
const BIND_ATTEMPTS = 5;

export interface MediaThreadOptions {
  min: number;
  max: number;
  host: string;
  /** nice value asked for the media threads (Linux, needs CAP_SYS_NICE; 0 = leave). */
  nice?: number;
  /** SCHED_FIFO priority asked for the sending thread (needs CAP_SYS_NICE; 0 = none). */
  rtPriority?: number;
  /** Two threads (sender, receiver) or one; default: two on Linux, where SO_REUSEADDR allows it. */
  split?: boolean;
  /** RTCP report interval (default 5 s, RFC 3550 §6.2). */
  rtcpIntervalMs?: number;
  /** Told what scheduling each media thread obtained, once it knows. */
  onPriority?: (role: MediaRole, priority: string) => void;
}

/** One media worker and its pending requests. */
class MediaThread {
  readonly worker: Worker;
  priority = 'default';
  private readonly waiting = new Map<string, { resolve: (v: FromThread) => void; reject: (e: Error) => void }>();
  failed: Error | null = null;

  constructor(
    readonly role: MediaRole,
    private readonly o: MediaThreadOptions,
    private readonly onEvent: (m: FromThread) => void,
  ) {
    const boot = new URL('./worker-boot.mjs', import.meta.url);
    const entry = new URL(`./thread${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
    const data: ThreadData = {
      entry,
      role,
      min: o.min,
      max: o.max,
      host: o.host,
      nice: o.nice ?? 0,
      rtPriority: role === 'rx' ? 0 : (o.rtPriority ?? 0),
      rtcpIntervalMs: o.rtcpIntervalMs,
    };
    this.worker = new Worker(boot, { workerData: data, name: `media-${role}` });
    this.worker.on('message', (m: FromThread) => this.onMessage(m));
    this.worker.on('error', (err) => {
      // A media thread died: every call's media is gone. Fail fast instead of hanging.
      this.failed = err;
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
      throw err;
    });
  }

  post(m: ToThread): void {
    this.worker.postMessage(m);
  }

  /** Posts `m` and resolves with the thread's answer of kind `answer` (or rejects on `error`). */
  ask(m: ToThread, answer: FromThread['op']): Promise<FromThread> {
    if (this.failed) return Promise.reject(this.failed);
    return new Promise((resolve, reject) => {
      this.waiting.set(`${answer}:${m.id}`, { resolve, reject });
      this.waiting.set(`error:${m.id}`, { resolve, reject });
      this.post(m);
    });
  }

  private onMessage(m: FromThread): void {
    if (m.op === 'priority') {
      this.priority = m.priority;
      this.o.onPriority?.(this.role, m.priority);
      return;
    }
    if (m.op === 'error' || m.op === 'opened' || m.op === 'reserved') {
      const w = this.waiting.get(`${m.op}:${m.id}`);
      this.waiting.delete(`opened:${m.id}`);
      this.waiting.delete(`reserved:${m.id}`);
      this.waiting.delete(`error:${m.id}`);
      if (m.op === 'error') w?.reject(new Error(m.message));
      else w?.resolve(m);
      return;
    }
    this.onEvent(m);
  }
}

class ThreadLeg implements MediaLeg {
  handlers: LegHandlers | null = null;
  /** The playback ring (at the leg's rate, made at start once the codec is known) and its writer. */
  private sab: SharedArrayBuffer | null = null;
  private ring: RingWriter | null = null;
  /** Brings what play() gets to the ring's rate. */
  private to: ToLegRate | null = null;
  private kicked = false;
  firstAudioSentAt: bigint | null = null;
  /** Halves still to report after a stop, and what they reported. */
  pendingStops = 0;
  collected: Partial<LegMetrics> = {};
  stopWaiter: ((m: LegMetrics) => void) | null = null;
  private stopping: Promise<LegMetrics> | null = null;

  constructor(
    private readonly host: ThreadMediaHost,
    private readonly tx: MediaThread,
    private readonly rx: MediaThread | null,
    readonly id: number,
    readonly port: number,
  ) {}

  start(o: LegStart, h: LegHandlers): void {
    if (this.sab) return;
    this.handlers = h;
    const rate = legRate(o.codec);
    this.sab = ringFor(rate);
    this.ring = new RingWriter(this.sab);
    this.to = new ToLegRate(rate);
    const info = new SharedArrayBuffer(32); // SenderInfo: tx writes, RTCP on rx reads
    // SRTP session keys are derived here, once, not on the media threads: on the sending thread
    // the derivation (0.2-1.5 ms a leg) held back every call's next packet (media/sdes.ts).
    if (o.srtp && !o.srtp.session) o = { ...o, srtp: { ...o.srtp, session: deriveSdes(o.srtp) } };
    this.tx.post({ op: 'start', id: this.id, o, ring: this.sab, info });
    this.rx?.post({ op: 'start', id: this.id, o, ring: this.sab, info });
  }
  /** The rate of this leg's ring (8 kHz before start). */
  get rate(): 8000 | 16000 {
    return this.to?.rate ?? 8000;
  }
  play(pcm: Int16Array, rate: PlayRate = 8000): void {
    // Once bridged, another leg's receiver is the ring's only producer (single-producer ring).
    if (pcm.length === 0 || this.stopping || this.bridged || !this.ring || !this.to) return;
    if (this.ring.write(this.to.convert(pcm, rate))) this.host.pumpLater(this);
    if (!this.kicked) {
      // The sender re-phases its 20 ms grid for the first AI audio: tell it now rather than
      // letting it find the audio at its next tick.
      this.kicked = true;
      this.tx.post({ op: 'kick', id: this.id });
    }
  }
  /** Moves held-back audio into the ring; false once nothing is held. */
  pump(): boolean {
    return !this.stopping && !!this.ring?.pump();
  }
  flush(): void {
    this.ring?.flush();
  }
  /** The ring this leg plays from (another leg's receiver writes into it once bridged), once started. */
  get playbackRing(): SharedArrayBuffer | null {
    return this.sab;
  }
  private bridged = false;
  /** A leg of no media thread (a browser room's visitor) this leg's far-end audio goes to. */
  forwardTo: MediaLeg | null = null;
  bridgeTo(other: MediaLeg): void {
    const target = other instanceof ThreadLeg ? other : null;
    const ring = target?.playbackRing;
    if (!target || !ring) {
      // Not on the media threads: the far end's audio comes to this thread as usual (16 kHz
      // batches) and is played into `other` here; this leg's own playback stays ours to feed.
      this.ring?.flush();
      this.forwardTo = other;
      return;
    }
    this.bridged = true;
    this.ring?.flush(); // the AI's queued words are not for the new party
    (this.rx ?? this.tx).post({ op: 'forward', id: this.id, ring, rate: target.rate });
  }
  retarget(t: LegTarget): void {
    this.tx.post({ op: 'retarget', id: this.id, t });
    this.rx?.post({ op: 'retarget', id: this.id, t });
  }
  get queuedMs(): number {
    return this.ring ? this.ring.queued / (this.rate / 1000) : 0;
  }
  stop(): Promise<LegMetrics> {
    if (!this.stopping) {
      this.stopping = new Promise<LegMetrics>((resolve) => {
        const t = setTimeout(() => resolve(EMPTY_METRICS), 2000);
        this.stopWaiter = (m) => {
          clearTimeout(t);
          this.firstAudioSentAt = m.firstAudioSentAt;
          resolve(m);
        };
      });
      this.pendingStops = this.rx ? 2 : 1;
      this.tx.post({ op: 'stop', id: this.id });
      this.rx?.post({ op: 'stop', id: this.id });
    }
    return this.stopping;
  }
  /** One half reported its figures; the leg's are complete once both have. */
  onStopped(metrics: Partial<LegMetrics> | null): boolean {
    Object.assign(this.collected, metrics ?? {});
    if (--this.pendingStops > 0) return false;
    this.stopWaiter?.({ ...EMPTY_METRICS, ...this.collected });
    return true;
  }
}

export class ThreadMediaHost implements MediaHost {
  private readonly tx: MediaThread;
  private readonly rx: MediaThread | null;
  private nextId = 1;
  private readonly legs = new Map<number, ThreadLeg>();

  constructor(o: MediaThreadOptions) {
    const split = o.split ?? process.platform === 'linux';
    const onEvent = (m: FromThread) => this.onEvent(m);
    this.tx = new MediaThread(split ? 'tx' : 'both', o, onEvent);
    this.rx = split ? new MediaThread('rx', o, onEvent) : null;
  }

  /** Scheduling each media thread obtained (for the log and GET /stats). */
  get priorities(): Record<string, string> {
    const out: Record<string, string> = { [this.tx.role]: this.tx.priority };
    if (this.rx) out.rx = this.rx.priority;
    return out;
  }

  private onEvent(m: FromThread): void {
    switch (m.op) {
      case 'audio': {
        const leg = this.legs.get(m.id);
        if (leg?.forwardTo) leg.forwardTo.play(m.pcm, 16000);
        else leg?.handlers?.onAudio16k(m.pcm);
        return;
      }
      case 'dtmf':
        this.legs.get(m.id)?.handlers?.onDtmf(m.digit);
        return;
      case 'timeout':
        this.legs.get(m.id)?.handlers?.onMediaTimeout?.();
        return;
      case 'stopped': {
        const leg = this.legs.get(m.id);
        if (leg?.onStopped(m.metrics)) this.legs.delete(m.id);
        return;
      }
      case 'priority':
      case 'opened':
      case 'reserved':
      case 'error':
        return; // answers to ask() and the thread's own reports: settled where they are asked
    }
  }

  async open(): Promise<MediaLeg> {
    const id = this.nextId++;
    let port: number;
    if (!this.rx) {
      port = ((await this.tx.ask({ op: 'open', id }, 'opened')) as { port: number }).port;
    } else {
      // The receiving thread finds a free port; the sending thread binds it first and the
      // receiving thread last, so the datagrams go to the receiver (Linux: the socket bound last
      // wins among SO_REUSEADDR sockets). Another process may take the port in between: retry.
      for (let attempt = 1; ; attempt++) {
        port = ((await this.rx.ask({ op: 'reserve', id }, 'reserved')) as { port: number }).port;
        try {
          await this.tx.ask({ op: 'bind', id, port }, 'opened');
        } catch (err) {
          if (attempt < BIND_ATTEMPTS) continue;
          throw err;
        }
        try {
          await this.rx.ask({ op: 'bind', id, port }, 'opened');
          break;
        } catch (err) {
          this.tx.post({ op: 'stop', id });
          if (attempt >= BIND_ATTEMPTS) throw err;
        }
      }
    }
    const leg = new ThreadLeg(this, this.tx, this.rx, id, port);
    this.legs.set(id, leg);
    return leg;
  }

  /** Legs with audio held back from a full ring, topped up every 100 ms (the ring holds 4 s). */
  private readonly pumping = new Set<ThreadLeg>();
  private pumpTimer: NodeJS.Timeout | null = null;
  pumpLater(leg: ThreadLeg): void {
    this.pumping.add(leg);
    this.pumpTimer ??= setInterval(() => {
      for (const l of this.pumping) if (!l.pump()) this.pumping.delete(l);
      if (this.pumping.size === 0 && this.pumpTimer) {
        clearInterval(this.pumpTimer);
        this.pumpTimer = null;
      }
    }, 100);
  }

  async close(): Promise<void> {
    if (this.pumpTimer) clearInterval(this.pumpTimer);
    await Promise.all([this.tx.worker.terminate(), this.rx?.worker.terminate()]);
  }
}
