/**
 * The small interface the desktop logic is written against: the parts of Electron's main-process
 * API it uses (app, BrowserWindow, Tray, Menu, safeStorage, utilityProcess, session handlers,
 * shell, clipboard), in the shape the logic needs. `electron-adapter.ts` implements it with real
 * Electron; the tests implement it with a fake. Nothing here imports `electron`.
 */

/** The server process (Electron's UtilityProcess, a forked Node child in a fake). */
export interface ChildLike {
  readonly pid: number | undefined;
  postMessage(message: unknown): void;
  /** Ends the process at once (SIGTERM on POSIX, TerminateProcess on Windows). */
  kill(): boolean;
  onMessage(cb: (message: unknown) => void): void;
  onExit(cb: (code: number) => void): void;
  /** Lines the process writes to stdout/stderr. */
  onOutput(cb: (line: string) => void): void;
}

export interface ForkOptions {
  env: Record<string, string>;
  serviceName: string;
}

/** What a window's web contents may do: every decision in one object, made by policy.ts. */
export interface WindowPolicy {
  /** will-navigate / will-redirect / will-frame-navigate: true lets it happen. */
  allowNavigation(url: string): boolean;
  /** setWindowOpenHandler: never a new Electron window; 'external' hands the URL to the OS browser. */
  windowOpen(url: string): 'deny' | 'external';
  /** setPermissionRequestHandler and setPermissionCheckHandler. */
  allowPermission(permission: string, requestingUrl: string, mediaTypes: readonly string[]): boolean;
  /** certificate-error: true accepts the certificate (only the appliance's own, pinned). */
  acceptCertificate(url: string, certificatePem: string): boolean;
  /** Content-Security-Policy set on console responses that come without one. */
  contentSecurityPolicy: string;
}

export interface WebPreferencesSpec {
  preload: string;
  contextIsolation: true;
  sandbox: true;
  nodeIntegration: false;
  nodeIntegrationInSubFrames: false;
  webviewTag: false;
  webSecurity: true;
  allowRunningInsecureContent: false;
  spellcheck: boolean;
}

export interface WindowOptions {
  title: string;
  width: number;
  height: number;
  show: boolean;
  webPreferences: WebPreferencesSpec;
  policy: WindowPolicy;
}

export interface WindowLike {
  loadURL(url: string): Promise<void>;
  show(): void;
  focus(): void;
  restore(): void;
  isMinimized(): boolean;
  isDestroyed(): boolean;
  onClosed(cb: () => void): void;
}

export type TrayIcon = 'starting' | 'ready' | 'degraded' | 'stopped';

export interface MenuItemSpec {
  id?: string;
  label?: string;
  type?: 'normal' | 'separator' | 'checkbox' | 'submenu';
  enabled?: boolean;
  checked?: boolean;
  accelerator?: string;
  /** Electron's built-in roles (copy, paste, reload...). */
  role?: string;
  submenu?: MenuItemSpec[];
}

export interface TrayModel {
  icon: TrayIcon;
  tooltip: string;
  items: MenuItemSpec[];
}

export interface AboutInfo {
  name: string;
  version: string;
  build: string;
  copyright: string;
  /** Electron, Chromium and Node versions of the running shell. */
  runtime: string;
}

export interface ElectronShell {
  readonly platform: NodeJS.Platform;
  app: {
    requestSingleInstanceLock(): boolean;
    onSecondInstance(cb: () => void): void;
    whenReady(): Promise<void>;
    quit(): void;
    exit(code: number): void;
    /** before-quit: `preventDefault` keeps the app alive until the server has stopped. */
    onBeforeQuit(cb: (preventDefault: () => void) => void): void;
    onWindowAllClosed(cb: () => void): void;
    /** macOS: the dock icon was clicked. */
    onActivate(cb: () => void): void;
    getPath(name: 'userData' | 'logs'): string;
    getVersion(): string;
    setOpenAtLogin(open: boolean): void;
    getOpenAtLogin(): boolean;
  };
  createWindow(o: WindowOptions): WindowLike;
  /** Creates the tray on first call, updates it after; `onAction` gets the clicked item's id. */
  setTray(model: TrayModel, onAction: (id: string) => void): void;
  setAppMenu(template: MenuItemSpec[], onAction: (id: string) => void): void;
  safeStorage: {
    isEncryptionAvailable(): boolean;
    encryptString(plain: string): Buffer;
    decryptString(encrypted: Buffer): string;
  };
  forkUtility(modulePath: string, args: string[], o: ForkOptions): ChildLike;
  /** ipcMain.handle; `senderUrl` is the URL of the frame that asked (checked by the handler). */
  handleIpc(channel: string, fn: (senderUrl: string) => unknown): void;
  openPath(p: string): Promise<string>;
  openExternal(url: string): Promise<void>;
  writeClipboard(text: string): void;
  showAbout(info: AboutInfo): void;
  showMessage(kind: 'info' | 'error', title: string, message: string): void;
}
