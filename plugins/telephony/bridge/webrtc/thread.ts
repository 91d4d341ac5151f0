/**
 * The WebRTC thread: every room's werift connection (ICE, DTLS-SRTP, RTP both ways) and its 20 ms
 * pacer live here, away from the main thread's engine WebSockets and control API, at the raised
 * priority the RTP sending thread gets (media/thread.ts `raisePriority`). The main thread talks to
 * it through thread-host.ts; audio crosses as transferred Int16Arrays (16 kHz in 80 ms batches
 * from the visitor, 8 kHz chunks towards them).
 */
import { isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { randomBytes } from 'node:crypto';
import { raisePriority } from '../media/thread.ts';
import { pacer } from '../media/session.ts';
import { Gaps, threadGapDeps } from './gaps.ts';
import { AES_CM_128_HMAC_SHA1_80, SrtpProtector, SrtpUnprotector } from './srtp.ts';
import { WebRtcLeg, type PlayRate, type WebRtcOptions } from './leg.ts';
import { installNativeX25519 } from './native-x25519.ts';
import { watchGc } from './gc-stats.ts';

export interface WebRtcThreadData {
  entry: string;
  nice: number;
  rtPriority: number;
  webrtc: WebRtcOptions;
}

export type ToWebRtcThread =
  | { op: 'open'; id: number; offerSdp: string; mediaTimeoutMs: number }
  | { op: 'play'; id: number; pcm: Int16Array; rate: PlayRate }
  | { op: 'flush'; id: number }
  | { op: 'stop'; id: number };

/** JIT and OpenSSL's first cipher fetch of the SRTP path, before the first room sends. */
function warmUp(): void {
  const keys = { profile: AES_CM_128_HMAC_SHA1_80, srtpSessionKey: randomBytes(16), srtpSessionSalt: randomBytes(14), srtpSessionAuthTag: randomBytes(20) };
  const tx = new SrtpProtector(keys);
  const rx = new SrtpUnprotector(keys);
  const payload = Buffer.alloc(160, 0xff);
  for (let i = 0; i < 300; i++) rx.unprotect(tx.protect(0, false, i, i * 160, 1, payload));
}

function serve(port: MessagePort, d: WebRtcThreadData): void {
  port.postMessage({ op: 'priority', priority: raisePriority(d.rtPriority, d.nice) });
  // Every join's DTLS handshake runs here, between the rooms' frames: OpenSSL's X25519, not tweetnacl's.
  installNativeX25519();
  // The thread's GC pauses, for /stats (webrtcGc): what the rooms' frames wait behind.
  const gc = watchGc();
  // Collections and joins' offers wait for the gap after the rooms' frames (gaps.ts).
  const gaps = new Gaps(
    threadGapDeps(() => {
      const due = pacer.earliestDue();
      return due === null ? null : due - process.hrtime.bigint();
    }),
  );
  pacer.afterRun = () => gaps.afterRun();
  warmUp();
  setInterval(() => {
    gc.stats.scavengesInGaps = gaps.collections;
    port.postMessage({ op: 'gc', stats: gc.stats });
  }, 1000).unref();
  const legs = new Map<number, WebRtcLeg>();
  /** Offers waiting for a gap (a stop meanwhile drops them). */
  const pending = new Set<number>();
  const open = (m: Extract<ToWebRtcThread, { op: 'open' }>): void => {
    if (!pending.delete(m.id)) return;
    const id = m.id;
    const leg = new WebRtcLeg(
      {
        onAudio16k: (pcm) => port.postMessage({ op: 'audio', id, pcm }, [pcm.buffer as ArrayBuffer]),
        onConnected: () => port.postMessage({ op: 'connected', id }),
        onGone: (why) => port.postMessage({ op: 'gone', id, why }),
        onVoice: () => port.postMessage({ op: 'voice', id }),
        onDrained: () => port.postMessage({ op: 'drained', id }),
      },
      d.webrtc,
      m.mediaTimeoutMs,
    );
    legs.set(id, leg);
    leg.answer(m.offerSdp).then(
      (sdp) => port.postMessage({ op: 'answer', id, sdp, codec: leg.codec }),
      // eslint-disable-next-line @typescript-eslint/use-unknown-in-catch-callback-variable -- the engine's, the transport's and our own rejections are Errors
      (err: Error) => {
        legs.delete(id);
        void leg.stop();
        port.postMessage({ op: 'error', id, message: err.message });
      },
    );
  };
  port.on('message', (m: ToWebRtcThread) => {
    switch (m.op) {
      case 'open':
        pending.add(m.id);
        gaps.run(() => open(m));
        return;
      case 'play':
        legs.get(m.id)?.play(m.pcm, m.rate);
        return;
      case 'flush':
        legs.get(m.id)?.flush();
        return;
      case 'stop': {
        const leg = legs.get(m.id);
        legs.delete(m.id);
        pending.delete(m.id);
        if (!leg) return port.postMessage({ op: 'stopped', id: m.id, metrics: null });
        void leg.stop().then((metrics) => port.postMessage({ op: 'stopped', id: m.id, metrics }));
        return;
      }
    }
  });
}

if (!isMainThread && parentPort && (workerData as { entry?: string })?.entry?.includes('webrtc/thread')) serve(parentPort, workerData as WebRtcThreadData);
