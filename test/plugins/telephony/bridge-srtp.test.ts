import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ProtectionProfileAeadAes128Gcm, ProtectionProfileAes128CmHmacSha1_80, RtpHeader, SrtpAuthenticationError, SrtpSession } from 'werift';
import { SrtpProtector, SrtpUnprotector, type SrtpKeys } from '../../../plugins/telephony/bridge/webrtc/srtp.ts';
import { WebRtcLeg } from '../../../plugins/telephony/bridge/webrtc/leg.ts';
import { WebRtcVisitor } from '../../support/webrtc-visitor.ts';

/**
 * werift SRTP contexts of one master key and salt (RFC 3711 §4.3 derives the session keys): its
 * own sender's, the one our code takes its keys from (as in a room), and a receiver's (a remote
 * context decrypts with the same keys).
 */
function contexts(profile: number) {
  const key = randomBytes(16);
  const salt = randomBytes(profile === ProtectionProfileAeadAes128Gcm ? 12 : 14);
  const session = () => new SrtpSession({ keys: { localMasterKey: key, localMasterSalt: salt, remoteMasterKey: key, remoteMasterSalt: salt }, profile });
  const ours = session();
  return {
    werift: session().localContext,
    ours: ours.localContext as unknown as SrtpKeys,
    oursRemote: ours.remoteContext as unknown as SrtpKeys,
    receiver: session().remoteContext,
  };
}

/** 20 packets across a sequence wrap (the rollover counter goes 0 → 1), of varied payload sizes. */
function* packets() {
  let seq = 65530;
  let ts = 0xfffff000;
  for (let i = 0; i < 20; i++) {
    yield { seq, ts, marker: i % 7 === 0, payload: randomBytes([160, 80, 1, 17, 160][i % 5]) };
    seq = (seq + 1) & 0xffff;
    ts = (ts + 160) >>> 0;
  }
}

const SSRC = 0x8badf00d;

describe("the rooms' own SRTP", () => {
  for (const [name, profile] of [
    ['AEAD_AES_128_GCM', ProtectionProfileAeadAes128Gcm],
    ['AES_CM_128_HMAC_SHA1_80', ProtectionProfileAes128CmHmacSha1_80],
  ] as const) {
    it(`${name}: sends the same bytes as werift's sender, across a sequence wrap, and werift decrypts them`, () => {
      const c = contexts(profile);
      const p = new SrtpProtector(c.ours);
      for (const k of packets()) {
        const header = new RtpHeader({ payloadType: 8, sequenceNumber: k.seq, timestamp: k.ts, ssrc: SSRC, marker: k.marker });
        const theirs = c.werift.encryptRtp(k.payload, header);
        const mine = p.protect(8, k.marker, k.seq, k.ts, SSRC, k.payload);
        expect(mine.toString('hex')).toBe(theirs.toString('hex'));
        const [plain] = c.receiver.decryptRtp(mine);
        expect(plain.subarray(12).toString('hex')).toBe(k.payload.toString('hex'));
      }
    });
  }

  it('AES_CM_128_HMAC_SHA1_80: receives what werift protects (across a wrap, with a CSRC and a header extension), as werift would', () => {
    const c = contexts(ProtectionProfileAes128CmHmacSha1_80);
    const rx = new SrtpUnprotector(c.oursRemote);
    let i = 0;
    for (const k of packets()) {
      const header = new RtpHeader({ payloadType: 0, sequenceNumber: k.seq, timestamp: k.ts, ssrc: SSRC, marker: k.marker });
      if (i % 3 === 1) header.csrc = [0x01020304];
      if (i % 4 === 2) {
        header.extension = true;
        header.extensionProfile = 0xbede;
        header.extensions = [{ id: 1, payload: Buffer.from([0x7f]) }];
      }
      i++;
      const srtp = c.werift.encryptRtp(k.payload, header);
      const [expected] = c.receiver.decryptRtp(srtp);
      expect(rx.unprotect(srtp).toString('hex')).toBe(expected.toString('hex'));
    }
  });

  it('AES_CM_128_HMAC_SHA1_80: drops what does not authenticate (tampered, wrong key, truncated) with the error werift drops', () => {
    const c = contexts(ProtectionProfileAes128CmHmacSha1_80);
    const rx = new SrtpUnprotector(c.oursRemote);
    const header = new RtpHeader({ payloadType: 0, sequenceNumber: 7, timestamp: 1, ssrc: SSRC });
    const good = c.werift.encryptRtp(randomBytes(160), header);
    const tampered = Buffer.from(good);
    tampered[40] ^= 1;
    expect(() => rx.unprotect(tampered)).toThrow(SrtpAuthenticationError);
    const other = contexts(ProtectionProfileAes128CmHmacSha1_80);
    expect(() => new SrtpUnprotector(other.oursRemote).unprotect(good)).toThrow(SrtpAuthenticationError);
    expect(() => rx.unprotect(good.subarray(0, 15))).toThrow(SrtpAuthenticationError);
    // The failures left the rollover state alone: the genuine packet still decrypts.
    expect(rx.unprotect(good).length).toBe(12 + 160);
  });

  it('refuses a packet larger than an Ethernet MTU', () => {
    const c = contexts(ProtectionProfileAes128CmHmacSha1_80);
    expect(() => new SrtpProtector(c.ours).protect(0, false, 1, 1, 1, new Uint8Array(1490))).toThrow(/larger/);
  });
});

describe("a room's WebRTC leg with a werift visitor", () => {
  it('negotiates AES-CM and carries RTP both ways through the bridge’s own SRTP, without loss', async () => {
    const heard: Int16Array[] = [];
    const leg = new WebRtcLeg(
      { onAudio16k: (pcm) => heard.push(pcm), onConnected: () => undefined, onGone: () => undefined, onVoice: () => undefined },
      { hostAddresses: ['127.0.0.1'], iceLite: true },
      0,
    );
    const visitor = new WebRtcVisitor({ toneHz: 700 });
    try {
      await visitor.accept(await leg.answer(await visitor.offer()));
      await visitor.connected;
      leg.play(new Int16Array(8000).map((_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 8000))));
      const until = Date.now() + 10_000;
      while ((visitor.packetsReceived < 50 || heard.length < 5) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await visitor.close();
    }
    const m = await leg.stop();
    expect(m.srtp).toBe('own');
    expect(m.packetsSent).toBeGreaterThanOrEqual(50);
    expect(visitor.packetsReceived).toBeGreaterThanOrEqual(50);
    expect(visitor.lost).toBe(0);
    expect(m.packetsReceived).toBeGreaterThan(20);
    expect(m.rxLost).toBe(0);
  }, 20_000);
});
