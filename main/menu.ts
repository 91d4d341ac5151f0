/** The application menu (macOS menu bar, the window menu elsewhere). */
import type { MenuItemSpec } from './shell.ts';
import { TRAY_ACTIONS } from './tray.ts';

export function appMenu(platform: NodeJS.Platform, productName: string): MenuItemSpec[] {
  const mac = platform === 'darwin';
  const quit: MenuItemSpec = { id: TRAY_ACTIONS.quit, label: mac ? `Quit ${productName}` : 'Quit', accelerator: 'CmdOrCtrl+Q' };
  const about: MenuItemSpec = { id: TRAY_ACTIONS.about, label: `About ${productName}` };
  return [
    ...(mac ? [{ label: productName, type: 'submenu' as const, submenu: [about, { type: 'separator' as const }, quit] }] : []),
    {
      label: 'File',
      type: 'submenu',
      submenu: [
        { id: TRAY_ACTIONS.openConsole, label: 'Open console', accelerator: 'CmdOrCtrl+O' },
        { id: TRAY_ACTIONS.openDataFolder, label: 'Open data folder' },
        { id: TRAY_ACTIONS.copyLanAddress, label: 'Copy LAN address' },
        ...(mac ? [] : [{ type: 'separator' as const }, quit]),
      ],
    },
    {
      label: 'Edit',
      type: 'submenu',
      submenu: [{ role: 'undo' }, { role: 'redo' }, { type: 'separator' }, { role: 'cut' }, { role: 'copy' }, { role: 'paste' }, { role: 'selectAll' }],
    },
    {
      label: 'View',
      type: 'submenu',
      submenu: [{ role: 'reload' }, { role: 'resetZoom' }, { role: 'zoomIn' }, { role: 'zoomOut' }, { role: 'togglefullscreen' }],
    },
    { label: 'Help', type: 'submenu', submenu: mac ? [] : [about] },
  ];
}
