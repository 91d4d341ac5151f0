/**
 * The media threads (ARCHITECTURE.md: media timing must not share an event loop with the rest).
 * Started by ThreadMediaHost through worker-boot.mjs in one of three roles:
 *  - `tx`: the RTP senders and their 20 ms pacer, nothing else. It allocates almost nothing per
 *    packet, so its garbage collections stay short, and it runs at real-time priority when the
 *    system allows it.
 *  - `rx`: the RTP receivers (one datagram object per packet, the source of most GC work), the
 *    jitter buffers, DTMF, G.711 and G.722 decoding, 8→16 kHz resampling of G.711 for the engine,
 *    and a bridged leg's audio into the other leg's ring at that ring's rate.
 *  - `both`: the two on one socket in one thread, where the two-socket split is unavailable
 *    (not Linux).
 * The call logic talks to them by messages (media/thread-host.ts); the AI's audio goes to the
 * sending thread through a shared ring per call (media/ring.ts), not by message.
 */
import { parentPort, workerData, isMainThread, type MessagePort } from 'node:worker_threads';
import { readlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import type dgram from 'node:dgram';
import { PortPool, RtpReceiver, RtpSender, MediaSession, bindSocket, pacer } from './session.ts';
import { RingReader, RingWriter } from './ring.ts';
import { SenderInfo } from './rtcp.ts';
import { legRate, upsample8to16Into } from './audio.ts';
import { Decimator16to8 } from './resample.ts';
import { InputBatcher, type LegStart, type LegTarget } from './leg.ts';

export type MediaRole = 'tx' | 'rx' | 'both';

export type ToThread =
  | { op: 'open'; id: number } // both: bind a port of its own
  | { op: 'reserve'; id: number } // rx: find a free port
  | { op: 'bind'; id: number; port: number } // tx, rx: bind the reserved port (shared)
  | { op: 'start'; id: number; o: LegStart; ring: SharedArrayBuffer; info: SharedArrayBuffer }
  | { op: 'kick'; id: number } // tx, both: the first AI audio was written to the ring
  | { op: 'retarget'; id: number; t: LegTarget }
  | { op: 'forward'; id: number; ring: SharedArrayBuffer; rate: 8000 | 16000 } // rx, both: far-end audio into that ring, at its rate
  | { op: 'stop'; id: number };

export interface ThreadData {
  entry: string;
  role: MediaRole;
  min: number;
  max: number;
  host: string;
  /** nice value asked for (0 = leave). */
  nice: number;
  /** SCHED_FIFO priority asked for (0 = none); falls back to `nice` when refused. */
  rtPriority: number;
  /** RTCP report interval (default RFC 3550's 5 s minimum for two parties). */
  rtcpIntervalMs?: number;
}

/**
 * Raises this thread's scheduling priority (Linux: both calls act on one thread when given its
 * TID, which /proc/thread-self names). SCHED_FIFO goes through util-linux `chrt`, since Node has
 * no sched_setscheduler binding; it needs CAP_SYS_NICE (or root) and an RLIMIT_RTPRIO, and the
 * kernel's RT throttling (sched_rt_runtime_us) still leaves 5 % to everything else. Returns what
 * was obtained, for the log.
 */
export function raisePriority(rtPriority: number, nice: number, run = execFileSync): string {
  if (process.platform !== 'linux') return 'default';
  let tid = 0;
  try {
    tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
  } catch {
    return 'default';
  }
  if (!(tid > 0)) return 'default';
  if (rtPriority > 0) {
    try {
      run('chrt', ['-f', '-p', String(rtPriority), String(tid)], { stdio: 'ignore', timeout: 2000 });
      return `fifo:${rtPriority}`;
    } catch {
      // not permitted or no chrt: try nice
    }
  }
  if (nice !== 0) {
    try {
      os.setPriority(tid, nice);
      return `nice:${nice}`;
    } catch {
      // not permitted: stay at the default priority
    }
  }
  return 'default';
}

interface TxEntry {
  kind: 'tx';
  socket: dgram.Socket;
  sender: RtpSender | null;
}
interface RxEntry {
  kind: 'rx';
  socket: dgram.Socket;
  rtcp: dgram.Socket;
  receiver: RtpReceiver | null;
}
interface BothEntry {
  kind: 'both';
  socket: dgram.Socket;
  rtcp: dgram.Socket;
  session: MediaSession | null;
}
type Entry = TxEntry | RxEntry | BothEntry;

function serve(port: MessagePort, d: ThreadData): void {
  const priority = raisePriority(d.rtPriority, d.nice);
  port.postMessage({ op: 'priority', priority });
  const pool = new PortPool(d.min, d.max, d.host);
  const legs = new Map<number, Entry>();
  /** Each started leg's rate (its receiver's frames: 16 kHz G.722, 8 kHz G.711). */
  const codecRates = new Map<number, 8000 | 16000>();
  /** RTCP sockets (RTP port + 1) of ports reserved but not bound yet (rx). */
  const reserved = new Map<number, dgram.Socket>();
  const fail = (id: number, err: unknown) => port.postMessage({ op: 'error', id, message: err instanceof Error ? err.message : String(err) });

  port.on('message', (m: ToThread) => {
    // Frames due now leave first: the port delivers a whole batch of messages back to back.
    pacer.serveDue();
    const l = legs.get(m.id);
    switch (m.op) {
      case 'open':
        pool.open().then(
          ({ rtp, rtcp }) => {
            legs.set(m.id, { kind: 'both', socket: rtp, rtcp, session: null });
            port.postMessage({ op: 'opened', id: m.id, port: rtp.address().port });
          },
          (err: unknown) => fail(m.id, err),
        );
        return;
      case 'reserve':
        pool.reserve().then(
          ({ port: p, rtcp }) => {
            reserved.get(m.id)?.close(); // a retry: the earlier reservation is given up
            reserved.set(m.id, rtcp);
            port.postMessage({ op: 'reserved', id: m.id, port: p });
          },
          (err: unknown) => fail(m.id, err),
        );
        return;
      case 'bind':
        bindSocket(m.port, d.host, true).then(
          (socket) => {
            if (!socket) {
              if (d.role === 'rx') reserved.get(m.id)?.close();
              reserved.delete(m.id);
              return fail(m.id, `RTP port ${m.port} was taken`);
            }
            if (d.role === 'tx') {
              // Datagrams reach the receiving thread's socket (bound after this one); anything
              // that still lands here (a stray, or after that socket closed) is dropped.
              socket.on('message', () => undefined);
              legs.set(m.id, { kind: 'tx', socket, sender: null });
            } else {
              const rtcp = reserved.get(m.id)!;
              reserved.delete(m.id);
              legs.set(m.id, { kind: 'rx', socket, rtcp, receiver: null });
            }
            port.postMessage({ op: 'opened', id: m.id, port: m.port });
          },
          (err: unknown) => fail(m.id, err),
        );
        return;
      case 'start':
        if (!l) return;
        codecRates.set(m.id, legRate(m.o.codec));
        if (l.kind === 'tx' && !l.sender) {
          l.sender = new RtpSender({ socket: l.socket, ...m.o, source: new RingReader(m.ring), info: new SenderInfo(m.info) });
          l.sender.start();
        } else if (l.kind === 'rx' && !l.receiver) {
          const rtcp = { socket: l.rtcp, remotePort: m.o.remoteRtcpPort ?? m.o.remotePort + 1, info: new SenderInfo(m.info), intervalMs: d.rtcpIntervalMs };
          l.receiver = new RtpReceiver({ socket: l.socket, ...m.o, connectTo: m.o.remotePort, rtcp, ...handlers(port, m.id) });
          l.receiver.start();
        } else if (l.kind === 'both' && !l.session) {
          const rtcp = { socket: l.rtcp, remotePort: m.o.remoteRtcpPort ?? m.o.remotePort + 1, intervalMs: d.rtcpIntervalMs };
          l.session = new MediaSession({
            socket: l.socket,
            ...m.o,
            source: new RingReader(m.ring),
            info: new SenderInfo(m.info),
            rtcp,
            ...handlers(port, m.id),
          });
          l.session.start();
        }
        return;
      case 'retarget':
        if (l?.kind === 'tx') l.sender?.retarget(m.t.remoteHost, m.t.remotePort);
        else if (l?.kind === 'rx') l.receiver?.retarget(m.t);
        else if (l?.kind === 'both') l.session?.retarget(m.t);
        return;
      case 'forward': {
        // The other call's ring gets a producer here; the call logic stopped writing to it.
        const sink = relay(new RingWriter(m.ring), codecRates.get(m.id) ?? 8000, m.rate);
        if (l?.kind === 'rx' && l.receiver) l.receiver.forward = sink;
        else if (l?.kind === 'both') l.session?.forwardTo(sink);
        return;
      }
      case 'kick':
        if (l?.kind === 'tx') l.sender?.audioQueued();
        else if (l?.kind === 'both') l.session?.audioQueued();
        return;
      case 'stop': {
        legs.delete(m.id);
        codecRates.delete(m.id);
        let metrics: object | null = null;
        if (l?.kind === 'both' && l.session) {
          metrics = l.session.metrics();
          l.session.stop(); // closes both sockets
        } else if (l) {
          const half = l.kind === 'tx' ? l.sender : l.kind === 'rx' ? l.receiver : null;
          if (half) {
            metrics = half.metrics();
            half.stop(); // a receiver also says RTCP BYE and closes the RTCP socket
          } else if (l.kind !== 'tx') {
            l.rtcp.close();
          }
          try {
            l.socket.close();
          } catch {
            // already closed
          }
        } else {
          reserved.get(m.id)?.close(); // stopped between reserve and bind
          reserved.delete(m.id);
        }
        port.postMessage({ op: 'stopped', id: m.id, metrics });
        return;
      }
    }
  });
}

/**
 * A bridged leg's far-end frames (at `from`, reused by the receiver) into the other leg's ring at
 * `to`: as they are when the rates agree (two G.722 legs stay wideband), low-passed to 8 kHz, or
 * interpolated to 16 kHz. Live audio: what does not fit is dropped (RingWriter.writeOrDrop).
 */
function relay(ring: RingWriter, from: 8000 | 16000, to: 8000 | 16000): (pcm: Int16Array) => void {
  if (from === to) return (pcm) => void ring.writeOrDrop(pcm);
  if (from === 16000) {
    const down = new Decimator16to8();
    let out = new Int16Array(160);
    return (pcm) => {
      if (out.length * 2 < pcm.length + 1) out = new Int16Array((pcm.length >> 1) + 1);
      void ring.writeOrDrop(out.subarray(0, down.processInto(pcm, out)));
    };
  }
  let out = new Int16Array(320);
  let last = 0;
  return (pcm) => {
    if (out.length !== pcm.length * 2) out = new Int16Array(pcm.length * 2);
    last = upsample8to16Into(pcm, last, out, 0);
    void ring.writeOrDrop(out);
  };
}

/** Far-end audio to the call logic in 80 ms batches at 16 kHz, DTMF digits, and a media timeout. */
function handlers(
  port: MessagePort,
  id: number,
): { onAudio: (pcm: Int16Array) => void; onAudio16k: (pcm: Int16Array) => void; onDtmf: (digit: string) => void; onMediaTimeout: () => void } {
  const batcher = new InputBatcher((pcm) => port.postMessage({ op: 'audio', id, pcm }, [pcm.buffer as ArrayBuffer]), 1280, upsample8to16Into);
  return {
    onAudio: (pcm) => batcher.push(pcm),
    onAudio16k: (pcm) => batcher.push16k(pcm),
    onDtmf: (digit) => port.postMessage({ op: 'dtmf', id, digit }),
    onMediaTimeout: () => port.postMessage({ op: 'timeout', id }),
  };
}

// Only as a media thread (the WebRTC thread imports raisePriority from here too).
if (!isMainThread && parentPort && (workerData as Partial<ThreadData> | null)?.role) serve(parentPort, workerData as ThreadData);
