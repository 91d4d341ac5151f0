/**
 * Wideband AI on G.722 legs: the caller's audio reaches the engine at 16 kHz and the engine's
 * 24 kHz reaches the G.722 encoder at 16 kHz, never through 8 kHz. A 6 kHz tone is the witness:
 * 8 kHz audio cannot carry it (its band ends at 4 kHz), so it survives a leg only if nothing on
 * the way went through 8 kHz, and a G.711 leg must lose it. Real media threads (and the inline
 * media), real UDP on loopback with a test socket as the far end (G.722 by our encoder and
 * decoder, bit-exact with spandsp's), the real Live client against the local fake.
 */
import { describe, expect, it } from 'vitest';
import { ThreadMediaHost } from '../../../plugins/telephony/bridge/media/thread-host.ts';
import { InlineMediaHost } from '../../../plugins/telephony/bridge/media/inline.ts';
import { bindSocket } from '../../../plugins/telephony/bridge/media/session.ts';
import { buildRtp, parseRtp } from '../../../plugins/telephony/bridge/media/rtp.ts';
import { decodeG711, encodeG711, type SipCodec } from '../../../plugins/telephony/bridge/media/audio.ts';
import { G722Decoder, G722Encoder } from '../../../plugins/telephony/bridge/media/g722.ts';
import { Decimator24to16, ToLegRate } from '../../../plugins/telephony/bridge/media/resample.ts';
import type { MediaHost } from '../../../plugins/telephony/bridge/media/leg.ts';
import { Conversation } from '../../../plugins/telephony/bridge/calls/conversation.ts';
import { GeminiLiveEngine } from '../../../plugins/telephony/bridge/engine/gemini-live.ts';
import { GeminiLiveFake } from '../../support/gemini-live-fake.ts';
import { tonePower } from '../../support/webrtc-visitor.ts';
import { until } from '../../support/until.ts';
import { cleanupsAfterEach } from '../../support/cleanup.ts';

const cleanups = cleanupsAfterEach();

function tone(hz: number, n: number, rate: number, amp = 8000, from = 0): Int16Array {
  return Int16Array.from({ length: n }, (_v, i) => Math.round(amp * Math.sin((2 * Math.PI * hz * (from + i)) / rate)));
}

/** Power of `pcm` at `hz` (Goertzel, independent of the length). */
const power = (pcm: Int16Array, hz: number, rate: number): number => tonePower(pcm, hz, rate);

function concat(parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The far end of one leg: sends a tone in `codec` every 20 ms and decodes what the leg sends it (16 kHz for G.722, 8 kHz for G.711). */
async function farEnd(codec: SipCodec, hz: number): Promise<{ port: number; heard: Int16Array[]; sendTo: (port: number) => void; close: () => void }> {
  const sock = await bindSocket(0, '127.0.0.1', false);
  if (!sock) throw new Error('no socket');
  const heard: Int16Array[] = [];
  const dec = new G722Decoder();
  sock.on('message', (buf) => {
    const p = parseRtp(buf);
    if (!p || p.payloadType !== (codec === 'G722' ? 9 : 0)) return;
    if (codec === 'G722') {
      const pcm = new Int16Array(p.payload.length * 2);
      dec.decode(p.payload, pcm, 0);
      heard.push(pcm);
    } else heard.push(decodeG711('PCMU', p.payload));
  });
  const enc = new G722Encoder();
  let timer: NodeJS.Timeout | null = null;
  let seq = 1;
  let sample = 0;
  return {
    port: sock.address().port,
    heard,
    sendTo(port) {
      timer = setInterval(() => {
        let payload: Uint8Array;
        if (codec === 'G722') {
          payload = new Uint8Array(160);
          enc.encodeWide(tone(hz, 320, 16000, 8000, sample), 0, 320, payload, 0);
          sample += 320;
        } else {
          payload = encodeG711('PCMU', tone(hz, 160, 8000, 8000, sample));
          sample += 160;
        }
        sock.send(
          buildRtp({ marker: false, payloadType: codec === 'G722' ? 9 : 0, sequence: seq++, timestamp: seq * 160, ssrc: 77, payload }),
          port,
          '127.0.0.1',
        );
      }, 20);
    },
    close() {
      if (timer) clearInterval(timer);
      sock.close();
    },
  };
}

const hosts: [string, (min: number) => MediaHost][] = [
  ['media threads (tx + rx)', (min) => new ThreadMediaHost({ min, max: min + 99, host: '127.0.0.1', split: true })],
  ['media inline', (min) => new InlineMediaHost(min, min + 99, '127.0.0.1')],
];

describe('rate changes to a G.722 leg', () => {
  it('24 → 16 kHz keeps a 6 kHz tone, removes 10 kHz (which would fold to 6 kHz), and gives the same samples in any chunking', () => {
    const src = tone(6000, 24000, 24000);
    const whole = new Decimator24to16().process(src);
    expect(whole.length).toBeGreaterThanOrEqual(15990);
    expect(whole.length).toBeLessThanOrEqual(16000);
    const d = new Decimator24to16();
    let at = 0;
    const parts: Int16Array[] = [];
    for (const n of [1, 2, 479, 3, 1000, 7]) {
      parts.push(d.process(src.subarray(at, at + n)));
      at += n;
    }
    parts.push(d.process(src.subarray(at)));
    expect(Array.from(concat(parts))).toEqual(Array.from(whole));
    const inBand = power(whole.subarray(100), 6000, 16000);
    expect(inBand).toBeGreaterThan(0.7 * power(tone(6000, 16000, 16000), 6000, 16000));
    const alias = new Decimator24to16().process(tone(10_000, 24000, 24000));
    expect(power(alias.subarray(100), 6000, 16000)).toBeLessThan(inBand / 100);
  });

  it('ToLegRate: the engine’s 24 kHz to a G.722 leg keeps 6 kHz, to a G.711 leg cannot; 16 kHz to a G.722 leg is passed as it is', () => {
    const engine = tone(6000, 24000, 24000);
    const wide = new ToLegRate(16000).convert(engine, 24000);
    const narrow = new ToLegRate(8000).convert(engine, 24000);
    expect(power(wide.subarray(100), 6000, 16000)).toBeGreaterThan(1e6);
    // At 8 kHz 6 kHz does not exist; what the filter let through would fold to 2 kHz.
    expect(power(narrow.subarray(100), 2000, 8000)).toBeLessThan(power(wide.subarray(100), 6000, 16000) / 100);
    const pcm16 = tone(6000, 320, 16000);
    expect(new ToLegRate(16000).convert(pcm16, 16000)).toBe(pcm16);
    expect(new ToLegRate(16000).convert(tone(1000, 160, 8000), 8000).length).toBe(320);
  });
});

describe.each(hosts)('a G.722 leg carries 16 kHz end to end with the AI engine (%s)', (_name, makeHost) => {
  it.each([
    ['G722', true],
    ['PCMU', false],
  ] as const)(
    '%s: a 6 kHz tone from the caller reaches the engine and the engine’s 6 kHz tone reaches the caller: %s',
    async (codec, wideband) => {
      const fake = new GeminiLiveFake({ script: [{ say: 'Hello.', audioMs: 3000, chunkMs: 100, hz: 6000 }, { wait: 60_000 }], keepAudioMs: 3000 });
      await fake.start();
      cleanups.push(() => fake.stop());
      const host = makeHost(codec === 'G722' ? 43000 : 43200);
      cleanups.push(() => host.close());
      const leg = await host.open();
      cleanups.push(() => leg.stop());
      const far = await farEnd(codec, 6000);
      cleanups.push(() => far.close());

      const engine = new GeminiLiveEngine({ apiKey: 'k', model: 'm', voice: 'Kore', language: 'en-US', systemPrompt: 'x', url: fake.url });
      const convo = new Conversation({
        audible: () => true,
        play: (pcm, rate) => leg.play(pcm, rate),
        flush: () => leg.flush(),
        queuedMs: () => leg.queuedMs,
        toolCall: () => undefined,
        engineClosed: () => undefined,
      });
      cleanups.push(() => convo.end());
      convo.use(engine);
      await engine.connect();
      leg.start(
        { codec, payloadType: codec === 'G722' ? 9 : 0, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: far.port },
        { onAudio16k: (pcm) => engine.sendAudio(pcm), onDtmf: () => undefined },
      );
      far.sendTo(leg.port);
      engine.begin();

      // Engine → caller: the far end decodes what the leg sent.
      await until(() => far.heard.length >= 120, 15_000, 'the AI’s audio at the far end');
      const heard = concat(far.heard.slice(20, 120));
      // Caller → engine: the fake keeps what it was sent (16 kHz PCM16 LE).
      const session = await until(() => fake.sessions.find((s) => s.audioBytesIn >= 2 * 32000), 15_000, 'the caller’s audio at the engine');
      const raw = Buffer.concat(session.audioIn);
      const toEngine = new Int16Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + (raw.length & ~1)));
      const got = toEngine.subarray(3200);

      const sent = power(tone(6000, 16000, 16000), 6000, 16000);
      if (wideband) {
        expect(power(heard, 6000, 16000)).toBeGreaterThan(0.3 * sent);
        expect(power(got, 6000, 16000)).toBeGreaterThan(0.3 * sent);
      } else {
        // G.711 samples at 8 kHz, where 6 kHz does not exist: the far end hears only what the 24 → 8
        // kHz low-pass (9 taps, unchanged for G.711) let fold to 2 kHz, and the engine only the image
        // at 6 kHz that 8 → 16 kHz interpolation makes of the caller's (folded) 2 kHz: each about
        // -14 dB, against the full tone (> -5 dB) a G.722 leg carries.
        expect(power(heard, 2000, 8000)).toBeLessThan(0.1 * sent);
        expect(power(got, 6000, 16000)).toBeLessThan(0.1 * sent);
      }
    },
    40_000,
  );

  it('two G.722 legs bridged (a desk phone taking the caller) relay 16 kHz: a 6 kHz tone crosses both ways; a tab’s 16 kHz plays as it is', async () => {
    const host = makeHost(43400);
    cleanups.push(() => host.close());
    const a = await host.open();
    const b = await host.open();
    cleanups.push(() => a.stop());
    cleanups.push(() => b.stop());
    const farA = await farEnd('G722', 6000);
    const farB = await farEnd('G722', 5000);
    cleanups.push(() => farA.close());
    cleanups.push(() => farB.close());
    const h = { onAudio16k: () => undefined, onDtmf: () => undefined };
    a.start({ codec: 'G722', payloadType: 9, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: farA.port }, h);
    b.start({ codec: 'G722', payloadType: 9, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: farB.port }, h);
    await new Promise((r) => setTimeout(r, 100));
    a.bridgeTo(b);
    b.bridgeTo(a);
    farA.sendTo(a.port);
    farB.sendTo(b.port);
    await until(() => farA.heard.length >= 100 && farB.heard.length >= 100, 15_000, 'both far ends hearing');
    const atB = concat(farB.heard.slice(40, 100));
    const atA = concat(farA.heard.slice(40, 100));
    expect(power(atB, 6000, 16000)).toBeGreaterThan(0.3 * power(tone(6000, 16000, 16000), 6000, 16000));
    expect(power(atA, 5000, 16000)).toBeGreaterThan(0.3 * power(tone(5000, 16000, 16000), 5000, 16000));

    // An office tab's (Opus) 16 kHz played into a G.722 caller's leg: officetab-provider's path.
    const c = await host.open();
    cleanups.push(() => c.stop());
    const farC = await farEnd('G722', 1000);
    cleanups.push(() => farC.close());
    c.start({ codec: 'G722', payloadType: 9, dtmfPayloadType: null, remoteHost: '127.0.0.1', remotePort: farC.port }, h);
    c.play(tone(6000, 32000, 16000), 16000);
    await until(() => farC.heard.length >= 80, 15_000, 'the tab’s audio at the caller');
    expect(power(concat(farC.heard.slice(20, 80)), 6000, 16000)).toBeGreaterThan(0.3 * power(tone(6000, 16000, 16000), 6000, 16000));
  }, 40_000);
});
