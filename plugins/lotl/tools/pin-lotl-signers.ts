/**
 * Writes the pinned LOTL signer set from a LOTL snapshot:
 *   node bin/run-ts.mjs plugins/lotl/tools/pin-lotl-signers.ts <eu-lotl.xml> <out.pem>
 *
 * It takes the certificates of the LOTL's pointer to itself (TS 119 612 §5.3.13; the EU LOTL
 * names its own signers there), and refuses unless the LOTL's signature verifies with one of
 * them. That only proves the snapshot is self-consistent: before shipping, compare the
 * fingerprints printed here with the ones the Official Journal publishes (the OJ notice the
 * LOTL's SchemeInformationURI names), as the EU LOTL practice asks.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { parseXml } from '../xml.ts';
import { pemOf, readTsl, selfPointer } from '../tsl.ts';
import { pinned, verifyEnvelopedSignature } from '../xades.ts';

const [src, out] = process.argv.slice(2);
if (!src || !out) {
  console.error('usage: pin-lotl-signers.ts <eu-lotl.xml> <out.pem>');
  process.exit(2);
}
const doc = parseXml(fs.readFileSync(src));
const lotl = readTsl(doc.root);
const self = selfPointer(lotl);
if (!lotl.isLotl || !self?.signers.length) throw new Error('not a LOTL with a pointer to itself');
const sig = verifyEnvelopedSignature(doc, self.signers.map(pinned));
const lines = [
  '# EU LOTL signer set pinned by the trusted-list cache (plugins/lotl).',
  `# Taken from the pointer to itself of the EU LOTL sequence ${lotl.sequence}, issued ${lotl.issued},`,
  `# whose ${sig.algorithm} signature verified with the certificate ${sig.signerSha256}.`,
  '# Replace with plugins.lotl.signersPath in config.json. Regenerate with plugins/lotl/tools/pin-lotl-signers.ts.',
  '',
];
for (const der of self.signers) {
  const c = new crypto.X509Certificate(der);
  lines.push(`# subject: ${c.subject.replace(/\n/g, ', ')}`, `# valid: ${c.validFrom} .. ${c.validTo}`, `# sha256: ${pinned(der).sha256}`, pemOf(der));
}
fs.writeFileSync(out, lines.join('\n'));
console.log(`wrote ${self.signers.length} certificates to ${out}`);
