/**
 * G.722 (media/g722.ts) against the reference the desk phones use (spandsp's G.722, which
 * baresip's g722 module links), SDES SRTP for the SIP legs (media/sdes.ts) against werift's own
 * SRTP, and the SDP policy of media/sdp.ts (G.722 preferred, RFC 4568 crypto lines, 488 cases).
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RtpHeader, RtpPacket, SrtpSession } from 'werift';
import { G722Decoder, G722Encoder } from '../../../plugins/telephony/bridge/media/g722.ts';
import { SdesSrtp, deriveSdes } from '../../../plugins/telephony/bridge/media/sdes.ts';
import { buildOffer, cryptoOffer, parseAnswer, parseOffer, SdpError, srtpOffer } from '../../../plugins/telephony/bridge/media/sdp.ts';

/** spandsp's G.722 (libspandsp.so.2, installed with baresip's g722 module) through ctypes. */
const REF = `
import ctypes, sys
lib = ctypes.CDLL('libspandsp.so.2')
lib.g722_encode_init.restype = ctypes.c_void_p
lib.g722_decode_init.restype = ctypes.c_void_p
data = sys.stdin.buffer.read()
if sys.argv[1] == 'enc':
    n = len(data) // 2
    s = lib.g722_encode_init(None, 64000, 0)
    out = (ctypes.c_uint8 * n)()
    m = lib.g722_encode(ctypes.c_void_p(s), out, (ctypes.c_int16 * n).from_buffer_copy(data), n)
    sys.stdout.buffer.write(bytes(out)[:m])
else:
    n = len(data)
    s = lib.g722_decode_init(None, 64000, 0)
    out = (ctypes.c_int16 * (2 * n))()
    m = lib.g722_decode(ctypes.c_void_p(s), out, (ctypes.c_uint8 * n).from_buffer_copy(data), n)
    sys.stdout.buffer.write(bytes(out)[:2 * m])
`;
const refFile = path.join(mkdtempSync(path.join(tmpdir(), 'g722-ref-')), 'ref.py');
writeFileSync(refFile, REF);
const spandsp = (mode: 'enc' | 'dec', input: Uint8Array): Buffer => execFileSync('python3', [refFile, mode], { input });

/** Speech-like 16 kHz test signal: a voiced part (150 Hz fundamental, falling harmonics, a syllable envelope), fricative noise, and a 5 kHz component only wideband carries. */
function speechLike(seconds: number): Int16Array {
  const n = 16000 * seconds;
  const out = new Int16Array(n);
  let seed = 7;
  for (let i = 0; i < n; i++) {
    const t = i / 16000;
    let v = 0;
    for (let h = 1; h <= 20; h++) v += (3000 / h) * Math.sin(2 * Math.PI * 150 * h * t + h);
    v *= 0.6 + 0.4 * Math.sin(2 * Math.PI * 4 * t);
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const noise = ((seed >> 8) % 2001) - 1000;
    v += (t % 0.5 > 0.4 ? 2 : 0.2) * noise + 1500 * Math.sin(2 * Math.PI * 5000 * t);
    out[i] = Math.max(-32768, Math.min(32767, Math.round(v)));
  }
  return out;
}

function encode(pcm: Int16Array): Uint8Array {
  const out = new Uint8Array(pcm.length / 2);
  new G722Encoder().encode(pcm, 0, pcm.length, out, 0);
  return out;
}
function decode(data: Uint8Array): Int16Array {
  const out = new Int16Array(data.length * 2);
  new G722Decoder().decode(data, out, 0);
  return out;
}

/** SNR (dB) of `b` against `a` at the best delay up to 64 samples (the QMF pair delays by 22). */
function snr(a: Int16Array, b: Int16Array): { db: number; delay: number } {
  let best = { db: -Infinity, delay: 0 };
  for (let d = 0; d <= 64; d++) {
    let sig = 0;
    let err = 0;
    for (let i = 1000; i < a.length - 100; i++) {
      sig += a[i]! * a[i]!;
      const e = a[i]! - b[i + d]!;
      err += e * e;
    }
    const db = 10 * Math.log10(sig / err);
    if (db > best.db) best = { db, delay: d };
  }
  return best;
}

/** Power of `pcm` at `hz` (Goertzel). */
function tone(pcm: Int16Array, hz: number, rate: number): number {
  const k = 2 * Math.cos((2 * Math.PI * hz) / rate);
  let s1 = 0;
  let s2 = 0;
  for (const x of pcm) {
    const s0 = x + k * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - k * s1 * s2;
}

describe('G.722 (ITU-T G.722, 64 kbit/s)', () => {
  it('encodes bit for bit as spandsp does (the G.722 of baresip), and decodes its octets identically', () => {
    const pcm = speechLike(3);
    const ours = encode(pcm);
    const theirs = spandsp('enc', new Uint8Array(pcm.buffer));
    expect(theirs.length).toBe(ours.length);
    expect(Buffer.from(ours).equals(theirs)).toBe(true);
    const dec = decode(theirs);
    const ref = spandsp('dec', theirs);
    expect(Buffer.from(dec.buffer).equals(ref)).toBe(true);
  });

  it('stays bit-exact with spandsp on signals that drive every branch-free choice and saturation: noise, square waves, a chirp, silence between', () => {
    let seed = 1;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const join = (parts: Int16Array[]) => {
      const pcm = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
      parts.reduce((at, p) => (pcm.set(p, at), at + p.length), 0);
      return pcm;
    };
    const noise = (n: number, peak: number) => Int16Array.from({ length: n }, () => Math.round((rnd() * 2 - 1) * peak));
    const square = (n: number, peak: number, half: number) => Int16Array.from({ length: n }, (_v, i) => (Math.floor(i / half) & 1 ? peak : -peak - 1));
    const chirp = (n: number, peak: number) =>
      Int16Array.from({ length: n }, (_v, i) => Math.round(peak * Math.sin(2 * Math.PI * (50 * (i / 16000) + 1300 * (i / 16000) ** 2))));
    const silence = new Int16Array(16000); // after speech: the idle-channel state
    // Full scale: the encoder matches spandsp bit for bit.
    const full = join([speechLike(1), silence, noise(16000, 32767), square(8000, 32767, 8), square(8000, 32767, 1), chirp(32000, 32767), silence]);
    const theirs = spandsp('enc', new Uint8Array(full.buffer));
    expect(Buffer.from(encode(full)).equals(theirs)).toBe(true);
    // Its decoder wraps on overflow where ours saturates, which only input near full scale reaches:
    // the decoder is compared on the same kinds of signal with some headroom.
    const loud = join([speechLike(1), silence, noise(16000, 16383), square(8000, 29000, 8), square(8000, 16000, 1), chirp(32000, 23000), silence]);
    const octets = spandsp('enc', new Uint8Array(loud.buffer));
    expect(Buffer.from(encode(loud)).equals(octets)).toBe(true);
    expect(Buffer.from(decode(octets).buffer).equals(spandsp('dec', octets))).toBe(true);
  });

  it('decodes in ragged chunks (state and the QMF window carried across calls, the window wrapping at every offset) as spandsp does in one pass', () => {
    let seed = 11;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const noise = Int16Array.from({ length: 16000 }, () => Math.round((rnd() * 2 - 1) * 16383));
    const pcm = new Int16Array(16000 * 2 + noise.length + 8000);
    pcm.set(speechLike(2));
    pcm.set(noise, 32000); // then 0.5 s of silence
    const octets = spandsp('enc', new Uint8Array(pcm.buffer));
    const ref = spandsp('dec', octets);
    const chunked = (data: Uint8Array, sizes: number[]): Int16Array => {
      const dec = new G722Decoder();
      const out = new Int16Array(2 * data.length);
      for (let at = 0, k = 0; at < data.length; k++) {
        const n = Math.min(sizes[k % sizes.length]!, data.length - at);
        dec.decode(data.subarray(at, at + n), out, 2 * at);
        at += n;
      }
      return out;
    };
    // 161 and 500: calls longer than the decoder's 160-octet pass (the QMF history carried between passes of one call).
    for (const sizes of [[1], [160], [7, 160, 33, 2, 41, 1, 159, 80], [161, 500, 3]]) expect(Buffer.from(chunked(octets, sizes).buffer).equals(ref)).toBe(true);
    // Any octet stream (every code, saturation both ways): ragged chunks give the samples of one pass.
    const random = Uint8Array.from({ length: 24000 }, () => Math.floor(rnd() * 256));
    expect(Buffer.from(chunked(random, [3, 160, 1, 57]).buffer).equals(Buffer.from(decode(random).buffer))).toBe(true);
  });

  it('a round trip keeps speech-like audio at a high SNR, including what only wideband carries (5 kHz)', () => {
    const pcm = speechLike(2);
    const back = decode(encode(pcm));
    const { db, delay } = snr(pcm, back);
    expect(delay).toBe(22); // the transmit and receive QMFs together
    expect(db).toBeGreaterThan(17); // 19.3 dB measured with this signal's noise bursts (G.722 at 64 kbit/s)
    // 5 kHz survives (G.711 at 8 kHz cannot carry it at all).
    const tail = back.subarray(8000);
    expect(tone(tail, 5000, 16000)).toBeGreaterThan(100 * tone(tail, 6500, 16000));
  });

  it('encodeWide: 16 kHz in chunks of any length (odd ones too) gives the octets of one pass, 320 samples a 20 ms frame', () => {
    const pcm = speechLike(1);
    const whole = encode(pcm);
    const enc = new G722Encoder();
    const out = new Uint8Array(whole.length);
    let octets = 0;
    let from = 0;
    for (const n of [1, 320, 7, 160, 33, 2, 319]) {
      octets += enc.encodeWide(pcm, from, n, out, octets);
      from += n;
    }
    while (from < pcm.length) {
      const n = Math.min(321, pcm.length - from);
      octets += enc.encodeWide(pcm, from, n, out, octets);
      from += n;
    }
    expect(octets).toBe(pcm.length / 2);
    expect(Buffer.from(out).equals(Buffer.from(whole))).toBe(true);
    expect(new G722Encoder().encodeWide(pcm, 0, 320, new Uint8Array(160), 0)).toBe(160);
  });

  it('encodeZeros (the silence a sender encodes while the AI is quiet): the octets of the full encoder on zeros and of spandsp, across speech, long and short silences and odd splits', () => {
    // Talk spurts and pauses as the sender meets them: silence after speech long enough for the
    // shortcut to engage (the upper band settles within ~5 frames), pauses of a few octets, odd
    // counts on both sides (a held sample pairs across the boundary).
    const speech = speechLike(2);
    const plan: [talk: number, quiet: number][] = [
      [3200, 32000],
      [321, 7],
      [160, 48000],
      [1, 3201],
      [6400, 40],
      [333, 16001],
      [2, 2],
      [3000, 64000],
    ];
    const total = plan.reduce((n, [t, q]) => n + t + q, 0);
    const pcm = new Int16Array(total);
    const shortcut = new G722Encoder();
    const full = new G722Encoder();
    const a = new Uint8Array(total / 2);
    const b = new Uint8Array(total / 2);
    let at = 0;
    let na = 0;
    let nb = 0;
    let from = 0;
    for (const [talk, quiet] of plan) {
      pcm.set(speech.subarray(from, from + talk), at);
      na += shortcut.encodeWide(pcm, at, talk, a, na);
      nb += full.encodeWide(pcm, at, talk, b, nb);
      from += talk;
      at += talk;
      // Silence in 20 ms frames and a ragged tail, as a sender asks for it.
      for (let left = quiet; left > 0;) {
        const n = Math.min(left, left > 640 ? 320 : 33);
        na += shortcut.encodeZeros(n, a, na);
        nb += full.encodeWide(pcm, at, n, b, nb); // pcm is zero there
        at += n;
        left -= n;
      }
    }
    expect(na).toBe(total / 2);
    expect(nb).toBe(total / 2);
    let first = -1;
    for (let i = 0; i < a.length && first < 0; i++) if (a[i] !== b[i]) first = i;
    expect(first).toBe(-1);
    expect(Buffer.from(a).equals(spandsp('enc', new Uint8Array(pcm.buffer)))).toBe(true);
  });

  it("the decoder's upper-band shortcut (its fixed point on a repeated code): the samples of spandsp across speech, our encoder's silence, random octets and ragged chunks", () => {
    // What a G.722 leg receives when the far end sends digital silence: our own encoder's octets
    // for talk spurts and pauses, with bursts of noise (every upper-band code) after some of them.
    // (Not random octets: spandsp's decoder wraps on overflow where ours saturates.)
    let seed = 5;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const speech = speechLike(2);
    const enc = new G722Encoder();
    const parts: Uint8Array[] = [];
    let from = 0;
    for (const [talk, quiet, burst] of [
      [3200, 32000, 0],
      [321, 7, 800],
      [160, 48000, 0],
      [1, 3201, 5],
      [6400, 640, 0],
      [333, 16001, 1],
      [3000, 64000, 0],
    ] as const) {
      const buf = new Uint8Array(((talk + quiet + burst) >> 1) + 2);
      let n = enc.encodeWide(speech, from, talk, buf, 0);
      from += talk;
      n += enc.encodeZeros(quiet, buf, n);
      const noise = Int16Array.from({ length: burst }, () => Math.round((rnd() * 2 - 1) * 16383));
      n += enc.encodeWide(noise, 0, burst, buf, n);
      parts.push(buf.subarray(0, n));
    }
    const octets = Buffer.concat(parts);
    const ref = spandsp('dec', octets);
    for (const sizes of [[160], [1], [7, 160, 33, 2, 41, 1, 159, 80]]) {
      const dec = new G722Decoder();
      const out = new Int16Array(2 * octets.length);
      let idleOctets = 0;
      for (let at = 0, k = 0; at < octets.length; k++) {
        const n = Math.min(sizes[k % sizes.length]!, octets.length - at);
        dec.decode(octets.subarray(at, at + n), out, 2 * at);
        at += n;
        if ((dec as unknown as { idleHigh: number }).idleHigh >= 0) idleOctets += n;
      }
      expect(idleOctets).toBeGreaterThan(octets.length / 2); // the shortcut did engage
      expect(Buffer.from(out.buffer).equals(ref)).toBe(true);
    }
  });
});

describe('SDES SRTP for the SIP legs', () => {
  const k1 = Buffer.alloc(30, 1).toString('base64');
  const k2 = Buffer.alloc(30, 2).toString('base64');

  it.each(['AES_CM_128_HMAC_SHA1_80', 'AES_CM_128_HMAC_SHA1_32'] as const)(
    '%s: what one side protects the other authenticates and decrypts; a changed bit is dropped',
    (suite) => {
      const a = new SdesSrtp({ suite, local: k1, remote: k2 });
      const b = new SdesSrtp({ suite, local: k2, remote: k1 });
      const payload = Buffer.from(Array.from({ length: 160 }, (_v, i) => i));
      const pkt = a.protect(9, true, 65535, 1234, 0xabcdef, payload);
      expect(pkt.length).toBe(12 + 160 + (suite === 'AES_CM_128_HMAC_SHA1_32' ? 4 : 10));
      expect(pkt.subarray(12, 172).equals(payload)).toBe(false);
      const rtp = b.unprotect(pkt)!;
      expect(rtp.subarray(12).equals(payload)).toBe(true);
      expect(rtp[1]).toBe(0x80 | 9);
      // Across the sequence wrap (rollover counter 1).
      expect(
        b
          .unprotect(a.protect(9, false, 0, 1394, 0xabcdef, payload))!
          .subarray(12)
          .equals(payload),
      ).toBe(true);
      const bad = Buffer.from(a.protect(9, false, 1, 1554, 0xabcdef, payload));
      bad[40] ^= 1;
      expect(b.unprotect(bad)).toBeNull();
      // Its own key does not open what it sent (each direction has its own master key).
      expect(a.unprotect(a.protect(9, false, 2, 1714, 0xabcdef, payload))).toBeNull();
      // SRTCP both ways.
      const rr = Buffer.from('81c90007000000010000000000000000000000000000000000000000', 'hex');
      rr.writeUInt16BE(rr.length / 4 - 1, 2);
      expect(b.unprotectRtcp(a.protectRtcp(rr))?.equals(rr)).toBe(true);
    },
  );

  it.each(['AES_CM_128_HMAC_SHA1_80', 'AES_CM_128_HMAC_SHA1_32'] as const)(
    '%s: session keys derived on another thread (deriveSdes, then a message) protect and open exactly as derived here',
    (suite) => {
      // What ThreadLeg.start posts to the media threads: a message turns the Buffers into Uint8Arrays.
      const handed = structuredClone(deriveSdes({ suite, local: k1, remote: k2 }));
      expect(Buffer.isBuffer(handed.local.key)).toBe(false);
      const here = new SdesSrtp({ suite, local: k1, remote: k2 });
      const there = new SdesSrtp({ suite, local: k1, remote: k2, session: handed });
      const peer = new SdesSrtp({ suite, local: k2, remote: k1, session: structuredClone(deriveSdes({ suite, local: k2, remote: k1 })) });
      const payload = Buffer.from(Array.from({ length: 160 }, (_v, i) => (i * 7) & 0xff));
      // 40 packets across a sequence wrap: the same octets, and the far end opens them.
      for (let i = 0; i < 40; i++) {
        const seq = (65520 + i) & 0xffff;
        const a = here.protect(9, i === 0, seq, 160 * i, 0x1234567, payload);
        const b = there.protect(9, i === 0, seq, 160 * i, 0x1234567, payload);
        expect(b.equals(a)).toBe(true);
        expect(peer.unprotect(Buffer.from(b))?.subarray(12).equals(payload)).toBe(true);
        expect(
          there
            .unprotect(Buffer.from(peer.protect(0, false, seq, 160 * i, 99, payload)))
            ?.subarray(12)
            .equals(payload),
        ).toBe(true);
      }
      const rr = Buffer.from('81c90007000000010000000000000000000000000000000000000000', 'hex');
      rr.writeUInt16BE(rr.length / 4 - 1, 2);
      expect(peer.unprotectRtcp(there.protectRtcp(rr))?.equals(rr)).toBe(true);
      expect(there.unprotectRtcp(peer.protectRtcp(rr))?.equals(rr)).toBe(true);
      // A master key of the wrong length still fails the constructor, derived keys or not.
      expect(() => new SdesSrtp({ suite, local: 'AAAA', remote: k2, session: handed })).toThrow(/30 octets/);
    },
  );

  it("is werift's SRTP: a werift session keyed with the same SDES master keys reads our packets", () => {
    const ours = new SdesSrtp({ suite: 'AES_CM_128_HMAC_SHA1_80', local: k1, remote: k2 });
    const raw = (b64: string) => Buffer.from(b64, 'base64');
    const theirs = new SrtpSession({
      keys: {
        localMasterKey: raw(k2).subarray(0, 16),
        localMasterSalt: raw(k2).subarray(16),
        remoteMasterKey: raw(k1).subarray(0, 16),
        remoteMasterSalt: raw(k1).subarray(16),
      },
      profile: 1,
    });
    const payload = Buffer.alloc(160, 0x55);
    const dec = theirs.decrypt(ours.protect(0, false, 100, 16000, 42, payload));
    expect(dec.subarray(12).equals(payload)).toBe(true);
    const back = theirs.encrypt(payload, new RtpHeader({ payloadType: 0, sequenceNumber: 7, timestamp: 1120, ssrc: 43 }));
    expect(RtpPacket.deSerialize(ours.unprotect(back)!).payload.equals(payload)).toBe(true);
  });
});

describe('SDP: G.722 first, SDES crypto by policy', () => {
  const host = '192.0.2.1';
  const offerFrom = (proto: string, crypto: string[], pts = '9 0 8 101') =>
    [
      'v=0',
      'o=- 1 1 IN IP4 192.0.2.9',
      's=-',
      'c=IN IP4 192.0.2.9',
      't=0 0',
      `m=audio 4000 ${proto} ${pts}`,
      'a=rtpmap:9 G722/8000',
      'a=rtpmap:101 telephone-event/8000',
      ...crypto,
      '',
    ].join('\r\n');
  const key = Buffer.alloc(30, 9).toString('base64');

  it('offers RTP/SAVP with one crypto line per suite when required, RTP/AVP with them when optional, none when off; G.722 first', () => {
    const req = srtpOffer('required');
    const sdp = buildOffer({ host, port: 5000, codecs: ['PCMU', 'PCMA', 'G722'], sessionId: 1, srtp: { savp: true, crypto: req.crypto } });
    expect(sdp).toContain('m=audio 5000 RTP/SAVP 9 0 8 101');
    expect(sdp).toMatch(/a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:[A-Za-z0-9+/]{40}\r\n/);
    expect(sdp).toMatch(/a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:[A-Za-z0-9+/]{40}\r\n/);
    expect(sdp).toContain('a=rtpmap:9 G722/8000');
    const opt = buildOffer({ host, port: 5000, codecs: ['G722', 'PCMU'], sessionId: 1, srtp: { savp: false, crypto: srtpOffer('optional').crypto } });
    expect(opt).toContain('m=audio 5000 RTP/AVP 9 0 101');
    expect(opt).toContain('a=crypto:1 ');
    expect(srtpOffer('off').crypto).toEqual([]);
    expect(srtpOffer(undefined).crypto).toEqual([]);
  });

  it('an answer: the accepted crypto tag gives the keys; required without one is an error, optional falls back to RTP', () => {
    const offer = { policy: 'required' as const, crypto: cryptoOffer() };
    const ans = parseAnswer(offerFrom('RTP/SAVP', [`a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:${key}`], '0 9'), ['G722', 'PCMU'], offer);
    expect(ans.codec).toBe('G722'); // preferred over the G.711 the answer lists first
    expect(ans.srtp).toEqual({ suite: 'AES_CM_128_HMAC_SHA1_32', local: offer.crypto[1]!.key, remote: key });
    // A tag we never offered with that suite is no acceptance.
    expect(() => parseAnswer(offerFrom('RTP/SAVP', [`a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:${key}`]), ['G722'], offer)).toThrow(SdpError);
    expect(() => parseAnswer(offerFrom('RTP/AVP', []), ['G722'], offer)).toThrow(/SRTP required/);
    expect(parseAnswer(offerFrom('RTP/AVP', []), ['G722'], { ...offer, policy: 'optional' }).srtp).toBeNull();
    // A phone without G.722 still gets G.711.
    expect(parseAnswer(offerFrom('RTP/AVP', [], '8 101'), ['G722', 'PCMU', 'PCMA']).codec).toBe('PCMA');
  });

  it('an offer: 488 cases (required without crypto, SAVP while off, an MKI or a short key), and the answer line', () => {
    expect(() => parseOffer(offerFrom('RTP/AVP', []), ['G722', 'PCMU'], 'required')).toThrow(/SRTP required/);
    expect(() => parseOffer(offerFrom('RTP/SAVP', [`a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:${key}`]), ['PCMU'], 'off')).toThrow(SdpError);
    expect(() => parseOffer(offerFrom('RTP/SAVP', [`a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:${key}|2^20|1:4`]), ['PCMU'], 'required')).toThrow(SdpError);
    expect(() => parseOffer(offerFrom('RTP/SAVP', ['a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAAA']), ['PCMU'], 'optional')).toThrow(SdpError);
    expect(() => parseOffer(offerFrom('RTP/SAVP', [`a=crypto:1 F8_128_HMAC_SHA1_80 inline:${key}`]), ['PCMU'], 'required')).toThrow(SdpError);
    const r = parseOffer(offerFrom('RTP/SAVP', [`a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:${key}|2^31`]), ['G722', 'PCMU'], 'optional');
    expect(r.media.codec).toBe('G722');
    expect(r.answer.savp).toBe(true);
    expect(r.answer.crypto).toEqual([{ tag: 3, suite: 'AES_CM_128_HMAC_SHA1_80', key: r.media.srtp!.local }]);
    expect(r.media.srtp!.remote).toBe(key);
    const answer = buildOffer({ host, port: 6000, codecs: [r.media.codec], sessionId: 2, srtp: r.answer });
    expect(answer).toContain('m=audio 6000 RTP/SAVP 9 101');
    expect(answer).toContain(`a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:${r.media.srtp!.local}`);
    // Optional and a plain offer: plain RTP, no crypto in the answer.
    const plain = parseOffer(offerFrom('RTP/AVP', [], '0 8'), ['PCMU', 'PCMA'], 'optional');
    expect(plain.media.srtp).toBeNull();
    expect(plain.answer).toEqual({ savp: false, crypto: [] });
  });
});
