/**
 * A repeated HelloVerifyRequest is not a failed handshake.
 *
 * The bridge answers a browser's `a=setup:actpass` as the DTLS client, so its first flight is a
 * ClientHello, which it sends again after 500 ms without an answer (werift's flight timer). A
 * server that asks for a cookie (RFC 6347 §4.2.1) answers each ClientHello it receives with a
 * HelloVerifyRequest; when its first answer takes longer than those 500 ms (a visitor's machine
 * or the bridge's thread busy: 45 rooms joining at once on the loaded 2-core VM), the client gets
 * two. werift 0.25.2's client throws on the second (its flight 3 `exec` refuses to run twice),
 * which fails the DTLS transport and ends the room "connection failed" 1-3 s into the join,
 * although the first HelloVerifyRequest was answered and the handshake was under way.
 *
 * What the client does with a second HelloVerifyRequest instead (RFC 6347 §4.2.1: "the client
 * MUST retransmit the ClientHello with the cookie added"):
 * - the same cookie again (a server that keeps no state per client): dropped; the ClientHello with
 *   that cookie is already out and on its retransmission timer (§4.2.4);
 * - a new cookie (a server that made one per ClientHello and now knows only the newest, as
 *   werift's does): the ClientHello goes out again with the new cookie, which werift's flight 3
 *   does once it is allowed to run again (ClientHello and HelloVerifyRequest are left out of the
 *   handshake hash, §4.2.1, so the handshake is the same);
 * - any HelloVerifyRequest after the server's flight arrived: dropped (werift would otherwise go
 *   back to flight 3 mid-handshake).
 */
import { DtlsClient } from 'werift';

/** msg_type of a HelloVerifyRequest (RFC 6347 §4.3.2). */
const HELLO_VERIFY_REQUEST = 3;
/** The client's flight that carries the cookie (RFC 6347 §4.2.4's flights, as werift numbers them). */
const COOKIE_FLIGHT = 3;

/** HelloVerifyRequest: server_version (2 octets), then the cookie as <0..2^8-1> (RFC 6347 §4.2.1). */
function cookieOf(fragment: unknown): Buffer | null {
  if (!Buffer.isBuffer(fragment) || fragment.length < 3) return null;
  const n = fragment[2]!;
  return fragment.length >= 3 + n ? fragment.subarray(3, 3 + n) : null;
}

/** The parts of werift's RTCDtlsTransport and DtlsClient used here. */
interface DtlsTransportInternals {
  onStateChange?: { subscribe: (fn: (state: string) => void) => unknown };
  dtls?: unknown;
}
interface ClientInternals {
  dtls?: { flight?: unknown; cookie?: unknown };
  onHandleHandshakes?: (assembled: { msg_type: number; fragment?: unknown }[]) => Promise<void>;
}

/**
 * Makes `client` ignore a HelloVerifyRequest once its cookie flight is out. Returns false when
 * werift's client is not shaped as expected (then nothing is changed).
 */
export function ignoreRepeatedHelloVerify(client: unknown): boolean {
  if (!(client instanceof DtlsClient)) return false;
  const c = client as unknown as ClientInternals;
  const handle = c.onHandleHandshakes;
  const context = c.dtls;
  if (typeof handle !== 'function' || !context || typeof context.flight !== 'number') return false;
  c.onHandleHandshakes = (assembled) => {
    const flight = context.flight as number;
    if (flight < COOKIE_FLIGHT) return handle(assembled);
    const rest = assembled.filter((h) => h.msg_type !== HELLO_VERIFY_REQUEST);
    const verify = assembled.find((h) => h.msg_type === HELLO_VERIFY_REQUEST);
    if (verify && flight === COOKIE_FLIGHT && rest.length === 0) {
      const cookie = cookieOf(verify.fragment);
      if (cookie && !(Buffer.isBuffer(context.cookie) && cookie.equals(context.cookie))) {
        // A new cookie: werift's flight 3 runs again (it refuses to while the flight says 3).
        context.flight = COOKIE_FLIGHT - 1;
        return handle([verify]);
      }
    }
    return rest.length ? handle(rest) : Promise.resolve();
  };
  return true;
}

/**
 * Applies `ignoreRepeatedHelloVerify` to the DTLS client a werift RTCDtlsTransport creates when
 * its handshake starts. werift makes the client just after the transport says "connecting" and
 * sends the first ClientHello 100 ms later, so a microtask after that state change is in time.
 * Returns false when the transport is not shaped as expected.
 */
export function toleratingRepeatedHelloVerify(transport: unknown): boolean {
  const t = transport as DtlsTransportInternals | undefined;
  if (!t || typeof t.onStateChange?.subscribe !== 'function') return false;
  t.onStateChange.subscribe((state) => {
    if (state === 'connecting') queueMicrotask(() => ignoreRepeatedHelloVerify(t.dtls));
  });
  return true;
}
