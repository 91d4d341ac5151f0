/**
 * A visitor whose DTLS answers come late: the bridge's ClientHello goes out twice (werift's
 * flight timer fires after 500 ms), the visitor answers both with a HelloVerifyRequest, and the
 * room still connects (webrtc/dtls-hvr.ts). Before, werift's client threw on the second one and
 * the room ended "connection failed" a second into the join: seen with 45 rooms joining at once
 * on the loaded 2-core VM (rooms-many.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { WebRtcLeg } from '../../../plugins/telephony/bridge/webrtc/leg.ts';
import { WebRtcVisitor } from '../../support/webrtc-visitor.ts';

/** The handshake message type of a datagram starting with a DTLS handshake record (content type 22). */
const handshakeType = (b: Buffer) => (b.length > 13 && b[0] === 22 ? b[13] : -1);
const HELLO_VERIFY_REQUEST = 3;
const SERVER_HELLO = 2;

describe("a room's DTLS handshake with a slow visitor", () => {
  it('connects when the visitor answers both ClientHellos with a HelloVerifyRequest', async () => {
    let gone = '';
    const leg = new WebRtcLeg(
      { onAudio16k: () => undefined, onConnected: () => undefined, onGone: (why) => (gone = why), onVoice: () => undefined },
      { hostAddresses: ['127.0.0.1'], iceLite: true },
      0,
    );
    const visitor = new WebRtcVisitor({ toneHz: 700 });
    let verifies = 0;
    try {
      const offer = await visitor.offer();
      // The visitor's ICE connection: its answer to the first ClientHello leaves 700 ms late,
      // after the bridge sent its ClientHello again (500 ms) and got the answer to that one; its
      // ServerHello 400 ms late, so the late answer finds the bridge waiting for it (flight 3).
      const conn = (visitor.pc.iceTransports[0] as unknown as { connection: { send: (b: Buffer) => Promise<void> } }).connection;
      const send = conn.send.bind(conn);
      let helloDelayed = false;
      conn.send = async (b: Buffer) => {
        const type = handshakeType(b);
        if (type === HELLO_VERIFY_REQUEST && verifies++ === 0) await new Promise((r) => setTimeout(r, 700));
        if (type === SERVER_HELLO && !helloDelayed) {
          helloDelayed = true;
          await new Promise((r) => setTimeout(r, 400));
        }
        return send(b);
      };
      await visitor.accept(await leg.answer(offer));
      const until = Date.now() + 15_000;
      while (visitor.pc.connectionState !== 'connected' && !gone && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      expect(gone).toBe('');
      expect(visitor.pc.connectionState).toBe('connected');
      // The case under test happened: two ClientHellos, two HelloVerifyRequests.
      expect(verifies).toBeGreaterThanOrEqual(2);
      leg.play(new Int16Array(8000));
      const heard = Date.now() + 10_000;
      while (visitor.packetsReceived < 20 && Date.now() < heard) await new Promise((r) => setTimeout(r, 50));
      expect(visitor.packetsReceived).toBeGreaterThanOrEqual(20);
    } finally {
      await visitor.close();
      await leg.stop();
    }
  }, 40_000);
});
