/** Media in the calling thread: used on the media thread itself, and when the thread is off. */
import type dgram from 'node:dgram';
import { MediaSession, PortPool } from './session.ts';
import { upsample8to16Into } from './audio.ts';
import { EMPTY_METRICS, InputBatcher, type LegHandlers, type LegMetrics, type LegStart, type LegTarget, type MediaHost, type MediaLeg } from './leg.ts';

export class InlineLeg implements MediaLeg {
  private session: MediaSession | null = null;
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
  play(pcm8k: Int16Array): void {
    this.session?.play(pcm8k);
  }
  flush(): void {
    this.session?.flush();
  }
  retarget(t: LegTarget): void {
    this.session?.retarget(t);
  }
  bridgeTo(other: MediaLeg): void {
    this.session?.flush();
    this.session?.forwardTo((pcm) => other.play(pcm.slice()));
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
