import fs from 'node:fs';
import { KeyService } from '../../server/keys.ts';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DesktopApp } from '../../main/desktop.ts';
import { IPC } from '../../main/ipc.ts';
import { choosePort, isPortFree } from '../../main/ports.ts';
import { SEALED_KEY_FILE } from '../../main/master-key.ts';
import type { Probe } from '../../main/supervisor.ts';
import { TRAY_ACTIONS } from '../../main/tray.ts';
import { ROOT } from '../support/cli.ts';
import { tempDir } from '../support/server.ts';
import { type FakeChild, FakeShell, flush, ManualTimers } from './fake-shell.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function setup(o: { probe?: Probe; portTaken?: boolean; keyStore?: boolean; lock?: boolean; userData?: string } = {}) {
  const userData = o.userData ?? tempDir('sovcomms-desktop-');
  dirs.push(userData);
  const shell = new FakeShell(userData);
  shell.keyStore = o.keyStore ?? true;
  shell.lock = o.lock ?? true;
  const timers = new ManualTimers();
  const app = new DesktopApp(shell, {
    serverEntry: '/app/dist/bin/sovcomms.js',
    preload: '/app/dist/main/preload.cjs',
    build: '20261125.abc1234',
    probe: o.probe ?? (async () => ({ status: 200, body: { status: 'ready', plugins: {} } })),
    timers,
    lanAddress: () => '192.168.1.20',
    pickPort: async (_host, preferred) => (o.portTaken ? { port: 49152, moved: true } : { port: preferred, moved: false }),
  });
  const child = () => shell.children.at(-1) as FakeChild;
  const started = async (url = 'https://0.0.0.0:8443', fp = 'AB:CD') => {
    child().emitMessage({ type: 'server-started', url, certFingerprint256: fp });
    await flush();
  };
  return { shell, app, timers, child, started, userData };
}

describe('desktop appliance (fake Electron shell)', () => {
  it('a second instance quits at once and starts nothing; the first one shows its window when asked', async () => {
    const second = setup({ lock: false });
    expect(await second.app.run()).toBe(false);
    expect(second.shell.quitCalls).toBe(1);
    expect(second.shell.children).toEqual([]);

    const first = setup();
    await first.app.run();
    await first.started();
    expect(first.shell.windows.length).toBe(1);
    first.shell.secondInstance!();
    expect(first.shell.windows.length).toBe(1); // shown again, not a new one
    expect(first.shell.windows[0]!.shown).toBe(1);
    // macOS: the dock icon with every window closed opens the console again.
    first.shell.windows[0]!.close();
    first.shell.activate!();
    expect(first.shell.windows.length).toBe(2);
  });

  it('starts the serve entry on the LAN with TLS, data under the per-user app data; opens the hardened console window once ready', async () => {
    const { shell, app, child, started, userData } = setup();
    await app.run();
    expect(shell.tray!.icon).toBe('starting');
    expect(child().modulePath).toBe('/app/dist/bin/sovcomms.js');
    expect(child().args).toEqual(['serve', '--host', '0.0.0.0', '--port', '8443', '--tls', 'auto']);
    expect(child().o.env.SOVCOMMS_DATA_DIR).toBe(path.join(userData, 'data'));
    expect(fs.statSync(path.join(userData, 'data')).mode & 0o077).toBe(0);
    expect(shell.windows).toEqual([]); // not before ready
    await started('https://0.0.0.0:8443', 'AB:CD:EF');
    const w = shell.windows[0]!;
    expect(w.loaded).toEqual(['https://127.0.0.1:8443/console/']);
    expect(w.options.webPreferences).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false, preload: '/app/dist/main/preload.cjs' });
    expect(app.policyState).toEqual({ origin: 'https://127.0.0.1:8443', pinnedCert: 'abcdef' });
    expect(w.options.policy.allowNavigation('https://127.0.0.1:8443/console/x')).toBe(true);
    expect(w.options.policy.allowNavigation('https://example.org/')).toBe(false);
    expect(shell.tray!.icon).toBe('ready');
    expect(shell.tray!.tooltip).toContain('Running at https://0.0.0.0:8443');
    expect(shell.menu.map((m) => m.label)).toEqual(['File', 'Edit', 'View', 'Help']);
  });

  it('tray: starting → ready → degraded naming the plugin → restarting after a crash → stopped on quit', async () => {
    let body: unknown = { status: 'ready', plugins: {} };
    const { shell, app, child, started, timers } = setup({ probe: async () => ({ status: 200, body }) });
    await app.run();
    await started();
    body = { status: 'degraded', plugins: { telephony: { state: 'failed', required: false } } };
    await timers.advance(5000);
    expect(shell.tray!.icon).toBe('degraded');
    expect(shell.tray!.items[0]!.label).toBe('Degraded: telephony not working');
    child().emitExit(1);
    await flush();
    expect(shell.tray!.icon).toBe('starting');
    expect(shell.tray!.items[0]!.label).toBe('Server stopped (exit code 1); restarting in 1 s');
    expect(shell.tray!.items.find((i) => i.id === TRAY_ACTIONS.openConsole)!.enabled).toBe(false);
    await timers.advance(1000);
    expect(shell.children.length).toBe(2);
    await started();
    // Quit: before-quit is held until the server has stopped; the server is asked, not killed.
    const prevented = shell.app.quit() as unknown as boolean;
    expect(prevented).toBe(true);
    expect(child().sent).toEqual([{ type: 'shutdown' }]);
    child().emitExit(0);
    await flush();
    expect(shell.tray!.icon).toBe('stopped');
    expect(shell.quitCalls).toBe(2); // the second quit goes through
    expect(shell.app.quit() as unknown as boolean).toBe(false);
  });

  it('tray actions: open console, open data folder, copy LAN address, start on login (saved), about', async () => {
    const { shell, app, started, userData } = setup();
    await app.run();
    await started();
    shell.windows[0]!.close();
    shell.trayAction!(TRAY_ACTIONS.openConsole);
    expect(shell.windows.length).toBe(2);
    shell.trayAction!(TRAY_ACTIONS.openDataFolder);
    expect(shell.opened).toEqual([path.join(userData, 'data')]);
    shell.trayAction!(TRAY_ACTIONS.copyLanAddress);
    expect(shell.clipboard).toEqual(['https://192.168.1.20:8443/console/']);
    expect(shell.tray!.items.find((i) => i.id === TRAY_ACTIONS.startOnLogin)!.checked).toBe(false);
    shell.trayAction!(TRAY_ACTIONS.startOnLogin);
    expect(shell.openAtLogin).toBe(true);
    expect(shell.tray!.items.find((i) => i.id === TRAY_ACTIONS.startOnLogin)!.checked).toBe(true);
    expect(JSON.parse(fs.readFileSync(path.join(userData, 'desktop.json'), 'utf8'))).toMatchObject({ startOnLogin: true });
    shell.trayAction!(TRAY_ACTIONS.about);
    expect(shell.abouts).toEqual([expect.objectContaining({ name: 'Sovereign Communications Appliance', version: '0.1.0', build: '20261125.abc1234' })]);
  });

  it("the server's output goes to <logs>/server.log (private to the user)", async () => {
    const { app, child, userData } = setup();
    await app.run();
    child().emitOutput('{"level":30,"msg":"appliance ready"}');
    child().emitOutput('First start: primary tenant localhost');
    const file = path.join(userData, 'logs', 'server.log');
    expect(app.logFile()).toBe(file);
    expect(fs.readFileSync(file, 'utf8')).toBe('{"level":30,"msg":"appliance ready"}\nFirst start: primary tenant localhost\n');
    expect(fs.statSync(file).mode & 0o077).toBe(0);
  });

  it("first start: the administrator's password is shown in a dialog and never logged", async () => {
    const { app, child, shell } = setup();
    await app.run();
    for (const l of [
      'First start: primary tenant localhost, administrator "admin".',
      '  password: Sup3r-Secret-Pass',
      '  (shown once; change it with: sovcomms user passwd admin)',
    ])
      child().emitOutput(l);
    expect(shell.messages).toEqual([
      {
        kind: 'info',
        title: 'First start',
        message:
          'First start: primary tenant localhost, administrator "admin".\npassword: Sup3r-Secret-Pass\n(shown once; change it with: sovcomms user passwd admin)',
      },
    ]);
    const log = fs.readFileSync(app.logFile(), 'utf8');
    expect(log).toContain('First start');
    expect(log).not.toContain('Sup3r-Secret-Pass');
  });

  it('choosePort: the preferred port when free, else one the OS picks', async () => {
    const held = net.createServer();
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', () => r()));
    const busy = (held.address() as net.AddressInfo).port;
    try {
      const moved = await choosePort('127.0.0.1', busy);
      expect(moved.moved).toBe(true);
      expect(moved.port).not.toBe(busy);
      expect(await isPortFree('127.0.0.1', moved.port)).toBe(true);
    } finally {
      await new Promise((r) => held.close(r));
    }
    expect(await choosePort('127.0.0.1', busy)).toEqual({ port: busy, moved: false });
  });

  it('port in use: another port is picked, shown to the user and in the preload info', async () => {
    const { shell, app, child, started } = setup({ portTaken: true });
    await app.run();
    expect(child().args).toContain('49152');
    expect(shell.messages).toEqual([{ kind: 'info', title: 'Port in use', message: 'Port 8443 is in use; the appliance listens on port 49152 instead.' }]);
    await started('https://0.0.0.0:49152');
    const info = (await shell.ipc.get(IPC.info)!('https://127.0.0.1:49152/console/')) as { portNote: string; url: string };
    expect(info.portNote).toContain('49152');
  });

  it('master key: sealed in the OS key store when available (same key next start), handed over as SOVCOMMS_MASTER_KEY', async () => {
    const a = setup();
    await a.app.run();
    const key = a.child().o.env.SOVCOMMS_MASTER_KEY!;
    expect(Buffer.from(key, 'base64').length).toBe(32);
    const sealed = fs.readFileSync(path.join(a.userData, SEALED_KEY_FILE));
    expect(sealed.toString()).not.toContain(key);
    expect(fs.existsSync(path.join(a.userData, 'data', 'master.key'))).toBe(false);
    expect(a.app.info()).toMatchObject({ keyStore: 'os-keystore', keyStoreNote: null });
    const b = setup({ userData: a.userData });
    await b.app.run();
    expect(b.child().o.env.SOVCOMMS_MASTER_KEY).toBe(key);
    // The server learns the store from the label and reports it to the console's dashboard.
    expect(b.child().o.env.SOVCOMMS_MASTER_KEY_STORE).toBe('os-keystore');
    const dir = tempDir('sovcomms-keystore-');
    expect(KeyService.load(dir, { env: b.child().o.env }).store).toBe('os-keystore');
    expect(KeyService.load(dir, { env: { SOVCOMMS_MASTER_KEY: key } }).store).toBe('env');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('master key: no key store, or a data dir with master.key already: the file, and the info says why', async () => {
    const a = setup({ keyStore: false });
    await a.app.run();
    expect(a.child().o.env.SOVCOMMS_MASTER_KEY).toBeUndefined();
    expect(a.app.info()).toMatchObject({ keyStore: 'file', keyStoreNote: 'the OS key store is not available' });
    const userData = tempDir('sovcomms-desktop-');
    fs.mkdirSync(path.join(userData, 'data'));
    fs.writeFileSync(path.join(userData, 'data', 'master.key'), 'x');
    const b = setup({ userData });
    await b.app.run();
    expect(b.child().o.env.SOVCOMMS_MASTER_KEY).toBeUndefined();
    expect(b.app.info().keyStoreNote).toBe('this data dir already has master.key');
  });

  it('preload IPC answers the console origin only', async () => {
    const { shell, app, started } = setup();
    await app.run();
    await started();
    const info = shell.ipc.get(IPC.info)!;
    expect(info('https://127.0.0.1:8443/console/')).toMatchObject({
      version: '0.1.0',
      build: '20261125.abc1234',
      lanAddress: 'https://192.168.1.20:8443/console/',
    });
    expect(() => info('https://evil.example/')).toThrow('not the console');
    expect(() => shell.ipc.get(IPC.copyLanAddress)!('http://127.0.0.1:8443/')).toThrow('not the console');
    expect(shell.clipboard).toEqual([]);
  });

  it('the preload exposes exactly the channels of ipc.ts', () => {
    const text = fs.readFileSync(path.join(ROOT, 'main/preload.cts'), 'utf8');
    const used = [...text.matchAll(/invoke\('([^']+)'\)/g)].map((m) => m[1]).sort();
    expect(used).toEqual(Object.values(IPC).sort());
    expect(text).toContain("exposeInMainWorld('sovcommsDesktop'");
    expect(text).not.toMatch(/exposeInMainWorld\([^)]*ipcRenderer\b[^.]/);
  });
});
