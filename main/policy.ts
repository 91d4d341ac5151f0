/**
 * The console window's security policy, as pure decisions (Electron's security checklist:
 * https://www.electronjs.org/docs/latest/tutorial/security). The window shows one origin, the
 * appliance's own; everything else is refused or handed to the OS browser.
 */
import crypto from 'node:crypto';
import type { WebPreferencesSpec, WindowPolicy } from './shell.ts';

/** Pages of the console that may use the microphone and the camera (browser voice calls). */
export const VOICE_PATHS = ['/console/voice', '/console/calls/browser'];

/** SHA-256 of a certificate's DER, as lower-case hex without separators. */
export function certFingerprint(pem: string): string {
  return new crypto.X509Certificate(pem).fingerprint256.replace(/:/g, '').toLowerCase();
}

/** Normalises `AA:BB:..`, `aabb..` or Electron's `sha256/<base64>` to lower-case hex. */
export function normaliseFingerprint(fp: string): string {
  if (fp.startsWith('sha256/')) return Buffer.from(fp.slice(7), 'base64').toString('hex');
  return fp.replace(/:/g, '').toLowerCase();
}

function originOf(url: string): string | null {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : null;
  } catch {
    return null;
  }
}

export function webPreferences(preload: string): WebPreferencesSpec {
  return {
    preload,
    contextIsolation: true,
    sandbox: true,
    nodeIntegration: false,
    nodeIntegrationInSubFrames: false,
    webviewTag: false,
    webSecurity: true,
    allowRunningInsecureContent: false,
    spellcheck: false,
  };
}

export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "media-src 'self' blob:",
  "connect-src 'self' wss: ws:",
  "font-src 'self' data:",
  "object-src 'none'",
  "base-uri 'self'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join('; ');

export interface PolicyState {
  /** The console's origin (`https://127.0.0.1:8443`); null until the server has told it. */
  origin: string | null;
  /** Lower-case hex SHA-256 of the appliance's own TLS certificate, when it serves HTTPS. */
  pinnedCert: string | null;
}

/**
 * The decisions for a window on the console. `state` is read at each decision: the origin and
 * the pinned certificate change when the server restarts on another port or renews its certificate.
 */
export function consolePolicy(state: PolicyState): WindowPolicy {
  const same = (url: string) => state.origin !== null && originOf(url) === state.origin;
  return {
    allowNavigation: (url) => same(url),
    windowOpen: (url) => {
      // Links to the outside world open in the OS browser, never in an Electron window.
      const o = originOf(url);
      return o !== null && !same(url) && url.startsWith('https:') ? 'external' : 'deny';
    },
    allowPermission: (permission, requestingUrl, mediaTypes) => {
      if (!same(requestingUrl)) return false;
      if (permission !== 'media') return false;
      if (!mediaTypes.every((t) => t === 'audio' || t === 'video')) return false;
      const p = new URL(requestingUrl).pathname;
      return VOICE_PATHS.some((v) => p === v || p.startsWith(`${v}/`));
    },
    acceptCertificate: (url, pem) => {
      if (!state.pinnedCert || !same(url)) return false;
      try {
        return crypto.timingSafeEqual(Buffer.from(certFingerprint(pem), 'hex'), Buffer.from(state.pinnedCert, 'hex'));
      } catch {
        return false;
      }
    },
    contentSecurityPolicy: CONSOLE_CSP,
  };
}
