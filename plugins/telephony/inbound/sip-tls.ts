/**
 * SIP over TLS for desk phones (RFC 3261 §26): the bridge serves the appliance's own certificate,
 * the one `serve --tls auto` serves (the rp-ca plugin's TLS_AUTO, issued by the primary tenant's
 * CA), made to name the SIP host too and issued at start when there is none. The core pushes it
 * to the bridge (PUT /tls) on every bridge start and after each renewal; a phone trusts the CA,
 * whose certificate and SHA-256 fingerprint the console shows (`?phones=tls`). The key goes
 * only over the loopback control hop; it is never logged nor shown.
 */
import { X509Certificate } from 'node:crypto';
import net from 'node:net';
import { z } from 'zod';
import type { Logger, TlsAutoProvider } from '../../../server/sdk.ts';
import type { BridgeLink } from '../bridge-link/link.ts';
import type { TelephonyConfig } from '../schemas.ts';
import { pemChain } from '../bridge/sip/tls.ts';

export const sipTlsView = z.object({
  enabled: z.boolean().describe('the bridge listens for SIP over TLS (desk phones)'),
  host: z.string().describe('the SIP host phones register to'),
  port: z.number().int().nullable().describe('the TLS port (null when off or not listening yet)'),
  caPem: z.string().describe('PEM of the CA a phone must trust (empty when there is no certificate)'),
  caSha256: z.string().describe("SHA-256 fingerprint of the CA's certificate, colon-separated hex"),
  certSha256: z.string().describe("SHA-256 fingerprint of the bridge's own certificate (for phones that pin the server)"),
  notAfter: z.string().nullable().describe("the certificate's expiry (ISO 8601)"),
  reason: z.string().describe('why TLS is off, or empty'),
});
export type SipTlsView = z.infer<typeof sipTlsView>;

/** How often the certificate is checked for renewal when HTTPS is not on "auto" (which has its own job). */
const CHECK_MS = 3_600_000;

export class SipTls {
  #reason = '';
  #port: number | null = null;
  #timer: NodeJS.Timeout | undefined;
  #listening = false;

  constructor(
    private readonly cfg: TelephonyConfig['bridge'],
    private readonly provider: () => TlsAutoProvider | undefined,
    private readonly bridge: BridgeLink,
    private readonly log: Logger,
  ) {}

  /** The SIP host as a name the certificate must carry (a wildcard bind is every address, named already). */
  private names(): string[] {
    const h = this.cfg.sipHost;
    return h === '0.0.0.0' || h === '::' || h === '' ? [] : [h];
  }

  private get wanted(): boolean {
    return this.cfg.sipTlsPort !== false;
  }

  /** The certificate and key, issued or renewed now when needed; null (with `reason`) when there is none. */
  private async credentials(): Promise<{ cert: string; key: string } | null> {
    const p = this.provider();
    if (!p?.require) {
      this.#reason = 'no certificate authority: the rp-ca plugin is not loaded';
      return null;
    }
    try {
      await p.require(this.names());
      if (!this.#listening) {
        this.#listening = true;
        // A renewal can land while the bridge restarts: a failed push is logged (the next bridge
        // start pushes again), never left as an unhandled rejection, which would end the process.
        p.onRenew?.(() => void this.push().catch((e: unknown) => this.log.warn({ err: (e as Error).message }, 'TLS certificate push to the bridge failed')));
      }
      return p.getCredentials();
    } catch (e) {
      this.#reason = `no certificate: ${(e as Error).message}`;
      return null;
    }
  }

  /** PUT /tls: at every bridge start (after the trunks and phones) and after each renewal. */
  async push(): Promise<void> {
    if (!this.wanted || this.bridge.state !== 'ready') return;
    const creds = await this.credentials();
    if (!creds) {
      this.log.warn({ reason: this.#reason }, 'SIP over TLS is off');
      return;
    }
    const ans = await this.bridge.putTls(creds);
    if (!ans.ok) {
      this.#port = null;
      this.#reason = `the bridge refused the certificate: ${ans.error.error_description ?? ans.error.error}`;
      // An older bridge (404) has no TLS; the description never carries the key.
      this.log.warn({ status: ans.status, error: ans.error.error }, 'SIP over TLS is off');
      return;
    }
    this.#port = ans.body.port;
    this.#reason = ans.body.port === null ? 'the bridge has TLS off' : '';
    if (!this.#timer) {
      this.#timer = setInterval(() => void this.credentials(), CHECK_MS);
      this.#timer.unref();
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** What a phone needs to trust the bridge (console phone page, `?phones=tls`). */
  async view(): Promise<SipTlsView> {
    const host = this.cfg.sipHost;
    const off = { enabled: false, host, port: null, caPem: '', caSha256: '', certSha256: '', notAfter: null };
    if (!this.wanted) return { ...off, reason: 'plugins.telephony.bridge.sipTlsPort is false' };
    const p = this.provider();
    let certs: string[] = [];
    try {
      certs = p ? pemChain(p.getCredentials().cert) : [];
    } catch {
      // not issued yet: the bridge has not started, or there is no CA
    }
    const leaf = certs[0];
    const ca = certs[certs.length - 1];
    if (!leaf || !ca) return { ...off, reason: this.#reason || 'no certificate yet (the bridge has not started)' };
    const leafCert = new X509Certificate(leaf);
    return {
      enabled: this.#port !== null,
      host: net.isIPv6(host) ? `[${host}]` : host,
      port: this.#port,
      caPem: `${ca}\n`,
      caSha256: new X509Certificate(ca).fingerprint256,
      certSha256: leafCert.fingerprint256,
      notAfter: new Date(leafCert.validTo).toISOString(),
      reason: this.#reason,
    };
  }
}
