import fs from 'node:fs';
import path from 'node:path';

/** The real August 2026 snapshot (never edited: negative cases derive copies at run time). */
export const SNAPSHOT = path.resolve(import.meta.dirname, '../../../../shared/fixtures/trusted-lists/2026-08');

export function fixtureText(name: string): string {
  return fs.readFileSync(path.join(SNAPSHOT, name), 'utf8');
}

export function fixtureNames(): string[] {
  return fs
    .readdirSync(SNAPSHOT)
    .filter((f) => f.endsWith('.xml'))
    .sort();
}

/** The ds:Signature element of a list, as text. */
export function signatureText(xml: string): string {
  const a = xml.indexOf('<ds:Signature ');
  const end = '</ds:Signature>';
  const b = xml.indexOf(end, a);
  if (a < 0 || b < 0) throw new Error('no ds:Signature');
  return xml.slice(a, b + end.length);
}

/** Changes one character of the first English TSP name: a signed element, one byte different. */
export function flipByteInSignedElement(xml: string): string {
  const marker = '<TSPName>';
  const at = xml.indexOf(marker);
  const nameAt = xml.indexOf('>', xml.indexOf('<Name', at)) + 1;
  const c = xml[nameAt]!;
  return xml.slice(0, nameAt) + (c === 'X' ? 'Y' : 'X') + xml.slice(nameAt + 1);
}

/** Moves the signature from the document element into SchemeInformation (a wrapping attempt). */
export function moveSignature(xml: string): string {
  const sig = signatureText(xml);
  const without = xml.replace(sig, '');
  return without.replace('</SchemeInformation>', `${sig}</SchemeInformation>`);
}

/** A second copy of the signature beside the first. */
export function secondSignature(xml: string): string {
  const sig = signatureText(xml);
  return xml.replace(sig, sig + sig.replace(/Id="/g, 'Id="copy-'));
}

export function withDoctype(xml: string): string {
  const decl = xml.indexOf('?>') + 2;
  return `${xml.slice(0, decl)}<!DOCTYPE TrustServiceStatusList [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY xxe SYSTEM "file:///etc/passwd">]>${xml.slice(decl).replace('<TSPName>', '<TSPName>&b;&xxe;')}`;
}

export function truncated(xml: string): string {
  return xml.slice(0, Math.floor(xml.length / 2));
}

export function expiredNextUpdate(xml: string): string {
  return xml.replace(/(<NextUpdate>\s*<dateTime>)[^<]+/, '$12020-01-01T00:00:00Z');
}

/** Gives SchemeInformation the Id of the SignedProperties: the reference becomes ambiguous. */
export function duplicateId(xml: string): string {
  const id = /<xades:SignedProperties[^>]*Id="([^"]+)"/.exec(xml)?.[1];
  if (!id) throw new Error('no SignedProperties Id');
  return xml.replace('<SchemeInformation>', `<SchemeInformation Id="${id}">`);
}

/** A minimal ustar archive of the given files (for the upload endpoint). */
export function tar(files: { name: string; bytes: Buffer }[]): Buffer {
  const parts: Buffer[] = [];
  for (const f of files) {
    const h = Buffer.alloc(512);
    h.write(f.name, 0, 100, 'utf8');
    h.write('0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(f.bytes.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write('0', 156);
    h.write('ustar\0', 257);
    h.write('00', 263);
    const sum = h.reduce((s, b) => s + b, 0);
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    parts.push(h, f.bytes, Buffer.alloc((512 - (f.bytes.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/**
 * Hides a forged TrustServiceProviderList inside the signature's ds:Object. The signature does
 * not cover ds:Object as a whole (only its SignedProperties), so the list still verifies: a
 * reader that searched the whole tree would pick the forged provider up.
 */
export function injectIntoObject(xml: string, fakeCertB64: string): string {
  const fake =
    '<TrustServiceProviderList xmlns="http://uri.etsi.org/02231/v2#"><TrustServiceProvider><TSPInformation><TSPName><Name xml:lang="en">Forged TSP</Name></TSPName></TSPInformation>' +
    '<TSPServices><TSPService><ServiceInformation><ServiceTypeIdentifier>http://uri.etsi.org/TrstSvc/Svctype/CA/QC</ServiceTypeIdentifier><ServiceName><Name xml:lang="en">Forged CA</Name></ServiceName>' +
    `<ServiceDigitalIdentity><DigitalId><X509Certificate>${fakeCertB64}</X509Certificate></DigitalId></ServiceDigitalIdentity>` +
    '<ServiceStatus>http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted</ServiceStatus><StatusStartingTime>2026-01-01T00:00:00Z</StatusStartingTime></ServiceInformation></TSPService></TSPServices></TrustServiceProvider></TrustServiceProviderList>';
  return xml.replace('</ds:Object>', `${fake}</ds:Object>`);
}

/** Moves the SignedProperties out of the signature, keeping its Id (a reference-redirect attempt). */
export function moveSignedProperties(xml: string): string {
  const a = xml.indexOf('<xades:SignedProperties');
  const end = '</xades:SignedProperties>';
  const b = xml.indexOf(end, a) + end.length;
  const sp = xml
    .slice(a, b)
    .replace(
      '<xades:SignedProperties',
      '<xades:SignedProperties xmlns:xades="http://uri.etsi.org/01903/v1.3.2#" xmlns:ds="http://www.w3.org/2000/09/xmldsig#"',
    );
  return (xml.slice(0, a) + xml.slice(b)).replace('</SchemeInformation>', `</SchemeInformation>${sp}`);
}
