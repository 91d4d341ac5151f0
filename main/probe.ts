/**
 * GET /readyz of the supervised server over loopback. HTTPS is checked against the pinned
 * fingerprint the server sent over the parent channel, not against a CA: the appliance's own CA
 * is not one the OS trusts, and the pin is stronger.
 */
import http from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { normaliseFingerprint } from './policy.ts';
import type { Probe } from './supervisor.ts';

/** A wildcard listen address is reached on loopback. */
export function loopbackUrl(url: string): URL {
  const u = new URL(url);
  if (u.hostname === '0.0.0.0') u.hostname = '127.0.0.1';
  if (u.hostname === '[::]') u.hostname = '[::1]';
  return u;
}

export function pinnedProbe(pin: () => string | null, timeoutMs = 2000): Probe {
  return (url) =>
    new Promise((resolve) => {
      const u = loopbackUrl(url);
      const secure = u.protocol === 'https:';
      const req = (secure ? https : http).get(u, { timeout: timeoutMs, agent: false, ...(secure ? { rejectUnauthorized: false } : {}) }, (res) => {
        if (secure) {
          // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- an https request's socket is the TLSSocket its agent made
          const fp = normaliseFingerprint((res.socket as TLSSocket).getPeerCertificate().fingerprint256 ?? '');
          if (!pin() || fp !== pin()) {
            res.destroy();
            return resolve(null);
          }
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let body: unknown = null;
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            body = null;
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on('error', () => resolve(null));
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve(null));
    });
}
