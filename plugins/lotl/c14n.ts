import { lookupNamespace, type XDocument, type XElement, type XNode } from './xml.ts';

/**
 * Exclusive XML Canonicalization 1.0 without comments (https://www.w3.org/TR/xml-exc-c14n/),
 * over the parser's tree. Comments are not kept by the parser, which is what "without
 * comments" asks. Output goes to a sink in chunks so a 3 MB list is hashed without building
 * one giant string.
 */

export interface C14nOptions {
  /** An element left out with its subtree: the enveloped-signature transform (XML-DSig §6.6.4). */
  exclude?: XElement;
  /** InclusiveNamespaces PrefixList (exc-c14n §3): prefixes treated as in inclusive c14n. */
  inclusivePrefixes?: string[];
}

export type Sink = (chunk: string) => void;

// C14N 1.0 §2.3: escaping of text and attribute values.
function escText(t: string): string {
  if (!/[&<>\r]/.test(t)) return t;
  return t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\r/g, '&#xD;');
}

function escAttr(v: string): string {
  if (!/[&<"\t\n\r]/.test(v)) return v;
  return v.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/"/g, '&quot;').replace(/\t/g, '&#x9;').replace(/\n/g, '&#xA;').replace(/\r/g, '&#xD;');
}

/** Canonicalizes the subtree at `el` (a same-document reference to an element). */
export function c14nElement(el: XElement, sink: Sink, o: C14nOptions = {}): void {
  const buf = new Buffered(sink);
  writeElement(el, new Map([['', '']]), buf, o);
  buf.flush();
}

/** Canonicalizes a whole document (URI=""): PIs around the document element per C14N §2.1. */
export function c14nDocument(doc: XDocument, sink: Sink, o: C14nOptions = {}): void {
  const buf = new Buffered(sink);
  for (const pi of doc.before) buf.add(`<?${pi.target}${pi.data ? ' ' + pi.data : ''}?>\n`);
  writeElement(doc.root, new Map([['', '']]), buf, o);
  for (const pi of doc.after) buf.add(`\n<?${pi.target}${pi.data ? ' ' + pi.data : ''}?>`);
  buf.flush();
}

export function c14nToString(el: XElement, o: C14nOptions = {}): string {
  let s = '';
  c14nElement(
    el,
    (c) => {
      s += c;
    },
    o,
  );
  return s;
}

class Buffered {
  #parts: string[] = [];
  #size = 0;
  constructor(private readonly sink: Sink) {}
  add(s: string): void {
    this.#parts.push(s);
    this.#size += s.length;
    if (this.#size > 65536) this.flush();
  }
  flush(): void {
    if (!this.#parts.length) return;
    this.sink(this.#parts.join(''));
    this.#parts = [];
    this.#size = 0;
  }
}

function writeElement(el: XElement, rendered: Map<string, string>, out: Buffered, o: C14nOptions): void {
  const qn = el.prefix ? `${el.prefix}:${el.local}` : el.local;
  // exc-c14n §3: a namespace node is output when it is visibly utilized (by the element's own
  // prefix or an attribute's) and not already rendered with the same value by an output ancestor.
  let next = rendered;
  let decls: [string, string][] | undefined;
  const consider = (p: string, u: string) => {
    const have = rendered.get(p);
    // The default namespace: xmlns="" only undoes a non-empty default an ancestor rendered.
    if (p === '' ? (have ?? '') === u : have === u) return;
    decls ??= [];
    if (!decls.some((d) => d[0] === p)) decls.push([p, u]);
  };
  consider(el.prefix, el.ns);
  for (const a of el.attrs) if (a.prefix && a.prefix !== 'xml' && a.prefix !== el.prefix) consider(a.prefix, a.ns);
  if (o.inclusivePrefixes) {
    for (const p0 of o.inclusivePrefixes) {
      const p = p0 === '#default' ? '' : p0;
      if (p === el.prefix || el.attrs.some((a) => a.prefix === p)) continue;
      const u = lookupNamespace(el, p);
      if (u !== undefined && (p !== '' || u !== '')) consider(p, u);
    }
  }
  let s = '<' + qn;
  if (decls) {
    decls.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    next = new Map(rendered);
    for (const [p, u] of decls) {
      next.set(p, u);
      s += p ? ` xmlns:${p}="${escAttr(u)}"` : ` xmlns="${escAttr(u)}"`;
    }
  }
  if (el.attrs.length) {
    // C14N §2.2: attributes by namespace URI, then local name (no-namespace ones first).
    const attrs = el.attrs.length > 1 ? [...el.attrs].sort((a, b) => (a.ns === b.ns ? cmp(a.local, b.local) : cmp(a.ns, b.ns))) : el.attrs;
    for (const a of attrs) s += ` ${a.prefix ? a.prefix + ':' + a.local : a.local}="${escAttr(a.value)}"`;
  }
  out.add(s + '>');
  for (const c of el.children) writeNode(c, next, out, o);
  out.add(`</${qn}>`);
}

function writeNode(n: XNode, rendered: Map<string, string>, out: Buffered, o: C14nOptions): void {
  if (n.kind === 'text') out.add(escText(n.text));
  else if (n.kind === 'element') {
    if (n !== o.exclude) writeElement(n, rendered, out, o);
  } else out.add(`<?${n.target}${n.data ? ' ' + n.data : ''}?>`);
}

// Code-point order of UTF-16 strings differs from UTF-8 byte order only above the BMP, which no
// namespace URI or attribute name in a trusted list uses; plain comparison is the C14N order there.
function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
