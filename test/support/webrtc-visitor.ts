/**
 * A browser-room visitor made of werift (the WebRTC stack the bridge uses, here as the other
 * party): offers PCMU (or Opus, as a browser does, with `codec: 'opus'`) with every candidate
 * gathered, sends 20 ms frames of a tone (or silence) once connected, and measures what it
 * receives: packets, sequence gaps, and the energy of the AI's 440 Hz tone. Tests use it where a
 * browser adds nothing; the bench uses it as its load client.
 */
import { RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket, type RTCRtpTransceiver } from 'werift';
// The bridge's Opus (libopus as WebAssembly): opusscript's own wrapper fails past ~40 codecs in a process.
import { OpusDecoder, OpusEncoder } from '../../plugins/telephony/bridge/webrtc/opus.ts';

/** G.711 μ-law of one sample (ITU-T G.711). */
function ulaw(sample: number): number {
  let s = Math.max(-32635, Math.min(32635, sample));
  const sign = s < 0 ? 0x80 : 0;
  if (s < 0) s = -s;
  s += 0x84;
  let exp = 7;
  for (let mask = 0x4000; (s & mask) === 0 && exp > 0; exp--, mask >>= 1);
  const mant = (s >> (exp + 3)) & 0x0f;
  return ~(sign | (exp << 4) | mant) & 0xff;
}
function unulaw(b: number): number {
  const u = ~b & 0xff;
  const t = (((u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4);
  return u & 0x80 ? 0x84 - t : t - 0x84;
}

/** Goertzel power of `hz` in 8 kHz samples, normalised per sample. */
export function tonePower(pcm: ArrayLike<number>, hz: number, rate = 8000): number {
  const k = 2 * Math.cos((2 * Math.PI * hz) / rate);
  let s1 = 0;
  let s2 = 0;
  for (const x of Array.from(pcm)) {
    const s0 = x + k * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return (s1 * s1 + s2 * s2 - k * s1 * s2) / Math.max(1, pcm.length) ** 2;
}

export interface VisitorOptions {
  /** Tone sent to the room (Hz); 0 = silence. */
  toneHz?: number;
  amplitude?: number;
  /** Keep this many ms of received audio for analysis. */
  keepMs?: number;
  /** What the visitor offers: PCMU alone (default) or Opus alone (a browser's first choice). */
  codec?: 'PCMU' | 'opus';
}

/** An Opus visitor sends and decodes at 48 kHz, as a browser does. */
const OPUS_RATE = 48_000;

export class WebRtcVisitor {
  readonly pc: RTCPeerConnection;
  private tr: RTCRtpTransceiver;
  private timer: NodeJS.Timeout | null = null;
  private seq = 1000;
  private ts = 0;
  private phase = 0;
  packetsReceived = 0;
  packetsSent = 0;
  /** Sequence numbers missing in what was received. */
  lost = 0;
  private lastSeq = -1;
  /** Received audio decoded (the first keepMs), at `receivedRate`. */
  readonly received: number[] = [];
  readonly receivedRate: number;
  connected: Promise<void>;
  private readonly opus: { enc: OpusEncoder; dec: OpusDecoder; pcm: Int16Array } | null;

  /**
   * An Opus visitor's tone, encoded once: one second (a whole number of cycles, so it repeats
   * without a step) sent over and over. Encoding 50 frames a second for each of 45 visitors kept
   * this process (it also runs the fake AI engine) busier than the bridge under test.
   */
  private readonly loop: Buffer[] | null = null;

  constructor(private readonly o: VisitorOptions = {}) {
    const opus = o.codec === 'opus';
    this.receivedRate = opus ? OPUS_RATE : 8000;
    this.opus = opus ? { enc: new OpusEncoder({ rate: OPUS_RATE }), dec: new OpusDecoder(OPUS_RATE), pcm: new Int16Array((OPUS_RATE * 120) / 1000) } : null;
    const hz = o.toneHz ?? 0;
    if (this.opus && Number.isInteger(hz)) {
      const n = OPUS_RATE / 50;
      const amp = o.amplitude ?? 8000;
      this.loop = Array.from({ length: 50 }, (_f, f) => {
        const pcm = new Int16Array(n);
        for (let i = 0; i < n; i++) pcm[i] = hz ? Math.round(amp * Math.sin((2 * Math.PI * hz * (f * n + i)) / OPUS_RATE)) : 0;
        return Buffer.from(this.opus!.enc.encode(pcm));
      });
    }
    const codec = opus
      ? new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111, parameters: 'minptime=10;useinbandfec=1' })
      : new RTCRtpCodecParameters({ mimeType: 'audio/PCMU', clockRate: 8000, channels: 1, payloadType: 0 });
    this.pc = new RTCPeerConnection({
      codecs: { audio: [codec], video: [] },
      iceUseIpv6: false,
      headerExtensions: { audio: [], video: [] },
    });
    this.tr = this.pc.addTransceiver('audio', { direction: 'sendrecv' });
    this.tr.onTrack.subscribe((track) => {
      track.onReceiveRtp.subscribe((rtp) => {
        this.packetsReceived++;
        const seq = rtp.header.sequenceNumber;
        if (this.lastSeq >= 0) {
          const gap = (seq - this.lastSeq - 1) & 0xffff;
          if (gap > 0 && gap < 1000) this.lost += gap;
        }
        this.lastSeq = seq;
        if (this.received.length >= ((this.o.keepMs ?? 0) * this.receivedRate) / 1000) return;
        if (this.opus) {
          const n = this.opus.dec.decodeInto(rtp.payload, this.opus.pcm);
          for (let i = 0; i < n; i++) this.received.push(this.opus.pcm[i]!);
        } else for (const b of rtp.payload) this.received.push(unulaw(b));
      });
    });
    this.connected = new Promise((resolve) => {
      this.pc.connectionStateChange.subscribe((s) => {
        if (s === 'connected') resolve();
      });
    });
  }

  async offer(): Promise<string> {
    await this.pc.setLocalDescription(await this.pc.createOffer());
    const until = Date.now() + 5000;
    while (this.pc.iceGatheringState !== 'complete' && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    return this.pc.localDescription!.sdp;
  }

  async accept(answerSdp: string): Promise<void> {
    await this.pc.setRemoteDescription({ type: 'answer', sdp: answerSdp });
    void this.connected.then(() => this.startSending());
  }

  private startSending(): void {
    const hz = this.o.toneHz ?? 0;
    const amp = this.o.amplitude ?? 8000;
    const started = performance.now();
    let sent = 0;
    // Catch up by wall time so the stream keeps 50 packets per second whatever the timer does.
    const tick = () => {
      const due = Math.floor((performance.now() - started) / 20) + 1;
      while (sent < due) {
        const rate = this.opus ? OPUS_RATE : 8000;
        const n = rate / 50;
        const tone = () => {
          const pcm = new Int16Array(n);
          for (let i = 0; i < n; i++) {
            pcm[i] = hz ? Math.round(amp * Math.sin(this.phase)) : 0;
            this.phase += (2 * Math.PI * hz) / rate;
          }
          return pcm;
        };
        const payload = this.loop
          ? this.loop[sent % this.loop.length]!
          : this.opus
            ? this.opus.enc.encode(tone())
            : Buffer.from(Uint8Array.from(tone(), (x) => ulaw(x)));
        const header = new RtpHeader({ payloadType: this.opus ? 111 : 0, sequenceNumber: this.seq, timestamp: this.ts >>> 0, ssrc: 4242, marker: sent === 0 });
        this.seq = (this.seq + 1) & 0xffff;
        this.ts += n;
        void this.tr.sender.sendRtp(new RtpPacket(header, payload)).catch(() => undefined);
        this.packetsSent++;
        sent++;
      }
    };
    this.timer = setInterval(tick, 20);
  }

  /** Power of `hz` in what was received. */
  receivedTone(hz: number): number {
    return tonePower(this.received, hz, this.receivedRate);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.pc.close().catch(() => undefined);
    if (this.opus) {
      this.opus.enc.close();
      this.opus.dec.close();
      // A packet still arriving after close decodes nothing.
      this.o.keepMs = 0;
    }
  }
}
