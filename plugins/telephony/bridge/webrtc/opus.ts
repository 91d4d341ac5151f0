/**
 * Opus (RFC 6716) for the browser legs, carried as RFC 7587 says: payload type from the SDP
 * (`opus/48000/2` whatever is really sent), the RTP clock at 48 kHz for every sampling rate, one
 * 20 ms frame per packet. The codec is libopus 1.4 compiled to WebAssembly (`opusscript`): it
 * installs from npm with its .wasm inside the package, nothing built or downloaded at install.
 *
 * The rates are chosen for the two ends of a room: the decoder gives 16 kHz, the rate the AI
 * engine listens at (no up-sampling, wideband all the way); the encoder takes 24 kHz, the rate the
 * engine speaks at (no decimation to 8 kHz as for G.711: a browser hears the AI up to 12 kHz).
 *
 * **Only opusscript's WebAssembly module is used, not its JavaScript wrapper** (`index.js` of
 * opusscript 0.1.1, the latest). The wrapper takes a `_malloc` pointer, which counts bytes, as an
 * index into `HEAPU16`, so its PCM buffers sit at twice the address it allocated, past the end of
 * the heap once a thread holds about 40 Opus rooms (16 MiB heap, ~105 KiB per wrapper): from there
 * every decode of the thread fails and every encode throws (a `RangeError` out of the pacer, which
 * took the WebRTC thread and all its rooms with it). Its buffers are also views of the heap taken
 * once, which a heap growth detaches. Here each codec allocates its own buffers, passes their real
 * addresses, and reads the heap views at each call (`sa()` in the module renews them on growth).
 * The module's `_encode(in, n, out, frameSize)` first packs `n` 16-bit slots holding one byte each
 * into samples (the wrapper's calling convention); with `n = 0` it reads the samples as written,
 * so a frame goes in with one `HEAP16.set` and no conversion. `_decode` writes each sample as two
 * 16-bit slots (low byte, high byte), which `decodeInto` reassembles straight into the caller's
 * array: no Buffer per packet. The module is made once per thread (each worker has its own).
 */
import { createRequire } from 'node:module';

/** RTP clock ticks per 20 ms frame (RFC 7587 §4.1: 48 kHz whatever the audio bandwidth). */
export const OPUS_TICKS_PER_FRAME = 960;
/** Samples per 20 ms frame at the encoder's input rate. */
export const OPUS_ENC_RATE = 24_000;
export const OPUS_ENC_FRAME = 480;
/** The decoder's output rate (the engine's input rate). */
export const OPUS_DEC_RATE = 16_000;
/** The largest frame a packet may decode to at 16 kHz (120 ms, RFC 6716 §3.2.1). */
export const OPUS_MAX_DEC_SAMPLES = 1920;
/** OPUS_SET_BITRATE, OPUS_SET_COMPLEXITY, OPUS_SET_INBAND_FEC, OPUS_SET_PACKET_LOSS_PERC (opus_defines.h). */
const SET_BITRATE = 4002;
const SET_COMPLEXITY = 4010;
const SET_INBAND_FEC = 4012;
const SET_PACKET_LOSS_PERC = 4014;
/** OPUS_APPLICATION_VOIP. */
const APPLICATION_VOIP = 2048;
/** RFC 6716 §3.2.1: a packet is at most 1275 octets a frame, three frames as the module allows. */
const MAX_PACKET = 1276 * 3;
/** The module's own decode limit (MAX_FRAME_SIZE in opusscript_encoder.cpp: 120 ms at 48 kHz). */
const MODULE_MAX_FRAME = 5760;
const RATES = [8000, 12000, 16000, 24000, 48000];
const ERRORS: Record<number, string> = {
  [-1]: 'bad argument',
  [-2]: 'buffer too small',
  [-3]: 'internal error',
  [-4]: 'invalid packet',
  [-5]: 'unimplemented',
  [-6]: 'invalid state',
  [-7]: 'memory allocation failed',
};

/** One libopus encoder and decoder pair (the module makes both for every handler). */
interface Handler {
  _encode(input: number, slots: number, output: number, frameSize: number): number;
  _decode(input: number, bytes: number, output: number): number;
  _encoder_ctl(ctl: number, arg: number): number;
}
/** What the Emscripten module of opusscript exports (build/opusscript_native_wasm.js). */
interface OpusModule {
  OpusScriptHandler: { new (rate: number, channels: number, application: number): Handler; destroy_handler(h: Handler): void };
  _malloc(bytes: number): number;
  _free(ptr: number): void;
  HEAPU8: Uint8Array;
  HEAP16: Int16Array;
  HEAPU16: Uint16Array;
}

let wasm: OpusModule | null = null;
/** This thread's module (instantiated synchronously from the .wasm file on first use). */
function opus(): OpusModule {
  if (wasm) return wasm;
  const factory = createRequire(import.meta.url)('opusscript/build/opusscript_native_wasm.js') as () => OpusModule;
  wasm = factory();
  return wasm;
}

/** A handler and the buffers it works in, freed together by `close()`. */
class Codec {
  protected readonly m = opus();
  protected readonly h: Handler;
  private readonly buffers: number[] = [];
  protected closed = false;

  constructor(readonly rate: number) {
    if (!RATES.includes(rate)) throw new RangeError(`Opus has no ${rate} Hz rate (${RATES.join(', ')})`);
    this.h = new this.m.OpusScriptHandler(rate, 1, APPLICATION_VOIP);
  }

  protected alloc(bytes: number): number {
    const p = this.m._malloc(bytes);
    if (!p) throw new Error('opus: out of WebAssembly memory');
    this.buffers.push(p);
    return p;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.m.OpusScriptHandler.destroy_handler(this.h);
    for (const p of this.buffers) this.m._free(p);
  }
}

export interface OpusEncoderOptions {
  /** Input rate (default 24 kHz, the engine's). */
  rate?: number;
  /** Bits per second (default 32 kbit/s). */
  bitrate?: number;
  /** libopus complexity 0-10 (default: libopus's own, 9). */
  complexity?: number;
}

/** One direction's encoder; `close()` frees its WebAssembly memory (a leg's stop does it). */
export class OpusEncoder extends Codec {
  private readonly pcm: number;
  private readonly out: number;
  private readonly maxFrame: number;

  constructor(o: OpusEncoderOptions = {}) {
    super(o.rate ?? OPUS_ENC_RATE);
    // 60 ms, the longest frame a packet's one frame may hold (RFC 6716 §2.1.4).
    this.maxFrame = (this.rate * 60) / 1000;
    this.pcm = this.alloc(this.maxFrame * 2);
    this.out = this.alloc(MAX_PACKET);
    this.ctl(SET_BITRATE, o.bitrate ?? 32_000);
    if (o.complexity !== undefined) this.ctl(SET_COMPLEXITY, o.complexity);
    // In-band FEC (the browser's offer has useinbandfec=1): a lost packet is rebuilt from the next.
    this.ctl(SET_INBAND_FEC, 1);
    this.ctl(SET_PACKET_LOSS_PERC, 5);
  }

  private ctl(ctl: number, arg: number): void {
    const r = this.h._encoder_ctl(ctl, arg);
    if (r < 0) throw new Error(`opus encoder ctl ${ctl}: ${ERRORS[r] ?? r}`);
  }

  /** Encodes one frame (20 ms: OPUS_ENC_FRAME samples at 24 kHz) into a packet of its own. */
  encode(frame: Int16Array): Buffer {
    if (this.closed) throw new Error('opus encoder closed');
    if (frame.length > this.maxFrame) throw new RangeError(`opus: a frame of ${frame.length} samples is over 60 ms`);
    const m = this.m;
    m.HEAP16.set(frame, this.pcm >> 1);
    const len = this.h._encode(this.pcm, 0, this.out, frame.length);
    if (len < 0) throw new Error(`opus encode: ${ERRORS[len] ?? len}`);
    return Buffer.from(m.HEAPU8.subarray(this.out, this.out + len));
  }
}

export class OpusDecoder extends Codec {
  private readonly in: number;
  private readonly pcm: number;

  /** `rate`: the output rate (default 16 kHz, the engine's). */
  constructor(rate = OPUS_DEC_RATE) {
    super(rate);
    this.in = this.alloc(MAX_PACKET);
    // The module writes each sample as two 16-bit slots.
    this.pcm = this.alloc(MODULE_MAX_FRAME * 4);
  }

  /** The most samples one packet decodes to at this rate (120 ms). */
  get maxSamples(): number {
    return (this.rate * 120) / 1000;
  }

  /**
   * Decodes one packet into `out` (which should hold `maxSamples`, OPUS_MAX_DEC_SAMPLES at 16 kHz);
   * returns how many samples. A packet libopus refuses (corrupt, or not Opus) decodes to nothing.
   */
  decodeInto(payload: Uint8Array, out: Int16Array): number {
    if (this.closed || payload.length === 0 || payload.length > MAX_PACKET) return 0;
    const m = this.m;
    m.HEAPU8.set(payload, this.in);
    let len: number;
    try {
      len = this.h._decode(this.in, payload.length, this.pcm);
    } catch {
      return 0; // a WebAssembly trap: never thrown into werift's receive path
    }
    if (len <= 0) return 0;
    const n = Math.min(len, out.length);
    const slots = m.HEAPU16;
    for (let i = 0, s = this.pcm >> 1; i < n; i++, s += 2) out[i] = (((slots[s + 1]! << 8) | slots[s]!) << 16) >> 16;
    return n;
  }
}

/** The frame queue of an Opus leg (one class with the SIP legs' own playback queue). */
export { PcmQueue } from '../media/pcm-queue.ts';
