import { fork, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import type { ChildLike, ElectronShell, ForkOptions, MenuItemSpec, TrayModel, WindowLike, WindowOptions } from '../../main/shell.ts';
import type { Timers } from '../../main/supervisor.ts';

/** Timers the test moves by hand. */
export class ManualTimers implements Timers {
  t = 0;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.pending.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.pending.delete(h as number);
  }
  now(): number {
    return this.t;
  }
  /** Delays of the timers now pending, soonest first. */
  get delays(): number[] {
    return [...this.pending.values()].map((p) => p.at - this.t).sort((a, b) => a - b);
  }
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      const next = [...this.pending.entries()].sort((a, b) => a[1].at - b[1].at)[0];
      if (!next || next[1].at > end) break;
      this.pending.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
      await flush();
    }
    this.t = end;
    await flush();
  }
}

export const flush = async () => {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
};

/** A server process the test drives: it says what the real one would say. */
export class FakeChild implements ChildLike {
  static nextPid = 1000;
  readonly pid = FakeChild.nextPid++;
  readonly sent: unknown[] = [];
  killed = false;
  private msg: ((m: unknown) => void)[] = [];
  private exit: ((c: number) => void)[] = [];
  constructor(
    readonly modulePath: string,
    readonly args: string[],
    readonly o: ForkOptions,
  ) {}
  postMessage(m: unknown): void {
    this.sent.push(m);
  }
  kill(): boolean {
    this.killed = true;
    queueMicrotask(() => this.emitExit(143));
    return true;
  }
  onMessage(cb: (m: unknown) => void): void {
    this.msg.push(cb);
  }
  onExit(cb: (c: number) => void): void {
    this.exit.push(cb);
  }
  private out: ((l: string) => void)[] = [];
  onOutput(cb: (l: string) => void): void {
    this.out.push(cb);
  }
  emitOutput(line: string): void {
    for (const f of this.out) f(line);
  }
  emitMessage(m: unknown): void {
    for (const f of this.msg) f(m);
  }
  emitExit(code: number): void {
    const l = this.exit;
    this.exit = [];
    for (const f of l) f(code);
  }
}

/** A Node child (child_process.fork) as a ChildLike: the real server, without Electron. */
export function nodeChild(modulePath: string, args: string[], o: ForkOptions): ChildLike & { child: ChildProcess } {
  const child = fork(modulePath, args, { env: { ...process.env, ...o.env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  return {
    child,
    get pid() {
      return child.pid;
    },
    postMessage: (m) => child.send(m as object),
    kill: () => child.kill('SIGKILL'),
    onMessage: (cb) => child.on('message', cb),
    onExit: (cb) => child.on('exit', (code, signal) => cb(code ?? (signal ? 128 : 0))),
    onOutput: (cb) => {
      for (const s of [child.stdout, child.stderr]) if (s) readline.createInterface({ input: s }).on('line', cb);
    },
  };
}

export interface FakeWindow extends WindowLike {
  options: WindowOptions;
  loaded: string[];
  shown: number;
  destroyed: boolean;
  close(): void;
}

export class FakeShell implements ElectronShell {
  platform: NodeJS.Platform = 'linux';
  lock = true;
  secondInstance: (() => void) | null = null;
  activate: (() => void) | null = null;
  beforeQuit: ((prevent: () => void) => void) | null = null;
  quitCalls = 0;
  openAtLogin = false;
  tray: TrayModel | null = null;
  trayHistory: TrayModel[] = [];
  trayAction: ((id: string) => void) | null = null;
  menu: MenuItemSpec[] = [];
  windows: FakeWindow[] = [];
  children: ChildLike[] = [];
  ipc = new Map<string, (senderUrl: string) => unknown>();
  opened: string[] = [];
  external: string[] = [];
  clipboard: string[] = [];
  messages: { kind: string; title: string; message: string }[] = [];
  abouts: unknown[] = [];
  keyStore = true;
  fork: (modulePath: string, args: string[], o: ForkOptions) => ChildLike = (m, a, o) => new FakeChild(m, a, o);

  constructor(readonly userData: string) {}

  app: ElectronShell['app'] = {
    requestSingleInstanceLock: () => this.lock,
    onSecondInstance: (cb) => {
      this.secondInstance = cb;
    },
    whenReady: async () => undefined,
    quit: () => {
      this.quitCalls++;
      let prevented = false;
      this.beforeQuit?.(() => {
        prevented = true;
      });
      return prevented;
    },
    exit: () => undefined,
    onBeforeQuit: (cb) => {
      this.beforeQuit = cb;
    },
    onWindowAllClosed: () => undefined,
    onActivate: (cb) => {
      this.activate = cb;
    },
    getPath: (name) => (name === 'logs' ? `${this.userData}/logs` : this.userData),
    getVersion: () => '0.1.0',
    setOpenAtLogin: (v) => {
      this.openAtLogin = v;
    },
    getOpenAtLogin: () => this.openAtLogin,
  };

  createWindow(options: WindowOptions): FakeWindow {
    const closed: (() => void)[] = [];
    const w: FakeWindow = {
      options,
      loaded: [],
      shown: 0,
      destroyed: false,
      loadURL: async (u) => {
        w.loaded.push(u);
      },
      show: () => {
        w.shown++;
      },
      focus: () => undefined,
      restore: () => undefined,
      isMinimized: () => false,
      isDestroyed: () => w.destroyed,
      onClosed: (cb) => closed.push(cb),
      close: () => {
        w.destroyed = true;
        for (const c of closed) c();
      },
    };
    this.windows.push(w);
    return w;
  }
  setTray(model: TrayModel, onAction: (id: string) => void): void {
    this.tray = model;
    this.trayHistory.push(model);
    this.trayAction = onAction;
  }
  setAppMenu(template: MenuItemSpec[]): void {
    this.menu = template;
  }
  safeStorage = {
    isEncryptionAvailable: () => this.keyStore,
    // Reversible, and visibly not the plain text.
    encryptString: (s: string) => Buffer.from(`sealed:${Buffer.from(s).toString('hex')}`),
    decryptString: (b: Buffer) => Buffer.from(b.toString().replace(/^sealed:/, ''), 'hex').toString(),
  };
  forkUtility(modulePath: string, args: string[], o: ForkOptions): ChildLike {
    const c = this.fork(modulePath, args, o);
    this.children.push(c);
    return c;
  }
  handleIpc(channel: string, fn: (senderUrl: string) => unknown): void {
    this.ipc.set(channel, fn);
  }
  openPath = async (p: string) => {
    this.opened.push(p);
    return '';
  };
  openExternal = async (u: string) => {
    this.external.push(u);
  };
  writeClipboard(t: string): void {
    this.clipboard.push(t);
  }
  showAbout(info: unknown): void {
    this.abouts.push(info);
  }
  showMessage(kind: 'info' | 'error', title: string, message: string): void {
    this.messages.push({ kind, title, message });
  }
}
