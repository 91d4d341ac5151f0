/**
 * The SRTP fast paths (webrtc/srtp.ts): keystream computed 16 packets ahead in one AES call, and
 * HMAC-SHA1 with precomputed pad blocks (media/hmac-sha1.ts). Checked against the RFCs' own test
 * vectors and against a reference built from node:crypto's AES-CTR and HMAC, one object per
 * packet, straight from RFC 3711's formulas, over the cases where a run of precomputed keystream
 * could be wrong: a sequence wrap (the rollover counter goes up inside a run), gaps, sizes that
 * grow, another SSRC, late, reordered, repeated and forged packets.
 */
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { HmacSha1 } from '../../../plugins/telephony/bridge/media/hmac-sha1.ts';
import {
  AES_CM_128_HMAC_SHA1_32,
  AES_CM_128_HMAC_SHA1_80,
  SrtpProtector,
  SrtpUnprotector,
  type SrtpKeys,
} from '../../../plugins/telephony/bridge/webrtc/srtp.ts';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

function mac(h: HmacSha1, msg: Uint8Array, suffix: number | null = null, bytes = 20): Buffer {
  const out = Buffer.alloc(bytes);
  h.macInto(msg, msg.length, suffix, out, 0, bytes);
  return out;
}

describe('HMAC-SHA1 with precomputed pads (media/hmac-sha1.ts)', () => {
  // RFC 2202 §3, test cases 1 to 7 (6 and 7 with an 80-octet key, hashed first as RFC 2104 says).
  it.each([
    ['0b'.repeat(20), Buffer.from('Hi There'), 'b617318655057264e28bc0b6fb378c8ef146be00'],
    [Buffer.from('Jefe').toString('hex'), Buffer.from('what do ya want for nothing?'), 'effcdf6ae5eb2fa2d27416d5f184df9c259a7c79'],
    ['aa'.repeat(20), Buffer.alloc(50, 0xdd), '125d7342b9ac11cd91a39af48aa17b4f63f175d3'],
    ['0102030405060708090a0b0c0d0e0f10111213141516171819', Buffer.alloc(50, 0xcd), '4c9007f4026250c6bc8414f9bf50c86c2d7235da'],
    ['0c'.repeat(20), Buffer.from('Test With Truncation'), '4c1a03424b55e07fe7f27be1d58bb9324a9a5a04'],
    ['aa'.repeat(80), Buffer.from('Test Using Larger Than Block-Size Key - Hash Key First'), 'aa4ae5e15272d00e95705637ce8a3b55ed402112'],
    ['aa'.repeat(80), Buffer.from('Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data'), 'e8e99d0f45237d786d6bbaa7965c7808bbff1a91'],
  ])('RFC 2202 test vector (key %s)', (key, data, digest) => {
    expect(mac(new HmacSha1(hex(key)), data).toString('hex')).toBe(digest);
  });

  it('equals node:crypto HMAC-SHA1 for every message length across the padding boundaries, with and without the 32-bit suffix, truncated', () => {
    const key = crypto.randomBytes(20);
    const h = new HmacSha1(key);
    for (let len = 0; len <= 300; len++) {
      const msg = crypto.randomBytes(len);
      expect(mac(h, msg).equals(crypto.createHmac('sha1', key).update(msg).digest())).toBe(true);
      const roc = crypto.randomInt(0, 2 ** 32 - 1);
      const withRoc = Buffer.alloc(4);
      withRoc.writeUInt32BE(roc);
      const want = crypto.createHmac('sha1', key).update(msg).update(withRoc).digest();
      expect(mac(h, msg, roc, 10).equals(want.subarray(0, 10))).toBe(true);
    }
  });

  it('keeps each key apart when several instances tag in turn (their working memory is shared by the thread)', () => {
    const ks = [crypto.randomBytes(20), crypto.randomBytes(20), crypto.randomBytes(90)];
    const hs = ks.map((k) => new HmacSha1(k));
    for (let i = 0; i < 60; i++) {
      const j = i % 3;
      const msg = crypto.randomBytes((i * 37) % 200);
      expect(
        mac(hs[j]!, msg, i).equals(
          crypto
            .createHmac('sha1', ks[j]!)
            .update(msg)
            .update(Buffer.from([0, 0, 0, i]))
            .digest(),
        ),
      ).toBe(true);
    }
  });
});

/** RFC 3711 §4.1.1 and §4.2 with one node:crypto object per packet: the reference. */
function reference(k: SrtpKeys, ssrc: number, roc: number, seq: number, pt: number, ts: number, payload: Buffer, tagLen: number): Buffer {
  const header = Buffer.alloc(12);
  header[0] = 0x80;
  header[1] = pt;
  header.writeUInt16BE(seq, 2);
  header.writeUInt32BE(ts >>> 0, 4);
  header.writeUInt32BE(ssrc >>> 0, 8);
  // IV = (salt · 2^16) XOR (SSRC · 2^64) XOR (index · 2^16)
  const iv = Buffer.alloc(16);
  k.srtpSessionSalt.copy(iv, 0, 0, 14);
  iv.writeUInt32BE((iv.readUInt32BE(4) ^ ssrc) >>> 0, 4);
  iv.writeUInt32BE((iv.readUInt32BE(8) ^ roc) >>> 0, 8);
  iv.writeUInt16BE(iv.readUInt16BE(12) ^ seq, 12);
  const ct = crypto.createCipheriv('aes-128-ctr', k.srtpSessionKey, iv).update(payload);
  const r = Buffer.alloc(4);
  r.writeUInt32BE(roc >>> 0);
  const tag = crypto.createHmac('sha1', k.srtpSessionAuthTag).update(header).update(ct).update(r).digest().subarray(0, tagLen);
  return Buffer.concat([header, ct, tag]);
}

function keys(profile = AES_CM_128_HMAC_SHA1_80): SrtpKeys {
  return { profile, srtpSessionKey: crypto.randomBytes(16), srtpSessionSalt: crypto.randomBytes(14), srtpSessionAuthTag: crypto.randomBytes(20) };
}

/** Packets of a sender: across a sequence wrap, a gap, sizes that grow and shrink, and a second SSRC. */
function* stream(): Generator<{ ssrc: number; roc: number; seq: number; ts: number; payload: Buffer }> {
  let seq = 65500;
  let roc = 0;
  for (let i = 0; i < 200; i++) {
    const size = i < 60 ? 160 : i < 80 ? [1, 17, 160, 333, 48][i % 5]! : i < 100 ? 400 : 160;
    yield { ssrc: 0x11223344, roc, seq, ts: i * 160, payload: crypto.randomBytes(size) };
    const step = i === 120 ? 40 : 1; // a gap of 39 packets (sender skipped; RFC 3711 §3.3.1 keeps the index)
    if (seq + step > 0xffff) roc++;
    seq = (seq + step) & 0xffff;
  }
}

describe('AES-CM keystream computed ahead (webrtc/srtp.ts)', () => {
  it('RFC 3711 Appendix B.2: the keystream of index 0, SSRC 0 is the Appendix’s', () => {
    const k: SrtpKeys = {
      profile: AES_CM_128_HMAC_SHA1_80,
      srtpSessionKey: hex('2B7E151628AED2A6ABF7158809CF4F3C'),
      srtpSessionSalt: hex('F0F1F2F3F4F5F6F7F8F9FAFBFCFD'),
      srtpSessionAuthTag: Buffer.alloc(20),
    };
    // A zero payload encrypts to the keystream itself.
    const pkt = new SrtpProtector(k).protect(0, false, 0, 0, 0, Buffer.alloc(48));
    expect(pkt.subarray(12, 60).toString('hex').toUpperCase()).toBe(
      'E03EAD0935C95E80E166B16DD92B4EB4' + 'D23513162B02D0F72A43A2FE4A5F97AB' + '41E95B3BB0A2E8DD477901E4FCA894C0',
    );
    // And the packet after it (index 1) is not encrypted with index 0's keystream.
    const next = new SrtpProtector(k);
    next.protect(0, false, 0, 0, 0, Buffer.alloc(48));
    expect(next.protect(0, false, 1, 160, 0, Buffer.alloc(48)).subarray(12, 28).toString('hex').toUpperCase()).not.toBe('E03EAD0935C95E80E166B16DD92B4EB4');
  });

  it.each([
    ['AES_CM_128_HMAC_SHA1_80', AES_CM_128_HMAC_SHA1_80, 10],
    ['AES_CM_128_HMAC_SHA1_32', AES_CM_128_HMAC_SHA1_32, 4],
  ] as const)('%s: every packet of a stream equals the one-object-per-packet reference (wrap, gap, sizes, another SSRC)', (_name, profile, tagLen) => {
    const k = keys(profile);
    const p = new SrtpProtector(k);
    const other = new SrtpProtector(k);
    let n = 0;
    for (const s of stream()) {
      expect(p.protect(9, false, s.seq, s.ts, s.ssrc, s.payload).equals(reference(k, s.ssrc, s.roc, s.seq, 9, s.ts, s.payload, tagLen))).toBe(true);
      // A second sender with the same session keys (another SSRC) interleaved: its own keystream.
      if (n++ % 7 === 0) {
        const q = other.protect(0, false, n, n * 160, 0x55667788, s.payload);
        expect(q.equals(reference(k, 0x55667788, 0, n, 0, n * 160, s.payload, tagLen))).toBe(true);
      }
    }
  });

  it('packet() + seal(): a frame written straight into the packet and protected in place equals protect() and the reference', () => {
    const k = keys();
    const p = new SrtpProtector(k);
    const q = new SrtpProtector(k);
    for (const s of stream()) {
      const pkt = p.packet(s.payload.length);
      s.payload.copy(pkt, 12);
      expect(p.seal(pkt, s.payload.length, 9, true, s.seq, s.ts, s.ssrc)).toBe(pkt);
      // The reference writes its second header octet as given: marker bit and payload type 9.
      const want = reference(k, s.ssrc, s.roc, s.seq, 0x80 | 9, s.ts, s.payload, 10);
      expect(pkt.equals(want)).toBe(true);
      expect(q.protect(9, true, s.seq, s.ts, s.ssrc, s.payload).equals(want)).toBe(true);
    }
  });

  it('receiving, copied or in place: in order, reordered, late, repeated and interleaved SSRCs all decrypt as the reference; a forged packet is refused and changes nothing', () => {
    const k = keys();
    const rx = new SrtpUnprotector(k);
    const sent = [...stream()].map((s) => ({ ...s, pkt: reference(k, s.ssrc, s.roc, s.seq, 9, s.ts, s.payload, 10) }));
    // Delivery order: swap neighbours now and then, deliver one 5 packets late, repeat one.
    const order: number[] = [];
    for (let i = 0; i < sent.length; i++) order.push(i);
    for (let i = 10; i + 1 < order.length; i += 13) [order[i], order[i + 1]] = [order[i + 1]!, order[i]!];
    const late = order.splice(30, 1)[0]!;
    order.splice(35, 0, late);
    order.splice(50, 0, 49);
    let j = 0;
    for (const i of order) {
      const s = sent[i]!;
      // Every other packet decrypted in place (the SIP legs' way): the same result, in the datagram's memory.
      const datagram = Buffer.from(s.pkt);
      const out = rx.unprotect(datagram, j % 2 === 1);
      if (j % 2 === 1) expect(out.buffer === datagram.buffer && out.byteOffset === datagram.byteOffset).toBe(true);
      expect(out.subarray(12).equals(s.payload)).toBe(true);
      expect(out.subarray(0, 12).equals(s.pkt.subarray(0, 12))).toBe(true);
      if (j++ % 9 === 0) {
        // A forged packet with the next index: refused, and the next real one still decrypts.
        const forged = Buffer.from(s.pkt);
        forged.writeUInt16BE((s.seq + 1) & 0xffff, 2);
        expect(() => rx.unprotect(forged)).toThrow();
        // Another SSRC of the same session in between.
        const x = reference(k, 0x99, 0, j, 0, 0, s.payload, 10);
        expect(rx.unprotect(x).subarray(12).equals(s.payload)).toBe(true);
      }
    }
  });
});
