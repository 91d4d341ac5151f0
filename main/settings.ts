/** The desktop shell's own settings (`<userData>/desktop.json`), validated like every input. */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

export const desktopSettings = z
  .object({
    /** Listen on the LAN (HTTPS with the appliance's own certificate) or on loopback only (HTTP). */
    lan: z.boolean().default(true),
    port: z.number().int().min(1).max(65535).default(8443),
    startOnLogin: z.boolean().default(false),
  })
  .strict();
export type DesktopSettings = z.infer<typeof desktopSettings>;

export const SETTINGS_FILE = 'desktop.json';

export function loadSettings(userData: string): DesktopSettings {
  const file = path.join(userData, SETTINGS_FILE);
  let raw: unknown = {};
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${file}: ${(e as Error).message}`, { cause: e });
  }
  const r = desktopSettings.safeParse(raw);
  if (!r.success) throw new Error(`${file}: ${r.error.issues[0]?.path.join('.')}: ${r.error.issues[0]?.message}`);
  return r.data;
}

export function saveSettings(userData: string, s: DesktopSettings): void {
  fs.mkdirSync(userData, { recursive: true, mode: 0o700 });
  const file = path.join(userData, SETTINGS_FILE);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(desktopSettings.parse(s), null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}
