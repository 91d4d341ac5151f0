/**
 * A small, strict XML 1.0 + Namespaces parser for trusted lists. It has no DTD support at all:
 * a DOCTYPE (and with it every entity declaration) is refused outright, so entity expansion
 * ("billion laughs") and external entities (XXE) cannot happen. Only the five predefined
 * entities and character references are understood (XML 1.0 §4.6, §4.1).
 *
 * Why not @xmldom/xmldom: it took ~3 s for the 23 MB snapshot on this machine, most of the
 * import budget, and it tolerates DTDs. This parser builds only what canonicalization and
 * the TS 119 612 model need, and fails closed on anything it does not understand.
 */

import { isUtf8 } from 'node:buffer';

export const XMLNS_NS = 'http://www.w3.org/2000/xmlns/';
export const XML_NS = 'http://www.w3.org/XML/1998/namespace';

export interface XAttr {
  prefix: string;
  local: string;
  /** Namespace of a prefixed attribute; '' for an unprefixed one (Namespaces §6.2). */
  ns: string;
  value: string;
}

export interface XText {
  kind: 'text';
  text: string;
}

export interface XPi {
  kind: 'pi';
  target: string;
  data: string;
}

export interface XElement {
  kind: 'element';
  prefix: string;
  local: string;
  ns: string;
  attrs: XAttr[];
  /** Namespace declarations made on this element: prefix ('' for default) to URI. */
  nsDecls: [string, string][];
  children: XNode[];
  parent: XElement | null;
}

export type XNode = XElement | XText | XPi;

export interface XDocument {
  root: XElement;
  /** Processing instructions before and after the document element (comments are dropped). */
  before: XPi[];
  after: XPi[];
  /** Elements by their `Id` / `ID` / `id` attribute value. */
  ids: Map<string, XElement>;
  /** Id values that occur more than once (XML-DSig same-document references become ambiguous). */
  duplicateIds: Set<string>;
  /** Every ds:Signature element, wherever it is. */
  signatures: XElement[];
}

export class XmlError extends Error {
  constructor(
    message: string,
    readonly code: 'doctype_refused' | 'malformed' | 'encoding' = 'malformed',
  ) {
    super(message);
  }
}

const DSIG_NS = 'http://www.w3.org/2000/09/xmldsig#';

const MAX_DEPTH = 256;
const NO_DECLS: [string, string][] = Object.freeze([]) as unknown as [string, string][];
const NO_ATTRS: XAttr[] = Object.freeze([]) as unknown as XAttr[];

/**
 * Attributes one element may carry. The trusted lists and XML-DSig use a handful (the most seen in
 * the EU snapshot is under ten, namespace declarations included); thousands only come from an
 * attack on the parser.
 */
export const MAX_ATTRIBUTES = 256;

const PREDEFINED: Record<string, string> = { lt: '<', gt: '>', amp: '&', apos: "'", quot: '"' };

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d;
}

/** Name characters, loosely (XML 1.0 §2.3): anything but whitespace and markup delimiters. */
function isNameStop(c: number): boolean {
  return isWs(c) || c === 0x3e /* > */ || c === 0x2f /* / */ || c === 0x3d /* = */ || c === 0x3c || c === 0x22 || c === 0x27 || c === 0x26 || Number.isNaN(c);
}

function decodeRefs(s: string, where: number): string {
  if (s.indexOf('&') < 0) return s;
  let out = '';
  let i = 0;
  for (;;) {
    const amp = s.indexOf('&', i);
    if (amp < 0) return out + s.slice(i);
    out += s.slice(i, amp);
    const semi = s.indexOf(';', amp);
    if (semi < 0 || semi - amp > 12) throw new XmlError(`bad reference near offset ${where}`);
    const name = s.slice(amp + 1, semi);
    if (name.startsWith('#')) {
      const cp = name[1] === 'x' ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      if (!/^#(x[0-9a-fA-F]+|[0-9]+)$/.test(name) || !validChar(cp)) throw new XmlError(`bad character reference &${name}; near offset ${where}`);
      out += String.fromCodePoint(cp);
    } else {
      const v = PREDEFINED[name];
      // No DTD, so no other entity can be declared: an unknown name is a well-formedness error.
      if (v === undefined) throw new XmlError(`undeclared entity &${name}; near offset ${where}`);
      out += v;
    }
    i = semi + 1;
  }
}

function validChar(cp: number): boolean {
  return cp === 0x9 || cp === 0xa || cp === 0xd || (cp >= 0x20 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff);
}

/** Decodes bytes as UTF-8 (the only encoding trusted lists use), refusing invalid sequences. */
export function decodeUtf8(bytes: Uint8Array): string {
  // isUtf8 + toString: the same strictness as a fatal TextDecoder at a fraction of its cost.
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!isUtf8(buf)) throw new XmlError('not valid UTF-8', 'encoding');
  const text = buf.toString('utf8');
  const decl = /^<\?xml[^>]*encoding\s*=\s*["']([^"']+)["']/.exec(text);
  if (decl && !/^utf-?8$/i.test(decl[1]!)) throw new XmlError(`unsupported encoding ${decl[1]}`, 'encoding');
  return text;
}

/** Parses a document. Throws XmlError on a DOCTYPE, an entity, or any well-formedness error. */
export function parseXml(input: string | Uint8Array): XDocument {
  const raw = typeof input === 'string' ? input : decodeUtf8(input);
  // XML 1.0 §2.11: line ends are normalized to #xA before parsing.
  const s = raw.indexOf('\r') >= 0 ? raw.replace(/\r\n?/g, '\n') : raw;
  const len = s.length;
  let i = 0;
  const ids = new Map<string, XElement>();
  const duplicateIds = new Set<string>();
  const signatures: XElement[] = [];
  // Reused per start tag (cleared each time): the unique-attribute checks.
  const rawNames = new Set<string>();
  const expandedNames = new Set<string>();
  const before: XPi[] = [];
  const after: XPi[] = [];
  let root: XElement | null = null;
  let cur: XElement | null = null;
  // In-scope namespaces as a chain of maps (one per element that declares something).
  interface Scope {
    map: Map<string, string>;
    parent: Scope | null;
  }
  const base: Scope = {
    map: new Map([
      ['xml', XML_NS],
      ['', ''],
    ]),
    parent: null,
  };
  const scopes: Scope[] = [];
  let scope = base;
  const lookup = (prefix: string): string | undefined => {
    for (let sc: Scope | null = scope; sc; sc = sc.parent) {
      const v = sc.map.get(prefix);
      if (v !== undefined) return v;
    }
    return undefined;
  };
  let textStart = -1;
  let depth = 0;

  if (s.charCodeAt(0) === 0xfeff) i = 1;

  const fail = (msg: string): never => {
    throw new XmlError(`${msg} at offset ${i}`);
  };

  const flushText = (end: number) => {
    if (textStart < 0) return;
    const t = s.slice(textStart, end);
    textStart = -1;
    if (!cur) {
      if (/[^ \n\t]/.test(t)) fail('text outside the document element');
      return;
    }
    if (t.indexOf(']]>') >= 0) fail("']]>' in text");
    if (t.indexOf('<') >= 0) fail('< in text');
    pushText(decodeRefs(t, i));
  };

  const pushText = (t: string) => {
    if (!cur || t === '') return;
    const last = cur.children[cur.children.length - 1];
    if (last && last.kind === 'text') last.text += t;
    else cur.children.push({ kind: 'text', text: t });
  };

  const readName = (): string => {
    const st = i;
    while (i < len && !isNameStop(s.charCodeAt(i))) i++;
    if (i === st) fail('name expected');
    return s.slice(st, i);
  };

  const splitQName = (q: string): [string, string] => {
    const c = q.indexOf(':');
    if (c < 0) return ['', q];
    if (c === 0 || c === q.length - 1 || q.indexOf(':', c + 1) >= 0) fail(`bad qualified name ${q}`);
    return [q.slice(0, c), q.slice(c + 1)];
  };

  while (i < len) {
    const lt = s.indexOf('<', i);
    if (lt < 0) {
      if (textStart < 0) textStart = i;
      i = len;
      break;
    }
    if (lt > i && textStart < 0) textStart = i;
    i = lt;
    const c1 = s.charCodeAt(i + 1);
    if (c1 === 0x21 /* ! */) {
      if (s.startsWith('<!--', i)) {
        flushText(i);
        const end = s.indexOf('-->', i + 4);
        if (end < 0) fail('unterminated comment');
        if (s.slice(i + 4, end).indexOf('--') >= 0) fail("'--' inside a comment");
        i = end + 3;
        continue;
      }
      if (s.startsWith('<![CDATA[', i)) {
        if (!cur) fail('CDATA outside the document element');
        flushText(i);
        const end = s.indexOf(']]>', i + 9);
        if (end < 0) fail('unterminated CDATA section');
        pushText(s.slice(i + 9, end));
        i = end + 3;
        continue;
      }
      if (/^<!DOCTYPE/i.test(s.slice(i, i + 9)) || /^<!ENTITY/i.test(s.slice(i, i + 8))) {
        throw new XmlError('DOCTYPE and entity declarations are refused', 'doctype_refused');
      }
      fail('unexpected markup declaration');
    }
    flushText(i);
    if (c1 === 0x3f /* ? */) {
      const end = s.indexOf('?>', i + 2);
      if (end < 0) fail('unterminated processing instruction');
      const body = s.slice(i + 2, end);
      const m = /^([^\s?]+)(?:\s+([\s\S]*))?$/.exec(body);
      if (!m) fail('bad processing instruction');
      const target = m![1]!;
      if (target.toLowerCase() === 'xml') {
        if (i !== 0 && !(i === 1 && s.charCodeAt(0) === 0xfeff)) fail('XML declaration not at the start');
      } else {
        const pi: XPi = { kind: 'pi', target, data: m![2] ?? '' };
        if (cur) cur.children.push(pi);
        else (root ? after : before).push(pi);
      }
      i = end + 2;
      continue;
    }
    if (c1 === 0x2f /* / */) {
      i += 2;
      const qn = readName();
      while (i < len && isWs(s.charCodeAt(i))) i++;
      if (s.charCodeAt(i) !== 0x3e) fail('> expected');
      i++;
      if (!cur) fail(`end tag </${qn}> without a start tag`);
      const want = cur!.prefix ? `${cur!.prefix}:${cur!.local}` : cur!.local;
      if (qn !== want) fail(`end tag </${qn}> does not match <${want}>`);
      if (cur!.nsDecls.length) scope = scopes.pop()!;
      cur = cur!.parent;
      depth--;
      continue;
    }
    // Start tag.
    i++;
    if (root && !cur) fail('a second document element');
    const qn = readName();
    const rawAttrs: [string, string][] = [];
    rawNames.clear();
    let selfClose = false;
    for (;;) {
      const ws0 = i;
      while (i < len && isWs(s.charCodeAt(i))) i++;
      if (i >= len) fail('unterminated start tag');
      const c = s.charCodeAt(i);
      if (c === 0x3e) {
        i++;
        break;
      }
      if (c === 0x2f) {
        if (s.charCodeAt(i + 1) !== 0x3e) fail('/> expected');
        i += 2;
        selfClose = true;
        break;
      }
      if (i === ws0) fail('whitespace expected between attributes');
      const an = readName();
      while (i < len && isWs(s.charCodeAt(i))) i++;
      if (s.charCodeAt(i) !== 0x3d) fail('= expected');
      i++;
      while (i < len && isWs(s.charCodeAt(i))) i++;
      const q = s.charCodeAt(i);
      if (q !== 0x22 && q !== 0x27) fail('quoted attribute value expected');
      const end = s.indexOf(q === 0x22 ? '"' : "'", i + 1);
      if (end < 0) fail('unterminated attribute value');
      const rv = s.slice(i + 1, end);
      if (rv.indexOf('<') >= 0) fail('< in attribute value');
      // XML 1.0 §3.3.3: literal whitespace in a CDATA attribute value becomes a space; character
      // references are applied after, so &#10; stays a line feed.
      const v = decodeRefs(/[\n\t]/.test(rv) ? rv.replace(/[\n\t]/g, ' ') : rv, i);
      // XML 1.0 §3.1 (unique attribute spec): one hash lookup per attribute, so a hostile
      // element with very many attributes costs linear time, and a cap refuses it outright.
      if (rawAttrs.length >= MAX_ATTRIBUTES) fail(`more than ${MAX_ATTRIBUTES} attributes on one element`);
      if (rawNames.has(an)) fail(`duplicate attribute ${an}`);
      rawNames.add(an);
      rawAttrs.push([an, v]);
      i = end + 1;
    }
    // Most elements have no attributes: share one empty array instead of allocating two.
    const nsDecls: [string, string][] = rawAttrs.length ? [] : NO_DECLS;
    for (const [n, v] of rawAttrs) {
      if (n === 'xmlns') nsDecls.push(['', v]);
      else if (n.startsWith('xmlns:')) {
        const p = n.slice(6);
        if (v === '') fail(`empty namespace for prefix ${p}`);
        if (p === 'xmlns' || (p === 'xml' && v !== XML_NS)) fail(`reserved prefix ${p}`);
        nsDecls.push([p, v]);
      }
    }
    if (nsDecls.length) {
      scopes.push(scope);
      scope = { map: new Map(nsDecls), parent: scope };
    }
    const [prefix, local] = splitQName(qn);
    const ns = lookup(prefix);
    if (ns === undefined) fail(`undeclared prefix ${prefix}`);
    const attrs: XAttr[] = rawAttrs.length ? [] : NO_ATTRS;
    expandedNames.clear();
    for (const [n, v] of rawAttrs) {
      if (n === 'xmlns' || n.startsWith('xmlns:')) continue;
      const [ap, al] = splitQName(n);
      let ans = '';
      if (ap) {
        const u = lookup(ap);
        if (u === undefined) fail(`undeclared prefix ${ap}`);
        ans = u!;
        // Namespaces §6.3: no two attributes with the same expanded name (prefixes may differ).
        const expanded = `{${ans}}${al}`;
        if (expandedNames.has(expanded)) fail(`duplicate attribute ${expanded}`);
        expandedNames.add(expanded);
      }
      attrs.push({ prefix: ap, local: al, ns: ans, value: v });
    }
    const el: XElement = { kind: 'element', prefix, local, ns: ns!, attrs, nsDecls, children: [], parent: cur };
    for (const a of attrs) {
      if (a.ns === '' && (a.local === 'Id' || a.local === 'ID' || a.local === 'id')) {
        if (ids.has(a.value)) duplicateIds.add(a.value);
        else ids.set(a.value, el);
      }
    }
    if (el.local === 'Signature' && el.ns === DSIG_NS) signatures.push(el);
    if (cur) cur.children.push(el);
    else root = el;
    if (selfClose) {
      if (nsDecls.length) scope = scopes.pop()!;
    } else {
      // Trusted lists nest about 12 deep; a bound keeps the recursive c14n and readers safe.
      if (++depth > MAX_DEPTH) fail(`elements nested deeper than ${MAX_DEPTH}`);
      cur = el;
    }
  }
  flushText(len);
  if (cur) throw new XmlError(`truncated document: <${cur.local}> is not closed`);
  if (!root) throw new XmlError('no document element');
  return { root, before, after, ids, duplicateIds, signatures };
}

// ---- small navigation helpers over the tree ------------------------------------------------

export function childElements(el: XElement, ns?: string, local?: string): XElement[] {
  const out: XElement[] = [];
  for (const c of el.children) {
    if (c.kind === 'element' && (ns === undefined || c.ns === ns) && (local === undefined || c.local === local)) out.push(c);
  }
  return out;
}

export function child(el: XElement | undefined, ns: string, local: string): XElement | undefined {
  if (!el) return undefined;
  for (const c of el.children) if (c.kind === 'element' && c.ns === ns && c.local === local) return c;
  return undefined;
}

/** Follows a path of local names in one namespace: `path(root, NS, 'A', 'B')`. */
export function path(el: XElement | undefined, ns: string, ...locals: string[]): XElement | undefined {
  let e = el;
  for (const l of locals) e = child(e, ns, l);
  return e;
}

export function textOf(el: XElement | undefined): string {
  if (!el) return '';
  let t = '';
  for (const c of el.children) {
    if (c.kind === 'text') t += c.text;
    else if (c.kind === 'element') t += textOf(c);
  }
  return t;
}

export function attr(el: XElement | undefined, local: string, ns = ''): string | undefined {
  if (!el) return undefined;
  for (const a of el.attrs) if (a.local === local && a.ns === ns) return a.value;
  return undefined;
}

/** The namespace bound to `prefix` at `el` (for InclusiveNamespaces PrefixList). */
export function lookupNamespace(el: XElement, prefix: string): string | undefined {
  if (prefix === 'xml') return XML_NS;
  for (let e: XElement | null = el; e; e = e.parent) {
    for (const [p, u] of e.nsDecls) if (p === prefix) return u;
  }
  return prefix === '' ? '' : undefined;
}
