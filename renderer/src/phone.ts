import { accessToken } from './auth.ts';
import { api, call } from './api/client.ts';

/**
 * The office tab: this console tab as the signed-in user's phone. While it is on, the tab holds
 * GET /api.ashx/v1/phone/register open (the registration lasts exactly as long as that
 * connection; it reconnects with backoff when dropped). A `ring` frame rings (visible and audible:
 * a 425 Hz ring cadence through WebAudio); accepting sends a WebRTC offer with every ICE
 * candidate to POST /phone/accept and plays the answer's audio; the microphone is asked for only
 * then. Frames are read with fetch so the bearer stays in a header, as in live.ts.
 */
export type PhoneState =
  | { kind: 'off' }
  | { kind: 'connecting' }
  | { kind: 'ready' }
  | { kind: 'ringing'; ring: Ring }
  | { kind: 'answering'; ring: Ring }
  | { kind: 'in-call'; ring: Ring; since: number }
  | { kind: 'ended'; reason: string };

export interface Ring {
  ringId: string;
  callId: string;
  callerNumber: string;
  callerName: string;
  ringTimeoutSec: number;
}

const RING_HZ = 425;

export class OfficePhone {
  state: PhoneState = { kind: 'off' };
  private ctrl: AbortController | undefined;
  private on = false;
  private audio: AudioContext | undefined;
  private ringTimer: number | undefined;
  private pc: RTCPeerConnection | undefined;
  private mic: MediaStream | undefined;
  private readonly listeners = new Set<(s: PhoneState) => void>();

  constructor(private readonly remote: HTMLAudioElement) {}

  subscribe(fn: (s: PhoneState) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private set(s: PhoneState): void {
    this.state = s;
    if (s.kind === 'ringing') this.startRinging();
    else this.stopRinging();
    for (const l of this.listeners) l(s);
  }

  /** Turns the phone on (call it from a click: the ring's AudioContext needs a user gesture). */
  start(): void {
    if (this.on) return;
    this.on = true;
    this.audio ??= new AudioContext();
    void this.audio.resume();
    this.set({ kind: 'connecting' });
    void this.run();
  }

  stop(): void {
    this.on = false;
    this.ctrl?.abort();
    if (this.state.kind === 'in-call' || this.state.kind === 'answering') void this.hangup();
    this.closeMedia();
    this.set({ kind: 'off' });
  }

  private async run(): Promise<void> {
    let delay = 500;
    while (this.on) {
      this.ctrl = new AbortController();
      try {
        const token = await accessToken();
        const headers: Record<string, string> = { Accept: 'text/event-stream' };
        if (token) headers.Authorization = `Bearer ${token}`;
        const r = await fetch('/api.ashx/v1/phone/register', { headers, signal: this.ctrl.signal });
        if (r.status === 401) await accessToken(true);
        if (!r.ok || !r.body) throw new Error(`phone registration answered ${r.status}`);
        delay = 500;
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) !== -1) {
            this.frame(buf.slice(0, cut));
            buf = buf.slice(cut + 2);
          }
        }
      } catch {
        // Dropped or refused: back off and register again.
      }
      if (!this.on) return;
      // The registration went with the connection (and a call the tab carried with it).
      if (this.state.kind === 'in-call' || this.state.kind === 'answering') this.closeMedia();
      this.set({ kind: 'connecting' });
      await new Promise((res) => setTimeout(res, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  }

  private frame(raw: string): void {
    let event = 'message';
    const data: string[] = [];
    for (const line of raw.split('\n')) {
      if (line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const k = i === -1 ? line : line.slice(0, i);
      const v = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (k === 'event') event = v;
      else if (k === 'data') data.push(v);
    }
    if (!data.length) return;
    const body = JSON.parse(data.join('\n')) as Record<string, unknown>;
    if (event === 'registered') {
      if (this.state.kind === 'connecting' || this.state.kind === 'ended') this.set({ kind: 'ready' });
    } else if (event === 'ring') {
      // One call at a time: a second ring while busy is left to the user's other endpoints.
      if (this.state.kind === 'ready' || this.state.kind === 'ended') {
        const ring = body as unknown as Ring;
        this.set({ kind: 'ringing', ring });
        // The appliance says when it stops ringing; should that word be lost, the ring still ends.
        window.setTimeout(
          () => {
            if (this.state.kind === 'ringing' && this.state.ring.ringId === ring.ringId) this.set({ kind: 'ready' });
          },
          (ring.ringTimeoutSec + 2) * 1000,
        );
      }
    } else if (event === 'stop') {
      const s = this.state;
      if ((s.kind === 'ringing' || s.kind === 'answering' || s.kind === 'in-call') && s.ring.ringId === body.ringId) {
        this.closeMedia();
        // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the server's reason is a string; shown as it prints
        this.set({ kind: 'ended', reason: String(body.reason ?? '') });
      }
    }
  }

  async accept(): Promise<void> {
    const s = this.state;
    if (s.kind !== 'ringing') return;
    const ring = s.ring;
    this.set({ kind: 'answering', ring });
    try {
      this.mic = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true }, video: false });
      const pc = new RTCPeerConnection({ iceServers: [] });
      this.pc = pc;
      for (const t of this.mic.getAudioTracks()) pc.addTrack(t, this.mic);
      pc.addEventListener('track', (e) => {
        this.remote.srcObject = e.streams[0] ?? new MediaStream([e.track]);
        void this.remote.play().catch(() => undefined);
      });
      pc.addEventListener('connectionstatechange', () => {
        const st = this.state;
        if (pc.connectionState === 'connected' && st.kind === 'answering') this.set({ kind: 'in-call', ring: st.ring, since: Date.now() });
        if ((pc.connectionState === 'failed' || pc.connectionState === 'closed') && (st.kind === 'in-call' || st.kind === 'answering')) {
          void this.hangup('connection lost');
        }
      });
      await pc.setLocalDescription(await pc.createOffer());
      await gathered(pc);
      const a = await call(api.POST('/api.ashx/v1/phone/accept', { body: { ringId: ring.ringId, sdp: pc.localDescription!.sdp } }));
      if (this.pc !== pc) return;
      await pc.setRemoteDescription({ type: 'answer', sdp: a.sdp });
    } catch (e) {
      this.closeMedia();
      this.set({ kind: 'ended', reason: e instanceof Error ? e.message : String(e) });
    }
  }

  async decline(): Promise<void> {
    const s = this.state;
    if (s.kind !== 'ringing') return;
    this.set({ kind: 'ready' });
    await call(api.POST('/api.ashx/v1/phone/decline', { body: { ringId: s.ring.ringId } })).catch(() => undefined);
  }

  async hangup(reason = ''): Promise<void> {
    const s = this.state;
    if (s.kind !== 'in-call' && s.kind !== 'answering') return;
    this.closeMedia();
    this.set({ kind: 'ended', reason });
    await call(api.POST('/api.ashx/v1/phone/hangup', { body: { ringId: s.ring.ringId } })).catch(() => undefined);
  }

  /** Closes the "call ended" note. */
  dismiss(): void {
    if (this.state.kind === 'ended') this.set({ kind: 'ready' });
  }

  private closeMedia(): void {
    this.pc?.close();
    this.pc = undefined;
    for (const t of this.mic?.getTracks() ?? []) t.stop();
    this.mic = undefined;
    this.remote.srcObject = null;
  }

  /** The ring: 425 Hz, 1 s on, 3 s off (the European ringing cadence), until answered or stopped. */
  private startRinging(): void {
    if (this.ringTimer !== undefined || !this.audio) return;
    const ctx = this.audio;
    const burst = () => {
      const osc = ctx.createOscillator();
      const gain = ctx.createGain();
      osc.frequency.value = RING_HZ;
      gain.gain.value = 0.2;
      osc.connect(gain).connect(ctx.destination);
      osc.start();
      osc.stop(ctx.currentTime + 1);
    };
    burst();
    this.ringTimer = window.setInterval(burst, 4000);
  }

  private stopRinging(): void {
    if (this.ringTimer === undefined) return;
    window.clearInterval(this.ringTimer);
    this.ringTimer = undefined;
  }
}

function gathered(pc: RTCPeerConnection): Promise<void> {
  return new Promise((resolve) => {
    if (pc.iceGatheringState === 'complete') return resolve();
    const t = setTimeout(resolve, 3000);
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') {
        clearTimeout(t);
        resolve();
      }
    });
  });
}
