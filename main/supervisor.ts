/**
 * Runs the server (`sovcomms serve`, the very entry the headless appliance uses) in a child
 * process and keeps it running: waits for its `server-started` message and then for `/readyz`,
 * watches its health, restarts it with exponential backoff when it dies, and stops it cleanly
 * (the server drains requests, stops jobs and plugins, checkpoints the store) on quit.
 */
import type { ChildLike, ElectronShell } from './shell.ts';
import type { ServerState } from './tray.ts';

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  now(): number;
}

export const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
  now: () => Date.now(),
};

/** GET of a readiness URL: status and parsed JSON body, or null when nothing answered. */
export type Probe = (url: string) => Promise<{ status: number; body: unknown } | null>;

export interface SupervisorOptions {
  /** dist/bin/sovcomms.js */
  entry: string;
  /** Arguments after the entry (`serve --host ... --port ...`); asked anew before every start. */
  args: () => Promise<string[]>;
  env: () => Record<string, string>;
  probe: Probe;
  onState: (s: ServerState) => void;
  /** The server said where it listens (and, serving HTTPS, its certificate's fingerprint). */
  onStarted?: (info: { url: string; certFingerprint256: string | null }) => void;
  onOutput?: (line: string) => void;
  timers?: Timers;
  /** First restart delay; doubles per crash up to maxBackoffMs. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Up this long without a crash: the next crash starts the backoff afresh. */
  stableMs?: number;
  /** From fork to ready; past it the process is killed and restarted. */
  readyTimeoutMs?: number;
  readyPollMs?: number;
  /** Health watch once ready (tray: ready / degraded). */
  healthPollMs?: number;
  /** A clean stop waits this long for the process to exit before killing it. */
  stopTimeoutMs?: number;
}

interface ReadyzBody {
  status?: string;
  plugins?: Record<string, { state?: string; required?: boolean; health?: { status?: string } }>;
}

/** The plugins /readyz names as failed or degraded. */
export function failingPlugins(body: unknown): string[] {
  const b = body as ReadyzBody | null;
  if (!b || typeof b !== 'object' || !b.plugins) return [];
  return Object.entries(b.plugins)
    .filter(([, p]) => p.state === 'failed' || p.health?.status === 'degraded')
    .map(([name]) => name)
    .sort();
}

export class ServerSupervisor {
  state: ServerState = { kind: 'stopped' };
  url: string | null = null;
  /** Crashes since the last stable run. */
  crashes = 0;
  private child: ChildLike | null = null;
  private stopping = false;
  private startedAt = 0;
  private timer: unknown = null;
  private exitWaiters: (() => void)[] = [];
  private readonly t: Timers;
  private readonly o: Required<Omit<SupervisorOptions, 'onStarted' | 'onOutput' | 'timers'>> & Pick<SupervisorOptions, 'onStarted' | 'onOutput'>;

  constructor(
    private readonly shell: Pick<ElectronShell, 'forkUtility'>,
    o: SupervisorOptions,
  ) {
    this.t = o.timers ?? realTimers;
    this.o = {
      backoffMs: 1000,
      maxBackoffMs: 60_000,
      stableMs: 60_000,
      readyTimeoutMs: 120_000,
      readyPollMs: 250,
      healthPollMs: 5000,
      stopTimeoutMs: 20_000,
      ...o,
    };
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  private set(s: ServerState): void {
    // The health watch repeats itself: tell only changes.
    if (JSON.stringify(s) === JSON.stringify(this.state) && s.kind !== 'stopped') return;
    this.state = s;
    this.o.onState(s);
  }

  private clearTimer(): void {
    if (this.timer !== null) this.t.clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(ms: number, fn: () => void): void {
    this.clearTimer();
    this.timer = this.t.setTimeout(() => {
      this.timer = null;
      fn();
    }, ms);
  }

  /** Forks the server; resolves once forked (readiness is reported through onState). */
  async start(): Promise<void> {
    if (this.child || this.stopping) return;
    this.set({ kind: 'starting', attempt: this.crashes + 1 });
    const args = await this.o.args();
    if (this.stopping) return;
    const child = this.shell.forkUtility(this.o.entry, args, { env: this.o.env(), serviceName: 'sovcomms-server' });
    this.child = child;
    this.startedAt = this.t.now();
    this.url = null;
    const deadline = this.startedAt + this.o.readyTimeoutMs;
    child.onOutput((l) => this.o.onOutput?.(l));
    child.onMessage((m) => {
      const msg = m as { type?: string; url?: string; certFingerprint256?: string } | null;
      if (this.child !== child || msg?.type !== 'server-started' || typeof msg.url !== 'string') return;
      this.url = msg.url;
      this.o.onStarted?.({ url: msg.url, certFingerprint256: msg.certFingerprint256 ?? null });
      void this.pollReady(child, deadline);
    });
    child.onExit((code) => this.onExit(child, code));
    this.schedule(this.o.readyTimeoutMs, () => {
      if (this.child === child && this.state.kind === 'starting') {
        this.o.onOutput?.(`server not ready within ${this.o.readyTimeoutMs} ms: killing it`);
        child.kill();
      }
    });
  }

  private async pollReady(child: ChildLike, deadline: number): Promise<void> {
    if (this.child !== child || this.stopping || !this.url) return;
    const r = await this.o.probe(`${this.url}/readyz`);
    if (this.child !== child || this.stopping) return;
    const failing = r ? failingPlugins(r.body) : [];
    if (r && r.status === 200) {
      this.set(failing.length ? { kind: 'degraded', url: this.url, plugins: failing } : { kind: 'ready', url: this.url });
      this.schedule(this.o.healthPollMs, () => void this.pollReady(child, Infinity));
      return;
    }
    if (this.state.kind === 'ready' || this.state.kind === 'degraded') {
      // It was ready and no longer is: a required plugin went down, or the process stopped answering.
      this.set({ kind: 'degraded', url: this.url, plugins: failing.length ? failing : ['server'] });
    }
    if (this.t.now() >= deadline) return; // the ready timer kills it
    this.schedule(this.state.kind === 'starting' ? this.o.readyPollMs : this.o.healthPollMs, () => void this.pollReady(child, deadline));
  }

  private onExit(child: ChildLike, code: number): void {
    if (this.child !== child) return;
    this.child = null;
    this.url = null;
    this.clearTimer();
    const waiters = this.exitWaiters;
    this.exitWaiters = [];
    for (const w of waiters) w();
    if (this.stopping) {
      this.set({ kind: 'stopped' });
      return;
    }
    if (this.t.now() - this.startedAt >= this.o.stableMs) this.crashes = 0;
    this.crashes++;
    const delay = Math.min(this.o.backoffMs * 2 ** (this.crashes - 1), this.o.maxBackoffMs);
    this.set({ kind: 'restarting', inMs: delay, reason: `exit code ${code}` });
    this.schedule(delay, () => void this.start());
  }

  /**
   * Clean stop: asks the server to shut down (it drains, stops plugins and checkpoints), waits for
   * it to exit, kills it only past stopTimeoutMs. No restart follows.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.clearTimer();
    const child = this.child;
    if (!child) {
      this.set({ kind: 'stopped' });
      return;
    }
    const exited = new Promise<void>((r) => this.exitWaiters.push(r));
    child.postMessage({ type: 'shutdown' });
    let killer: unknown = null;
    const timedOut = new Promise<void>((r) => {
      killer = this.t.setTimeout(() => {
        this.o.onOutput?.(`server did not stop within ${this.o.stopTimeoutMs} ms: killing it`);
        child.kill();
        r();
      }, this.o.stopTimeoutMs);
    });
    await Promise.race([exited, timedOut]);
    this.t.clearTimeout(killer);
    await exited;
  }
}
