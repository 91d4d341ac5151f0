import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { parse } from '../cli-args.ts';
import type { CoreCommand } from './command.ts';

export const doctorCommand: CoreCommand = {
  opens: 'all',
  summary: 'Checks the data dir, the store, the port and the tools, one line per check',
  usage: ['doctor'],
  changes: false,
  async run(args, ctx, { plugins }) {
    parse(args, {}, 0);
    let failures = 0;
    const ok = (m: string) => ctx.out(`ok    ${m}`);
    const warn = (m: string) => ctx.out(`warn  ${m}`);
    const fail = (m: string) => {
      failures++;
      ctx.out(`FAIL  ${m}`);
    };
    const c = ctx.core;
    try {
      fs.accessSync(c.dataDir, fs.constants.W_OK);
      ok(`data dir ${c.dataDir} is writable`);
    } catch {
      fail(`data dir ${c.dataDir} is not writable`);
    }
    // Only the owner may read the data dir and the store (sealed secrets, hashes, call records).
    for (const [what, p] of [
      ['data dir', c.dataDir],
      ['database', path.join(c.dataDir, 'appliance.db')],
    ] as const) {
      const mode = fs.statSync(p).mode & 0o777;
      if (mode & 0o077) fail(`${what} ${p} is readable by other local users (mode ${mode.toString(8)}); chmod ${what === 'data dir' ? '700' : '600'} it`);
      else ok(`${what} is private to its owner (mode ${mode.toString(8)})`);
    }
    const keyFile = path.join(c.dataDir, 'master.key');
    if (ctx.keys.source === 'file') {
      const mode = fs.statSync(keyFile).mode & 0o777;
      if (mode & 0o077) fail(`master key ${keyFile} is readable by others (mode ${mode.toString(8)}); chmod 600 it`);
      else ok('master key file has mode 600');
    } else ok(`master key from ${ctx.keys.source}`);
    const integrity = ctx.db.pragma('quick_check', { simple: true });
    if (integrity === 'ok') ok('database quick_check ok');
    else fail(`database quick_check: ${String(integrity)}`);
    const tenants = ctx.tenants.list();
    if (!tenants.length) warn('no tenants yet: `sovcomms serve` creates the primary tenant on first start');
    else ok(`${tenants.length} tenant(s), primary ${tenants.find((t) => t.isPrimary)?.host ?? '(none!)'}`);
    const portFree = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(c.http.port, c.http.host, () => s.close(() => resolve(true)));
    });
    if (portFree) ok(`port ${c.http.host}:${c.http.port} is free`);
    else warn(`port ${c.http.host}:${c.http.port} is in use (the appliance may already be running)`);
    for (const [tool, why] of [
      ['sipp', 'SIP trunk tests (Debian sip-tester)'],
      ['softhsm2-util', 'HSM tests (Debian softhsm2)'],
      ['chromium', 'browser tests (Debian chromium)'],
      ['openssl', 'certificate checks'],
    ] as const) {
      try {
        execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
        ok(`${tool} found`);
      } catch {
        warn(`${tool} not found: needed for ${why}`);
      }
    }
    for (const p of plugins) ok(`plugin ${p.name} loaded`);
    return failures ? 1 : 0;
  },
};
