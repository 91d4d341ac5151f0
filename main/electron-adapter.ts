/**
 * ElectronShell over real Electron: the one thin file that touches Electron's objects. No logic
 * lives here; every decision is the policy's or DesktopApp's (tested with a fake shell). This
 * file is type-checked, never run by the tests (the Electron binary is not on these machines).
 */
import path from 'node:path';
import readline from 'node:readline';
import {
  app,
  BrowserWindow,
  clipboard,
  dialog,
  ipcMain,
  Menu,
  nativeImage,
  safeStorage,
  shell,
  Tray,
  utilityProcess,
  type MenuItemConstructorOptions,
} from 'electron';
import type { ElectronShell, MenuItemSpec, WindowPolicy } from './shell.ts';

function toTemplate(items: MenuItemSpec[], onAction: (id: string) => void): MenuItemConstructorOptions[] {
  return items.map((i) => ({
    ...(i.label !== undefined ? { label: i.label } : {}),
    ...(i.type ? { type: i.type } : {}),
    ...(i.enabled !== undefined ? { enabled: i.enabled } : {}),
    ...(i.checked !== undefined ? { checked: i.checked } : {}),
    ...(i.accelerator ? { accelerator: i.accelerator } : {}),
    ...(i.role ? { role: i.role as MenuItemConstructorOptions['role'] } : {}),
    ...(i.submenu ? { submenu: toTemplate(i.submenu, onAction) } : {}),
    ...(i.id ? { id: i.id, click: () => onAction(i.id!) } : {}),
  }));
}

/** Policies of the windows we made, by webContents id (certificate-error is an app event). */
const policies = new Map<number, WindowPolicy>();

export function electronShell(iconsDir: string): ElectronShell {
  let tray: Tray | null = null;
  // Defence in depth for any web contents at all, not only our window's.
  app.on('web-contents-created', (_e, contents) => {
    contents.on('will-attach-webview', (e) => e.preventDefault());
  });
  app.on('certificate-error', (event, contents, url, _error, certificate, callback) => {
    const policy = policies.get(contents.id);
    const ok = !!policy && policy.acceptCertificate(url, certificate.data);
    if (ok) event.preventDefault();
    callback(ok);
  });
  return {
    platform: process.platform,
    app: {
      requestSingleInstanceLock: () => app.requestSingleInstanceLock(),
      onSecondInstance: (cb) => app.on('second-instance', () => cb()),
      whenReady: () => app.whenReady().then(() => undefined),
      quit: () => app.quit(),
      exit: (code) => app.exit(code),
      onBeforeQuit: (cb) => app.on('before-quit', (e) => cb(() => e.preventDefault())),
      onWindowAllClosed: (cb) => app.on('window-all-closed', () => cb()),
      onActivate: (cb) => app.on('activate', () => cb()),
      getPath: (name) => app.getPath(name),
      getVersion: () => app.getVersion(),
      setOpenAtLogin: (open) => app.setLoginItemSettings({ openAtLogin: open }),
      getOpenAtLogin: () => app.getLoginItemSettings().openAtLogin,
    },
    createWindow(o) {
      const w = new BrowserWindow({ title: o.title, width: o.width, height: o.height, show: o.show, webPreferences: { ...o.webPreferences } });
      const wc = w.webContents;
      const p = o.policy;
      policies.set(wc.id, p);
      const guard = (e: { url: string; preventDefault(): void }) => {
        if (!p.allowNavigation(e.url)) e.preventDefault();
      };
      wc.on('will-navigate', guard);
      wc.on('will-redirect', guard);
      wc.on('will-frame-navigate', guard);
      wc.setWindowOpenHandler(({ url }) => {
        if (p.windowOpen(url) === 'external') void shell.openExternal(url);
        return { action: 'deny' };
      });
      wc.on('will-attach-webview', (e) => e.preventDefault());
      const ses = wc.session;
      ses.setPermissionRequestHandler((_wc, permission, callback, details) => {
        const media = 'mediaTypes' in details ? (details.mediaTypes ?? []) : [];
        callback(p.allowPermission(permission, details.requestingUrl ?? '', media));
      });
      ses.setPermissionCheckHandler((_wc, permission, requestingOrigin, details) => {
        const media = 'mediaType' in details && details.mediaType ? [details.mediaType] : [];
        return p.allowPermission(permission, details.requestingUrl ?? requestingOrigin, media);
      });
      ses.webRequest.onHeadersReceived((details, callback) => {
        const headers = { ...(details.responseHeaders ?? {}) };
        const has = Object.keys(headers).some((k) => k.toLowerCase() === 'content-security-policy');
        if (!has && p.allowNavigation(details.url)) headers['Content-Security-Policy'] = [p.contentSecurityPolicy];
        callback({ responseHeaders: headers });
      });
      w.on('closed', () => policies.delete(wc.id));
      return {
        loadURL: (url) => w.loadURL(url),
        show: () => w.show(),
        focus: () => w.focus(),
        restore: () => w.restore(),
        isMinimized: () => w.isMinimized(),
        isDestroyed: () => w.isDestroyed(),
        onClosed: (cb) => w.on('closed', () => cb()),
      };
    },
    setTray(model, onAction) {
      const image = nativeImage.createFromPath(path.join(iconsDir, `tray-${model.icon}.png`));
      if (!tray) tray = new Tray(image);
      else tray.setImage(image);
      tray.setToolTip(model.tooltip);
      tray.setContextMenu(Menu.buildFromTemplate(toTemplate(model.items, onAction)));
    },
    setAppMenu(template, onAction) {
      Menu.setApplicationMenu(Menu.buildFromTemplate(toTemplate(template, onAction)));
    },
    safeStorage: {
      // eslint-disable-next-line @typescript-eslint/no-deprecated -- the synchronous safeStorage calls the ElectronShell port is built on (read once at start); moving to the async API is a change of the port
      isEncryptionAvailable: () => safeStorage.isEncryptionAvailable(),
      // eslint-disable-next-line @typescript-eslint/no-deprecated -- the synchronous safeStorage calls the ElectronShell port is built on (read once at start); moving to the async API is a change of the port
      encryptString: (plain) => safeStorage.encryptString(plain),
      // eslint-disable-next-line @typescript-eslint/no-deprecated -- the synchronous safeStorage calls the ElectronShell port is built on (read once at start); moving to the async API is a change of the port
      decryptString: (enc) => safeStorage.decryptString(enc),
    },
    forkUtility(modulePath, args, o) {
      const child = utilityProcess.fork(modulePath, args, { env: o.env, serviceName: o.serviceName, stdio: 'pipe' });
      return {
        get pid() {
          return child.pid;
        },
        postMessage: (m) => child.postMessage(m),
        kill: () => child.kill(),
        onMessage: (cb) => child.on('message', (m: unknown) => cb(m)),
        onExit: (cb) => child.on('exit', (code) => cb(code)),
        onOutput: (cb) => {
          for (const s of [child.stdout, child.stderr]) if (s) readline.createInterface({ input: s }).on('line', cb);
        },
      };
    },
    handleIpc: (channel, fn) => ipcMain.handle(channel, (event) => fn(event.senderFrame?.url ?? '')),
    openPath: (p) => shell.openPath(p),
    openExternal: (url) => shell.openExternal(url),
    writeClipboard: (text) => void clipboard.writeText(text).catch(() => undefined), // a refused clipboard write must not reject unhandled in the main process
    showAbout(info) {
      app.setAboutPanelOptions({
        applicationName: info.name,
        applicationVersion: info.version,
        version: info.build,
        copyright: info.copyright,
        credits: info.runtime,
      });
      app.showAboutPanel();
    },
    showMessage(kind, title, message) {
      void dialog.showMessageBox({ type: kind, title, message });
    },
  };
}
