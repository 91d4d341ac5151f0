import { defineService, type AuditWriter } from './plugin.ts';

/**
 * Services the core itself consumes and a plugin provides: the core names the interface, a
 * plugin implements it (`ctx.provide(AUDIT_WRITER, ...)`), so the core never imports a plugin.
 */

/** Where `ctx.audit` writes: the audit plugin's store (without it, entries go to the log). */
export const AUDIT_WRITER = defineService<AuditWriter>('audit');

/** The appliance's own HTTPS certificate for `http.tls: 'auto'` (PEM chain and key). */
export interface TlsAutoProvider {
  getCredentials(): { cert: string; key: string };
  /** Tells the server to swap its secure context after a renewal. */
  onRenew?(listener: () => void): void;
  /**
   * For another listener on the same certificate (SIP over TLS): the certificate must also name
   * `names`; issued (or re-issued) now when there is none or it lacks them, even when the HTTP
   * server itself is not on `tls: 'auto'`. Renewals then follow as for HTTPS.
   */
  require?(names: readonly string[]): Promise<void>;
}

export const TLS_AUTO = defineService<TlsAutoProvider>('tls-auto');
