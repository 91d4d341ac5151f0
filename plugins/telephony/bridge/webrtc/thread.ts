/**
 * The WebRTC thread: every room's werift connection (ICE, DTLS-SRTP, RTP both ways) and its 20 ms
 * pacer live here, away from the main thread's engine WebSockets and control API, at the raised
 * priority the RTP sending thread gets (media/thread.ts `raisePriority`). The main thread talks to
 * it through thread-host.ts; audio crosses as transferred Int16Arrays (16 kHz in 80 ms batches
 * from the visitor, 8 kHz chunks towards them).
 */
import { isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { raisePriority } from '../media/thread.ts';
import { WebRtcLeg, type WebRtcOptions } from './leg.ts';
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
  | { op: 'play'; id: number; pcm: Int16Array }
  | { op: 'flush'; id: number }
  | { op: 'stop'; id: number };

function serve(port: MessagePort, d: WebRtcThreadData): void {
  port.postMessage({ op: 'priority', priority: raisePriority(d.rtPriority, d.nice) });
  // Every join's DTLS handshake runs here, between the rooms' frames: OpenSSL's X25519, not tweetnacl's.
  installNativeX25519();
  // The thread's GC pauses, for /stats (webrtcGc): what the rooms' frames wait behind.
  const gc = watchGc();
  setInterval(() => port.postMessage({ op: 'gc', stats: gc.stats }), 1000).unref();
  const legs = new Map<number, WebRtcLeg>();
  port.on('message', (m: ToWebRtcThread) => {
    switch (m.op) {
      case 'open': {
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
          (err: Error) => {
            legs.delete(id);
            void leg.stop();
            port.postMessage({ op: 'error', id, message: err.message });
          },
        );
        return;
      }
      case 'play':
        legs.get(m.id)?.play(m.pcm);
        return;
      case 'flush':
        legs.get(m.id)?.flush();
        return;
      case 'stop': {
        const leg = legs.get(m.id);
        legs.delete(m.id);
        if (!leg) return port.postMessage({ op: 'stopped', id: m.id, metrics: null });
        void leg.stop().then((metrics) => port.postMessage({ op: 'stopped', id: m.id, metrics }));
        return;
      }
    }
  });
}

if (!isMainThread && parentPort && (workerData as { entry?: string })?.entry?.includes('webrtc/thread')) serve(parentPort, workerData as WebRtcThreadData);
