import crypto from 'node:crypto';
import { AppError, type Clock, cookies, type KeyService, type Logger, type Tenant, type User } from '../../../server/sdk.ts';
import type { OidcService, RelyingPartyClient } from '../../oidc/api.ts';

/**
 * Sign-in for `signed-in` rooms through the tenant's own OpenID Provider: authorization code with
 * PKCE (RFC 7636, S256) for the built-in public client `sovcomms-rooms`, the code exchanged in
 * process, and a short-lived room session for the browser.
 *
 * Nothing is stored on the server. The pending sign-in (state, PKCE verifier, nonce, the room)
 * and the room session (user id and name, expiry) are sealed with the appliance master key
 * (AES-256-GCM) into HttpOnly cookies, with the tenant's id in the associated data: a cookie of
 * one tenant does not open under another, so a session of tenant A never opens a room of tenant
 * B. The user must still be active at every join. A session cannot be revoked one by one (it ends
 * with its lifetime, the cookie's removal, or the account's deactivation).
 */

export const ROOM_CLIENT_ID = 'sovcomms-rooms';
/** The OpenID Provider's redirect back (an alias of `/room.ashx?signed-in`). */
export const ROOM_CALLBACK_PATH = '/room/callback';
/**
 * The pending sign-in: binds the callback to the browser that started it. Sent to the callback
 * only, and left to expire (one Set-Cookie per response; the code in it is single-use anyway).
 */
export const ROOM_LOGIN_COOKIE = 'sov_room_login';
/** The room session. */
export const ROOM_SESSION_COOKIE = 'sov_room';

const LOGIN_TTL_SEC = 600;
const loginAad = (t: Tenant) => `room-login|${t.id}`;
const sessionAad = (t: Tenant) => `room-session|${t.id}`;

interface PendingLogin {
  /** SHA-256 of the state sent to the OpenID Provider. */
  s: string;
  v: string;
  n: string;
  /** The room (virtual number) to return to. */
  r: string;
  exp: number;
}

interface SessionClaims {
  sub: string;
  name: string;
  exp: number;
}

/** Who is in a room session. */
export interface RoomVisitor {
  userId: string;
  name: string;
  email: string | null;
}

export interface Cookie {
  name: string;
  value: string;
  maxAgeSec: number;
  /** `/` for the session (the page and the join API); the callback alone for the pending sign-in. */
  path: string;
}

/** The Set-Cookie value (SameSite=Lax: the provider's redirect back is a top-level GET), Secure on TLS. */
export function cookieHeader(c: Cookie, origin: string): string {
  return cookies.serialize(c.name, c.value, { path: c.path, maxAge: c.maxAgeSec, secure: origin.startsWith('https:') });
}

/**
 * The public client `sovcomms-rooms` of the tenant's provider (PKCE S256, no consent page: the
 * visitor signs in to this appliance itself), coming back to the room callback.
 */
const ROOM_CLIENT: RelyingPartyClient = { clientId: ROOM_CLIENT_ID, name: 'Browser rooms sign-in', callbackPath: ROOM_CALLBACK_PATH };

const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('base64url');

export interface RoomSignInDeps {
  /** The OpenID Provider, when the oidc plugin runs (else signed-in rooms cannot be entered). */
  oidc: () => OidcService | undefined;
  keys: KeyService;
  clock: Clock;
  log: Logger;
  sessionTtlSec: number;
}

export class RoomSignIn {
  constructor(private readonly d: RoomSignInDeps) {}

  private nowSec(): number {
    return Math.floor(this.d.clock.now() / 1000);
  }

  get available(): boolean {
    return this.d.oidc() !== undefined;
  }

  private provider(): OidcService {
    const o = this.d.oidc();
    if (!o) throw new AppError(503, 'room_unavailable', 'signed-in rooms need the OpenID Provider (plugin oidc), which is not running');
    return o;
  }

  /**
   * Starts a sign-in for the room of `number`: where to send the browser (the provider's
   * authorization endpoint) and the cookie that binds the callback to this browser.
   */
  start(tenant: Tenant, origin: string, number: string): { location: string; cookie: Cookie } {
    const { location, state, verifier, nonce } = this.provider().relyingParty(ROOM_CLIENT).start(tenant, origin);
    const pending: PendingLogin = { s: sha256(state), v: verifier, n: nonce, r: number, exp: this.nowSec() + LOGIN_TTL_SEC };
    return {
      location,
      cookie: {
        name: ROOM_LOGIN_COOKIE,
        value: this.d.keys.seal(JSON.stringify(pending), loginAad(tenant)),
        maxAgeSec: LOGIN_TTL_SEC,
        path: ROOM_CALLBACK_PATH,
      },
    };
  }

  /**
   * The provider sent the browser back with `code` and `state`: the code is exchanged in process
   * (with the PKCE verifier from the browser's login cookie), the ID token's nonce checked, the
   * provider's tokens revoked at once (they served only to learn who signed in), and a room
   * session made. Returns the room to go back to, or why it failed.
   */
  async finish(
    tenant: Tenant,
    origin: string,
    q: { code?: string; state?: string; error?: string },
    loginCookie: string | undefined,
    info: { ip: string; ua: string; headers: Record<string, string | string[] | undefined> },
  ): Promise<{ ok: true; number: string; user: User; session: Cookie } | { ok: false; number: string | null; error: string }> {
    const rp = this.provider().relyingParty(ROOM_CLIENT);
    const pending = this.openLogin(tenant, loginCookie);
    if (!pending || !q.state || sha256(q.state) !== pending.s)
      return { ok: false, number: pending?.r ?? null, error: 'this sign-in was not started in this browser, or it expired' };
    if (q.error || !q.code)
      return { ok: false, number: pending.r, error: q.error === 'access_denied' ? 'the sign-in was declined' : 'the sign-in did not complete' };
    const got = await rp.finish(tenant, origin, { code: q.code, verifier: pending.v, nonce: pending.n }, info);
    if ('error' in got) {
      if (got.detail) this.d.log.info({ err: got.detail }, 'room sign-in exchange failed');
      return { ok: false, number: pending.r, error: got.error === 'inactive' ? 'the account is not active' : 'the sign-in could not be confirmed' };
    }
    const user = got.user;
    const claims: SessionClaims = { sub: user.id, name: user.name, exp: this.nowSec() + this.d.sessionTtlSec };
    return {
      ok: true,
      number: pending.r,
      user,
      session: { name: ROOM_SESSION_COOKIE, value: this.d.keys.seal(JSON.stringify(claims), sessionAad(tenant)), maxAgeSec: this.d.sessionTtlSec, path: '/' },
    };
  }

  /** The visitor of a room session cookie of this tenant, still active; null otherwise. */
  visitor(tenant: Tenant, cookie: string | undefined): RoomVisitor | null {
    const oidc = this.d.oidc();
    if (!cookie || !oidc) return null;
    let c: SessionClaims;
    try {
      c = JSON.parse(this.d.keys.openString(cookie, sessionAad(tenant))) as SessionClaims;
    } catch {
      return null; // not sealed by this appliance, or for another tenant
    }
    if (typeof c.sub !== 'string' || typeof c.exp !== 'number' || c.exp <= this.nowSec()) return null;
    const u = oidc.activeUser(tenant, c.sub);
    return u ? { userId: u.id, name: u.name, email: u.email } : null;
  }

  private openLogin(tenant: Tenant, cookie: string | undefined): PendingLogin | null {
    if (!cookie) return null;
    try {
      const p = JSON.parse(this.d.keys.openString(cookie, loginAad(tenant))) as PendingLogin;
      return typeof p.s === 'string' && typeof p.v === 'string' && typeof p.r === 'string' && p.exp > this.nowSec() ? p : null;
    } catch {
      return null;
    }
  }
}
