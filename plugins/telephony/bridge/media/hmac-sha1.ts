/**
 * HMAC-SHA1 (RFC 2104 over SHA-1, RFC 3174 / FIPS 180-4) with the key's inner and outer pad
 * blocks hashed once, for SRTP's per-packet tag (RFC 3711 §4.2: HMAC-SHA1 over the packet and
 * its rollover counter).
 *
 * Why not node:crypto: it has no keyed hash state that can be reused. `createHmac` makes an
 * OpenSSL object per packet (the provider-store lock and the per-object garbage that
 * webrtc/srtp.ts describes), `hash.copy()` the same, and two one-shot `crypto.hash` calls per tag
 * (what srtp.ts did) hash the two 64-byte pad blocks again every time and allocate two Buffers.
 * Here a 172-octet RTP packet costs four SHA-1 compressions (three inner, one outer) in plain
 * integer JavaScript and no allocation: measured on the 2-core VM (Node 20, load ~3), 0.9 µs a
 * tag against 2.0 µs for the two one-shots and 2.1 µs for `createHmac` (and about 0.45 µs since
 * the compression is unrolled, below).
 *
 * Timing: SHA-1's compression has no data-dependent branch or table lookup; the only branches
 * here depend on the message length, which is public.
 */
import crypto from 'node:crypto';

const BLOCK = 64;

/**
 * One SHA-1 compression (FIPS 180-4 §6.1.2) of the 64 octets of `m` at `o` into `h` (five words,
 * big-endian view). Fully unrolled: the 80 rounds with the five working variables renamed round
 * by round instead of shifted, and the message schedule as 16 local words updated in place
 * (W[t] = ROTL1(W[t-3] ^ W[t-8] ^ W[t-14] ^ W[t-16]) overwrites W[t-16], the one it no longer
 * needs), so nothing goes through memory but the 64 input octets and the five state words. Two
 * compressions per SRTP tag each way on every packet: this form took about half the CPU of the
 * looped one over an 80-word array (bench/results/2026-12-05-vm-telcpu-4.md).
 */
function compress(h: Int32Array, m: Uint8Array, o: number): void {
  let a = h[0]!;
  let b = h[1]!;
  let c = h[2]!;
  let d = h[3]!;
  let e = h[4]!;
  let x = 0;
  let w0 = (m[o + 0]! << 24) | (m[o + 1]! << 16) | (m[o + 2]! << 8) | m[o + 3]!;
  let w1 = (m[o + 4]! << 24) | (m[o + 5]! << 16) | (m[o + 6]! << 8) | m[o + 7]!;
  let w2 = (m[o + 8]! << 24) | (m[o + 9]! << 16) | (m[o + 10]! << 8) | m[o + 11]!;
  let w3 = (m[o + 12]! << 24) | (m[o + 13]! << 16) | (m[o + 14]! << 8) | m[o + 15]!;
  let w4 = (m[o + 16]! << 24) | (m[o + 17]! << 16) | (m[o + 18]! << 8) | m[o + 19]!;
  let w5 = (m[o + 20]! << 24) | (m[o + 21]! << 16) | (m[o + 22]! << 8) | m[o + 23]!;
  let w6 = (m[o + 24]! << 24) | (m[o + 25]! << 16) | (m[o + 26]! << 8) | m[o + 27]!;
  let w7 = (m[o + 28]! << 24) | (m[o + 29]! << 16) | (m[o + 30]! << 8) | m[o + 31]!;
  let w8 = (m[o + 32]! << 24) | (m[o + 33]! << 16) | (m[o + 34]! << 8) | m[o + 35]!;
  let w9 = (m[o + 36]! << 24) | (m[o + 37]! << 16) | (m[o + 38]! << 8) | m[o + 39]!;
  let w10 = (m[o + 40]! << 24) | (m[o + 41]! << 16) | (m[o + 42]! << 8) | m[o + 43]!;
  let w11 = (m[o + 44]! << 24) | (m[o + 45]! << 16) | (m[o + 46]! << 8) | m[o + 47]!;
  let w12 = (m[o + 48]! << 24) | (m[o + 49]! << 16) | (m[o + 50]! << 8) | m[o + 51]!;
  let w13 = (m[o + 52]! << 24) | (m[o + 53]! << 16) | (m[o + 54]! << 8) | m[o + 55]!;
  let w14 = (m[o + 56]! << 24) | (m[o + 57]! << 16) | (m[o + 58]! << 8) | m[o + 59]!;
  let w15 = (m[o + 60]! << 24) | (m[o + 61]! << 16) | (m[o + 62]! << 8) | m[o + 63]!;
  e = (((a << 5) | (a >>> 27)) + (d ^ (b & (c ^ d))) + e + w0 + 0x5a827999) | 0;
  b = (b << 30) | (b >>> 2);
  d = (((e << 5) | (e >>> 27)) + (c ^ (a & (b ^ c))) + d + w1 + 0x5a827999) | 0;
  a = (a << 30) | (a >>> 2);
  c = (((d << 5) | (d >>> 27)) + (b ^ (e & (a ^ b))) + c + w2 + 0x5a827999) | 0;
  e = (e << 30) | (e >>> 2);
  b = (((c << 5) | (c >>> 27)) + (a ^ (d & (e ^ a))) + b + w3 + 0x5a827999) | 0;
  d = (d << 30) | (d >>> 2);
  a = (((b << 5) | (b >>> 27)) + (e ^ (c & (d ^ e))) + a + w4 + 0x5a827999) | 0;
  c = (c << 30) | (c >>> 2);
  e = (((a << 5) | (a >>> 27)) + (d ^ (b & (c ^ d))) + e + w5 + 0x5a827999) | 0;
  b = (b << 30) | (b >>> 2);
  d = (((e << 5) | (e >>> 27)) + (c ^ (a & (b ^ c))) + d + w6 + 0x5a827999) | 0;
  a = (a << 30) | (a >>> 2);
  c = (((d << 5) | (d >>> 27)) + (b ^ (e & (a ^ b))) + c + w7 + 0x5a827999) | 0;
  e = (e << 30) | (e >>> 2);
  b = (((c << 5) | (c >>> 27)) + (a ^ (d & (e ^ a))) + b + w8 + 0x5a827999) | 0;
  d = (d << 30) | (d >>> 2);
  a = (((b << 5) | (b >>> 27)) + (e ^ (c & (d ^ e))) + a + w9 + 0x5a827999) | 0;
  c = (c << 30) | (c >>> 2);
  e = (((a << 5) | (a >>> 27)) + (d ^ (b & (c ^ d))) + e + w10 + 0x5a827999) | 0;
  b = (b << 30) | (b >>> 2);
  d = (((e << 5) | (e >>> 27)) + (c ^ (a & (b ^ c))) + d + w11 + 0x5a827999) | 0;
  a = (a << 30) | (a >>> 2);
  c = (((d << 5) | (d >>> 27)) + (b ^ (e & (a ^ b))) + c + w12 + 0x5a827999) | 0;
  e = (e << 30) | (e >>> 2);
  b = (((c << 5) | (c >>> 27)) + (a ^ (d & (e ^ a))) + b + w13 + 0x5a827999) | 0;
  d = (d << 30) | (d >>> 2);
  a = (((b << 5) | (b >>> 27)) + (e ^ (c & (d ^ e))) + a + w14 + 0x5a827999) | 0;
  c = (c << 30) | (c >>> 2);
  e = (((a << 5) | (a >>> 27)) + (d ^ (b & (c ^ d))) + e + w15 + 0x5a827999) | 0;
  b = (b << 30) | (b >>> 2);
  x = w13 ^ w8 ^ w2 ^ w0;
  w0 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (c ^ (a & (b ^ c))) + d + w0 + 0x5a827999) | 0;
  a = (a << 30) | (a >>> 2);
  x = w14 ^ w9 ^ w3 ^ w1;
  w1 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (b ^ (e & (a ^ b))) + c + w1 + 0x5a827999) | 0;
  e = (e << 30) | (e >>> 2);
  x = w15 ^ w10 ^ w4 ^ w2;
  w2 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (a ^ (d & (e ^ a))) + b + w2 + 0x5a827999) | 0;
  d = (d << 30) | (d >>> 2);
  x = w0 ^ w11 ^ w5 ^ w3;
  w3 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (e ^ (c & (d ^ e))) + a + w3 + 0x5a827999) | 0;
  c = (c << 30) | (c >>> 2);
  x = w1 ^ w12 ^ w6 ^ w4;
  w4 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w4 + 0x6ed9eba1) | 0;
  b = (b << 30) | (b >>> 2);
  x = w2 ^ w13 ^ w7 ^ w5;
  w5 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w5 + 0x6ed9eba1) | 0;
  a = (a << 30) | (a >>> 2);
  x = w3 ^ w14 ^ w8 ^ w6;
  w6 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w6 + 0x6ed9eba1) | 0;
  e = (e << 30) | (e >>> 2);
  x = w4 ^ w15 ^ w9 ^ w7;
  w7 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w7 + 0x6ed9eba1) | 0;
  d = (d << 30) | (d >>> 2);
  x = w5 ^ w0 ^ w10 ^ w8;
  w8 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w8 + 0x6ed9eba1) | 0;
  c = (c << 30) | (c >>> 2);
  x = w6 ^ w1 ^ w11 ^ w9;
  w9 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w9 + 0x6ed9eba1) | 0;
  b = (b << 30) | (b >>> 2);
  x = w7 ^ w2 ^ w12 ^ w10;
  w10 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w10 + 0x6ed9eba1) | 0;
  a = (a << 30) | (a >>> 2);
  x = w8 ^ w3 ^ w13 ^ w11;
  w11 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w11 + 0x6ed9eba1) | 0;
  e = (e << 30) | (e >>> 2);
  x = w9 ^ w4 ^ w14 ^ w12;
  w12 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w12 + 0x6ed9eba1) | 0;
  d = (d << 30) | (d >>> 2);
  x = w10 ^ w5 ^ w15 ^ w13;
  w13 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w13 + 0x6ed9eba1) | 0;
  c = (c << 30) | (c >>> 2);
  x = w11 ^ w6 ^ w0 ^ w14;
  w14 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w14 + 0x6ed9eba1) | 0;
  b = (b << 30) | (b >>> 2);
  x = w12 ^ w7 ^ w1 ^ w15;
  w15 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w15 + 0x6ed9eba1) | 0;
  a = (a << 30) | (a >>> 2);
  x = w13 ^ w8 ^ w2 ^ w0;
  w0 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w0 + 0x6ed9eba1) | 0;
  e = (e << 30) | (e >>> 2);
  x = w14 ^ w9 ^ w3 ^ w1;
  w1 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w1 + 0x6ed9eba1) | 0;
  d = (d << 30) | (d >>> 2);
  x = w15 ^ w10 ^ w4 ^ w2;
  w2 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w2 + 0x6ed9eba1) | 0;
  c = (c << 30) | (c >>> 2);
  x = w0 ^ w11 ^ w5 ^ w3;
  w3 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w3 + 0x6ed9eba1) | 0;
  b = (b << 30) | (b >>> 2);
  x = w1 ^ w12 ^ w6 ^ w4;
  w4 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w4 + 0x6ed9eba1) | 0;
  a = (a << 30) | (a >>> 2);
  x = w2 ^ w13 ^ w7 ^ w5;
  w5 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w5 + 0x6ed9eba1) | 0;
  e = (e << 30) | (e >>> 2);
  x = w3 ^ w14 ^ w8 ^ w6;
  w6 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w6 + 0x6ed9eba1) | 0;
  d = (d << 30) | (d >>> 2);
  x = w4 ^ w15 ^ w9 ^ w7;
  w7 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w7 + 0x6ed9eba1) | 0;
  c = (c << 30) | (c >>> 2);
  x = w5 ^ w0 ^ w10 ^ w8;
  w8 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + ((b & c) | (d & (b | c))) + e + w8 + 0x8f1bbcdc) | 0;
  b = (b << 30) | (b >>> 2);
  x = w6 ^ w1 ^ w11 ^ w9;
  w9 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + ((a & b) | (c & (a | b))) + d + w9 + 0x8f1bbcdc) | 0;
  a = (a << 30) | (a >>> 2);
  x = w7 ^ w2 ^ w12 ^ w10;
  w10 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + ((e & a) | (b & (e | a))) + c + w10 + 0x8f1bbcdc) | 0;
  e = (e << 30) | (e >>> 2);
  x = w8 ^ w3 ^ w13 ^ w11;
  w11 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + ((d & e) | (a & (d | e))) + b + w11 + 0x8f1bbcdc) | 0;
  d = (d << 30) | (d >>> 2);
  x = w9 ^ w4 ^ w14 ^ w12;
  w12 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + ((c & d) | (e & (c | d))) + a + w12 + 0x8f1bbcdc) | 0;
  c = (c << 30) | (c >>> 2);
  x = w10 ^ w5 ^ w15 ^ w13;
  w13 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + ((b & c) | (d & (b | c))) + e + w13 + 0x8f1bbcdc) | 0;
  b = (b << 30) | (b >>> 2);
  x = w11 ^ w6 ^ w0 ^ w14;
  w14 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + ((a & b) | (c & (a | b))) + d + w14 + 0x8f1bbcdc) | 0;
  a = (a << 30) | (a >>> 2);
  x = w12 ^ w7 ^ w1 ^ w15;
  w15 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + ((e & a) | (b & (e | a))) + c + w15 + 0x8f1bbcdc) | 0;
  e = (e << 30) | (e >>> 2);
  x = w13 ^ w8 ^ w2 ^ w0;
  w0 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + ((d & e) | (a & (d | e))) + b + w0 + 0x8f1bbcdc) | 0;
  d = (d << 30) | (d >>> 2);
  x = w14 ^ w9 ^ w3 ^ w1;
  w1 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + ((c & d) | (e & (c | d))) + a + w1 + 0x8f1bbcdc) | 0;
  c = (c << 30) | (c >>> 2);
  x = w15 ^ w10 ^ w4 ^ w2;
  w2 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + ((b & c) | (d & (b | c))) + e + w2 + 0x8f1bbcdc) | 0;
  b = (b << 30) | (b >>> 2);
  x = w0 ^ w11 ^ w5 ^ w3;
  w3 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + ((a & b) | (c & (a | b))) + d + w3 + 0x8f1bbcdc) | 0;
  a = (a << 30) | (a >>> 2);
  x = w1 ^ w12 ^ w6 ^ w4;
  w4 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + ((e & a) | (b & (e | a))) + c + w4 + 0x8f1bbcdc) | 0;
  e = (e << 30) | (e >>> 2);
  x = w2 ^ w13 ^ w7 ^ w5;
  w5 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + ((d & e) | (a & (d | e))) + b + w5 + 0x8f1bbcdc) | 0;
  d = (d << 30) | (d >>> 2);
  x = w3 ^ w14 ^ w8 ^ w6;
  w6 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + ((c & d) | (e & (c | d))) + a + w6 + 0x8f1bbcdc) | 0;
  c = (c << 30) | (c >>> 2);
  x = w4 ^ w15 ^ w9 ^ w7;
  w7 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + ((b & c) | (d & (b | c))) + e + w7 + 0x8f1bbcdc) | 0;
  b = (b << 30) | (b >>> 2);
  x = w5 ^ w0 ^ w10 ^ w8;
  w8 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + ((a & b) | (c & (a | b))) + d + w8 + 0x8f1bbcdc) | 0;
  a = (a << 30) | (a >>> 2);
  x = w6 ^ w1 ^ w11 ^ w9;
  w9 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + ((e & a) | (b & (e | a))) + c + w9 + 0x8f1bbcdc) | 0;
  e = (e << 30) | (e >>> 2);
  x = w7 ^ w2 ^ w12 ^ w10;
  w10 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + ((d & e) | (a & (d | e))) + b + w10 + 0x8f1bbcdc) | 0;
  d = (d << 30) | (d >>> 2);
  x = w8 ^ w3 ^ w13 ^ w11;
  w11 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + ((c & d) | (e & (c | d))) + a + w11 + 0x8f1bbcdc) | 0;
  c = (c << 30) | (c >>> 2);
  x = w9 ^ w4 ^ w14 ^ w12;
  w12 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w12 + 0xca62c1d6) | 0;
  b = (b << 30) | (b >>> 2);
  x = w10 ^ w5 ^ w15 ^ w13;
  w13 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w13 + 0xca62c1d6) | 0;
  a = (a << 30) | (a >>> 2);
  x = w11 ^ w6 ^ w0 ^ w14;
  w14 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w14 + 0xca62c1d6) | 0;
  e = (e << 30) | (e >>> 2);
  x = w12 ^ w7 ^ w1 ^ w15;
  w15 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w15 + 0xca62c1d6) | 0;
  d = (d << 30) | (d >>> 2);
  x = w13 ^ w8 ^ w2 ^ w0;
  w0 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w0 + 0xca62c1d6) | 0;
  c = (c << 30) | (c >>> 2);
  x = w14 ^ w9 ^ w3 ^ w1;
  w1 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w1 + 0xca62c1d6) | 0;
  b = (b << 30) | (b >>> 2);
  x = w15 ^ w10 ^ w4 ^ w2;
  w2 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w2 + 0xca62c1d6) | 0;
  a = (a << 30) | (a >>> 2);
  x = w0 ^ w11 ^ w5 ^ w3;
  w3 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w3 + 0xca62c1d6) | 0;
  e = (e << 30) | (e >>> 2);
  x = w1 ^ w12 ^ w6 ^ w4;
  w4 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w4 + 0xca62c1d6) | 0;
  d = (d << 30) | (d >>> 2);
  x = w2 ^ w13 ^ w7 ^ w5;
  w5 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w5 + 0xca62c1d6) | 0;
  c = (c << 30) | (c >>> 2);
  x = w3 ^ w14 ^ w8 ^ w6;
  w6 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w6 + 0xca62c1d6) | 0;
  b = (b << 30) | (b >>> 2);
  x = w4 ^ w15 ^ w9 ^ w7;
  w7 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w7 + 0xca62c1d6) | 0;
  a = (a << 30) | (a >>> 2);
  x = w5 ^ w0 ^ w10 ^ w8;
  w8 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w8 + 0xca62c1d6) | 0;
  e = (e << 30) | (e >>> 2);
  x = w6 ^ w1 ^ w11 ^ w9;
  w9 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w9 + 0xca62c1d6) | 0;
  d = (d << 30) | (d >>> 2);
  x = w7 ^ w2 ^ w12 ^ w10;
  w10 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w10 + 0xca62c1d6) | 0;
  c = (c << 30) | (c >>> 2);
  x = w8 ^ w3 ^ w13 ^ w11;
  w11 = (x << 1) | (x >>> 31);
  e = (((a << 5) | (a >>> 27)) + (b ^ c ^ d) + e + w11 + 0xca62c1d6) | 0;
  b = (b << 30) | (b >>> 2);
  x = w9 ^ w4 ^ w14 ^ w12;
  w12 = (x << 1) | (x >>> 31);
  d = (((e << 5) | (e >>> 27)) + (a ^ b ^ c) + d + w12 + 0xca62c1d6) | 0;
  a = (a << 30) | (a >>> 2);
  x = w10 ^ w5 ^ w15 ^ w13;
  w13 = (x << 1) | (x >>> 31);
  c = (((d << 5) | (d >>> 27)) + (e ^ a ^ b) + c + w13 + 0xca62c1d6) | 0;
  e = (e << 30) | (e >>> 2);
  x = w11 ^ w6 ^ w0 ^ w14;
  w14 = (x << 1) | (x >>> 31);
  b = (((c << 5) | (c >>> 27)) + (d ^ e ^ a) + b + w14 + 0xca62c1d6) | 0;
  d = (d << 30) | (d >>> 2);
  x = w12 ^ w7 ^ w1 ^ w15;
  w15 = (x << 1) | (x >>> 31);
  a = (((b << 5) | (b >>> 27)) + (c ^ d ^ e) + a + w15 + 0xca62c1d6) | 0;
  c = (c << 30) | (c >>> 2);
  h[0] = (h[0]! + a) | 0;
  h[1] = (h[1]! + b) | 0;
  h[2] = (h[2]! + c) | 0;
  h[3] = (h[3]! + d) | 0;
  h[4] = (h[4]! + e) | 0;
}

const IV = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0];

/**
 * The working memory of a tag: the chaining state, the last (padded) block or two of a message,
 * and the outer hash's one block. None of it carries from one tag to the next, so one set serves
 * every HmacSha1 of the thread (each worker has its own module instance; a tag is computed
 * synchronously, start to end). A media thread tags packets of a few hundred sessions in turn:
 * memory of the session's own would be cold for nearly every packet, this stays in the cache.
 */
const H = new Int32Array(5);
const TAIL = new Uint8Array(2 * BLOCK);
/** The outer message is always the 20-octet inner digest: its padding and length (84 octets after the pad block, in bits) are fixed. */
const OB = new Uint8Array(BLOCK);
OB[20] = 0x80;
OB[62] = ((BLOCK + 20) * 8) >>> 8;
OB[63] = ((BLOCK + 20) * 8) & 0xff;

/** HMAC-SHA1 with one key, its pad blocks hashed once; no allocation per tag. */
export class HmacSha1 {
  /** The chaining state after the key XOR ipad block (words 0-4) and after the key XOR opad block (5-9): all of the key a tag reads, in one place. */
  private readonly pads = new Int32Array(10);

  constructor(key: Uint8Array) {
    // RFC 2104 §2: a key longer than the block is hashed first; a shorter one is zero-padded.
    const k = key.length > BLOCK ? crypto.createHash('sha1').update(key).digest() : key;
    const pad = new Uint8Array(BLOCK);
    const state = new Int32Array(5);
    for (const [at, x] of [
      [0, 0x36],
      [5, 0x5c],
    ] as const) {
      for (let i = 0; i < BLOCK; i++) pad[i] = (k[i] ?? 0) ^ x;
      state.set(IV);
      compress(state, pad, 0);
      this.pads.set(state, at);
    }
  }

  /**
   * HMAC-SHA1(key, msg[0, len) ‖ the 32-bit big-endian `suffix`, when given), its first `bytes`
   * octets (up to 20) written to `out` at `at`. SRTP passes the packet and the rollover counter.
   */
  macInto(msg: Uint8Array, len: number, suffix: number | null, out: Uint8Array, at: number, bytes = 20): void {
    const h = H;
    const pads = this.pads;
    h[0] = pads[0]!;
    h[1] = pads[1]!;
    h[2] = pads[2]!;
    h[3] = pads[3]!;
    h[4] = pads[4]!;
    // Whole blocks straight from the message, the rest (with the suffix and padding) from `tail`.
    const whole = len - (len % BLOCK);
    for (let o = 0; o < whole; o += BLOCK) compress(h, msg, o);
    const t = TAIL;
    let n = len - whole;
    for (let i = 0; i < n; i++) t[i] = msg[whole + i]!;
    if (suffix !== null) {
      t[n] = suffix >>> 24;
      t[n + 1] = (suffix >>> 16) & 0xff;
      t[n + 2] = (suffix >>> 8) & 0xff;
      t[n + 3] = suffix & 0xff;
      n += 4;
    }
    t[n] = 0x80;
    // One padded block when the 0x80 and the 64-bit length fit after the rest, else two.
    const end = n + 9 <= BLOCK ? BLOCK : 2 * BLOCK;
    // A loop, not fill(): a few octets, and fill() leaves compiled code for the runtime.
    for (let i = n + 1; i < end - 4; i++) t[i] = 0;
    // Length in bits of ipad block ‖ message (below 2^32 for anything this takes).
    const bits = (BLOCK + len + (suffix !== null ? 4 : 0)) * 8;
    t[end - 4] = bits >>> 24;
    t[end - 3] = (bits >>> 16) & 0xff;
    t[end - 2] = (bits >>> 8) & 0xff;
    t[end - 1] = bits & 0xff;
    compress(h, t, 0);
    if (end > BLOCK) compress(h, t, BLOCK);
    const ob = OB;
    for (let i = 0; i < 5; i++) {
      const v = h[i]!;
      ob[4 * i] = v >>> 24;
      ob[4 * i + 1] = (v >>> 16) & 0xff;
      ob[4 * i + 2] = (v >>> 8) & 0xff;
      ob[4 * i + 3] = v & 0xff;
    }
    h[0] = pads[5]!;
    h[1] = pads[6]!;
    h[2] = pads[7]!;
    h[3] = pads[8]!;
    h[4] = pads[9]!;
    compress(h, ob, 0);
    for (let i = 0; i < bytes; i++) out[at + i] = (h[i >> 2]! >>> (24 - 8 * (i & 3))) & 0xff;
  }
}
