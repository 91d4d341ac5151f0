import crypto from 'node:crypto';
import fs from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseXml, XmlError, child, childElements, type XDocument } from '../../../plugins/lotl/xml.ts';
import { c14nToString } from '../../../plugins/lotl/c14n.ts';
import { readTsl, selfPointer, dersOfPem, TSL_XML_MIME, type Tsl } from '../../../plugins/lotl/tsl.ts';
import { DSIG, pinned, SignatureError, verifyEnvelopedSignature, type PinnedCert } from '../../../plugins/lotl/xades.ts';
import { DEFAULT_SIGNERS } from '../../../plugins/lotl/service.ts';
import {
  duplicateId,
  expiredNextUpdate,
  injectIntoObject,
  moveSignedProperties,
  fixtureNames,
  fixtureText,
  flipByteInSignedElement,
  moveSignature,
  secondSignature,
  truncated,
  withDoctype,
} from './support.ts';

// Parsed once for the whole file: the snapshot is 23 MB.
const docs = new Map<string, { doc: XDocument; tsl: Tsl }>();
let lotl: Tsl;
let pins: PinnedCert[];

beforeAll(() => {
  for (const f of fixtureNames()) {
    const doc = parseXml(fs.readFileSync(`${import.meta.dirname}/../../../../shared/fixtures/trusted-lists/2026-08/${f}`));
    docs.set(f, { doc, tsl: readTsl(doc.root) });
  }
  lotl = docs.get('eu-lotl.xml')!.tsl;
  pins = dersOfPem(fs.readFileSync(DEFAULT_SIGNERS, 'utf8')).map(pinned);
});

function signersFor(territory: string): PinnedCert[] {
  return lotl.pointers.filter((p) => p.territory === territory && p.mimeType === TSL_XML_MIME).flatMap((p) => p.signers.map(pinned));
}

function keyInfoCert(doc: XDocument): PinnedCert {
  const el = childElements(child(child(doc.signatures[0]!, DSIG, 'KeyInfo'), DSIG, 'X509Data')!, DSIG, 'X509Certificate')[0]!;
  return pinned(
    Buffer.from(
      el.children
        .map((c) => (c.kind === 'text' ? c.text : ''))
        .join('')
        .replace(/\s+/g, ''),
      'base64',
    ),
  );
}

function failure(xml: string, trusted: PinnedCert[]): string {
  try {
    verifyEnvelopedSignature(parseXml(xml), trusted);
  } catch (e) {
    if (e instanceof SignatureError || e instanceof XmlError) return e.code;
    throw e;
  }
  return 'verified';
}

describe('the real 2026-08 snapshot', () => {
  it('has 30 lists; the LOTL (sequence 390) verifies with the shipped pinned signer set', () => {
    expect(docs.size).toBe(30);
    expect(lotl.isLotl).toBe(true);
    expect(lotl.sequence).toBe(390);
    expect(lotl.pointers).toHaveLength(43);
    const v = verifyEnvelopedSignature(docs.get('eu-lotl.xml')!.doc, pins);
    expect(v.algorithm).toBe('rsa-sha512');
    // The shipped set is exactly the LOTL's pointer to itself.
    expect(pins.map((p) => p.sha256).sort()).toEqual(
      selfPointer(lotl)!
        .signers.map((d) => pinned(d).sha256)
        .sort(),
    );
  });

  it('all 30 signatures verify: 29 against the signers the LOTL pins, HR only against its own retired signer', () => {
    const algs = new Map<string, string>();
    for (const [name, { doc, tsl }] of docs) {
      if (tsl.isLotl) continue;
      if (tsl.territory === 'HR') {
        // The HR copy is from 2024, signed by a certificate the current LOTL no longer names.
        expect(() => verifyEnvelopedSignature(doc, signersFor('HR'))).toThrow(expect.objectContaining({ code: 'signer_not_pinned' }));
        expect(verifyEnvelopedSignature(doc, [keyInfoCert(doc)]).algorithm).toBe('rsa-sha256');
        continue;
      }
      const v = verifyEnvelopedSignature(doc, signersFor(tsl.territory));
      algs.set(name.slice(0, 2), v.algorithm);
    }
    expect(algs.size).toBe(28);
    expect(algs.get('EL')).toBe('ecdsa-sha512');
    expect(algs.get('SI')).toBe('ecdsa-sha512');
    expect(algs.get('HU')).toBe('ecdsa-sha256');
    expect(algs.get('IT')).toBe('rsa-sha256');
    expect(algs.get('AT')).toBe('rsa-sha512');
  });

  it('reads the TS 119 612 model: NL, NO, HR past NextUpdate on 2026-08-22, UK closed, ~3,900 services', () => {
    const at = Date.parse('2026-08-22T00:00:00Z');
    const stale = [...docs.values()]
      .filter(({ tsl }) => tsl.nextUpdate !== null && Date.parse(tsl.nextUpdate) < at)
      .map(({ tsl }) => tsl.territory)
      .sort();
    expect(stale).toEqual(['HR', 'NL', 'NO']);
    const uk = docs.get('UK_TSL_UK.xml')!.tsl;
    expect(uk.nextUpdate).toBeNull();
    const services = [...docs.values()].reduce((n, { tsl }) => n + tsl.services.length, 0);
    expect(services).toBeGreaterThan(3800);
    expect(services).toBeLessThan(4000);
    const at0 = docs.get('AT_TSL_AT.xml')!.tsl;
    expect(at0.territory).toBe('AT');
    expect(at0.services[0]!.serviceType).toMatch(/^http:\/\/uri\.etsi\.org\/TrstSvc\/Svctype\//);
    expect(at0.services[0]!.status).toMatch(/^http:\/\/uri\.etsi\.org\/TrstSvc\/TrustedList\/Svcstatus\//);
    expect(at0.services.some((s) => s.certificates.length > 0)).toBe(true);
    const ptr = lotl.pointers.find((p) => p.territory === 'AT' && p.mimeType === TSL_XML_MIME)!;
    expect(ptr.location).toMatch(/^https:\/\//);
    expect(ptr.signers.length).toBeGreaterThan(0);
  });
});

describe('tampered copies are refused with a stable reason', () => {
  const cy = () => fixtureText('CY_TSL_CY.xml');

  it('the untouched copy verifies (control)', () => {
    expect(failure(cy(), signersFor('CY'))).toBe('verified');
  });

  it('one byte changed inside a signed element: digest_mismatch', () => {
    expect(failure(flipByteInSignedElement(cy()), signersFor('CY'))).toBe('digest_mismatch');
  });

  it('a NextUpdate pushed into the past cannot be forged either: digest_mismatch', () => {
    expect(failure(expiredNextUpdate(cy()), signersFor('CY'))).toBe('digest_mismatch');
  });

  it('a moved (wrapped) signature: signature_not_root_child', () => {
    expect(failure(moveSignature(cy()), signersFor('CY'))).toBe('signature_not_root_child');
  });

  it('a second signature: multiple_signatures', () => {
    expect(failure(secondSignature(cy()), signersFor('CY'))).toBe('multiple_signatures');
  });

  it('an Id used twice: duplicate_ids', () => {
    expect(failure(duplicateId(cy()), signersFor('CY'))).toBe('duplicate_ids');
  });

  it('a DOCTYPE with entities is refused before anything is expanded', () => {
    expect(failure(withDoctype(cy()), signersFor('CY'))).toBe('doctype_refused');
    expect(() => parseXml('<a>&xxe;</a>')).toThrow(/undeclared entity/);
  });

  it('a truncated file: malformed', () => {
    expect(failure(truncated(cy()), signersFor('CY'))).toBe('malformed');
  });

  it('a SignedProperties moved out of the signature (same Id): bad_structure', () => {
    expect(failure(moveSignedProperties(cy()), signersFor('CY'))).toBe('bad_structure');
  });

  it('a forged provider hidden in ds:Object still verifies, and is never read: data comes only from the signed document element', () => {
    const fakeDer = Buffer.from(signersFor('AT')[0]!.der);
    const doc = parseXml(injectIntoObject(cy(), fakeDer.toString('base64')));
    expect(verifyEnvelopedSignature(doc, signersFor('CY')).algorithm).toBe('rsa-sha512');
    const tsl = readTsl(doc.root);
    const original = docs.get('CY_TSL_CY.xml')!.tsl;
    expect(tsl.services.length).toBe(original.services.length);
    expect(tsl.services.some((sv) => sv.tspName === 'Forged TSP')).toBe(false);
    expect(tsl.services.flatMap((sv) => sv.certificates).some((c) => c.equals(fakeDer))).toBe(false);
  });

  it('a list signed by someone else: signer_not_pinned', () => {
    expect(failure(cy(), signersFor('AT'))).toBe('signer_not_pinned');
  });
});

describe('the parser and exclusive c14n', () => {
  it('refuses what XML forbids', () => {
    expect(() => parseXml('<a>'.repeat(100_000) + '</a>'.repeat(100_000))).toThrow(/nested deeper/);
    for (const bad of ['<a><b></a>', '<a x="1" x="2"/>', '<a/><b/>', '<p:a/>', '<a>x', 'text', '<a>&#0;</a>']) {
      expect(() => parseXml(bad), bad).toThrow(XmlError);
    }
  });

  it('renders only visibly utilized namespaces, sorted attributes, escaped text (exc-c14n §3)', () => {
    const d = parseXml('<r xmlns="urn:d" xmlns:a="urn:a" xmlns:u="urn:unused"><a:e b="2" a:z="1" a="&lt;&#9;"><f>x &amp; y &gt; z\r\n</f></a:e></r>');
    const e = d.root.children[0]!;
    expect(e.kind).toBe('element');
    expect(c14nToString(e as never)).toBe('<a:e xmlns:a="urn:a" a="&lt;&#x9;" b="2" a:z="1"><f xmlns="urn:d">x &amp; y &gt; z\n</f></a:e>');
  });

  it('hashes the same as the signer did for every reference (SHA-256 of DER keys the anchors)', () => {
    const der = crypto.randomBytes(8);
    expect(pinned(der).sha256).toBe(crypto.createHash('sha256').update(der).digest('hex'));
  });
});
