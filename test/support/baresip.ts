/**
 * Debian's baresip (1.0.0, /usr/bin/baresip) as a real desk phone in tests: one account, auto
 * answer, G.711 (and G.722 and SDES SRTP when asked, `modules`), a sine tone as its microphone (`ausine`), what it hears recorded as WAV (`sndfile`), no
 * sound card (`aubridge` as the player), driven and watched through `ctrl_tcp` (netstring JSON:
 * commands in, events such as REGISTER_OK, CALL_INCOMING, CALL_ESTABLISHED, CALL_CLOSED out).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './sipp.ts';
import { until as pollUntil } from './until.ts';

export interface BaresipOptions {
  /** The account line (baresip `accounts` syntax), e.g. `<sip:alice@127.0.0.1:5061;transport=tls>;auth_pass=…`. */
  account: string;
  /** PEM file of the CA the phone trusts for SIP over TLS. */
  caFile?: string;
  /** Its microphone: a sine of this frequency (default 1000 Hz). */
  sineHz?: number;
  /** `-s`: every SIP message with its transport and addresses in `output`. */
  trace?: boolean;
  /**
   * More modules beside G.711: `g722.so` (wideband, spandsp's G.722), `srtp.so` (SDES SRTP, for an
   * account's `mediaenc=srtp-mand`). Without them the phone offers G.711 and plain RTP only.
   */
  modules?: string[];
}

export interface BaresipEvent {
  type: string;
  [k: string]: unknown;
}

export class Baresip {
  readonly events: BaresipEvent[] = [];
  output = '';
  #ctrl: net.Socket | null = null;
  #buf = Buffer.alloc(0);
  #token = 0;

  private constructor(
    readonly dir: string,
    private readonly child: ChildProcess,
  ) {}

  static async start(o: BaresipOptions): Promise<Baresip> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baresip-'));
    const rec = path.join(dir, 'rec');
    fs.mkdirSync(rec);
    // Up to three starts, each on fresh ports: under a loaded suite a port picked free can be taken
    // by another test before baresip binds it (it then never opens its control port).
    for (let attempt = 1; ; attempt++) {
      const [sipPort, ctrlPort] = [await freePort(), await freePort()];
      const config = [
        'poll_method\t\tepoll',
        // Its SDP names loopback, where it sends from (the bridge takes symmetric RTP only).
        'net_interface\t\t127.0.0.1',
        `sip_listen\t\t127.0.0.1:${sipPort}`,
        ...(o.caFile ? [`sip_cafile\t\t${o.caFile}`] : []),
        'audio_player\t\taubridge,nowhere',
        'audio_alert\t\taubridge,nowhere',
        `audio_source\t\tausine,${o.sineHz ?? 1000}`,
        'ausrc_srate\t\t48000',
        'ausrc_channels\t\t2',
        'module_path\t\t/usr/lib/baresip/modules',
        'module\t\t\tg711.so',
        ...(o.modules ?? []).map((m) => `module\t\t\t${m}`),
        'module\t\t\tausine.so',
        'module\t\t\taubridge.so',
        'module\t\t\tsndfile.so',
        'module_app\t\tmenu.so',
        'module_app\t\taccount.so',
        'module_app\t\tctrl_tcp.so',
        `ctrl_tcp_listen\t\t127.0.0.1:${ctrlPort}`,
        `snd_path\t\t${rec}`,
      ];
      fs.writeFileSync(path.join(dir, 'config'), config.join('\n') + '\n');
      fs.writeFileSync(path.join(dir, 'accounts'), o.account + '\n');
      const child = spawn('/usr/bin/baresip', ['-f', dir, ...(o.trace ? ['-s'] : [])], { stdio: ['pipe', 'pipe', 'pipe'] });
      const b = new Baresip(dir, child);
      child.stdout!.on('data', (d: Buffer) => (b.output += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (b.output += d.toString()));
      try {
        await pollUntil(() => b.connect(ctrlPort), 10_000, `baresip control port on ${ctrlPort}`);
        return b;
      } catch (e) {
        child.kill('SIGKILL');
        if (attempt >= 3) throw new Error(`${(e as Error).message} (3 starts; exit ${String(child.exitCode)}; it said: ${b.output.slice(-300)})`, { cause: e });
      }
    }
  }

  private async connect(port: number): Promise<boolean> {
    return new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => {
        this.#ctrl = s;
        s.on('data', (d: Buffer) => this.onData(d));
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
  }

  private onData(d: Buffer): void {
    this.#buf = Buffer.concat([this.#buf, d]);
    for (;;) {
      const colon = this.#buf.indexOf(0x3a);
      if (colon < 0) return;
      const len = Number(this.#buf.subarray(0, colon).toString());
      if (this.#buf.length < colon + 1 + len + 1) return;
      const json = this.#buf.subarray(colon + 1, colon + 1 + len).toString();
      this.#buf = this.#buf.subarray(colon + 2 + len);
      try {
        const m = JSON.parse(json) as BaresipEvent & { event?: boolean };
        if (m.event) this.events.push(m);
      } catch {
        // not JSON: ignore
      }
    }
  }

  /** A ctrl_tcp command (`hangup`, `dial sip:…`, …). */
  command(command: string, params = ''): void {
    const json = JSON.stringify({ command, params, token: `t${++this.#token}` });
    this.#ctrl?.write(`${Buffer.byteLength(json)}:${json},`);
  }

  /** The first event of `type` (from `since`, an index into `events`). */
  waitEvent(type: string, ms = 10_000, since = 0): Promise<BaresipEvent> {
    return pollUntil(
      () => this.events.slice(since).find((e) => e.type === type) ?? null,
      ms,
      `baresip ${type} (saw ${this.events.map((e) => e.type).join(',')})`,
    );
  }

  /**
   * Registered: its REGISTER_OK event, or (when the registration was done before the control
   * connection was up, as over UDP it often is) the account line it prints for a 200.
   */
  waitRegistered(ms = 15_000): Promise<true> {
    return pollUntil(
      () => this.events.some((e) => e.type === 'REGISTER_OK') || /\} 200 OK \(.*\) \[\d+ bindings?\]/.test(this.output) || null,
      ms,
      `baresip registered (saw ${this.events.map((e) => e.type).join(',')})\n${this.output.slice(-2000)}`,
    );
  }

  /** Samples of what the phone heard in its last call (sndfile's decoded stream) and their rate. */
  heard(): { rate: number; samples: Int16Array } {
    const rec = path.join(this.dir, 'rec');
    const files = fs
      .readdirSync(rec)
      .filter((f) => f.endsWith('-dec.wav'))
      .map((f) => path.join(rec, f))
      .sort((a, b) => fs.statSync(a).mtimeMs - fs.statSync(b).mtimeMs);
    const last = files.at(-1);
    if (!last) return { rate: 0, samples: new Int16Array(0) };
    const wav = fs.readFileSync(last);
    const channels = wav.readUInt16LE(22);
    const rate = wav.readUInt32LE(24);
    const data = wav.indexOf('data', 12);
    const bytes = wav.subarray(data + 8);
    const all = new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + (bytes.length & ~1)));
    // The first channel of interleaved frames.
    return { rate, samples: channels > 1 ? all.filter((_, i) => i % channels === 0) : all };
  }

  async stop(): Promise<void> {
    this.#ctrl?.destroy();
    if (this.child.exitCode === null) {
      const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
      this.child.kill('SIGTERM');
      const t = setTimeout(() => this.child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(t);
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
