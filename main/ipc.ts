/**
 * The preload API (window.sovcommsDesktop in the console): a few read-only facts and three
 * actions, over fixed IPC channels. preload.cts implements it; desktop.ts answers it.
 */
export interface DesktopInfo {
  version: string;
  build: string;
  /** `os-keystore` (safeStorage) or `file` (master.key in the data dir). */
  keyStore: 'os-keystore' | 'file';
  /** Why the key file is used (no key store, or an existing key file). */
  keyStoreNote: string | null;
  lanAddress: string | null;
  url: string | null;
  /** Set when the configured port was taken and another one is used. */
  portNote: string | null;
}

export interface DesktopApi {
  info(): Promise<DesktopInfo>;
  openDataFolder(): Promise<void>;
  copyLanAddress(): Promise<void>;
}

export const IPC = {
  info: 'sovcomms:info',
  openDataFolder: 'sovcomms:open-data-folder',
  copyLanAddress: 'sovcomms:copy-lan-address',
} as const;
