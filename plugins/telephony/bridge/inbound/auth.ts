/**
 * Who may ask the bridge for something with a password: desk phones REGISTERing (the registrar,
 * 401 / Authorization) and trunks sending INVITEs with digest (407 / Proxy-Authorization). The
 * digest itself (nonces bound to the address, single use or a rising nonce-count) is
 * ../sip/digest.ts; this adds the limits on guessing (RFC 3261 §26.3.2.4 leaves them to the
 * implementation):
 *
 * - per source address and per user name, a few failures are free, then every further one doubles
 *   a wait (1 s, 2 s, 4 s ... 15 min) during which every request that would need the password is
 *   answered 503 with Retry-After (§20.33 allows Retry-After with 503; SIP has no 429, and a
 *   phone backs off on 503 as asked) without looking at the password, the right one included;
 * - the wait of a user name does not hold back an address that user signed in from lately (their
 *   own phones), so nobody can lock alice's phone out by guessing her password from elsewhere;
 *   the wait of an address holds everyone there back;
 * - failures are forgotten after an hour without one; a success forgets the user name's.
 */
import { makeResponse, newTag } from '../sip/message.ts';
import type { ServerRequestContext } from '../sip/transaction.ts';
import { DigestServer, parseDigestAnswer } from '../sip/digest.ts';
import { log } from '../log.ts';

export interface AuthLimits {
  /** Failures before the first wait. */
  free: number;
  firstWaitMs: number;
  maxWaitMs: number;
  /** A key without a failure for this long starts over. */
  forgetMs: number;
}

const ADDRESS_LIMITS: AuthLimits = { free: 10, firstWaitMs: 1000, maxWaitMs: 15 * 60_000, forgetMs: 60 * 60_000 };
const USER_LIMITS: AuthLimits = { free: 10, firstWaitMs: 1000, maxWaitMs: 15 * 60_000, forgetMs: 60 * 60_000 };

/** Keys followed at once per table; beyond it the longest quiet are forgotten. */
const MAX_KEYS = 10_000;
/** How long a user's good address stays known, and how many per user. */
const KNOWN_MS = 24 * 60 * 60_000;
const MAX_KNOWN = 8;

/** Failure counts with a doubling wait (a small LRU: a flood of keys cannot grow it). */
class Backoff {
  private readonly entries = new Map<string, { failures: number; last: number; until: number }>();

  constructor(
    private readonly limits: AuthLimits,
    private readonly now: () => number = Date.now,
  ) {}

  /** Milliseconds `key` must still wait (0: it may try). */
  waitMs(key: string): number {
    const e = this.entries.get(key);
    if (!e) return 0;
    const now = this.now();
    if (now >= e.until && now - e.last > this.limits.forgetMs) {
      this.entries.delete(key);
      return 0;
    }
    return Math.max(0, e.until - now);
  }

  /** Counts a failure; returns the wait it starts (0 while failures are still free). */
  fail(key: string): number {
    const now = this.now();
    this.waitMs(key); // forgets a stale entry first
    const e = this.entries.get(key) ?? { failures: 0, last: now, until: 0 };
    e.failures++;
    e.last = now;
    const over = e.failures - this.limits.free;
    const wait = over > 0 ? Math.min(this.limits.maxWaitMs, this.limits.firstWaitMs * 2 ** Math.min(over - 1, 30)) : 0;
    e.until = wait ? now + wait : 0;
    this.entries.delete(key);
    this.entries.set(key, e);
    if (this.entries.size > MAX_KEYS) this.entries.delete(this.entries.keys().next().value as string);
    return wait;
  }

  clear(key: string): void {
    this.entries.delete(key);
  }
}

export interface GuardOptions {
  realm: string;
  /** 401 with WWW-Authenticate / Authorization (registrar), or 407 with the Proxy- pair (trunks). */
  proxy: boolean;
  now?: () => number;
  addressLimits?: AuthLimits;
  userLimits?: AuthLimits;
}

/** The source address as a key: an IPv4-mapped IPv6 address is its IPv4 address. */
export function addressOf(ctx: ServerRequestContext): string {
  return ctx.from.host.replace(/^::ffff:/i, '');
}

export class DigestGuard {
  readonly digest: DigestServer;
  private readonly byAddress: Backoff;
  private readonly byUser: Backoff;
  private readonly known = new Map<string, Map<string, number>>();
  private readonly now: () => number;

  constructor(private readonly o: GuardOptions) {
    this.now = o.now ?? Date.now;
    this.digest = new DigestServer(o.realm, this.now);
    this.byAddress = new Backoff(o.addressLimits ?? ADDRESS_LIMITS, this.now);
    this.byUser = new Backoff(o.userLimits ?? USER_LIMITS, this.now);
  }

  /**
   * The user name the request proved it holds the password of, or null once it has been answered
   * (challenge, 403, or 503 while its address or user name waits). `passwordOf` gives the
   * password of a user name this request may use, undefined for any other.
   */
  check(ctx: ServerRequestContext, passwordOf: (username: string) => string | undefined): string | null {
    const addr = addressOf(ctx);
    const answer = parseDigestAnswer(ctx.req.headers.get(this.o.proxy ? 'Proxy-Authorization' : 'Authorization'));
    const wait = Math.max(this.byAddress.waitMs(addr), answer && !this.isKnown(answer.username, addr) ? this.byUser.waitMs(answer.username) : 0);
    if (wait > 0) {
      const res = makeResponse(ctx.req, 503, 'Service Unavailable', newTag());
      res.headers.append('Retry-After', String(Math.ceil(wait / 1000)));
      ctx.respond(res);
      return null;
    }
    if (!answer) return this.challenge(ctx, addr, false);
    const password = passwordOf(answer.username);
    // An unknown user name costs the same hashing as a known one and counts as a failure alike.
    const verdict = this.digest.verify(answer, ctx.req.method, password ?? DUMMY, addr);
    if (verdict === 'unknown') return this.challenge(ctx, addr, false);
    if (verdict === 'stale' && password !== undefined) return this.challenge(ctx, addr, true);
    if (verdict !== 'ok' || password === undefined) {
      this.failed(answer.username, addr);
      ctx.respond(makeResponse(ctx.req, 403, 'Forbidden', newTag()));
      return null;
    }
    this.byUser.clear(answer.username);
    this.remember(answer.username, addr);
    return answer.username;
  }

  private challenge(ctx: ServerRequestContext, addr: string, stale: boolean): null {
    const res = this.o.proxy ? makeResponse(ctx.req, 407, 'Proxy Authentication Required', newTag()) : makeResponse(ctx.req, 401, 'Unauthorized', newTag());
    res.headers.append(this.o.proxy ? 'Proxy-Authenticate' : 'WWW-Authenticate', this.digest.challenge(addr, stale));
    ctx.respond(res);
    return null;
  }

  private failed(username: string, addr: string): void {
    const a = this.byAddress.fail(addr);
    const u = this.byUser.fail(username);
    // Logged when a wait starts (bounded by the doubling), never the answer itself.
    if (a) log('warn', 'SIP digest: address waits after repeated failures', { realm: this.o.realm, addr, waitSec: Math.ceil(a / 1000) });
    if (u)
      log('warn', 'SIP digest: user name waits after repeated failures', {
        realm: this.o.realm,
        username: username.slice(0, 64),
        waitSec: Math.ceil(u / 1000),
      });
  }

  private isKnown(username: string, addr: string): boolean {
    const at = this.known.get(username)?.get(addr);
    return at !== undefined && this.now() - at < KNOWN_MS;
  }

  private remember(username: string, addr: string): void {
    const m = this.known.get(username) ?? new Map<string, number>();
    m.delete(addr);
    m.set(addr, this.now());
    if (m.size > MAX_KNOWN) m.delete(m.keys().next().value as string);
    this.known.delete(username);
    this.known.set(username, m);
    if (this.known.size > MAX_KEYS) this.known.delete(this.known.keys().next().value as string);
  }
}

/** Stands in for the password of a user name nobody has (never matches: it is not a string a client could send). */
const DUMMY = '\u0000no-such-user';
