/**
 * ITU-T G.722 (11/88, and G.722 Appendix II's test conditions) at 64 kbit/s: 16 kHz audio split by
 * the 24-tap quadrature mirror filter into two 8 kHz sub-bands, the lower one coded with 6-bit
 * ADPCM (of which the 4-bit core drives the predictor: the embedded coding of §1.3), the upper one
 * with 2-bit ADPCM; one octet per pair of input samples (bits 7-6 the upper band, 5-0 the lower).
 *
 * Written from the Recommendation's block description (blocks 1L-6L and 1H-6H, the adaptive
 * predictor of block 4 shared by both bands, the QMF of §2 and §4): integer arithmetic with the
 * Recommendation's word lengths and saturation, so it is bit-exact with other implementations of
 * it (the test compares with spandsp's, the G.722 of baresip and FreeSWITCH).
 *
 * RTP (RFC 3551 §4.5.2): payload type 9, and although the codec samples at 16 kHz the RTP clock is
 * 8000 Hz (an error in RFC 1890 kept for compatibility), so a 20 ms frame is 160 octets and
 * advances the timestamp by 160, exactly as a G.711 frame does.
 *
 * No allocation per call of encode/decode: the state lives in typed arrays made once per stream.
 */

/** Decision levels of the 6-bit lower-band quantizer (Table 6, QUANTL). */
const Q6 = [
  0, 35, 72, 110, 150, 190, 233, 276, 323, 370, 422, 473, 530, 587, 650, 714, 786, 858, 940, 1023, 1121, 1219, 1339, 1458, 1612, 1765, 1980, 2195, 2557, 2919,
];
const Q6_MAX = Q6[Q6.length - 1]!;
/** For a threshold v ≤ Q6_MAX: the smallest i ≥ 1 with Q6[i] ≥ v. */
const Q6_INTERVAL = (() => {
  const t = new Uint8Array(Q6_MAX + 1);
  let i = 1;
  for (let v = 0; v <= Q6_MAX; v++) {
    while (Q6[i]! < v) i++;
    t[v] = i;
  }
  return t;
})();
/** Lower-band codes for negative and positive differences per quantizer interval (Table 6). */
const ILN = [0, 63, 62, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 0];
const ILP = [0, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 0];
/** Log scale factor multipliers (Table 8, LOGSCL) and the 4-bit code to their index. */
const WL = [-60, -30, 58, 172, 334, 538, 1198, 3042];
const RL42 = [0, 7, 6, 5, 4, 3, 2, 1, 7, 6, 5, 4, 3, 2, 1, 0];
/** Inverse log base 2 table (Table 9, SCALEL/SCALEH). */
const ILB = [
  2048, 2093, 2139, 2186, 2233, 2282, 2332, 2383, 2435, 2489, 2543, 2599, 2656, 2714, 2774, 2834, 2896, 2960, 3025, 3091, 3158, 3228, 3298, 3371, 3444, 3520,
  3597, 3676, 3756, 3838, 3922, 4008,
];
/** Inverse quantizer outputs: 4-bit core (Table 7, INVQAL) and the full 6-bit one (Table 6, INVQBL). */
const QM4 = [0, -20456, -12896, -8968, -6288, -4240, -2584, -1200, 20456, 12896, 8968, 6288, 4240, 2584, 1200, 0];
const QM6 = [
  -136, -136, -136, -136, -24808, -21904, -19008, -16704, -14984, -13512, -12280, -11192, -10232, -9360, -8576, -7856, -7192, -6576, -6000, -5456, -4944, -4464,
  -4008, -3576, -3168, -2776, -2400, -2032, -1688, -1360, -1040, -728, 24808, 21904, 19008, 16704, 14984, 13512, 12280, 11192, 10232, 9360, 8576, 7856, 7192,
  6576, 6000, 5456, 4944, 4464, 4008, 3576, 3168, 2776, 2400, 2032, 1688, 1360, 1040, 728, 432, 136, -432, -136,
];
/** Upper band (Table 10 and the QUANTH/INVQAH/LOGSCH blocks). */
const QM2 = [-7408, -1616, 7408, 1616];
const IHN = [0, 1, 0];
const IHP = [0, 3, 2];
const WH = [0, -214, 798];
const RH2 = [2, 1, 2, 1];

const sat = (v: number): number => (v > 32767 ? 32767 : v < -32768 ? -32768 : v);

/*
 * Branch-free where the branch follows the signal. A sign comparison or a choice between two
 * table entries by the sign of a difference goes one way or the other at random on speech, and
 * each wrong guess of the CPU's branch predictor costs ~15 cycles: with a dozen such per octet,
 * speech cost 1.8 times what silence did (24 against 14 µs to encode a 20 ms frame, 19 against 11
 * to decode). The choices below are sign masks (`x >> 31` is 0 or -1) and table offsets instead;
 * branches stay where they are almost never taken (saturation, the quantizer's top interval).
 */
/** ILP then ILN: the lower-band code of interval i is IL[i] for a positive difference, IL[32 + i] for a negative one. */
const IL = [...ILP, ...ILN];
/** IHP then IHN from 4: the upper-band code of mih (1 or 2) is IH[mih], IH[4 + mih] for a negative difference. */
const IH = [...IHP, 0, ...IHN, 0];
/** LOGSCL's multiplier of each 4-bit lower-band core code, LOGSCH's of each upper-band code. */
const WL4 = RL42.map((r) => WL[r]!);
const WH2 = RH2.map((r) => WH[r]!);
/**
 * SCALEL/SCALEH looked up: the step `det` for every nb >> 6 up to the band's largest nb, i.e.
 * ILB[(nb >> 6) & 31] shifted right by shift - (nb >> 11) (left when that is negative), times 4.
 */
const detTable = (max: number, shift: number): number[] =>
  Array.from({ length: (max >> 6) + 1 }, (_v, k) => {
    const e = shift - (k >> 5);
    return (e < 0 ? ILB[k & 31]! << -e : ILB[k & 31]! >> e) << 2;
  });
const DET_L = detTable(18432, 8);
const DET_H = detTable(22528, 10);

/**
 * One sub-band's ADPCM state: the pole-zero predictor of block 4 (two poles, six zeros), the log
 * scale factor `nb` and the quantizer step `det`. Every delay element is a field of its own, not
 * an element of a small typed array: block 4 runs twice per octet, 16,000 times a second each way
 * on a call, and plain number fields keep it in registers (the typed-array version cost 3 to 4
 * times as much, which made a G.722 call cost several G.711 calls). The delayed differences and
 * reconstructed signals are kept doubled and saturated, as FILTEZ and FILTEP use them (each value
 * is doubled once instead of at every delay), and of the partial reconstructions only the signs,
 * which is all UPPOL1 and UPPOL2 read; a saturated double has the sign of the value.
 */
class Band {
  s = 0;
  sz = 0;
  nb = 0;
  det: number;
  // sat(2r) of the reconstructed signal (delays 1, 2); signs (0 or -1) of the partial reconstruction p.
  rr1 = 0;
  rr2 = 0;
  sg1 = 0;
  sg2 = 0;
  a1 = 0;
  a2 = 0;
  // sat(2d) of the quantized differences (delays 1 to 6; their signs are d's) and the zero coefficients.
  dd1 = 0;
  dd2 = 0;
  dd3 = 0;
  dd4 = 0;
  dd5 = 0;
  dd6 = 0;
  b1 = 0;
  b2 = 0;
  b3 = 0;
  b4 = 0;
  b5 = 0;
  b6 = 0;

  constructor(
    det: number,
    private readonly max: number,
    private readonly dets: number[],
  ) {
    this.det = det;
  }

  /** Block 3: LOGSCL/LOGSCH and SCALEL/SCALEH (the next quantizer step from the code's multiplier). */
  scale(w: number): void {
    let nb = (Math.imul(this.nb, 127) >> 7) + w;
    nb &= ~(nb >> 31); // below 0: 0
    if (nb > this.max) nb = this.max;
    this.nb = nb;
    this.det = this.dets[nb >> 6]!;
  }

  /** Block 4: reconstruction, pole and zero coefficient adaptation, and the next prediction. */
  block4(dx: number): void {
    const r0 = sat((this.s + dx) | 0);
    const sg0 = sat((this.sz + dx) | 0) >> 31;
    const sg1 = this.sg1;
    const a1 = this.a1;
    // UPPOL2
    const w1 = sat(a1 << 2);
    // -w1 when p0 and p1 have the same sign, else w1; likewise ±128 and ±192 below.
    const same1 = ~(sg0 ^ sg1);
    let w2 = (w1 ^ same1) - same1;
    if (w2 > 32767) w2 = 32767;
    let ap2 = ((w2 >> 7) + 128 - ((sg0 ^ this.sg2) & 256) + (Math.imul(this.a2, 32512) >> 15)) | 0;
    if (ap2 > 12288) ap2 = 12288;
    else if (ap2 < -12288) ap2 = -12288;
    // UPPOL1
    // No saturation needed (the Recommendation's SAT cannot act): |a1| ≤ 27648 (the limit below)
    // keeps this within ±27733, and ap2 ∈ [-12288, 12288] keeps lim within [3072, 27648].
    let ap1 = (192 - ((sg0 ^ sg1) & 384) + (Math.imul(a1, 32640) >> 15)) | 0;
    const lim = 15360 - ap2;
    if (ap1 > lim) ap1 = lim;
    else if (ap1 < -lim) ap1 = -lim;
    // UPZERO, then DELAYA: each b moves by +128 towards the sign agreement of its delayed
    // difference with dx (-128 when they differ; m is -1 then), by 0 when dx is 0. A 16-bit b
    // times 32640/32768 plus or minus 128 stays within 16 bits: the Recommendation's saturation
    // cannot act.
    const ddx = sat((dx + dx) | 0);
    const step = ((dx | -dx) >>> 31) << 7;
    const dd1 = this.dd1;
    const dd2 = this.dd2;
    const dd3 = this.dd3;
    const dd4 = this.dd4;
    const dd5 = this.dd5;
    let m = (dd1 ^ dx) >> 31;
    const b1 = ((step ^ m) - m + (Math.imul(this.b1, 32640) >> 15)) | 0;
    m = (dd2 ^ dx) >> 31;
    const b2 = ((step ^ m) - m + (Math.imul(this.b2, 32640) >> 15)) | 0;
    m = (dd3 ^ dx) >> 31;
    const b3 = ((step ^ m) - m + (Math.imul(this.b3, 32640) >> 15)) | 0;
    m = (dd4 ^ dx) >> 31;
    const b4 = ((step ^ m) - m + (Math.imul(this.b4, 32640) >> 15)) | 0;
    m = (dd5 ^ dx) >> 31;
    const b5 = ((step ^ m) - m + (Math.imul(this.b5, 32640) >> 15)) | 0;
    m = (this.dd6 ^ dx) >> 31;
    const b6 = ((step ^ m) - m + (Math.imul(this.b6, 32640) >> 15)) | 0;
    this.b1 = b1;
    this.b2 = b2;
    this.b3 = b3;
    this.b4 = b4;
    this.b5 = b5;
    this.b6 = b6;
    this.dd1 = ddx;
    this.dd2 = dd1;
    this.dd3 = dd2;
    this.dd4 = dd3;
    this.dd5 = dd4;
    this.dd6 = dd5;
    const rr1 = sat((r0 + r0) | 0);
    const rr2 = this.rr1;
    this.rr1 = rr1;
    this.rr2 = rr2;
    this.sg2 = sg1;
    this.sg1 = sg0;
    this.a2 = ap2;
    this.a1 = ap1;
    // FILTEP, FILTEZ (with the new dd1 = sat(2·dx) and the old dd1 to dd5), PREDIC.
    const sp = sat(((Math.imul(ap1, rr1) >> 15) + (Math.imul(ap2, rr2) >> 15)) | 0);
    const sz = sat(
      ((Math.imul(b1, ddx) >> 15) +
        (Math.imul(b2, dd1) >> 15) +
        (Math.imul(b3, dd2) >> 15) +
        (Math.imul(b4, dd3) >> 15) +
        (Math.imul(b5, dd4) >> 15) +
        (Math.imul(b6, dd5) >> 15)) |
        0,
    );
    this.sz = sz;
    this.s = sat((sp + sz) | 0);
  }
}

/**
 * The QMF delay line as a sliding window over a longer buffer: two samples go in per octet, the
 * newest 24 are the filter's taps, and the window is moved back to the start only when the buffer
 * is full (no shuffle of 22 samples per octet). Room for 40 octets, not more: a media thread runs
 * a few hundred encoders and decoders in turn, and a window sliding through 4 KiB (512 octets)
 * met cold cache lines at every frame; 416 bytes stay warm (23.2 -> 22.5 µs per call and frame,
 * encode and decode, 200 of each in turn).
 */
class QmfLine {
  private readonly x = new Int32Array(24 + 2 * 40);
  /** Index of the oldest of the 24 current taps. */
  private at = 0;
  push(a: number, b: number): void {
    if (this.at + 26 > this.x.length) {
      this.x.copyWithin(0, this.at + 2, this.at + 24);
      this.at = -2;
    }
    this.at += 2;
    this.x[this.at + 22] = a;
    this.x[this.at + 23] = b;
  }
  /** Σ x[2i]·h[i] of the current taps (after sums()). */
  even = 0;
  /** Σ x[2i+1]·h[11-i] of the current taps (after sums()). */
  odd = 0;
  /** The two polyphase sums, unrolled with Table 11's coefficients as constants (QMF above). */
  sums(): void {
    const x = this.x;
    const o = this.at;
    this.even =
      (Math.imul(x[o]!, 3) +
        Math.imul(x[o + 2]!, -11) +
        Math.imul(x[o + 4]!, 12) +
        Math.imul(x[o + 6]!, 32) +
        Math.imul(x[o + 8]!, -210) +
        Math.imul(x[o + 10]!, 951) +
        Math.imul(x[o + 12]!, 3876) +
        Math.imul(x[o + 14]!, -805) +
        Math.imul(x[o + 16]!, 362) +
        Math.imul(x[o + 18]!, -156) +
        Math.imul(x[o + 20]!, 53) +
        Math.imul(x[o + 22]!, -11)) |
      0;
    this.odd =
      (Math.imul(x[o + 1]!, -11) +
        Math.imul(x[o + 3]!, 53) +
        Math.imul(x[o + 5]!, -156) +
        Math.imul(x[o + 7]!, 362) +
        Math.imul(x[o + 9]!, -805) +
        Math.imul(x[o + 11]!, 3876) +
        Math.imul(x[o + 13]!, 951) +
        Math.imul(x[o + 15]!, -210) +
        Math.imul(x[o + 17]!, 32) +
        Math.imul(x[o + 19]!, 12) +
        Math.imul(x[o + 21]!, -11) +
        Math.imul(x[o + 23]!, 3)) |
      0;
  }
}

/** Every field of a band's state, for the fixed-point check of encodeZeros. */
function sameBand(b: Band, c: Band): boolean {
  return (
    b.s === c.s &&
    b.sz === c.sz &&
    b.nb === c.nb &&
    b.det === c.det &&
    b.rr1 === c.rr1 &&
    b.rr2 === c.rr2 &&
    b.sg1 === c.sg1 &&
    b.sg2 === c.sg2 &&
    b.a1 === c.a1 &&
    b.a2 === c.a2 &&
    b.dd1 === c.dd1 &&
    b.dd2 === c.dd2 &&
    b.dd3 === c.dd3 &&
    b.dd4 === c.dd4 &&
    b.dd5 === c.dd5 &&
    b.dd6 === c.dd6 &&
    b.b1 === c.b1 &&
    b.b2 === c.b2 &&
    b.b3 === c.b3 &&
    b.b4 === c.b4 &&
    b.b5 === c.b5 &&
    b.b6 === c.b6
  );
}

/**
 * Silence (encodeZeros). The whole encoder has no fixed point on zero input: the lower band's
 * quantizer has no zero level, so its codes keep toggling and its predictor wanders (checked:
 * no repeated state at any 20 ms frame boundary within 200,000 frames of zeros after speech), so
 * a silent frame's octets cannot be reused. Two parts of it do settle, though:
 *  - the QMF: once its 24 taps are all zero, both sums are 0 (xlow = xhigh = 0) without computing
 *    them, and pushing more zeros leaves the window as it is;
 *  - the upper band: with xhigh = 0 its step falls to the minimum, where its quantized difference
 *    is 0, and its predictor then reaches a state that an octet of zeros maps to itself (seen
 *    here, not assumed: the state is compared before and after an octet). From then on it emits
 *    the same 2-bit code with no work.
 * So a silent octet costs the lower band alone: the octets are those of the full encoder, bit for
 * bit (test/plugins/telephony/bridge-g722-srtp.test.ts compares them over speech, silence and
 * every odd split).
 */
export class G722Encoder {
  private readonly low = new Band(32, 18432, DET_L);
  private readonly high = new Band(8, 22528, DET_H);
  private readonly qmf = new QmfLine();
  /** A 16 kHz sample waiting for its partner (encodeWide of an odd count). */
  private held = 0;
  private holding = false;
  /** Zero samples last pushed into the QMF line in a row, as counted by encodeZeros (up to 24). */
  private zeros = 0;
  /** The upper band's code while it sits at its fixed point on zero input, else -1. */
  private idleHigh = -1;
  /** A copy of the upper band's state, for the fixed-point check (made on first use). */
  private probe: Band | null = null;

  /** The lower band's 6-bit code for `xlow` (blocks 1L to 4L). */
  private lowCode(xlow: number): number {
    const lo = this.low;
    // 1L SUBTRA, QUANTL
    const el = sat(xlow - lo.s);
    const wd = el ^ (el >> 31); // el when ≥ 0, else -(el + 1) (QUANTL)
    // The smallest interval i (1 to 29) whose upper decision level exceeds |el|, 30 when none does:
    // wd < (Q6[i]·det) >> 12 ⟺ Q6[i] ≥ ⌈(wd + 1)·4096 / det⌉ (all integers), looked up instead of
    // searched (a binary search's five unpredictable branches cost more than the whole band).
    const v = (((wd + 1) * 4096 + lo.det - 1) / lo.det) | 0;
    const i = v > Q6_MAX ? 30 : Q6_INTERVAL[v]!;
    const ilow = IL[i | ((el >> 31) & 32)]!;
    // 2L INVQAL (the 4-bit core), 3L, 4L
    const ril = ilow >> 2;
    const dlow = Math.imul(lo.det, QM4[ril]!) >> 15;
    lo.scale(WL4[ril]!);
    lo.block4(dlow);
    return ilow;
  }

  /**
   * `m` octets of `high` (the upper band's bits) and the lower band's code for xlow = 0, into `out`
   * at `at`: lowCode(0) m times, with the band's state in local variables for the run (see
   * G722Decoder.decode for why; the steps are Band.scale's and Band.block4's, in the same order).
   */
  private lowZeros(m: number, high: number, out: Uint8Array, at: number): void {
    const L = this.low;
    let s = L.s;
    let sz = L.sz;
    let nb = L.nb;
    let det = L.det;
    let rr1 = L.rr1;
    let rr2 = L.rr2;
    let sg1 = L.sg1;
    let sg2 = L.sg2;
    let a1 = L.a1;
    let a2 = L.a2;
    let d1 = L.dd1;
    let d2 = L.dd2;
    let d3 = L.dd3;
    let d4 = L.dd4;
    let d5 = L.dd5;
    let d6 = L.dd6;
    let b1 = L.b1;
    let b2 = L.b2;
    let b3 = L.b3;
    let b4 = L.b4;
    let b5 = L.b5;
    let b6 = L.b6;
    for (let j = 0; j < m; j++) {
      // 1L SUBTRA (xlow = 0), QUANTL as in lowCode
      const el = s === -32768 ? 32767 : -s;
      const wd = el ^ (el >> 31);
      const v = (((wd + 1) * 4096 + det - 1) / det) | 0;
      const ilow = IL[(v > Q6_MAX ? 30 : Q6_INTERVAL[v]!) | ((el >> 31) & 32)]!;
      out[at + j] = (high | ilow) & 0xff;
      // 2L INVQAL, 3L (Band.scale)
      const ril = ilow >> 2;
      const dx = Math.imul(det, QM4[ril]!) >> 15;
      nb = (Math.imul(nb, 127) >> 7) + WL4[ril]!;
      nb &= ~(nb >> 31);
      if (nb > 18432) nb = 18432;
      det = DET_L[nb >> 6]!;
      // 4L (Band.block4)
      const r0 = sat(s + dx);
      const sg0 = (sz + dx) >> 31;
      const same1 = ~(sg0 ^ sg1);
      let w2 = (sat(a1 << 2) ^ same1) - same1;
      if (w2 > 32767) w2 = 32767;
      let ap2 = ((w2 >> 7) + 128 - ((sg0 ^ sg2) & 256) + (Math.imul(a2, 32512) >> 15)) | 0;
      if (ap2 > 12288) ap2 = 12288;
      else if (ap2 < -12288) ap2 = -12288;
      let ap1 = (192 - ((sg0 ^ sg1) & 384) + (Math.imul(a1, 32640) >> 15)) | 0;
      const lim = 15360 - ap2;
      if (ap1 > lim) ap1 = lim;
      else if (ap1 < -lim) ap1 = -lim;
      const ddx = sat(dx + dx);
      const step = ((dx | -dx) >>> 31) << 7;
      let q = (d1 ^ dx) >> 31;
      b1 = ((step ^ q) - q + (Math.imul(b1, 32640) >> 15)) | 0;
      q = (d2 ^ dx) >> 31;
      b2 = ((step ^ q) - q + (Math.imul(b2, 32640) >> 15)) | 0;
      q = (d3 ^ dx) >> 31;
      b3 = ((step ^ q) - q + (Math.imul(b3, 32640) >> 15)) | 0;
      q = (d4 ^ dx) >> 31;
      b4 = ((step ^ q) - q + (Math.imul(b4, 32640) >> 15)) | 0;
      q = (d5 ^ dx) >> 31;
      b5 = ((step ^ q) - q + (Math.imul(b5, 32640) >> 15)) | 0;
      q = (d6 ^ dx) >> 31;
      b6 = ((step ^ q) - q + (Math.imul(b6, 32640) >> 15)) | 0;
      d6 = d5;
      d5 = d4;
      d4 = d3;
      d3 = d2;
      d2 = d1;
      d1 = ddx;
      rr2 = rr1;
      rr1 = sat(r0 + r0);
      sg2 = sg1;
      sg1 = sg0;
      a2 = ap2;
      a1 = ap1;
      const sp = sat(((Math.imul(a1, rr1) >> 15) + (Math.imul(a2, rr2) >> 15)) | 0);
      sz = sat(
        ((Math.imul(b1, d1) >> 15) +
          (Math.imul(b2, d2) >> 15) +
          (Math.imul(b3, d3) >> 15) +
          (Math.imul(b4, d4) >> 15) +
          (Math.imul(b5, d5) >> 15) +
          (Math.imul(b6, d6) >> 15)) |
          0,
      );
      s = sat(sp + sz);
    }
    L.s = s;
    L.sz = sz;
    L.nb = nb;
    L.det = det;
    L.rr1 = rr1;
    L.rr2 = rr2;
    L.sg1 = sg1;
    L.sg2 = sg2;
    L.a1 = a1;
    L.a2 = a2;
    L.dd1 = d1;
    L.dd2 = d2;
    L.dd3 = d3;
    L.dd4 = d4;
    L.dd5 = d5;
    L.dd6 = d6;
    L.b1 = b1;
    L.b2 = b2;
    L.b3 = b3;
    L.b4 = b4;
    L.b5 = b5;
    L.b6 = b6;
  }

  /** One octet from two 16 kHz samples. */
  encodePair(s0: number, s1: number): number {
    const q = this.qmf;
    q.push(s0, s1);
    q.sums();
    // Both sums carry the QMF's ×4096 gain: >> 13 removes it and the two-filter sum, >> 1 more
    // gives the 15-bit input of the sub-band coders.
    const ilow = this.lowCode((q.even + q.odd) >> 14);
    const xhigh = (q.odd - q.even) >> 14;
    // 1H SUBTRA, QUANTH
    const hb = this.high;
    const eh = sat(xhigh - hb.s);
    const wdh = eh ^ (eh >> 31); // |eh|, or |eh| - 1 when negative, as QUANTL's wd

    // QUANTH: 2 when wdh ≥ (564·det) >> 12, else 1.
    const mih = 1 + ((((564 * hb.det) >> 12) - 1 - wdh) >>> 31);
    const ihigh = IH[mih | ((eh >> 31) & 4)]!;
    // 2H INVQAH, 3H, 4H
    const dhigh = Math.imul(hb.det, QM2[ihigh]!) >> 15;
    hb.scale(WH2[ihigh]!);
    hb.block4(dhigh);
    return ((ihigh << 6) | ilow) & 0xff;
  }

  /** Encodes `n` 16 kHz samples (n even) of `pcm` from `from` into n/2 octets of `out` at `at`. */
  encode(pcm: Int16Array, from: number, n: number, out: Uint8Array, at: number): void {
    this.zeros = 0;
    this.idleHigh = -1;
    for (let k = 0; k < n; k += 2) out[at + (k >> 1)] = this.encodePair(pcm[from + k]!, pcm[from + k + 1]!);
  }

  /**
   * Encodes `n` 16 kHz samples of `pcm` from `from` (any n: an odd sample waits here for the next
   * call's first) into `out` at `at`; returns the octets written.
   */
  encodeWide(pcm: Int16Array, from: number, n: number, out: Uint8Array, at: number): number {
    if (n > 0) {
      this.zeros = 0;
      this.idleHigh = -1;
    }
    let k = 0;
    let o = at;
    if (this.holding && n > 0) {
      out[o++] = this.encodePair(this.held, pcm[from]!);
      this.holding = false;
      k = 1;
    }
    for (; k + 1 < n; k += 2) out[o++] = this.encodePair(pcm[from + k]!, pcm[from + k + 1]!);
    if (k < n) {
      this.held = pcm[from + k]!;
      this.holding = true;
    }
    return o - at;
  }

  /**
   * encodeWide of `n` zero samples, the same octets and the same state for what follows, at the
   * cost of the lower band alone once the QMF and the upper band have settled (see above).
   */
  encodeZeros(n: number, out: Uint8Array, at: number): number {
    let k = 0;
    let o = at;
    if (this.holding && n > 0) {
      out[o++] = this.encodePair(this.held, 0);
      this.holding = false;
      this.zeros = 1;
      this.idleHigh = -1;
      k = 1;
    }
    for (; k + 1 < n; k += 2) {
      if (this.zeros >= 24) {
        if (this.idleHigh >= 0) {
          // The QMF's taps are all zero (xlow = 0) and the upper band is at its fixed point: the
          // rest of the run (all pairs but an odd last sample) is the lower band's alone.
          const m = (n - k) >> 1;
          this.lowZeros(m, this.idleHigh << 6, out, o);
          o += m;
          k += 2 * m;
          break;
        }
        const probe = (this.probe ??= new Band(8, 22528, DET_H));
        Object.assign(probe, this.high);
        const code = this.encodePair(0, 0);
        out[o++] = code;
        if (sameBand(probe, this.high)) this.idleHigh = code >> 6;
        continue;
      }
      out[o++] = this.encodePair(0, 0);
      this.zeros += 2;
    }
    if (k < n) {
      this.held = 0;
      this.holding = true;
    }
    return o - at;
  }
}

/** The receive QMF's history in values: 11 octets' worth of (lower + upper, lower - upper) (24 taps). */
const QMF_HISTORY = 22;
/** Octets a decode pass takes at a time (a 20 ms frame is 160). */
const QMF_CHUNK = 160;
/**
 * The thread's work buffer for a decode pass: a decoder's history, then its chunk's values.
 * Shared by every decoder of the thread (each worker has its own module instance; a pass is
 * synchronous): one buffer that stays in the cache rather than a window per decoder.
 */
const QMF_WORK = new Int32Array(QMF_HISTORY + 2 * QMF_CHUNK);

/**
 * The decoder keeps both bands' state in local variables for the length of a decode() call (a
 * 20 ms frame): the same steps as Band.scale and Band.block4, in the same order, but with no field
 * loaded or stored per octet, and as one function V8 compiles as a whole. The far end's audio of
 * every G.722 call is decoded here, 8,000 octets a second: this form took 16-19 % less CPU than
 * the one over Band's methods (200 decoders in turn, 2-core VM).
 *
 * And it decodes a frame in two passes: first the two sub-band decoders for every octet, which
 * leave their sum and difference in the thread's work buffer after the QMF's history, then the
 * receive QMF over all of them. Each octet's sub-band step needs the one before (a chain of
 * dependent multiplies the CPU can only wait on); the QMF's 24 products of an octet need nothing
 * of the octet before, so in a loop of their own the CPU overlaps them octet after octet, where
 * interleaved with the chain they had to wait in line. Same arithmetic, same samples: 41-46 %
 * less CPU a frame (13.3 -> 7.1 µs speech, 7.5 -> 4.4 µs our silence; 200 decoders in turn with
 * other memory touched in between, bench/results/2026-12-06-vm-telcpu-8.md).
 * The octets' meaning is the Recommendation's as above; the tests compare it with spandsp.
 */
export class G722Decoder {
  private readonly low = new Band(32, 18432, DET_L);
  private readonly high = new Band(8, 22528, DET_H);
  /** The receive QMF's history: the last 11 octets' two values (lower + upper, lower - upper), oldest first. */
  private readonly x = new Int32Array(QMF_HISTORY);
  /**
   * The upper band's 2-bit code while its state sits at a fixed point of that code (one octet of
   * it leaves all 22 state fields as they were), else -1; `idleR` is its output rhigh there.
   */
  private idleHigh = -1;
  private idleR = 0;
  /** The upper band's state before the octet under the fixed-point check (made on first use). */
  private probe: Band | null = null;

  /**
   * Decodes `data` into 2 × data.length 16 kHz samples of `out` from `at`.
   *
   * The upper band's shortcut, as the encoder's (encodeZeros): once an octet's 2-bit code leaves
   * the band's state unchanged, every further octet with that code would compute the same state
   * and the same rhigh again, so they take that rhigh and skip the band's steps until another
   * code comes. This is checked, not assumed: while not at a fixed point, the first octet of
   * every call (a 20 ms frame) is decoded alone and the band's 22 state fields compared before
   * and after it. A far end sending digital silence (our own encoder's, another G.722 endpoint
   * muted) gets there within a few frames; the lower band has no fixed point (its quantizer has
   * no zero level) and always runs in full.
   */
  decode(data: Uint8Array, out: Int16Array, at: number): void {
    const n = data.length;
    let from = 0;
    if (this.idleHigh < 0 && n > 0) {
      const H = this.high;
      const probe = (this.probe ??= new Band(8, 22528, DET_H));
      Object.assign(probe, H);
      this.run(data, 0, 1, out, at);
      if (sameBand(probe, H)) {
        const c = (data[0]! >> 6) & 3;
        const r = (Math.imul(H.det, QM2[c]!) >> 15) + H.s;
        this.idleHigh = c;
        this.idleR = r > 16383 ? 16383 : r < -16384 ? -16384 : r;
      }
      from = 1;
    }
    if (from < n) this.run(data, from, n, out, at);
  }

  /** Decodes data[from, to) into `out` from at + 2·from (the state in locals meanwhile, see above). */
  private run(data: Uint8Array, from: number, to: number, out: Int16Array, at: number): void {
    const L = this.low;
    const H = this.high;
    let ls = L.s;
    let lsz = L.sz;
    let lnb = L.nb;
    let ldet = L.det;
    let lrr1 = L.rr1;
    let lrr2 = L.rr2;
    let lsg1 = L.sg1;
    let lsg2 = L.sg2;
    let la1 = L.a1;
    let la2 = L.a2;
    let ld1 = L.dd1;
    let ld2 = L.dd2;
    let ld3 = L.dd3;
    let ld4 = L.dd4;
    let ld5 = L.dd5;
    let ld6 = L.dd6;
    let lb1 = L.b1;
    let lb2 = L.b2;
    let lb3 = L.b3;
    let lb4 = L.b4;
    let lb5 = L.b5;
    let lb6 = L.b6;
    let hs = H.s;
    let hsz = H.sz;
    let hnb = H.nb;
    let hdet = H.det;
    let hrr1 = H.rr1;
    let hrr2 = H.rr2;
    let hsg1 = H.sg1;
    let hsg2 = H.sg2;
    let ha1 = H.a1;
    let ha2 = H.a2;
    let hd1 = H.dd1;
    let hd2 = H.dd2;
    let hd3 = H.dd3;
    let hd4 = H.dd4;
    let hd5 = H.dd5;
    let hd6 = H.dd6;
    let hb1 = H.b1;
    let hb2 = H.b2;
    let hb3 = H.b3;
    let hb4 = H.b4;
    let hb5 = H.b5;
    let hb6 = H.b6;
    const hist = this.x;
    const x = QMF_WORK;
    let idle = this.idleHigh;
    const idleR = this.idleR;
    for (let c = from; c < to;) {
      const end = to - c > QMF_CHUNK ? c + QMF_CHUNK : to;
      for (let i = 0; i < QMF_HISTORY; i++) x[i] = hist[i]!;
      // The sub-band decoders, octet after octet (each depends on the one before), leave their two
      // values for the QMF after the history; the QMF runs over them afterwards, below.
      let w = QMF_HISTORY;
      for (let j = c; j < end; j++) {
        const code = data[j]!;
        const ilow = code & 0x3f;
        const ihigh = (code >> 6) & 3;
        // 5L INVQBL, RECONS, 6L LIMIT
        let rlow = ls + (Math.imul(ldet, QM6[ilow]!) >> 15);
        if (rlow > 16383) rlow = 16383;
        else if (rlow < -16384) rlow = -16384;
        // 2L INVQAL (4-bit core)
        const ril = ilow >> 2;
        const dl = Math.imul(ldet, QM4[ril]!) >> 15;
        // 3L (Band.scale), 4L (Band.block4)
        lnb = (Math.imul(lnb, 127) >> 7) + WL4[ril]!;
        lnb &= ~(lnb >> 31);
        if (lnb > 18432) lnb = 18432;
        ldet = DET_L[lnb >> 6]!;
        {
          const r0 = sat(ls + dl);
          const sg0 = (lsz + dl) >> 31;
          const same1 = ~(sg0 ^ lsg1);
          let w2 = (sat(la1 << 2) ^ same1) - same1;
          if (w2 > 32767) w2 = 32767;
          let ap2 = ((w2 >> 7) + 128 - ((sg0 ^ lsg2) & 256) + (Math.imul(la2, 32512) >> 15)) | 0;
          if (ap2 > 12288) ap2 = 12288;
          else if (ap2 < -12288) ap2 = -12288;
          let ap1 = (192 - ((sg0 ^ lsg1) & 384) + (Math.imul(la1, 32640) >> 15)) | 0;
          const lim = 15360 - ap2;
          if (ap1 > lim) ap1 = lim;
          else if (ap1 < -lim) ap1 = -lim;
          const step = ((dl | -dl) >>> 31) << 7;
          let q = (ld1 ^ dl) >> 31;
          lb1 = ((step ^ q) - q + (Math.imul(lb1, 32640) >> 15)) | 0;
          q = (ld2 ^ dl) >> 31;
          lb2 = ((step ^ q) - q + (Math.imul(lb2, 32640) >> 15)) | 0;
          q = (ld3 ^ dl) >> 31;
          lb3 = ((step ^ q) - q + (Math.imul(lb3, 32640) >> 15)) | 0;
          q = (ld4 ^ dl) >> 31;
          lb4 = ((step ^ q) - q + (Math.imul(lb4, 32640) >> 15)) | 0;
          q = (ld5 ^ dl) >> 31;
          lb5 = ((step ^ q) - q + (Math.imul(lb5, 32640) >> 15)) | 0;
          q = (ld6 ^ dl) >> 31;
          lb6 = ((step ^ q) - q + (Math.imul(lb6, 32640) >> 15)) | 0;
          ld6 = ld5;
          ld5 = ld4;
          ld4 = ld3;
          ld3 = ld2;
          ld2 = ld1;
          ld1 = sat(dl + dl);
          lrr2 = lrr1;
          lrr1 = sat(r0 + r0);
          lsg2 = lsg1;
          lsg1 = sg0;
          la2 = ap2;
          la1 = ap1;
          const sp = sat(((Math.imul(ap1, lrr1) >> 15) + (Math.imul(ap2, lrr2) >> 15)) | 0);
          lsz = sat(
            ((Math.imul(lb1, ld1) >> 15) +
              (Math.imul(lb2, ld2) >> 15) +
              (Math.imul(lb3, ld3) >> 15) +
              (Math.imul(lb4, ld4) >> 15) +
              (Math.imul(lb5, ld5) >> 15) +
              (Math.imul(lb6, ld6) >> 15)) |
              0,
          );
          ls = sat(sp + lsz);
        }
        // At the upper band's fixed point: its rhigh, and its state stays.
        let rhigh = idleR;
        if (ihigh !== idle) {
          idle = -1;
          // 2H INVQAH, 5H RECONS, 6H LIMIT
          const dh = Math.imul(hdet, QM2[ihigh]!) >> 15;
          rhigh = dh + hs;
          if (rhigh > 16383) rhigh = 16383;
          else if (rhigh < -16384) rhigh = -16384;
          // 3H, 4H
          hnb = (Math.imul(hnb, 127) >> 7) + WH2[ihigh]!;
          hnb &= ~(hnb >> 31);
          if (hnb > 22528) hnb = 22528;
          hdet = DET_H[hnb >> 6]!;
          {
            const r0 = sat(hs + dh);
            const sg0 = (hsz + dh) >> 31;
            const same1 = ~(sg0 ^ hsg1);
            let w2 = (sat(ha1 << 2) ^ same1) - same1;
            if (w2 > 32767) w2 = 32767;
            let ap2 = ((w2 >> 7) + 128 - ((sg0 ^ hsg2) & 256) + (Math.imul(ha2, 32512) >> 15)) | 0;
            if (ap2 > 12288) ap2 = 12288;
            else if (ap2 < -12288) ap2 = -12288;
            let ap1 = (192 - ((sg0 ^ hsg1) & 384) + (Math.imul(ha1, 32640) >> 15)) | 0;
            const lim = 15360 - ap2;
            if (ap1 > lim) ap1 = lim;
            else if (ap1 < -lim) ap1 = -lim;
            const step = ((dh | -dh) >>> 31) << 7;
            let q = (hd1 ^ dh) >> 31;
            hb1 = ((step ^ q) - q + (Math.imul(hb1, 32640) >> 15)) | 0;
            q = (hd2 ^ dh) >> 31;
            hb2 = ((step ^ q) - q + (Math.imul(hb2, 32640) >> 15)) | 0;
            q = (hd3 ^ dh) >> 31;
            hb3 = ((step ^ q) - q + (Math.imul(hb3, 32640) >> 15)) | 0;
            q = (hd4 ^ dh) >> 31;
            hb4 = ((step ^ q) - q + (Math.imul(hb4, 32640) >> 15)) | 0;
            q = (hd5 ^ dh) >> 31;
            hb5 = ((step ^ q) - q + (Math.imul(hb5, 32640) >> 15)) | 0;
            q = (hd6 ^ dh) >> 31;
            hb6 = ((step ^ q) - q + (Math.imul(hb6, 32640) >> 15)) | 0;
            hd6 = hd5;
            hd5 = hd4;
            hd4 = hd3;
            hd3 = hd2;
            hd2 = hd1;
            hd1 = sat(dh + dh);
            hrr2 = hrr1;
            hrr1 = sat(r0 + r0);
            hsg2 = hsg1;
            hsg1 = sg0;
            ha2 = ap2;
            ha1 = ap1;
            const sp = sat(((Math.imul(ap1, hrr1) >> 15) + (Math.imul(ap2, hrr2) >> 15)) | 0);
            hsz = sat(
              ((Math.imul(hb1, hd1) >> 15) +
                (Math.imul(hb2, hd2) >> 15) +
                (Math.imul(hb3, hd3) >> 15) +
                (Math.imul(hb4, hd4) >> 15) +
                (Math.imul(hb5, hd5) >> 15) +
                (Math.imul(hb6, hd6) >> 15)) |
                0,
            );
            hs = sat(sp + hsz);
          }
        }
        x[w] = rlow + rhigh;
        x[w + 1] = rlow - rhigh;
        w += 2;
      }
      // Receive QMF (QmfLine.push and sums) over the chunk: no octet's sums depend on another's,
      // so these iterations overlap in the CPU where the decoders above cannot.
      for (let j = c, o = 0; j < end; j++, o += 2) {
        const even =
          (Math.imul(x[o]!, 3) +
            Math.imul(x[o + 2]!, -11) +
            Math.imul(x[o + 4]!, 12) +
            Math.imul(x[o + 6]!, 32) +
            Math.imul(x[o + 8]!, -210) +
            Math.imul(x[o + 10]!, 951) +
            Math.imul(x[o + 12]!, 3876) +
            Math.imul(x[o + 14]!, -805) +
            Math.imul(x[o + 16]!, 362) +
            Math.imul(x[o + 18]!, -156) +
            Math.imul(x[o + 20]!, 53) +
            Math.imul(x[o + 22]!, -11)) |
          0;
        const odd =
          (Math.imul(x[o + 1]!, -11) +
            Math.imul(x[o + 3]!, 53) +
            Math.imul(x[o + 5]!, -156) +
            Math.imul(x[o + 7]!, 362) +
            Math.imul(x[o + 9]!, -805) +
            Math.imul(x[o + 11]!, 3876) +
            Math.imul(x[o + 13]!, 951) +
            Math.imul(x[o + 15]!, -210) +
            Math.imul(x[o + 17]!, 32) +
            Math.imul(x[o + 19]!, 12) +
            Math.imul(x[o + 21]!, -11) +
            Math.imul(x[o + 23]!, 3)) |
          0;
        out[at + 2 * j] = sat(odd >> 11);
        out[at + 2 * j + 1] = sat(even >> 11);
      }
      for (let i = 0; i < QMF_HISTORY; i++) hist[i] = x[w - QMF_HISTORY + i]!;
      c = end;
    }
    this.idleHigh = idle;
    L.s = ls;
    L.sz = lsz;
    L.nb = lnb;
    L.det = ldet;
    L.rr1 = lrr1;
    L.rr2 = lrr2;
    L.sg1 = lsg1;
    L.sg2 = lsg2;
    L.a1 = la1;
    L.a2 = la2;
    L.dd1 = ld1;
    L.dd2 = ld2;
    L.dd3 = ld3;
    L.dd4 = ld4;
    L.dd5 = ld5;
    L.dd6 = ld6;
    L.b1 = lb1;
    L.b2 = lb2;
    L.b3 = lb3;
    L.b4 = lb4;
    L.b5 = lb5;
    L.b6 = lb6;
    H.s = hs;
    H.sz = hsz;
    H.nb = hnb;
    H.det = hdet;
    H.rr1 = hrr1;
    H.rr2 = hrr2;
    H.sg1 = hsg1;
    H.sg2 = hsg2;
    H.a1 = ha1;
    H.a2 = ha2;
    H.dd1 = hd1;
    H.dd2 = hd2;
    H.dd3 = hd3;
    H.dd4 = hd4;
    H.dd5 = hd5;
    H.dd6 = hd6;
    H.b1 = hb1;
    H.b2 = hb2;
    H.b3 = hb3;
    H.b4 = hb4;
    H.b5 = hb5;
    H.b6 = hb6;
  }
}
