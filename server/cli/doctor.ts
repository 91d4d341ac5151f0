import fs from 'node:fs';
import { readBackupState } from '../backup/service.ts';
import net from 'node:net';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { parse } from '../cli-args.ts';
import { appliedVersion } from '../store/migrate.ts';
import { CORE_MIGRATIONS } from '../core.ts';
import type { CoreCommand } from './command.ts';

/** The Node majors the appliance supports (package.json `engines`). */
export const SUPPORTED_NODE_MAJORS = [20, 22, 24];

export const doctorCommand: CoreCommand = {
  opens: 'all',
  summary: 'Checks the data dir, the store, the port and the tools, one line per check',
  usage: ['doctor'],
  changes: false,
  async run(args, ctx, { plugins, schemaBefore }) {
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
    // Schema: each part's version, and any migration shipped but not applied.
    for (const [name, migrations] of [['core', CORE_MIGRATIONS] as const, ...plugins.map((p) => [p.name, p.migrations ?? []] as const)]) {
      const at = appliedVersion(ctx.db, name);
      const pending = migrations.filter((m) => m.version > at);
      // Opening the store for this command applied what was pending: say what that was, from the
      // versions read before (a part new to this data dir had nothing to be pending).
      const before = schemaBefore.get(name);
      const applied = before === undefined ? [] : migrations.filter((m) => m.version > before && m.version <= at);
      if (pending.length) warn(`schema ${name} at ${at}: ${pending.length} migration(s) pending (${pending.map((m) => m.name).join(', ')})`);
      else if (applied.length)
        warn(
          `schema ${name} was at version ${before}: ${applied.length} migration(s) were pending and were applied now (${applied.map((m) => m.name).join(', ')}); at version ${at}`,
        );
      else ok(`schema ${name} at version ${at}, none pending`);
    }
    const major = Number(process.versions.node.split('.')[0]);
    if (SUPPORTED_NODE_MAJORS.includes(major))
      ok(`runtime Node ${process.versions.node}${major === 20 ? ' (past its end of life in April 2026: move to 22 or 24)' : ''}`);
    else warn(`runtime Node ${process.versions.node} is not one of the supported ${SUPPORTED_NODE_MAJORS.join(', ')}`);
    try {
      const st = fs.statfsSync(c.dataDir);
      const free = st.bavail * st.bsize;
      const msg = `disk: ${(free / 2 ** 30).toFixed(1)} GiB free of ${((st.blocks * st.bsize) / 2 ** 30).toFixed(1)} GiB under ${c.dataDir}`;
      if (free < 1 * 2 ** 30) warn(`${msg} (less than 1 GiB)`);
      else ok(msg);
    } catch (e) {
      warn(`disk space unknown: ${(e as Error).message}`);
    }
    const tls = c.http.tls;
    if (tls && tls !== 'auto') {
      try {
        const cert = new X509Certificate(fs.readFileSync(path.resolve(c.dataDir, tls.cert)));
        const days = Math.floor((Date.parse(cert.validTo) - ctx.clock.now()) / 86_400_000);
        if (days < 0) fail(`TLS certificate ${tls.cert} expired ${-days} day(s) ago`);
        else if (days < 30) warn(`TLS certificate ${tls.cert} expires in ${days} day(s)`);
        else ok(`TLS certificate ${tls.cert} valid for ${days} more day(s)`);
      } catch (e) {
        fail(`TLS certificate ${tls.cert} unreadable: ${(e as Error).message}`);
      }
    } else ok(tls === 'auto' ? 'TLS certificate from the RP CA (renewed by it)' : 'no TLS configured (plain HTTP)');
    // The backup schedule and its last runs (server/backup): unscheduled is a warning, failing or overdue a failure.
    const backup = readBackupState(ctx.db, c.dataDir, ctx.clock.now());
    const last = backup.lastSuccess ? `last success ${backup.lastSuccess.at} (${backup.lastSuccess.file})` : 'no success yet';
    if (backup.health === 'unconfigured') warn(`backup: no schedule (sovcomms backup schedule --every 24h --keep 14 --to DIR); ${last}`);
    else if (backup.health === 'ok')
      ok(`backup: every ${backup.schedule?.every ?? '?'} to ${backup.schedule?.target ?? '?'}, ${last}, next ${backup.nextRun ?? '-'}`);
    else fail(`backup: ${backup.health}${backup.lastFailure ? ` (${backup.lastFailure.reason} at ${backup.lastFailure.at})` : ''}; ${last}`);
    const tel = (c.plugins.telephony ?? {}) as { bridge?: { mode?: string; sipHost?: string; sipPort?: number } };
    const mode = tel.bridge?.mode ?? 'embedded';
    if (mode === 'embedded' && plugins.some((p) => p.name === 'telephony')) {
      const host = tel.bridge?.sipHost ?? '127.0.0.1';
      const port = tel.bridge?.sipPort ?? 5060;
      const free = await new Promise<boolean>((resolve) => {
        const s = net.createServer();
        s.once('error', () => resolve(false));
        s.listen(port, host, () => s.close(() => resolve(true)));
      });
      if (free) ok(`SIP listens on ${host}:${port} (UDP and TCP; free now)`);
      else warn(`SIP address ${host}:${port} is in use (the appliance, or another PBX: plugins.telephony.bridge.sipPort)`);
    } else ok(`SIP: bridge mode ${mode}`);
    for (const p of plugins) ok(`plugin ${p.name} loaded`);
    return failures ? 1 : 0;
  },
};
