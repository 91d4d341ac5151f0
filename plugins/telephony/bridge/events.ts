/**
 * Bridge → core event delivery (CONTROL-API.md): one event per POST, in order, `seq` rising per
 * process, retried 1 s, 2 s, 4 s … capped at 30 s until a 2xx. The core de-duplicates by
 * (X-Bridge-Instance, seq), so a retry after a lost answer is harmless.
 */
import type { BridgeEventFields, BridgeEventType } from '../control.ts';
import { log } from './log.ts';

/** The envelope every event carries; the kind's own fields (control.ts) ride along. */
interface Envelope<T extends BridgeEventType = BridgeEventType> {
  seq: number;
  type: T;
  callId: string;
  ts: string;
}
/** One event as it goes on the wire: the envelope plus the fields control.ts defines for its kind. */
export type SentEvent<T extends BridgeEventType = BridgeEventType> = Envelope<T> & BridgeEventFields<T>;

/** Emits a callback event; its fields are the contract's for that kind (control.ts). */
export type EmitFn = <T extends BridgeEventType>(type: T, callId: string, fields: BridgeEventFields<T>) => void;

export class EventSender {
  private seq = 0;
  private readonly queue: Envelope[] = [];
  private running = false;
  private stopped = false;
  private wake: (() => void) | null = null;
  delivered = 0;

  constructor(
    private readonly url: string | undefined,
    private readonly token: string,
    readonly instanceId: string,
    private readonly baseDelayMs = 1000,
    private readonly maxDelayMs = 30_000,
  ) {}

  /** Queues one event; its fields are typed by the contract, so the bridge cannot emit what the core refuses. */
  emit<T extends BridgeEventType>(type: T, callId: string, fields: BridgeEventFields<T>): SentEvent<T> {
    const ev: SentEvent<T> = { seq: ++this.seq, type, callId, ts: new Date().toISOString(), ...fields };
    if (!this.url) return ev;
    this.queue.push(ev);
    void this.pump();
    return ev;
  }

  /**
   * Loads fetch's implementation before the first call: Node compiles its bundled HTTP client on
   * the first `fetch`, which took 0.7-2.5 s on a loaded 2-core machine, and the first event of the
   * first call (a room's `answered`) paid it on the thread that carries every call's engine.
   */
  async warm(): Promise<void> {
    await fetch('data:,')
      .then((r) => r.arrayBuffer())
      .catch(() => undefined);
  }

  get pending(): number {
    return this.queue.length;
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length && !this.stopped) {
        const ev = this.queue[0];
        let delay = this.baseDelayMs;
        let tries = 0;
        while (!this.stopped) {
          if (await this.post(ev)) break;
          if (tries++ === 0) log('warn', 'event delivery to the core failed; retrying', { seq: ev.seq, type: ev.type, callId: ev.callId });
          await new Promise<void>((r) => {
            const t = setTimeout(r, delay);
            this.wake = () => {
              clearTimeout(t);
              r();
            };
          });
          this.wake = null;
          delay = Math.min(delay * 2, this.maxDelayMs);
        }
        this.queue.shift();
        this.delivered++;
      }
    } finally {
      this.running = false;
    }
  }

  private async post(ev: Envelope): Promise<boolean> {
    try {
      const res = await fetch(this.url as string, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.token}`, 'x-bridge-instance': this.instanceId },
        body: JSON.stringify(ev),
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer().catch(() => undefined);
      return res.status >= 200 && res.status < 300;
    } catch {
      return false;
    }
  }

  /** Waits (bounded) until queued events are delivered, e.g. before a clean exit. */
  async drain(timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.queue.length && Date.now() < until) {
      this.wake?.();
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
  }
}
