/** What the tray shows for each state of the server, and which actions it offers. */
import type { MenuItemSpec, TrayModel } from './shell.ts';

export type ServerState =
  | { kind: 'starting'; attempt: number }
  | { kind: 'ready'; url: string }
  | { kind: 'degraded'; url: string; plugins: string[] }
  | { kind: 'restarting'; inMs: number; reason: string }
  | { kind: 'stopped'; reason?: string };

export const TRAY_ACTIONS = {
  openConsole: 'open-console',
  openDataFolder: 'open-data-folder',
  copyLanAddress: 'copy-lan-address',
  startOnLogin: 'start-on-login',
  about: 'about',
  quit: 'quit',
} as const;

export function stateText(s: ServerState): string {
  switch (s.kind) {
    case 'starting':
      return s.attempt > 1 ? `Starting (attempt ${s.attempt})…` : 'Starting…';
    case 'ready':
      return `Running at ${s.url}`;
    case 'degraded':
      return `Degraded: ${s.plugins.join(', ')} not working`;
    case 'restarting':
      return `Server stopped (${s.reason}); restarting in ${Math.ceil(s.inMs / 1000)} s`;
    case 'stopped':
      return s.reason ? `Stopped (${s.reason})` : 'Stopped';
  }
}

export function trayModel(s: ServerState, o: { lanAddress: string | null; startOnLogin: boolean; productName: string }): TrayModel {
  const up = s.kind === 'ready' || s.kind === 'degraded';
  const items: MenuItemSpec[] = [
    { id: 'status', label: stateText(s), enabled: false },
    { type: 'separator' },
    { id: TRAY_ACTIONS.openConsole, label: 'Open console', enabled: up },
    { id: TRAY_ACTIONS.openDataFolder, label: 'Open data folder' },
    { id: TRAY_ACTIONS.copyLanAddress, label: o.lanAddress ? `Copy LAN address (${o.lanAddress})` : 'Copy LAN address', enabled: up && !!o.lanAddress },
    { type: 'separator' },
    { id: TRAY_ACTIONS.startOnLogin, label: 'Start on login', type: 'checkbox', checked: o.startOnLogin },
    { id: TRAY_ACTIONS.about, label: `About ${o.productName}` },
    { type: 'separator' },
    { id: TRAY_ACTIONS.quit, label: 'Quit' },
  ];
  const icon = s.kind === 'ready' ? 'ready' : s.kind === 'degraded' ? 'degraded' : s.kind === 'stopped' ? 'stopped' : 'starting';
  return { icon, tooltip: `${o.productName}: ${stateText(s)}`, items };
}
