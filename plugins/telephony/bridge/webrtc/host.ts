/**
 * The bridge's browser rooms (CONTROL-API.md "Rooms"): `POST /rooms` opens one, and the call
 * routes (`GET /calls`, `POST /calls/:id/hangup`) reach them through `get`/`list` here, so bridge.ts
 * only delegates.
 */
import type { VoiceEngine } from '../engine/types.ts';
import type { EmitFn } from '../call.ts';
import type { OpenRoom, OpenRoomAnswer } from '../../control.ts';
import { log } from '../log.ts';
import type { WebRtcOptions } from './leg.ts';
import { RoomCall, type RoomMetrics } from './room.ts';

export interface RoomHostOptions {
  engineFactory: (cfg: OpenRoom['engine']) => VoiceEngine;
  emit: EmitFn;
  webrtc: WebRtcOptions;
  mediaTimeoutMs?: number;
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

export class RoomHost {
  private readonly rooms = new Map<string, RoomCall>();
  readonly recent: RoomMetrics[] = [];

  constructor(private readonly o: RoomHostOptions) {}

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
      webrtc: this.o.webrtc,
      mediaTimeoutMs: this.o.mediaTimeoutMs,
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

  stopAll(): void {
    for (const r of this.rooms.values()) r.hangup('failed', 'bridge shutting down');
  }
}
