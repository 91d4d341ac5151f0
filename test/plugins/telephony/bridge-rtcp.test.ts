/** RTCP packets and reception statistics (RFC 3550 §6, Appendix A). */
import { describe, expect, it } from 'vitest';
import { buildBye, buildReport, buildSdes, ntpOf, parseRtcp, ReceptionStats, SenderInfo } from '../../../plugins/telephony/bridge/media/rtcp.ts';

describe('RTCP packets (RFC 3550 §6.4-6.6)', () => {
  it('builds a compound SR + SDES + BYE with the exact layout and parses it back', () => {
    const block = { ssrc: 0xdeadbeef, fractionLost: 64, cumulativeLost: -3, extendedMax: 0x1_0005, jitter: 42, lsr: 0x12345678, dlsr: 65536 };
    const sr = buildReport(0x01020304, { ntpSec: 0xe0000000, ntpFrac: 0x80000000, rtpTs: 160, packets: 7, octets: 1120 }, block);
    expect(sr.length).toBe(52); // 28 + one 24-byte block
    expect(sr.subarray(0, 4)).toEqual(Buffer.from([0x81, 200, 0, 12])); // V=2, RC=1, PT=SR, length 13 words - 1
    const sdes = buildSdes(0x01020304, 'abc@sovcomms');
    expect(sdes.length % 4).toBe(0);
    expect(sdes[1]).toBe(202);
    const bye = buildBye(0x01020304);
    expect(bye).toEqual(Buffer.from([0x81, 203, 0, 1, 1, 2, 3, 4]));
    const parsed = parseRtcp(Buffer.concat([sr, sdes, bye]))!;
    expect(parsed).toEqual([
      { type: 'sr', ssrc: 0x01020304, sender: { ntpSec: 0xe0000000, ntpFrac: 0x80000000, rtpTs: 160, packets: 7, octets: 1120 }, blocks: [block] },
      { type: 'sdes', chunks: [{ ssrc: 0x01020304, cname: 'abc@sovcomms' }] },
      { type: 'bye', ssrcs: [0x01020304] },
    ]);
    const rr = buildReport(9, null, null);
    expect(rr).toEqual(Buffer.from([0x80, 201, 0, 1, 0, 0, 0, 9]));
    expect(parseRtcp(rr)).toEqual([{ type: 'rr', ssrc: 9, blocks: [] }]);
  });

  it('refuses what is not valid RTCP (Appendix A.2)', () => {
    const sr = buildReport(1, { ntpSec: 1, ntpFrac: 0, rtpTs: 0, packets: 0, octets: 0 }, null);
    expect(parseRtcp(Buffer.alloc(3))).toBeNull();
    expect(parseRtcp(buildSdes(1, 'x'))).toBeNull(); // must start with SR or RR
    expect(parseRtcp(sr.subarray(0, 20))).toBeNull(); // length beyond the datagram
    const v1 = Buffer.from(sr);
    v1[0] = 0x40;
    expect(parseRtcp(v1)).toBeNull();
    const claimsBlock = Buffer.from(buildReport(1, null, null));
    claimsBlock[0] = 0x81; // RC=1 but no room for the block
    expect(parseRtcp(claimsBlock)).toBeNull();
    const rtp = Buffer.from([0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
    expect(parseRtcp(rtp)).toBeNull();
  });

  it('NTP timestamps count from 1900', () => {
    expect(ntpOf(0)).toEqual({ sec: 2_208_988_800, frac: 0 });
    expect(ntpOf(1500).frac).toBe(2 ** 31);
  });
});

describe('reception statistics (Appendix A.1, A.3, A.8)', () => {
  it('counts expected and lost packets across a sequence wrap, and the fraction lost per interval', () => {
    const r = new ReceptionStats();
    let t = 0;
    for (let seq = 65530; seq < 65536 + 10; seq++) {
      if (seq === 65534 || seq === 65536 + 3) continue; // two lost, one on each side of the wrap
      r.onRtp(77, seq & 0xffff, seq * 160, (t += 20));
    }
    expect(r.expected).toBe(16);
    expect(r.lost).toBe(2);
    const b = r.block(0)!;
    expect(b).toMatchObject({ ssrc: 77, cumulativeLost: 2, extendedMax: 0x10000 + 9, fractionLost: Math.floor((2 * 256) / 16) });
    // Next interval without loss: fraction 0, cumulative unchanged.
    for (let seq = 65536 + 10; seq < 65536 + 20; seq++) r.onRtp(77, seq & 0xffff, seq * 160, (t += 20));
    expect(r.block(0)).toMatchObject({ fractionLost: 0, cumulativeLost: 2 });
  });

  it('jitter is 0 for perfectly paced packets and grows toward the mean deviation when arrivals wobble', () => {
    const steady = new ReceptionStats();
    for (let i = 0; i < 100; i++) steady.onRtp(1, i, i * 160, i * 20);
    expect(steady.jitter).toBe(0);
    const wobbly = new ReceptionStats();
    for (let i = 0; i < 400; i++) wobbly.onRtp(1, i, i * 160, i * 20 + (i % 2 ? 5 : 0));
    // |D| is 5 ms = 40 timestamp units every packet: J converges to 40.
    expect(wobbly.jitter).toBeGreaterThan(39);
    expect(wobbly.jitter).toBeLessThanOrEqual(40);
  });

  it('a new SSRC starts the statistics over', () => {
    const r = new ReceptionStats();
    for (let i = 0; i < 5; i++) r.onRtp(1, i, i * 160, i * 20);
    r.onRtp(2, 1000, 0, 200);
    expect(r.expected).toBe(1);
    expect(r.lost).toBe(0);
  });
});

describe('sender info shared between threads', () => {
  it('reads what was last written, and nothing before the first packet', () => {
    const w = new SenderInfo();
    const r = new SenderInfo(w.sab);
    expect(r.read()).toBeNull();
    w.update(0xfffffff0, 10, 1600, 0xffffff00, 1234.5);
    expect(r.read()).toEqual({ ssrc: 0xfffffff0, packets: 10, octets: 1600, rtpTs: 0xffffff00, atMs: 1234.5 });
  });
});
