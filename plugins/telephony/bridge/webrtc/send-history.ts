/**
 * werift's RTP sender keeps its last 128 packets (`rtpCache`, a clone of each: header, extension
 * list and payload) to answer RTCP NACKs with retransmissions. Our answer negotiates no NACK for
 * audio and a browser does not ask for one, so that history only keeps 2.56 s of every room's
 * packets alive: on a WebRTC thread carrying 25 rooms, ~3200 cloned packets that every young-
 * generation garbage collection copies or promotes, and those collections (every ~0.4 s, 5 to
 * 30 ms each) were what made the rooms' frames late.
 *
 * The history is swapped for a zero-length typed array: writes past its end are ignored without
 * an error, even in strict mode (ECMA-262 TypedArraySetElement), and reads give undefined, which
 * werift's NACK handler takes as "not kept". Its own resets (`rtpCache = []`) are ignored too.
 */
const NOTHING_KEPT = new Int8Array(0);

export function dropSendHistory(sender: object): void {
  Object.defineProperty(sender, 'rtpCache', {
    get: () => NOTHING_KEPT,
    set: () => undefined,
    configurable: true,
  });
}
