import crypto from 'node:crypto';
import type { Response } from 'express';
import { AppError, cookies, type KeyService, type RouteRequest, type Tenant, type User } from '../../server/sdk.ts';
import type { LoginOption } from './api.ts';
import type { Lang } from './page-text.ts';
import type { OidcProvider } from './provider.ts';
import { BROWSER_COOKIE, SID_COOKIE, type Session, type Sessions } from './sessions.ts';

export const CHALLENGE_COOKIE = 'sc_wa';
const CHALLENGE_TTL_SEC = 300;

export function secure(req: RouteRequest): boolean {
  return req.origin.startsWith('https:');
}

/** WebAuthn RP ID: the host name the browser used, without port (WebAuthn L3 §5.1.4.1). */
export function rpId(req: RouteRequest): string {
  return new URL(req.origin).hostname;
}

/**
 * The browser's side of signing in, for every page and form of the provider: the browser-binding
 * cookie, the session cookie (replaced at each sign-in: no fixation), the CSRF tokens bound to the
 * browser, the sealed WebAuthn challenge, and the sign-in options other plugins add to the login
 * page. Route handlers ask it; none of them reads or writes a cookie itself.
 */
export class SignIn {
  readonly #options: LoginOption[] = [];

  constructor(
    private readonly provider: OidcProvider,
    readonly sessions: Sessions,
    private readonly keys: KeyService,
    private readonly sessionTtl: number,
  ) {}

  // ---- the browser and its session -------------------------------------------------------------

  /** The browser's id (CSRF tokens and pending interactions are bound to it), if it has one. */
  browser(req: RouteRequest): string | undefined {
    return cookies.get(req.headers.cookie, BROWSER_COOKIE);
  }

  /** The browser's id, set as a new cookie on this answer when it has none (or a malformed one). */
  ensureBrowser(req: RouteRequest, res: Response): string {
    const c = this.browser(req);
    if (c && /^[A-Za-z0-9_-]{20,64}$/.test(c)) return c;
    const v = crypto.randomBytes(24).toString('base64url');
    res.append('Set-Cookie', cookies.serialize(BROWSER_COOKIE, v, { secure: secure(req) }));
    return v;
  }

  /** The sign-in session of the request's cookie, if still valid. */
  session(req: RouteRequest): Session | undefined {
    return this.sessions.get(req.tenant, cookies.get(req.headers.cookie, SID_COOKIE));
  }

  /** The most recently signed-in account of the browser, if active. */
  currentUser(req: RouteRequest): User | undefined {
    const a = this.session(req)?.accounts[0];
    return a ? this.provider.activeUser(req.tenant, a.userId) : undefined;
  }

  /**
   * Signs `user` in on this browser: a new session id (the old one dropped, its other accounts
   * kept) in a new cookie. Returns the new session, for the rest of this request.
   */
  login(req: RouteRequest, res: Response, user: User, amr: string[]): Session {
    const { cookie: value } = this.sessions.login(req.tenant, this.session(req), user.id, amr);
    res.append('Set-Cookie', cookies.serialize(SID_COOKIE, value, { secure: secure(req), maxAge: this.sessionTtl }));
    return this.sessions.get(req.tenant, value)!;
  }

  /** Ends the session (if any) and drops its cookie. */
  logout(req: RouteRequest, res: Response, session: Session | undefined): void {
    if (session) this.sessions.end(session);
    res.append('Set-Cookie', cookies.serialize(SID_COOKIE, '', { secure: secure(req), maxAge: 0 }));
  }

  /**
   * Signs the user in and says where the browser goes next: the pending authorization of this
   * browser (its interaction records who signed in, how and when), or the passkeys page.
   */
  signIn(req: RouteRequest, res: Response, user: User, amr: string[], interactionId: string | undefined | null): string {
    this.login(req, res, user, amr);
    const it = interactionId ? this.sessions.interaction(req.tenant, interactionId, this.browser(req)) : undefined;
    if (it) {
      this.sessions.updateInteraction(it.id, { ...it.state, userId: user.id, loginAt: this.provider.now(), amr });
      return `/oidc.ashx/resume?i=${encodeURIComponent(it.id)}`;
    }
    return '/passkeys.html';
  }

  // ---- CSRF ------------------------------------------------------------------------------------

  /** A form's CSRF token: bound to this browser and the form's purpose. */
  csrf(browser: string, purpose: string): string {
    return this.sessions.csrf(browser, purpose);
  }

  /** Whether the form's token is this browser's for `purpose`. */
  csrfOk(req: RouteRequest, purpose: string, token: string | undefined): boolean {
    return this.sessions.checkCsrf(this.browser(req), purpose, token);
  }

  /** The same for the pages' JSON calls: 403 invalid_csrf otherwise. */
  requireCsrf(req: RouteRequest, purpose: string, token: string | undefined): void {
    if (!this.csrfOk(req, purpose, token)) throw new AppError(403, 'invalid_csrf', 'the form expired; reload the page');
  }

  // ---- the WebAuthn challenge (sealed, short-lived, in a cookie) -------------------------------

  sealChallenge(req: RouteRequest, res: Response, v: { c: string; p: string; u?: string }): void {
    const sealed = this.keys.seal(JSON.stringify({ ...v, exp: this.provider.clock.now() + CHALLENGE_TTL_SEC * 1000 }), 'oidc-webauthn');
    res.append('Set-Cookie', cookies.serialize(CHALLENGE_COOKIE, sealed, { secure: secure(req), maxAge: CHALLENGE_TTL_SEC }));
  }

  /** The challenge of `purpose`, once: the cookie is dropped on this answer whatever it held. */
  takeChallenge(req: RouteRequest, res: Response, purpose: string): { c: string; u?: string } | undefined {
    res.append('Set-Cookie', cookies.serialize(CHALLENGE_COOKIE, '', { secure: secure(req), maxAge: 0 }));
    const raw = cookies.get(req.headers.cookie, CHALLENGE_COOKIE);
    if (!raw) return undefined;
    try {
      const v = JSON.parse(this.keys.openString(raw, 'oidc-webauthn')) as { c: string; p: string; u?: string; exp: number };
      return v.p === purpose && v.exp > this.provider.clock.now() ? v : undefined;
    } catch {
      return undefined;
    }
  }

  // ---- sign-in methods of other plugins ------------------------------------------------------

  registerLoginOption(o: LoginOption): void {
    if (this.#options.some((x) => x.id === o.id)) throw new Error(`login option ${o.id} registered twice`);
    this.#options.push(o);
  }

  /** The blocks other plugins add to /login.html. */
  loginOptionsHtml(tenant: Tenant, i: string, lang: Lang): string {
    return this.#options.map((o) => o.html({ tenant, i, lang })).join('\n');
  }
}
