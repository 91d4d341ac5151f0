/**
 * Opus (RFC 6716) for the browser legs, carried as RFC 7587 says: payload type from the SDP
 * (`opus/48000/2` whatever is really sent), the RTP clock at 48 kHz for every sampling rate, one
 * 20 ms frame per packet. The codec is libopus 1.4 compiled to WebAssembly (`opusscript`): it
 * installs from npm with its .wasm inside the package, nothing built or downloaded at install.
 *
 * The rates are chosen for the two ends of a room: the decoder gives 16 kHz, the rate the AI
 * engine listens at (no up-sampling, wideband all the way); the encoder takes 24 kHz, the rate the
 * engine speaks at (no decimation to 8 kHz as for G.711: a browser hears the AI up to 12 kHz).
 */
import OpusScript from 'opusscript';

/** RTP clock ticks per 20 ms frame (RFC 7587 §4.1: 48 kHz whatever the audio bandwidth). */
export const OPUS_TICKS_PER_FRAME = 960;
/** Samples per 20 ms frame at the encoder's input rate. */
export const OPUS_ENC_RATE = 24_000;
export const OPUS_ENC_FRAME = 480;
/** The decoder's output rate (the engine's input rate). */
export const OPUS_DEC_RATE = 16_000;
/** The largest frame a packet may decode to (120 ms at 16 kHz, RFC 6716 §3.2.1). */
const MAX_DEC_SAMPLES = 1920;
/** OPUS_SET_INBAND_FEC and OPUS_SET_PACKET_LOSS_PERC (opus_defines.h). */
const SET_INBAND_FEC = 4012;
const SET_PACKET_LOSS_PERC = 4014;

/** One direction's codec state; `close()` frees its WebAssembly memory (a leg's stop does it). */
export class OpusEncoder {
  private readonly enc = new OpusScript(OPUS_ENC_RATE, 1, OpusScript.Application.VOIP);
  private closed = false;

  constructor(bitrate = 32_000) {
    this.enc.setBitrate(bitrate);
    // In-band FEC (the browser's offer has useinbandfec=1): a lost packet is rebuilt from the next.
    this.enc.encoderCTL(SET_INBAND_FEC, 1);
    this.enc.encoderCTL(SET_PACKET_LOSS_PERC, 5);
  }

  /** Encodes one 20 ms frame (OPUS_ENC_FRAME samples at 24 kHz). */
  encode(frame: Int16Array): Buffer {
    if (this.closed) throw new Error('opus encoder closed');
    return this.enc.encode(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength), frame.length);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.enc.delete();
  }
}

export class OpusDecoder {
  private readonly dec = new OpusScript(OPUS_DEC_RATE, 1, OpusScript.Application.VOIP);
  private closed = false;

  /**
   * Decodes one packet to 16 kHz samples written into `out` (which must hold MAX_DEC_SAMPLES);
   * returns how many. A packet libopus refuses (corrupt, or not Opus) decodes to nothing.
   */
  decodeInto(payload: Uint8Array, out: Int16Array): number {
    if (this.closed || payload.length === 0) return 0;
    let pcm: Buffer;
    try {
      pcm = this.dec.decode(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength));
    } catch {
      return 0;
    }
    const n = Math.min(pcm.length >> 1, out.length);
    for (let i = 0; i < n; i++) out[i] = pcm.readInt16LE(2 * i);
    return n;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.dec.delete();
  }
}

export const OPUS_MAX_DEC_SAMPLES = MAX_DEC_SAMPLES;

/** The frame queue of an Opus leg (one class with the SIP legs' own playback queue). */
export { PcmQueue } from '../media/pcm-queue.ts';
