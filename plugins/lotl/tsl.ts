import { attr, child, childElements, path, textOf, type XElement } from './xml.ts';

/**
 * The parts of the ETSI TS 119 612 (v2.x) model the appliance uses. Everything is read from the
 * document element's own children (SchemeInformation, TrustServiceProviderList): never from
 * inside the signature and never by searching the whole tree, so only signed content is read.
 */

export const TSL_NS = 'http://uri.etsi.org/02231/v2#';
export const TSLX_NS = 'http://uri.etsi.org/02231/v2/additionaltypes#';
export const LOTL_TYPE_SUFFIX = 'EUlistofthelists';
export const TSL_XML_MIME = 'application/vnd.etsi.tsl+xml';

export interface TslPointer {
  territory: string;
  location: string;
  mimeType: string;
  tslType: string;
  /** DER of the certificates that may sign the pointed-to list. */
  signers: Buffer[];
}

export interface TslService {
  tspName: string;
  serviceName: string;
  serviceType: string;
  status: string;
  statusSince: string;
  certificates: Buffer[];
}

export interface Tsl {
  version: number;
  sequence: number;
  type: string;
  isLotl: boolean;
  territory: string;
  operator: string;
  issued: string;
  /** null: a closed list (§5.3.15: NextUpdate without a date, no further update will come). */
  nextUpdate: string | null;
  /** SchemeInformationURI values (pivot LOTLs are announced here). */
  schemeInformationUris: string[];
  pointers: TslPointer[];
  tspCount: number;
  services: TslService[];
}

export class TslError extends Error {}

function t(el: XElement | undefined): string {
  return textOf(el).trim();
}

function b64der(el: XElement): Buffer {
  const s = textOf(el).replace(/\s+/g, '');
  const der = Buffer.from(s, 'base64');
  // Buffer.from skips characters that are not base64; re-encoding shows whether any were there.
  if (!s || der.toString('base64').replace(/=+$/, '') !== s.replace(/=+$/, '')) throw new TslError('malformed X509Certificate');
  if (der[0] !== 0x30) throw new TslError('X509Certificate is not a DER SEQUENCE');
  return der;
}

/** A multilingual name: English when there is one, else the first. */
function name(list: XElement | undefined): string {
  const names = list ? childElements(list, TSL_NS, 'Name') : [];
  const en = names.find((n) => (attr(n, 'lang', 'http://www.w3.org/XML/1998/namespace') ?? '').toLowerCase() === 'en');
  return t(en ?? names[0]);
}

function iso(s: string, what: string): string {
  const ms = Date.parse(s);
  if (!s || Number.isNaN(ms)) throw new TslError(`${what} is not a date-time: ${JSON.stringify(s)}`);
  return new Date(ms).toISOString();
}

function digitalIds(sdi: XElement | undefined): Buffer[] {
  const out: Buffer[] = [];
  if (!sdi) return out;
  for (const id of childElements(sdi, TSL_NS, 'DigitalId')) {
    for (const c of childElements(id, TSL_NS, 'X509Certificate')) out.push(b64der(c));
  }
  return out;
}

export function readTsl(root: XElement): Tsl {
  if (root.ns !== TSL_NS || root.local !== 'TrustServiceStatusList') throw new TslError('not a TrustServiceStatusList');
  const si = child(root, TSL_NS, 'SchemeInformation');
  if (!si) throw new TslError('no SchemeInformation');
  const sequence = Number(t(child(si, TSL_NS, 'TSLSequenceNumber')));
  if (!Number.isSafeInteger(sequence) || sequence < 1) throw new TslError('bad TSLSequenceNumber');
  const type = t(child(si, TSL_NS, 'TSLType'));
  const territory = t(child(si, TSL_NS, 'SchemeTerritory')).toUpperCase();
  if (!/^[A-Z]{2}$/.test(territory)) throw new TslError(`bad SchemeTerritory ${JSON.stringify(territory)}`);
  const nu = child(si, TSL_NS, 'NextUpdate');
  const nuDate = t(child(nu, TSL_NS, 'dateTime'));
  const pointers: TslPointer[] = [];
  for (const p of childElements(child(si, TSL_NS, 'PointersToOtherTSL') ?? si, TSL_NS, 'OtherTSLPointer')) {
    const info = new Map<string, string>();
    for (const oi of childElements(child(p, TSL_NS, 'AdditionalInformation') ?? p, TSL_NS, 'OtherInformation')) {
      for (const e of childElements(oi)) if (!info.has(e.local)) info.set(e.local, t(e));
    }
    const signers: Buffer[] = [];
    for (const sdi of childElements(child(p, TSL_NS, 'ServiceDigitalIdentities') ?? p, TSL_NS, 'ServiceDigitalIdentity')) signers.push(...digitalIds(sdi));
    pointers.push({
      territory: (info.get('SchemeTerritory') ?? '').toUpperCase(),
      location: t(child(p, TSL_NS, 'TSLLocation')),
      mimeType: info.get('MimeType') ?? '',
      tslType: info.get('TSLType') ?? '',
      signers,
    });
  }
  const services: TslService[] = [];
  const tsps = childElements(child(root, TSL_NS, 'TrustServiceProviderList') ?? root, TSL_NS, 'TrustServiceProvider');
  for (const tsp of tsps) {
    const tspName = name(path(tsp, TSL_NS, 'TSPInformation', 'TSPName'));
    for (const svc of childElements(child(tsp, TSL_NS, 'TSPServices') ?? tsp, TSL_NS, 'TSPService')) {
      // Current information only: ServiceHistory holds earlier states of the same service.
      const inf = child(svc, TSL_NS, 'ServiceInformation');
      if (!inf) continue;
      services.push({
        tspName,
        serviceName: name(child(inf, TSL_NS, 'ServiceName')),
        serviceType: t(child(inf, TSL_NS, 'ServiceTypeIdentifier')),
        status: t(child(inf, TSL_NS, 'ServiceStatus')),
        statusSince: t(child(inf, TSL_NS, 'StatusStartingTime')),
        certificates: digitalIds(child(inf, TSL_NS, 'ServiceDigitalIdentity')),
      });
    }
  }
  return {
    version: Number(t(child(si, TSL_NS, 'TSLVersionIdentifier'))),
    sequence,
    type,
    isLotl: type.endsWith(LOTL_TYPE_SUFFIX),
    territory,
    operator: name(child(si, TSL_NS, 'SchemeOperatorName')),
    issued: iso(t(child(si, TSL_NS, 'ListIssueDateTime')), 'ListIssueDateTime'),
    nextUpdate: nuDate ? iso(nuDate, 'NextUpdate') : null,
    schemeInformationUris: childElements(child(si, TSL_NS, 'SchemeInformationURI') ?? si, TSL_NS, 'URI').map((u) => t(u)),
    pointers,
    tspCount: tsps.length,
    services,
  };
}

/** The pointer a LOTL makes to itself (its own signer set, TS 119 612 §5.3.13 / EU LOTL practice). */
export function selfPointer(lotl: Tsl): TslPointer | undefined {
  return (
    lotl.pointers.find((p) => p.territory === lotl.territory && p.tslType.endsWith(LOTL_TYPE_SUFFIX) && p.mimeType === TSL_XML_MIME) ??
    lotl.pointers.find((p) => p.tslType.endsWith(LOTL_TYPE_SUFFIX) && p.mimeType === TSL_XML_MIME)
  );
}

export function pemOf(der: Buffer): string {
  const b = der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE-----\n${b}\n-----END CERTIFICATE-----\n`;
}

export function dersOfPem(pem: string): Buffer[] {
  const out: Buffer[] = [];
  const re = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g;
  for (let m = re.exec(pem); m; m = re.exec(pem)) out.push(Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64'));
  return out;
}
