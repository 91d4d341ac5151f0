import 'reflect-metadata';
import crypto from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { c14nDocument, c14nElement, c14nToString } from '../../../plugins/lotl/c14n.ts';
import { child, parseXml } from '../../../plugins/lotl/xml.ts';
import { DSIG } from '../../../plugins/lotl/xades.ts';

/**
 * Signs synthetic trusted lists the way the real ones are signed (enveloped XAdES, exc-c14n,
 * ECDSA P-256 with SHA-512, r||s), for cases the real snapshot cannot give: a pivot LOTL chain,
 * a validly signed older sequence. The real snapshot is what proves the canonicalization.
 */

x509.cryptoProvider.set(crypto.webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export interface Signer {
  der: Buffer;
  key: crypto.KeyObject;
}

export async function makeSigner(cn: string): Promise<Signer> {
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await crypto.webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as crypto.webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: crypto.randomBytes(8).toString('hex'),
    name: `CN=${cn}`,
    notBefore: new Date('2025-01-01'),
    notAfter: new Date('2030-01-01'),
    keys,
    signingAlgorithm: alg,
  });
  return { der: Buffer.from(cert.rawData), key: crypto.KeyObject.from(keys.privateKey) };
}

const NS = 'http://uri.etsi.org/02231/v2#';
const LOTL_TYPE = 'http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUlistofthelists';
const TL_TYPE = 'http://uri.etsi.org/TrstSvc/TrustedList/TSLType/EUgeneric';

export interface ListSpec {
  territory: string;
  sequence: number;
  lotl?: boolean;
  issued?: string;
  nextUpdate?: string | null;
  pointers?: { territory: string; lotl?: boolean; certs: Buffer[] }[];
  schemeUris?: string[];
  services?: { tsp: string; cert: Buffer }[];
}

export function listXml(o: ListSpec): string {
  const b64 = (d: Buffer) => d.toString('base64');
  const ptrs = (o.pointers ?? [])
    .map(
      (p) =>
        `<OtherTSLPointer><ServiceDigitalIdentities><ServiceDigitalIdentity>${p.certs.map((c) => `<DigitalId><X509Certificate>${b64(c)}</X509Certificate></DigitalId>`).join('')}</ServiceDigitalIdentity></ServiceDigitalIdentities>` +
        `<TSLLocation>https://lists.example/${p.territory}.xml</TSLLocation><AdditionalInformation><OtherInformation><TSLType>${p.lotl ? LOTL_TYPE : TL_TYPE}</TSLType></OtherInformation>` +
        `<OtherInformation><SchemeTerritory>${p.territory}</SchemeTerritory></OtherInformation><OtherInformation><ns3:MimeType xmlns:ns3="http://uri.etsi.org/02231/v2/additionaltypes#">application/vnd.etsi.tsl+xml</ns3:MimeType></OtherInformation></AdditionalInformation></OtherTSLPointer>`,
    )
    .join('');
  const nu = o.nextUpdate === null ? '<NextUpdate/>' : `<NextUpdate><dateTime>${o.nextUpdate ?? '2030-01-01T00:00:00Z'}</dateTime></NextUpdate>`;
  const tsps = (o.services ?? [])
    .map(
      (s) =>
        `<TrustServiceProvider><TSPInformation><TSPName><Name xml:lang="en">${s.tsp}</Name></TSPName></TSPInformation><TSPServices><TSPService><ServiceInformation>` +
        '<ServiceTypeIdentifier>http://uri.etsi.org/TrstSvc/Svctype/CA/QC</ServiceTypeIdentifier><ServiceName><Name xml:lang="en">CA</Name></ServiceName>' +
        `<ServiceDigitalIdentity><DigitalId><X509Certificate>${b64(s.cert)}</X509Certificate></DigitalId></ServiceDigitalIdentity>` +
        '<ServiceStatus>http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted</ServiceStatus><StatusStartingTime>2025-01-01T00:00:00Z</StatusStartingTime></ServiceInformation></TSPService></TSPServices></TrustServiceProvider>',
    )
    .join('');
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<TrustServiceStatusList xmlns="${NS}" Id="tsl" TSLTag="http://uri.etsi.org/19612/TSLTag">\n<SchemeInformation><TSLVersionIdentifier>6</TSLVersionIdentifier>` +
    `<TSLSequenceNumber>${o.sequence}</TSLSequenceNumber><TSLType>${o.lotl ? LOTL_TYPE : TL_TYPE}</TSLType><SchemeOperatorName><Name xml:lang="en">Operator ${o.territory}</Name></SchemeOperatorName>` +
    (o.schemeUris ? `<SchemeInformationURI>${o.schemeUris.map((u) => `<URI xml:lang="en">${u}</URI>`).join('')}</SchemeInformationURI>` : '') +
    `<SchemeTerritory>${o.territory}</SchemeTerritory>${ptrs ? `<PointersToOtherTSL>${ptrs}</PointersToOtherTSL>` : ''}` +
    `<ListIssueDateTime>${o.issued ?? '2026-08-01T00:00:00Z'}</ListIssueDateTime>${nu}</SchemeInformation>\n` +
    (tsps ? `<TrustServiceProviderList>${tsps}</TrustServiceProviderList>\n` : '') +
    '</TrustServiceStatusList>'
  );
}

/** Adds an enveloped XAdES signature (ecdsa-sha512) as the last child of the document element. */
export function sign(xml: string, s: Signer): string {
  const sig =
    '<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#" Id="sig-1"><ds:SignedInfo>' +
    '<ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512"/>' +
    '<ds:Reference Id="ref-1" URI=""><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms>' +
    '<ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha512"/><ds:DigestValue>@D1@</ds:DigestValue></ds:Reference>' +
    '<ds:Reference Type="http://uri.etsi.org/01903#SignedProperties" URI="#xades-sig-1"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms>' +
    '<ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha512"/><ds:DigestValue>@D2@</ds:DigestValue></ds:Reference></ds:SignedInfo>' +
    `<ds:SignatureValue>@SV@</ds:SignatureValue><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${s.der.toString('base64')}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>` +
    '<ds:Object><xades:QualifyingProperties xmlns:xades="http://uri.etsi.org/01903/v1.3.2#" Target="#sig-1"><xades:SignedProperties Id="xades-sig-1">' +
    '<xades:SignedSignatureProperties><xades:SigningTime>2026-08-01T00:00:00Z</xades:SigningTime></xades:SignedSignatureProperties></xades:SignedProperties></xades:QualifyingProperties></ds:Object></ds:Signature>';
  let out = xml.replace('</TrustServiceStatusList>', `${sig}</TrustServiceStatusList>`);
  const digest = (feed: (h: crypto.Hash) => void) => {
    const h = crypto.createHash('sha512');
    feed(h);
    return h.digest('base64');
  };
  const d = parseXml(out);
  const d1 = digest((h) => c14nDocument(d, (c) => h.update(c, 'utf8'), { exclude: d.signatures[0] }));
  const d2 = digest((h) => c14nElement(d.ids.get('xades-sig-1')!, (c) => h.update(c, 'utf8')));
  out = out.replace('@D1@', d1).replace('@D2@', d2);
  const si = child(parseXml(out).signatures[0]!, DSIG, 'SignedInfo')!;
  const sv = crypto.sign('sha512', Buffer.from(c14nToString(si), 'utf8'), { key: s.key, dsaEncoding: 'ieee-p1363' });
  return out.replace('@SV@', sv.toString('base64'));
}
