import { AppError } from '../errors.ts';

/**
 * Long-lived streams (WebSocket upgrades, Server-Sent Events) counted per client address and in
 * all. A stream holds its connection for hours, so without a cap of its own one address (an
 * office behind NAT, a script) could spend its whole connection share on streams and have none
 * left for ordinary requests, and a burst of them could take every connection of the appliance.
 * Past a cap the stream is refused with a status the client can act on: 429 with Retry-After for
 * its address, 503 for the appliance. The appliance's own loopback (console, health checks) is
 * counted in the total only, as for connections.
 */
export class StreamSlots {
  readonly #perIp = new Map<string, number>();
  #open = 0;

  constructor(private readonly limits: { maxStreams: number; maxStreamsPerIp: number }) {}

  get open(): number {
    return this.#open;
  }

  /** Takes a slot for `ip`, or throws; the answer releases it (once, however often it is called). */
  take(ip: string): () => void {
    const loopback = ip === '127.0.0.1' || ip === '::1';
    const mine = loopback ? 0 : (this.#perIp.get(ip) ?? 0);
    if (!loopback && mine >= this.limits.maxStreamsPerIp) {
      throw new AppError(429, 'rate_limited', `too many open streams from this address (at most ${this.limits.maxStreamsPerIp})`, {
        headers: { 'Retry-After': '10' },
      });
    }
    if (this.#open >= this.limits.maxStreams) {
      throw new AppError(503, 'temporarily_unavailable', 'too many open streams on the appliance; try again shortly', { headers: { 'Retry-After': '10' } });
    }
    this.#open++;
    if (!loopback) this.#perIp.set(ip, mine + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.#open--;
      if (loopback) return;
      const n = (this.#perIp.get(ip) ?? 1) - 1;
      if (n > 0) this.#perIp.set(ip, n);
      else this.#perIp.delete(ip);
    };
  }
}
