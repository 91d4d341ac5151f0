/**
 * Sign-in through the appliance's own OpenID Provider with its built-in public client
 * `sovcomms-console`: authorization code + PKCE (S256). Tokens live in this module's memory only
 * (never in storage, never in a URL): a reload signs in again through the provider's session,
 * which takes one redirect and no typing. Refresh tokens rotate on every use.
 */
import { LANG_KEY } from './lib/lang-key.ts';

export const CLIENT_ID = 'sovcomms-console';
const SCOPE = 'openid profile email offline_access';
// Only the PKCE verifier and state cross the redirect, in sessionStorage (this tab only, gone
// when the code is exchanged); tokens never do.
const PENDING = 'sovcomms.pkce';

export interface Session {
  accessToken: string;
  refreshToken: string | undefined;
  idToken: string | undefined;
  expiresAt: number;
  user: { sub: string; name: string; role: string; tenant: string };
}

let session: Session | undefined;
// Set once sign-out has begun: the page is about to leave for the provider's logout, and a sign-in
// started by the now session-less UI would race it (and, winning, sign the user straight back in).
let leaving = false;
let refreshing: Promise<Session | undefined> | undefined;
const listeners = new Set<(s: Session | undefined) => void>();

export function current(): Session | undefined {
  return session;
}

export function onSession(fn: (s: Session | undefined) => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function set(s: Session | undefined): void {
  session = s;
  for (const l of listeners) l(s);
}

const redirectUri = () => `${location.origin}/console/callback`;

function b64url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(n: number): string {
  return b64url(crypto.getRandomValues(new Uint8Array(n)));
}

/** Sends the browser to the provider's authorize endpoint; `returnTo` is where it lands after. */
export async function signIn(returnTo = location.pathname + location.search): Promise<never> {
  if (leaving) return new Promise<never>(() => undefined);
  const verifier = random(48);
  const state = random(24);
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, returnTo: returnTo.startsWith('/console/') ? returnTo : '/console/' }));
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: redirectUri(),
    scope: SCOPE,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  // The provider's sign-in pages speak the console's language (OIDC Core §3.1.2.1 ui_locales).
  const lang = localStorage.getItem(LANG_KEY);
  if (lang) q.set('ui_locales', lang);
  location.assign(`/oauth2/v1/authorize?${q}`);
  return new Promise<never>(() => undefined);
}

interface TokenAnswer {
  access_token: string;
  refresh_token?: string;
  id_token?: string;
  expires_in: number;
  error?: string;
  error_description?: string;
}

async function tokenRequest(form: Record<string, string>): Promise<TokenAnswer> {
  const r = await fetch('/oauth2/v1/token', {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ client_id: CLIENT_ID, ...form }),
  });
  const body = (await r.json()) as TokenAnswer;
  if (!r.ok) throw new Error(body.error_description ?? body.error ?? `token endpoint answered ${r.status}`);
  return body;
}

/** The ID token's claims, for display only (the server decides what the bearer may do). */
function idClaims(idToken: string | undefined): Record<string, unknown> | undefined {
  const part = idToken?.split('.')[1];
  if (!part) return undefined;
  try {
    const bin = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
    return JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)))) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

async function fromTokens(t: TokenAnswer, previous?: Session): Promise<Session> {
  // The ID token carries the profile claims: no userinfo round trip on the way to the first screen.
  let claims = idClaims(t.id_token ?? previous?.idToken);
  if (!claims?.preferred_username) {
    const info = await fetch('/oauth2/v1/userinfo', { headers: { Authorization: `Bearer ${t.access_token}` } });
    claims = info.ok ? ((await info.json()) as Record<string, unknown>) : {};
  }
  const str = (v: unknown, d: string) => (typeof v === 'string' ? v : d);
  return {
    accessToken: t.access_token,
    refreshToken: t.refresh_token ?? previous?.refreshToken,
    idToken: t.id_token ?? previous?.idToken,
    expiresAt: Date.now() + t.expires_in * 1000,
    user: {
      sub: str(claims.sub, ''),
      name: str(claims.preferred_username ?? claims.name, str(claims.sub, '')),
      role: Array.isArray(claims.roles) ? str(claims.roles[0], 'user') : 'user',
      tenant: location.hostname,
    },
  };
}

/** Completes the redirect at /console/callback; returns where to go next. */
export async function completeSignIn(): Promise<string> {
  const q = new URLSearchParams(location.search);
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? 'null') as { verifier: string; state: string; returnTo: string } | null;
  sessionStorage.removeItem(PENDING);
  if (q.get('error')) throw new Error(q.get('error_description') ?? q.get('error')!);
  if (!pending || q.get('state') !== pending.state || !q.get('code')) throw new Error('sign-in answer does not match this tab’s request; try again');
  const t = await tokenRequest({ grant_type: 'authorization_code', code: q.get('code')!, redirect_uri: redirectUri(), code_verifier: pending.verifier });
  set(await fromTokens(t));
  return pending.returnTo;
}

/** A fresh access token: refreshed (rotated) shortly before it expires; undefined when signed out. */
export async function accessToken(force = false): Promise<string | undefined> {
  const s = session;
  if (!s) return undefined;
  if (!force && s.expiresAt - Date.now() > 30_000) return s.accessToken;
  if (!s.refreshToken) return force ? undefined : s.accessToken;
  refreshing ??= tokenRequest({ grant_type: 'refresh_token', refresh_token: s.refreshToken })
    .then((t) => fromTokens(t, s))
    .then(
      (n) => {
        set(n);
        return n;
      },
      () => {
        set(undefined);
        return undefined;
      },
    )
    .finally(() => {
      refreshing = undefined;
    });
  return (await refreshing)?.accessToken;
}

/** RP-initiated logout: the provider ends its session and returns to the console's start. */
export async function signOut(): Promise<void> {
  const s = session;
  leaving = true;
  set(undefined);
  if (s?.refreshToken) {
    await fetch('/oauth2/v1/revoke', {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ client_id: CLIENT_ID, token: s.refreshToken, token_type_hint: 'refresh_token' }),
    }).catch(() => undefined);
  }
  const q = new URLSearchParams({ client_id: CLIENT_ID, post_logout_redirect_uri: `${location.origin}/console/` });
  if (s?.idToken) q.set('id_token_hint', s.idToken);
  location.assign(`/oauth2/v1/logout?${q}`);
}
