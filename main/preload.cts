/**
 * The console window's preload. Sandboxed, so it is a CommonJS script that may require only
 * `electron`: no import statements (an ES module preload is not allowed with sandbox: true, and
 * a CommonJS module would touch `exports`). Exposes the minimal typed API of ipc.ts through
 * contextBridge; the page never sees ipcRenderer itself.
 */
/* eslint-disable @typescript-eslint/consistent-type-imports -- a script without import statements names types only through import() */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the sandboxed preload's only way to reach electron
const { contextBridge, ipcRenderer } = require('electron') as typeof import('electron');

// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- a type-only import across module kinds; tsc resolves it, the lint's project service does not for .cts
type DesktopApi = import('./ipc.ts', { with: { 'resolution-mode': 'import' } }).DesktopApi;
// eslint-disable-next-line @typescript-eslint/no-unsafe-assignment -- a type-only import across module kinds; tsc resolves it, the lint's project service does not for .cts
type DesktopInfo = import('./ipc.ts', { with: { 'resolution-mode': 'import' } }).DesktopInfo;

// The channel names of ipc.ts, repeated: a sandboxed preload cannot load another module.
const desktopApi: DesktopApi = {
  info: () => ipcRenderer.invoke('sovcomms:info') as Promise<DesktopInfo>,
  openDataFolder: () => ipcRenderer.invoke('sovcomms:open-data-folder') as Promise<void>,
  copyLanAddress: () => ipcRenderer.invoke('sovcomms:copy-lan-address') as Promise<void>,
};

contextBridge.exposeInMainWorld('sovcommsDesktop', Object.freeze(desktopApi));
