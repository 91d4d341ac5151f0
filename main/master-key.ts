/**
 * The appliance master key under the desktop shell: kept in the OS key store through Electron's
 * safeStorage (Keychain, DPAPI, libsecret/kwallet) when it is available, handed to the server as
 * SOVCOMMS_MASTER_KEY; else the server's own `<data-dir>/master.key` (mode 0600) as headless.
 *
 * A data dir that already has a master.key keeps it (the headless CLI on the same data dir needs
 * it, and moving a key is a step an operator takes on purpose, not a side effect of an upgrade).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { ElectronShell } from './shell.ts';

export type KeyStoreChoice = { kind: 'os-keystore'; env: Record<string, string> } | { kind: 'file'; env: Record<string, string>; reason: string };

/** Where the sealed key lives (outside the data dir: a copied data dir does not carry it). */
export const SEALED_KEY_FILE = 'master-key.sealed';

export function masterKey(shell: Pick<ElectronShell, 'safeStorage'>, userData: string, dataDir: string): KeyStoreChoice {
  if (fs.existsSync(path.join(dataDir, 'master.key'))) return { kind: 'file', env: {}, reason: 'this data dir already has master.key' };
  if (!shell.safeStorage.isEncryptionAvailable()) return { kind: 'file', env: {}, reason: 'the OS key store is not available' };
  const sealed = path.join(userData, SEALED_KEY_FILE);
  let key: string;
  if (fs.existsSync(sealed)) {
    // A sealed key that no longer opens (another OS user, a reset key store) must stop the start:
    // a fresh key would make every stored secret unreadable.
    key = shell.safeStorage.decryptString(fs.readFileSync(sealed));
    if (Buffer.from(key, 'base64').length !== 32) throw new Error(`${sealed}: the OS key store returned no valid master key`);
  } else {
    key = crypto.randomBytes(32).toString('base64');
    fs.mkdirSync(userData, { recursive: true, mode: 0o700 });
    fs.writeFileSync(sealed, shell.safeStorage.encryptString(key), { mode: 0o600, flag: 'wx' });
  }
  // The server reports the store (KeyService.store) to the console's dashboard from this label.
  return { kind: 'os-keystore', env: { SOVCOMMS_MASTER_KEY: key, SOVCOMMS_MASTER_KEY_STORE: 'os-keystore' } };
}
