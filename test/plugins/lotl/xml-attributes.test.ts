import { describe, expect, it } from 'vitest';
import { MAX_ATTRIBUTES, parseXml, XmlError } from '../../../plugins/lotl/xml.ts';

/** One element with `n` distinct attributes. */
function manyAttributes(n: number): string {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(`a${i}="${i}"`);
  return `<r ${parts.join(' ')}/>`;
}

describe('XML attributes (unique attribute spec, bounded work)', () => {
  it('an element with 150,000 attributes is refused by the cap, not parsed in quadratic time', () => {
    // The shape of the reported attack: one 1.7 MB element that blocked the server for 30 s.
    expect(() => parseXml(manyAttributes(150_000))).toThrow(new RegExp(`more than ${MAX_ATTRIBUTES} attributes`));
  });

  it('up to the cap, every attribute is kept and duplicates are still found', () => {
    const doc = parseXml(manyAttributes(MAX_ATTRIBUTES));
    expect(doc.root.attrs).toHaveLength(MAX_ATTRIBUTES);
    expect(doc.root.attrs[MAX_ATTRIBUTES - 1]).toMatchObject({ local: `a${MAX_ATTRIBUTES - 1}`, value: String(MAX_ATTRIBUTES - 1) });
    expect(() => parseXml('<r a="1" b="2" a="3"/>')).toThrow(/duplicate attribute a/);
    // Namespaces §6.3: two prefixes bound to the same namespace name the same attribute.
    expect(() => parseXml('<r xmlns:p="urn:x" xmlns:q="urn:x" p:a="1" q:a="2"/>')).toThrow(/duplicate attribute \{urn:x\}a/);
    // The same local name in two namespaces is two attributes; the reused sets start empty on the next element.
    const ok = parseXml('<r xmlns:p="urn:x" xmlns:q="urn:y" p:a="1" q:a="2"><c p:a="3" a="4"/></r>');
    expect(ok.root.attrs).toHaveLength(2);
    expect(() => parseXml('<r a="1" a="1"/>')).toThrow(XmlError);
  });
});
