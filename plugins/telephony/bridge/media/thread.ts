/**
 * The media thread (ARCHITECTURE.md: media timing must not share an event loop with the rest).
 * Owns the RTP sockets and the 20 ms pacer; the call logic talks to it by messages. Started by
 * ThreadMediaHost through worker-boot.mjs.
 */
import { parentPort, workerData, isMainThread } from 'node:worker_threads';
import { readlinkSync } from 'node:fs';
import os from 'node:os';
import { InlineMediaHost, type InlineLeg } from './inline.ts';
import type { LegStart } from './leg.ts';

export type ToThread =
  | { op: 'open'; id: number }
  | { op: 'start'; id: number; o: LegStart }
  | { op: 'play'; id: number; pcm: Int16Array }
  | { op: 'flush'; id: number }
  | { op: 'stop'; id: number };

if (!isMainThread && parentPort) {
  const port = parentPort;
  const { min, max, host, nice } = workerData as { min: number; max: number; host: string; nice: number };
  // A frame is due every 20 ms per call: when the machine is busy the scheduler must run this
  // thread first (as media servers run their RTP threads). Linux applies setpriority(2) to one
  // thread when given its TID; /proc/thread-self names it. Raising priority needs CAP_SYS_NICE:
  // without it this quietly stays at the default priority.
  if (nice !== 0 && process.platform === 'linux') {
    try {
      os.setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), nice);
    } catch {
      // not permitted or no procfs: run at normal priority
    }
  }
  const media = new InlineMediaHost(min, max, host);
  const legs = new Map<number, { leg: InlineLeg; plays: number; reported: number }>();
  // Queue levels go back to the call logic (for "hang up once the goodbye has played").
  setInterval(() => {
    for (const [id, l] of legs) {
      const ms = l.leg.queuedMs;
      if (ms !== l.reported) {
        l.reported = ms;
        port.postMessage({ op: 'queue', id, ms, plays: l.plays });
      }
    }
  }, 50).unref();
  port.on('message', (m: ToThread) => {
    const l = legs.get(m.id);
    switch (m.op) {
      case 'open':
        media.open().then(
          (leg) => {
            legs.set(m.id, { leg: leg as InlineLeg, plays: 0, reported: 0 });
            port.postMessage({ op: 'opened', id: m.id, port: leg.port });
          },
          (err: Error) => port.postMessage({ op: 'error', id: m.id, message: err.message }),
        );
        return;
      case 'start':
        l?.leg.start(m.o, {
          onAudio16k: (pcm) => port.postMessage({ op: 'audio', id: m.id, pcm }, [pcm.buffer as ArrayBuffer]),
          onDtmf: (digit) => port.postMessage({ op: 'dtmf', id: m.id, digit }),
        });
        return;
      case 'play':
        if (l) {
          l.plays++;
          l.leg.play(m.pcm);
        }
        return;
      case 'flush':
        l?.leg.flush();
        return;
      case 'stop':
        if (!l) {
          port.postMessage({ op: 'stopped', id: m.id, metrics: null });
          return;
        }
        legs.delete(m.id);
        void l.leg.stop().then((metrics) => port.postMessage({ op: 'stopped', id: m.id, metrics }));
        return;
    }
  });
}
