/**
 * The desktop appliance: one instance per user, the server supervised in a utility process with
 * its data under the OS's per-user app data, a hardened window on the console once the server is
 * ready, a tray with the server's state, the application menu, start on login, and a clean stop
 * of the server on quit. Written against ElectronShell only (tested with a fake of it).
 */
import fs from 'node:fs';
import path from 'node:path';
import { IPC, type DesktopInfo } from './ipc.ts';
import { lanAddress as findLanAddress } from './lan.ts';
import { masterKey, type KeyStoreChoice } from './master-key.ts';
import { appMenu } from './menu.ts';
import { consolePolicy, normaliseFingerprint, webPreferences, type PolicyState } from './policy.ts';
import { choosePort } from './ports.ts';
import { loopbackUrl } from './probe.ts';
import { loadSettings, saveSettings, type DesktopSettings } from './settings.ts';
import type { ElectronShell, WindowLike } from './shell.ts';
import { ServerSupervisor, type Probe, type Timers } from './supervisor.ts';
import { TRAY_ACTIONS, trayModel, type ServerState } from './tray.ts';

export const PRODUCT_NAME = 'Sovereign Communications Appliance';
const LOG_MAX_BYTES = 10 * 1024 * 1024;

export interface DesktopOptions {
  /** dist/bin/sovcomms.js */
  serverEntry: string;
  /** dist/main/preload.cjs */
  preload: string;
  build: string;
  probe: Probe;
  timers?: Timers;
  lanAddress?: () => string | null;
  pickPort?: (host: string, preferred: number) => Promise<{ port: number; moved: boolean }>;
  /** Runtime versions for the about window. */
  runtime?: string;
}

export class DesktopApp {
  readonly policyState: PolicyState = { origin: null, pinnedCert: null };
  supervisor!: ServerSupervisor;
  window: WindowLike | null = null;
  settings!: DesktopSettings;
  userData = '';
  dataDir = '';
  key: KeyStoreChoice | null = null;
  portNote: string | null = null;
  private quitting = false;
  private stopped = false;
  private openWhenReady = true;

  constructor(
    private readonly shell: ElectronShell,
    private readonly o: DesktopOptions,
  ) {}

  private get lan(): string | null {
    return (this.o.lanAddress ?? findLanAddress)();
  }

  /** The console's address for LAN devices (the listener's port on this machine's LAN address). */
  lanUrl(): string | null {
    const lan = this.lan;
    if (!lan || !this.supervisor?.url || !this.settings.lan) return null;
    const u = new URL(this.supervisor.url);
    return `${u.protocol}//${lan}:${u.port}/console/`;
  }

  /** Returns false when another instance runs (this one quits; the other shows its window). */
  async run(): Promise<boolean> {
    const { app } = this.shell;
    if (!app.requestSingleInstanceLock()) {
      app.quit();
      return false;
    }
    app.onSecondInstance(() => this.showConsole());
    app.onActivate(() => this.showConsole());
    await app.whenReady();
    this.userData = app.getPath('userData');
    this.dataDir = path.join(this.userData, 'data');
    fs.mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    this.settings = loadSettings(this.userData);
    // The OS is the source of truth for start on login (the user may change it there).
    this.settings.startOnLogin = app.getOpenAtLogin();
    this.key = masterKey(this.shell, this.userData, this.dataDir);
    this.registerIpc();
    this.shell.setAppMenu(appMenu(this.shell.platform, PRODUCT_NAME), (id) => this.action(id));
    this.updateTray({ kind: 'starting', attempt: 1 });
    // The tray keeps the appliance running with every window closed.
    app.onWindowAllClosed(() => undefined);
    app.onBeforeQuit((preventDefault) => {
      if (this.stopped) return;
      preventDefault();
      void this.quit();
    });
    this.supervisor = new ServerSupervisor(this.shell, {
      entry: this.o.serverEntry,
      args: () => this.serverArgs(),
      env: () => ({ SOVCOMMS_DATA_DIR: this.dataDir, ...this.key!.env }),
      probe: this.o.probe,
      timers: this.o.timers,
      onState: (s) => this.onServerState(s),
      onOutput: (line) => this.onServerOutput(line),
      onStarted: ({ url, certFingerprint256 }) => {
        this.policyState.origin = loopbackUrl(url).origin;
        this.policyState.pinnedCert = certFingerprint256 ? normaliseFingerprint(certFingerprint256) : null;
      },
    });
    await this.supervisor.start();
    return true;
  }

  private async serverArgs(): Promise<string[]> {
    const host = this.settings.lan ? '0.0.0.0' : '127.0.0.1';
    const { port, moved } = await (this.o.pickPort ?? choosePort)(host, this.settings.port);
    this.portNote = moved ? `Port ${this.settings.port} is in use; the appliance listens on port ${port} instead.` : null;
    if (moved) this.shell.showMessage('info', 'Port in use', this.portNote!);
    return ['serve', '--host', host, '--port', String(port), ...(this.settings.lan ? ['--tls', 'auto'] : [])];
  }

  private onServerState(s: ServerState): void {
    this.updateTray(s);
    if ((s.kind === 'ready' || s.kind === 'degraded') && this.openWhenReady) {
      this.openWhenReady = false;
      this.showConsole();
    }
  }

  private updateTray(s: ServerState): void {
    this.shell.setTray(trayModel(s, { lanAddress: this.lanUrl(), startOnLogin: this.settings?.startOnLogin ?? false, productName: PRODUCT_NAME }), (id) =>
      this.action(id),
    );
  }

  /** The console URL the window loads (the loopback address: the pinned certificate covers it). */
  consoleUrl(): string | null {
    const url = this.supervisor?.url;
    if (!url) return null;
    const u = loopbackUrl(url);
    this.policyState.origin = u.origin;
    return `${u.origin}/console/`;
  }

  showConsole(): void {
    const url = this.consoleUrl();
    if (!url) return;
    if (this.window && !this.window.isDestroyed()) {
      if (this.window.isMinimized()) this.window.restore();
      this.window.show();
      this.window.focus();
      return;
    }
    const w = this.shell.createWindow({
      title: PRODUCT_NAME,
      width: 1280,
      height: 840,
      show: true,
      webPreferences: webPreferences(this.o.preload),
      policy: consolePolicy(this.policyState),
    });
    this.window = w;
    w.onClosed(() => {
      if (this.window === w) this.window = null;
    });
    void w.loadURL(url);
  }

  /** Where the server's output goes: `<logs>/server.log`, one older file kept past LOG_MAX_BYTES. */
  logFile(): string {
    return path.join(this.shell.app.getPath('logs'), 'server.log');
  }

  private firstRun: string[] = [];

  /**
   * The server prints the first start's administrator password once, on stdout: headless the
   * operator reads it in the terminal; here it is shown in a dialog, and never written to the log.
   */
  private onServerOutput(line: string): void {
    if (line.startsWith('First start:')) this.firstRun = [line];
    else if (this.firstRun.length && /^\s+(password:|\(shown once)/.test(line)) {
      this.firstRun.push(line.trim());
      if (line.trim().startsWith('password:')) {
        this.logLine('  password: [shown in the first-start dialog, not logged]');
        return;
      }
      if (this.firstRun.length === 3) {
        this.shell.showMessage('info', 'First start', this.firstRun.join('\n'));
        this.firstRun = [];
      }
    }
    this.logLine(line);
  }

  private logLine(line: string): void {
    const file = this.logFile();
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      if ((fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0) > LOG_MAX_BYTES) fs.renameSync(file, `${file}.1`);
      fs.appendFileSync(file, `${line}\n`, { mode: 0o600 });
    } catch {
      // A full or read-only disk must not take the shell down; the server keeps running.
    }
  }

  info(): DesktopInfo {
    return {
      version: this.shell.app.getVersion(),
      build: this.o.build,
      keyStore: this.key?.kind ?? 'file',
      keyStoreNote: this.key?.kind === 'file' ? this.key.reason : null,
      lanAddress: this.lanUrl(),
      url: this.supervisor?.url ?? null,
      portNote: this.portNote,
    };
  }

  private registerIpc(): void {
    // Only the console's own pages may ask (a page of another origin never loads, but be sure).
    const guard =
      <T>(fn: () => T) =>
      (senderUrl: string): T => {
        if (!this.policyState.origin || new URL(senderUrl).origin !== this.policyState.origin) throw new Error('not the console');
        return fn();
      };
    this.shell.handleIpc(
      IPC.info,
      guard(() => this.info()),
    );
    this.shell.handleIpc(
      IPC.openDataFolder,
      guard(() => this.action(TRAY_ACTIONS.openDataFolder)),
    );
    this.shell.handleIpc(
      IPC.copyLanAddress,
      guard(() => this.action(TRAY_ACTIONS.copyLanAddress)),
    );
  }

  action(id: string): void {
    switch (id) {
      case TRAY_ACTIONS.openConsole:
        return this.showConsole();
      case TRAY_ACTIONS.openDataFolder:
        void this.shell.openPath(this.dataDir);
        return;
      case TRAY_ACTIONS.copyLanAddress: {
        const u = this.lanUrl();
        if (u) this.shell.writeClipboard(u);
        return;
      }
      case TRAY_ACTIONS.startOnLogin:
        this.settings.startOnLogin = !this.settings.startOnLogin;
        this.shell.app.setOpenAtLogin(this.settings.startOnLogin);
        saveSettings(this.userData, this.settings);
        this.updateTray(this.supervisor.state);
        return;
      case TRAY_ACTIONS.about:
        this.shell.showAbout({
          name: PRODUCT_NAME,
          version: this.shell.app.getVersion(),
          build: this.o.build,
          copyright: '',
          runtime: this.o.runtime ?? `Node ${process.versions.node}`,
        });
        return;
      case TRAY_ACTIONS.quit:
        void this.quit();
        return;
    }
  }

  /** Quit: stop the server cleanly (drain, checkpoint), then leave. */
  async quit(): Promise<void> {
    if (this.quitting) return;
    this.quitting = true;
    await this.supervisor?.stop();
    this.stopped = true;
    this.shell.app.quit();
  }
}
