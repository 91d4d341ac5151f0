/**
 * The issuer's CBOR writer against cbor-x as the decoder: byte strings written in place get the
 * shortest head for their length (RFC 8949 §4.2.1) at each boundary, nested ones included, and
 * what follows them is not disturbed.
 */
import { Decoder, Tag } from 'cbor-x';
import { describe, expect, it } from 'vitest';
import { CborTag, CborWriter, cborEncode } from '../../../plugins/wallet-issuer/cbor.ts';

const decoder = new Decoder({ mapsAsObjects: false, useRecords: false });

function embedded(content: Uint8Array): Buffer {
  const w = new CborWriter();
  w.head(4, 3);
  w.text('before');
  const outer = w.openBstr();
  const inner = w.openEmbedded();
  w.bstr(content);
  w.closeBstr(inner);
  w.closeBstr(outer);
  w.text('after');
  return w.copy();
}

describe('CborWriter', () => {
  for (const n of [0, 21, 22, 23, 24, 250, 253, 254, 255, 256, 65_530, 65_533, 65_534, 65_536, 70_000]) {
    it(`writes a byte string of ${n} content bytes in place with its shortest head`, () => {
      const content = Buffer.alloc(n, 0xab);
      const out = embedded(content);
      const [before, payload, after] = decoder.decode(out) as [string, Uint8Array, string];
      expect(before).toBe('before');
      expect(after).toBe('after');
      // The payload is #6.24(bstr .cbor bstr(content)), encoded exactly as an encoder would from scratch.
      const inner = cborEncode(content);
      expect(Buffer.from(payload)).toEqual(Buffer.concat([Buffer.from([0xd8, 0x18]), cborEncode(inner)]));
      const tagged = decoder.decode(payload) as Tag | Uint8Array;
      const bytes = tagged instanceof Tag ? (tagged.value as Uint8Array) : tagged;
      expect(Buffer.from(decoder.decode(bytes) as Uint8Array)).toEqual(content);
    });
  }

  it('encodes maps, arrays, tags, integers, floats and null like a general encoder', () => {
    const v = new Map<unknown, unknown>([
      ['a', [1, -1, 24, -25, 256, 65_536, 2 ** 32 - 1, 1.5, true, false, null]],
      [-7, new CborTag(1004, '2026-11-25')],
      ['m', new Map([[33, Buffer.from([1, 2, 3])]])],
    ]);
    const back = decoder.decode(cborEncode(v)) as Map<unknown, unknown>;
    expect(back.get('a')).toEqual([1, -1, 24, -25, 256, 65_536, 2 ** 32 - 1, 1.5, true, false, null]);
    const tag = back.get(-7) as Tag;
    expect(tag.tag).toBe(1004);
    expect(tag.value).toBe('2026-11-25');
    expect(Buffer.from((back.get('m') as Map<number, Uint8Array>).get(33)!)).toEqual(Buffer.from([1, 2, 3]));
  });
});
