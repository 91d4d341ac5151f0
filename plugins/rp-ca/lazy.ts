import type { CaDeps, CaService } from './service.ts';
import type { TlsAuto, TlsCredentials } from './tls.ts';

/**
 * @peculiar/x509 (with tsyringe and its ASN.1 schemas) and pkcs11js cost about a second of start-up
 * on a loaded machine, and every `sovcomms` command and every appliance start loads every plugin.
 * So the CA code is imported on first use: the first request that needs the CA, `ca init`/`status`,
 * or the start of `serve --tls auto`.
 */
export function lazyCaService(deps: CaDeps): { get: () => Promise<CaService>; loaded(): CaService | undefined } {
  let p: Promise<CaService> | undefined;
  let svc: CaService | undefined;
  return {
    get: () => (p ??= import('./service.ts').then((m) => (svc = new m.CaService(deps)))),
    loaded: () => svc,
  };
}

/**
 * The 'tls-auto' service as server/app.ts sees it. Provided at route time (so the core finds it
 * whatever the start order), backed by the real TlsAuto once the plugin started with http.tls
 * "auto".
 */
export class TlsAutoService {
  impl: TlsAuto | undefined;
  /** Builds the TlsAuto for `require` when the HTTP server is not on tls "auto" (set in setup). */
  make: (() => Promise<TlsAuto>) | undefined;
  readonly #required = new Set<string>();
  #making: Promise<TlsAuto> | undefined;

  private need(): TlsAuto {
    if (!this.impl) throw new Error('tls-auto: the rp-ca plugin has not started with http.tls "auto"');
    return this.impl;
  }

  getCredentials(): TlsCredentials {
    return this.need().getCredentials();
  }

  onRenew(listener: () => void): void {
    this.need().onRenew(listener);
  }

  /** The certificate must name `names` too (SIP over TLS): issued or re-issued now when needed. */
  async require(names: readonly string[]): Promise<void> {
    for (const n of names) this.#required.add(n);
    if (!this.impl) {
      if (!this.make) throw new Error('tls-auto: the rp-ca plugin is not set up');
      this.#making ??= this.make();
      this.impl ??= await this.#making;
    }
    this.impl.extraNames = [...this.#required];
    await this.impl.ensure();
  }

  /** Issues or renews now when needed (what the renewal job runs); true when the certificate changed. */
  ensure(): Promise<boolean> {
    return this.need().ensure();
  }

  get serial(): string | undefined {
    return this.impl?.serial;
  }
}
