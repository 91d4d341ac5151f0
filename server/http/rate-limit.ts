import { RateLimitedError } from '../errors.ts';

/**
 * Per-key token buckets in memory (per IP, per account). A bucket holds `perMinute` tokens and
 * refills continuously; an empty bucket answers 429 with Retry-After in whole seconds.
 */
export class RateLimiter {
  /**
   * bucket → key → tokens. Two lookups with the callers' own strings (a bucket name is a constant;
   * a client's address is the socket's one string) rather than a joined key: a joined key is a
   * new string, hashed anew on every request.
   */
  readonly #buckets = new Map<string, Map<string, { tokens: number; at: number }>>();
  #sweepAt = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Takes one token; returns 0 when allowed, else the seconds until one is available. */
  take(bucket: string, key: string, perMinute: number, cost = 1): number {
    const t = this.now();
    this.sweep(t);
    const rate = perMinute / 60_000;
    let keys = this.#buckets.get(bucket);
    if (!keys) {
      keys = new Map();
      this.#buckets.set(bucket, keys);
    }
    let b = keys.get(key);
    if (!b) {
      b = { tokens: perMinute, at: t };
      keys.set(key, b);
    } else {
      b.tokens = Math.min(perMinute, b.tokens + (t - b.at) * rate);
      b.at = t;
    }
    if (b.tokens >= cost) {
      b.tokens -= cost;
      return 0;
    }
    return Math.max(1, Math.ceil((cost - b.tokens) / rate / 1000));
  }

  /** Throws 429 when the bucket is empty. */
  check(bucket: string, key: string, perMinute: number, cost = 1): void {
    const wait = this.take(bucket, key, perMinute, cost);
    if (wait > 0) throw new RateLimitedError(wait);
  }

  /** True when the next take would be refused (for "rate limited" audit events without spending). */
  isLimited(bucket: string, key: string, perMinute: number): boolean {
    const b = this.#buckets.get(bucket)?.get(key);
    if (!b) return false;
    return Math.min(perMinute, b.tokens + (this.now() - b.at) * (perMinute / 60_000)) < 1;
  }

  reset(bucket: string, key: string): void {
    this.#buckets.get(bucket)?.delete(key);
  }

  private sweep(t: number): void {
    if (t < this.#sweepAt) return;
    this.#sweepAt = t + 60_000;
    // Buckets untouched for 10 minutes are full again: forgetting them changes nothing.
    for (const keys of this.#buckets.values()) for (const [k, b] of keys) if (t - b.at > 600_000) keys.delete(k);
  }
}
