/**
 * SIP over TLS towards a server (RFC 3261 §26.3.1, RFC 5922 §7): the server's certificate must
 * chain to the system store or to the trunk's own CA (`tlsCaPem`), and name the trunk's host, which
 * is also sent as SNI (RFC 6066 §3). With DNS SRV the connection goes to a target's address but
 * the name checked stays the trunk's domain (RFC 5922 §4: the domain the user asked for). A refusal
 * is an error that says which of the two failed, for the trunk's `lastError`.
 */
import net from 'node:net';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';

export interface TlsClientOptions {
  /** The name the certificate must carry (DNS name or IP address); SNI when it is a name. */
  servername: string;
  /** PEM of the CA(s) to trust instead of the system store. */
  ca?: string;
}

/** How long a TLS connection may take, TCP and handshake together. */
const CONNECT_TIMEOUT_MS = 10_000;

export class TlsVerifyError extends Error {}

export function connectTls(host: string, port: number, opts: TlsClientOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      host,
      port,
      // RFC 6066 §3: SNI carries a host name, never a literal address.
      servername: net.isIP(opts.servername) ? undefined : opts.servername,
      ca: opts.ca,
      minVersion: 'TLSv1.2',
      rejectUnauthorized: true,
      checkServerIdentity: (_host, cert) => tls.checkServerIdentity(opts.servername, cert),
    });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`TLS connection to ${host}:${port} timed out`));
    }, CONNECT_TIMEOUT_MS);
    s.once('secureConnect', () => {
      clearTimeout(timer);
      s.off('error', onError);
      resolve(s);
    });
    const onError = (err: Error & { code?: string }) => {
      clearTimeout(timer);
      reject(describe(err, opts));
    };
    s.once('error', onError);
  });
}

function describe(err: Error & { code?: string }, opts: TlsClientOptions): Error {
  const code = err.code ?? '';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return new TlsVerifyError(`TLS: the server certificate does not name ${opts.servername} (${err.message})`, { cause: err });
  if (/CERT|SELF_SIGNED|UNABLE_TO|ISSUER/.test(code)) {
    const anchor = opts.ca ? "the trunk's CA" : 'the system CA store';
    return new TlsVerifyError(`TLS: the server certificate of ${opts.servername} does not chain to ${anchor} (${code})`, { cause: err });
  }
  return new Error(`TLS connection to ${opts.servername} failed: ${err.message}`, { cause: err });
}

/** SHA-256 fingerprint of a certificate as phones show it: colon-separated upper-case hex. */
export function fingerprint256(pem: string): string {
  return new X509Certificate(pem).fingerprint256;
}

/** The certificates of a PEM chain, leaf first. */
export function pemChain(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}
