/**
 * Runs real SIPp (Debian `sip-tester`) as the far end of the bridge's calls: ephemeral ports on
 * 127.0.0.1, `-m 1`, a global timeout, and always killed by `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { readFileSync, readdirSync, readlinkSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const SCENARIOS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'sipp');
export const G711A_PCAP = '/usr/share/sip-tester/g711a.pcap';

/**
 * A port free for both UDP and TCP right now (SIPp needs it on the transport we use), even (SIPp
 * media ports must be), and below the kernel's ephemeral range (32768-60999 on Linux) and the
 * bridges' RTP ranges (30000-50200 in these tests): a port handed out by bind(0) elsewhere in the
 * suite, or an RTP port a bridge in a parallel file opens, must not land on it between this check
 * and SIPp's own bind.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 21000 + 2 * Math.floor(Math.random() * 4500);
    const udp = await new Promise<boolean>((r) => {
      const u = dgram.createSocket('udp4');
      u.once('error', () => r(false));
      u.bind(port, '127.0.0.1', () => u.close(() => r(true)));
    });
    if (!udp) continue;
    const tcp = await new Promise<boolean>((r) => {
      const s = net.createServer();
      s.once('error', () => r(false));
      s.listen(port, '127.0.0.1', () => s.close(() => r(true)));
    });
    if (tcp) return port;
  }
}

/** The socket inodes bound to `port` (UDP) or listening on it (TCP), from /proc/net. */
function socketInodes(port: number, transport: 'udp' | 'tcp'): Set<string> {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const f of transport === 'tcp' ? ['/proc/net/tcp', '/proc/net/tcp6'] : ['/proc/net/udp', '/proc/net/udp6']) {
    try {
      for (const l of readFileSync(f, 'utf8').split('\n')) {
        // Columns: sl, local address, remote address, state (0A is LISTEN), ..., inode (10th).
        const c = l.trim().split(/\s+/);
        if (c[1]?.endsWith(`:${hex}`) && (transport === 'udp' || c[3] === '0A')) inodes.add(c[9]);
      }
    } catch {
      // not Linux or no IPv6
    }
  }
  return inodes;
}

/**
 * True once process `pid` itself holds the port: another process that took the port first (SIPp
 * then fails to bind and exits) must not pass for a ready SIPp, or the calls go into its socket.
 */
function heldBy(pid: number, port: number, transport: 'udp' | 'tcp'): boolean {
  const inodes = socketInodes(port, transport);
  if (inodes.size === 0) return false;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`, 'utf8'));
      if (m && inodes.has(m[1])) return true;
    }
  } catch {
    // the process is gone, or /proc is not there
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
  // A port picked free can still be taken before SIPp binds it: then SIPp exits, and a fresh
  // pair of ports is tried (not when the caller named the port).
  for (let attempt = 1; ; attempt++) {
    const run = await startOnce(o, o.port ?? (await freePort()));
    if (run.ready || o.port !== undefined || attempt === 3) {
      if (!run.ready) {
        await run.stop();
        throw new Error(`SIPp did not take port ${run.port}: ${(await run.exited).output}`);
      }
      return run;
    }
    await run.stop();
  }
}

async function startOnce(o: SippOptions, port: number): Promise<SippRun & { ready: boolean }> {
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
  // Ready when SIPp itself holds its SIP socket: bound (UDP) or listening (TCP).
  const deadline = Date.now() + 10_000;
  let ready = false;
  while (child.exitCode === null && child.pid !== undefined && Date.now() < deadline) {
    ready = heldBy(child.pid, port, o.transport ?? 'udp');
    if (ready) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  if (!ready && child.exitCode !== null) {
    // Gone before we looked: a short UAC scenario may already be done, which is its test's
    // business; only a failed bind is a reason to start again.
    ready = !/bind|already in use/i.test((await exited).output);
  }
  return {
    ready,
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
