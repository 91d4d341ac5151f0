/**
 * Runs real SIPp (Debian `sip-tester`) as the far end of the bridge's calls: ephemeral ports on
 * 127.0.0.1, `-m 1`, a global timeout, and always killed by `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { readFileSync, readdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const SCENARIOS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'sipp');
export const G711A_PCAP = '/usr/share/sip-tester/g711a.pcap';

/** A port free for both UDP and TCP right now (SIPp needs it on the transport we use). */
export async function freePort(): Promise<number> {
  for (;;) {
    const u = dgram.createSocket('udp4');
    await new Promise<void>((r) => u.bind(0, '127.0.0.1', r));
    const port = u.address().port;
    const ok = await new Promise<boolean>((r) => {
      const s = net.createServer();
      s.once('error', () => r(false));
      s.listen(port, '127.0.0.1', () => s.close(() => r(true)));
    });
    u.close();
    if (ok && port % 2 === 0 && port < 65000) return port; // even: SIPp media ports must be even
  }
}

function udpBound(port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const f of ['/proc/net/udp', '/proc/net/udp6']) {
    try {
      if (
        readFileSync(f, 'utf8')
          .split('\n')
          .some((l) => l.trim().split(/\s+/)[1]?.endsWith(`:${hex}`))
      )
        return true;
    } catch {
      // not Linux or no IPv6
    }
  }
  return false;
}

export interface SippOptions {
  /** A file under test/support/sipp/ (without .xml) or a built-in (`uas`). */
  scenario: string;
  /**
   * Literal text put in the scenario for `{{name}}` before SIPp reads it (a copy in the run's
   * directory): for places SIPp's own [keys] do not reach, e.g. inside [authentication …].
   */
  template?: Record<string, string>;
  transport?: 'udp' | 'tcp';
  rtpEcho?: boolean;
  timeoutSec?: number;
  /** Calls before SIPp exits (`-m`); 1 by default. */
  calls?: number;
  /** More SIPp arguments (e.g. `-l 1000` for many simultaneous calls). */
  extraArgs?: string[];
  /** Extra `-key name value` pairs for [name] substitution in the scenario. */
  keys?: Record<string, string>;
  /** SIP port (default a free one): a second SIPp can take over the port a first one registered from. */
  port?: number;
  /** Local address (default 127.0.0.1; e.g. 127.0.0.2 for a source no trunk knows). */
  ip?: string;
  /** UAC scenarios: the `host:port` to call. */
  remote?: string;
}

export interface SippRun {
  port: number;
  mediaPort: number;
  /** Resolves when SIPp exits: exit code 0 means every call of the scenario succeeded. */
  exited: Promise<{ code: number | null; output: string }>;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export async function startSipp(o: SippOptions): Promise<SippRun> {
  const port = o.port ?? (await freePort());
  const ip = o.ip ?? '127.0.0.1';
  let mediaPort = await freePort();
  while (mediaPort === port) mediaPort = await freePort();
  const cwd = mkdtempSync(path.join(tmpdir(), 'sipp-'));
  let file = path.join(SCENARIOS, `${o.scenario}.xml`);
  if (o.template) {
    let text = readFileSync(file, 'utf8');
    for (const [k, v] of Object.entries(o.template)) text = text.replaceAll(`{{${k}}}`, v);
    file = path.join(cwd, `${o.scenario}.xml`);
    writeFileSync(file, text);
  }
  const scen = o.scenario === 'uas' || o.scenario === 'uac' ? ['-sn', o.scenario] : ['-sf', file];
  const args = [
    ...scen,
    '-i',
    ip,
    '-p',
    String(port),
    '-mi',
    ip,
    '-mp',
    String(mediaPort),
    '-t',
    o.transport === 'tcp' ? 't1' : 'u1',
    '-m',
    String(o.calls ?? 1),
    '-aa',
    '-nostdin',
    '-timeout',
    `${o.timeoutSec ?? 20}s`,
    '-timeout_error',
    '-trace_err',
  ];
  if (o.rtpEcho) args.push('-rtp_echo');
  if (o.extraArgs) args.push(...o.extraArgs);
  for (const [k, v] of Object.entries(o.keys ?? {})) args.push('-key', k, v);
  if (o.remote) args.push(o.remote);
  const child = spawn('sipp', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  const exited = new Promise<{ code: number | null; output: string }>((resolve) =>
    child.once('exit', (code) => {
      running.delete(child);
      let errors = '';
      try {
        for (const f of readdirSync(cwd)) if (f.endsWith('errors.log')) errors += readFileSync(path.join(cwd, f), 'utf8');
      } catch {
        // no error log
      }
      rmSync(cwd, { recursive: true, force: true });
      resolve({ code, output: errors + output.slice(-2000) });
    }),
  );
  // Ready when its SIP socket is bound (UDP) or listening (TCP).
  const deadline = Date.now() + 5000;
  for (;;) {
    if (child.exitCode !== null) break;
    const ready = o.transport === 'tcp' ? tcpListening(port) : udpBound(port);
    if (ready || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    port,
    mediaPort,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

function tcpListening(port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    try {
      // Column 4 is the state; 0A is LISTEN.
      if (
        readFileSync(f, 'utf8')
          .split('\n')
          .some((l) => {
            const c = l.trim().split(/\s+/);
            return c[1]?.endsWith(`:${hex}`) && c[3] === '0A';
          })
      )
        return true;
    } catch {
      // not Linux or no IPv6
    }
  }
  return false;
}
