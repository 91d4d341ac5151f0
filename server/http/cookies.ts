/**
 * Cookies of the appliance's own browser flows (sign-in sessions, pending sign-ins, room
 * sessions): one parser and one serializer, so every plugin reads and writes them alike.
 * RFC 6265 §4.2.1 / §5.4: the Cookie header is `name=value` pairs separated by `;`.
 */

/**
 * The cookies of a Cookie header. When a name repeats, the first wins (RFC 6265 §5.4 sends the
 * longest path first, i.e. the most specific cookie); empty values are left out, as absent.
 */
export function parse(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    const k = part.slice(0, i).trim();
    const v = part.slice(i + 1).trim();
    if (k && v && !(k in out)) out[k] = v;
  }
  return out;
}

/** One cookie of a Cookie header (the first of its name), or undefined when absent or empty. */
export function get(header: string | undefined, name: string): string | undefined {
  return parse(header)[name];
}

export interface CookieOptions {
  /** On TLS only (RFC 6265 §4.1.2.5): set when the browser reached the appliance over https. */
  secure: boolean;
  /** Seconds to live; 0 removes the cookie; absent: a session cookie. */
  maxAge?: number;
  /** `/` unless a cookie is meant for one path only (a callback). */
  path?: string;
  /** `Lax` unless the cookie must never travel with a request another site started (`Strict`). */
  sameSite?: 'Lax' | 'Strict';
}

/**
 * A Set-Cookie value: HttpOnly (no script reads it), SameSite=Lax (top-level redirects back from
 * an OpenID Provider carry it, cross-site POSTs do not), Secure on https. Values are the
 * appliance's own (base64url, sealed blobs): nothing here needs quoting.
 */
export function serialize(name: string, value: string, o: CookieOptions): string {
  return `${name}=${value}; Path=${o.path ?? '/'}; HttpOnly; SameSite=${o.sameSite ?? 'Lax'}${o.maxAge !== undefined ? `; Max-Age=${o.maxAge}` : ''}${o.secure ? '; Secure' : ''}`;
}
