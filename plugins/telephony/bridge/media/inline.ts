/** Media in the calling thread: used on the media thread itself, and when the thread is off. */
import type dgram from 'node:dgram';
import { MediaSession, PortPool } from './session.ts';
import { legRate, upsample8to16Into } from './audio.ts';
import { ToLegRate } from './resample.ts';
import {
  EMPTY_METRICS,
  InputBatcher,
  type LegHandlers,
  type LegMetrics,
  type LegStart,
  type LegTarget,
  type MediaHost,
  type MediaLeg,
  type PlayRate,
} from './leg.ts';

export class InlineLeg implements MediaLeg {
  private session: MediaSession | null = null;
  /** Brings what play() gets to the leg's rate (made at start, with the codec). */
  private to: ToLegRate | null = null;
  private stopped = false;
  readonly port: number;

  constructor(
    private readonly socket: dgram.Socket,
    private readonly rtcpSocket: dgram.Socket,
    private readonly rtcpIntervalMs?: number,
  ) {
    this.port = socket.address().port;
  }

  start(o: LegStart, h: LegHandlers): void {
    if (this.session || this.stopped) return;
    this.to = new ToLegRate(legRate(o.codec));
    const batcher = new InputBatcher(h.onAudio16k, 1280, upsample8to16Into);
    const rtcp = { socket: this.rtcpSocket, remotePort: o.remoteRtcpPort ?? o.remotePort + 1, intervalMs: this.rtcpIntervalMs };
    this.session = new MediaSession({
      socket: this.socket,
      ...o,
      rtcp,
      onAudio: (pcm) => batcher.push(pcm),
      onAudio16k: (pcm) => batcher.push16k(pcm),
      onDtmf: h.onDtmf,
      onMediaTimeout: h.onMediaTimeout,
    });
    this.session.start();
  }
  play(pcm: Int16Array, rate: PlayRate = 8000): void {
    if (this.to) this.session?.play(this.to.convert(pcm, rate));
  }
  flush(): void {
    this.session?.flush();
  }
  retarget(t: LegTarget): void {
    this.session?.retarget(t);
  }
  bridgeTo(other: MediaLeg): void {
    this.session?.flush();
    const rate = this.to?.rate ?? 8000;
    this.session?.forwardTo((pcm) => other.play(pcm.slice(), rate));
  }
  get queuedMs(): number {
    return this.session?.queuedMs ?? 0;
  }
  get firstAudioSentAt(): bigint | null {
    return this.session?.firstAudioSentAt ?? null;
  }
  async stop(): Promise<LegMetrics> {
    if (this.stopped) return EMPTY_METRICS;
    this.stopped = true;
    const s = this.session;
    if (!s) {
      this.socket.close();
      this.rtcpSocket.close();
      return EMPTY_METRICS;
    }
    const m = s.metrics();
    s.stop();
    return m;
  }
}

export class InlineMediaHost implements MediaHost {
  private readonly pool: PortPool;
  constructor(
    min: number,
    max: number,
    host: string,
    private readonly rtcpIntervalMs?: number,
  ) {
    this.pool = new PortPool(min, max, host);
  }
  async open(): Promise<MediaLeg> {
    const { rtp, rtcp } = await this.pool.open();
    return new InlineLeg(rtp, rtcp, this.rtcpIntervalMs);
  }
  async close(): Promise<void> {
    // Nothing beyond the legs, which close themselves.
  }
}
