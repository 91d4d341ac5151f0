/**
 * The bridge's browser rooms (CONTROL-API.md "Rooms"): `POST /rooms` opens one, and the call
 * routes (`GET /calls`, `POST /calls/:id/hangup`) reach them through `get`/`list` here, so bridge.ts
 * only delegates.
 */
import os from 'node:os';
import type { VoiceEngine } from '../engine/types.ts';
import type { EmitFn } from '../events.ts';
import type { OpenRoom, OpenRoomAnswer } from '../../control.ts';
import { log } from '../log.ts';
import { WebRtcLeg, type RoomLeg, type WebRtcHandlers, type WebRtcOptions } from './leg.ts';
import { RoomCall, type RoomDeps, type RoomMetrics } from '../calls/room.ts';
import { WebRtcThreadHost } from './thread-host.ts';
import { installNativeX25519 } from './native-x25519.ts';
import type { GcStats } from './gc-stats.ts';

export interface RoomHostOptions {
  engineFactory: (cfg: OpenRoom['engine']) => VoiceEngine;
  emit: EmitFn;
  /** Where a room's AI may hand the visitor (asked of the core). */
  askTransfer?: RoomDeps['askTransfer'];
  /** Rings an office user's endpoints for a room's transfer to a person. */
  ringUser?: RoomDeps['ringUser'];
  /** The SIP side for a room's transfer to a PSTN number. */
  pstn?: RoomDeps['pstn'];
  webrtc: WebRtcOptions;
  mediaTimeoutMs?: number;
  /** Rooms' media on WebRTC threads (default) or in the main event loop. */
  thread?: boolean;
  /** How many WebRTC threads share the rooms (default: webrtcThreadsFromEnv). */
  threads?: number;
  nice?: number;
  rtPriority?: number;
  onPriority?: (priority: string) => void;
}

export class RoomError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    description: string,
  ) {
    super(description);
  }
}

/** `SOVCOMMS_BRIDGE_WEBRTC_HOSTS` (comma-separated addresses) and `…_WEBRTC_PORTS` (`min-max`). */
export function webrtcOptionsFromEnv(env: NodeJS.ProcessEnv): WebRtcOptions {
  const hosts = (env.SOVCOMMS_BRIDGE_WEBRTC_HOSTS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const ports = /^(\d+)-(\d+)$/.exec(env.SOVCOMMS_BRIDGE_WEBRTC_PORTS ?? '');
  const range: [number, number] | undefined = ports && Number(ports[1]) < Number(ports[2]) ? [Number(ports[1]), Number(ports[2])] : undefined;
  return { hostAddresses: hosts.length ? hosts : undefined, portRange: range };
}

/**
 * `SOVCOMMS_BRIDGE_WEBRTC_THREADS`: WebRTC threads the rooms are spread over (default 2, at most
 * the CPUs). Everything of a room's connection runs on its thread's event loop (werift: ICE, the
 * DTLS handshakes of new joins, SRTP both ways, its garbage collections), and any of it that runs
 * when a frame is due delays that frame; two threads on two cores halve what each room waits behind.
 */
export function webrtcThreadsFromEnv(env: NodeJS.ProcessEnv): number {
  const n = Number(env.SOVCOMMS_BRIDGE_WEBRTC_THREADS);
  return Number.isInteger(n) && n >= 1 && n <= 16 ? n : Math.max(1, Math.min(2, os.availableParallelism()));
}

export class RoomHost {
  private readonly rooms = new Map<string, RoomCall>();
  readonly recent: RoomMetrics[] = [];
  /** The WebRTC threads (each started on its first room); empty when rooms run inline. */
  private readonly threads: WebRtcThreadHost[];
  private readonly webrtc: WebRtcOptions;

  constructor(private readonly o: RoomHostOptions) {
    const n = o.thread === false ? 0 : (o.threads ?? webrtcThreadsFromEnv(process.env));
    // Rooms answer a browser's offer with host candidates: ICE lite, so no visitor's join makes
    // the appliance ask a STUN server on the internet (see WebRtcOptions.iceLite).
    this.webrtc = { ...o.webrtc, iceLite: true };
    this.threads = Array.from(
      { length: n },
      () => new WebRtcThreadHost({ webrtc: this.webrtc, nice: o.nice, rtPriority: o.rtPriority, onPriority: o.onPriority }),
    );
    if (!n) installNativeX25519(); // the legs run in this thread (see native-x25519.ts)
  }

  /** The WebRTC threads' scheduling, once one started ('inline' without threads). */
  get priority(): string | null {
    if (!this.threads.length) return 'inline';
    if (!this.rooms.size && !this.recent.length) return null;
    return [...new Set(this.threads.filter((t) => t.started).map((t) => t.priority))].join(',') || null;
  }

  /** Each started WebRTC thread's GC pauses (gc-stats.ts), cumulative. */
  get gc(): GcStats[] {
    return this.threads.flatMap((t) => (t.gc ? [t.gc] : []));
  }

  /** A new room goes to the thread carrying the fewest. */
  private leastLoaded(): WebRtcThreadHost {
    return this.threads.reduce((a, b) => (b.size < a.size ? b : a));
  }

  get size(): number {
    return this.rooms.size;
  }
  get(callId: string): RoomCall | undefined {
    return this.rooms.get(callId);
  }
  list(): RoomCall[] {
    return [...this.rooms.values()];
  }

  /** Opens a room; `capacity` is what the bridge still carries (calls and rooms together). */
  async open(req: OpenRoom, capacity: number): Promise<OpenRoomAnswer> {
    if (this.rooms.has(req.callId)) throw new RoomError(409, 'duplicate_call', `call ${req.callId} is already in progress`);
    if (capacity <= 0) throw new RoomError(503, 'no_capacity', 'the bridge carries its maximum number of calls');
    const room = new RoomCall(req, {
      engineFactory: this.o.engineFactory,
      emit: this.o.emit,
      openLeg: (h, timeout) => (this.threads.length ? this.leastLoaded().open(h, timeout) : new WebRtcLeg(h, this.webrtc, timeout)),
      mediaTimeoutMs: this.o.mediaTimeoutMs,
      askTransfer: this.o.askTransfer,
      ringUser: this.o.ringUser,
      pstn: this.o.pstn,
      onDone: (r) => {
        this.rooms.delete(r.callId);
        log('info', 'room call ended', { callId: r.callId, outcome: r.outcome, errorDetail: r.errorDetail || undefined });
        if (r.metrics) {
          this.recent.push(r.metrics);
          if (this.recent.length > 2000) this.recent.shift();
        }
      },
    });
    this.rooms.set(req.callId, room);
    try {
      const { answerSdp, codec } = await room.open();
      return { accepted: true, callId: req.callId, answerSdp, codec };
    } catch (err) {
      this.rooms.delete(req.callId);
      throw new RoomError(400, 'invalid_request', `offerSdp: ${(err as Error).message}`);
    }
  }

  /**
   * A WebRTC leg that is not a room (the office tab, inbound/officetab-provider.ts): on the same
   * WebRTC thread and pacer as the rooms' legs.
   */
  openLeg(h: WebRtcHandlers, mediaTimeoutMs = 10_000): RoomLeg {
    return this.threads.length ? this.leastLoaded().open(h, mediaTimeoutMs) : new WebRtcLeg(h, this.webrtc, mediaTimeoutMs);
  }

  stopAll(): void {
    for (const r of this.rooms.values()) r.hangup('failed', 'bridge shutting down');
  }

  async close(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.close()));
  }
}
