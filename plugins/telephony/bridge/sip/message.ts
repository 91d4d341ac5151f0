/**
 * SIP message model, strict parser and serializer (RFC 3261 §7, §20, §25).
 *
 * Pure: no I/O. The parser rejects anything it cannot frame unambiguously (bad start line, header
 * without a colon, Content-Length that disagrees with the body) so that a confused peer is
 * answered 400 or ignored instead of being half-understood.
 */
import { randomBytes } from 'node:crypto';

export interface SipRequest {
  kind: 'request';
  method: string;
  uri: string;
  headers: SipHeaders;
  body: Buffer;
}
export interface SipResponse {
  kind: 'response';
  status: number;
  reason: string;
  headers: SipHeaders;
  body: Buffer;
}
export type SipMessage = SipRequest | SipResponse;

export class SipParseError extends Error {
  override name = 'SipParseError';
  constructor(
    message: string,
    /** For a request that was framed but carries a refused value: the 400 to answer it with. */
    readonly reply?: SipResponse,
  ) {
    super(message);
  }
}

/**
 * Control characters (C0 except HTAB, and DEL). RFC 3261 §25.1 allows none of them in a header
 * value outside a quoted-pair, and no quoted-pair may carry CR or LF; we refuse them everywhere
 * (a lone CR would end the line at a peer that splits on CR, an ESC or NUL reaches a phone's
 * display), on the way in and on the way out.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;
// eslint-disable-next-line no-control-regex -- as above
const CONTROL_ALL = /[\x00-\x08\x0a-\x1f\x7f]/g;

/** Whether a string carries a control character no SIP header may hold. */
function hasControl(s: string): boolean {
  return CONTROL.test(s);
}

/** RFC 3261 §7.3.3 compact header forms → canonical names. */
const COMPACT: Record<string, string> = {
  i: 'Call-ID',
  m: 'Contact',
  e: 'Content-Encoding',
  l: 'Content-Length',
  c: 'Content-Type',
  f: 'From',
  s: 'Subject',
  k: 'Supported',
  t: 'To',
  v: 'Via',
  o: 'Event',
  r: 'Refer-To',
  b: 'Referred-By',
  u: 'Allow-Events',
  a: 'Accept-Contact',
  x: 'Session-Expires',
};
const CANONICAL: Record<string, string> = {
  'call-id': 'Call-ID',
  cseq: 'CSeq',
  'www-authenticate': 'WWW-Authenticate',
  'proxy-authenticate': 'Proxy-Authenticate',
  'proxy-authorization': 'Proxy-Authorization',
  'max-forwards': 'Max-Forwards',
  'record-route': 'Record-Route',
  'content-length': 'Content-Length',
  'content-type': 'Content-Type',
  'user-agent': 'User-Agent',
  'refer-to': 'Refer-To',
  'referred-by': 'Referred-By',
};

/** Canonical form of a header name (compact form expanded, case normalised). */
export function canonicalName(name: string): string {
  const lower = name.toLowerCase();
  if (lower.length === 1 && COMPACT[lower]) return COMPACT[lower];
  if (CANONICAL[lower]) return CANONICAL[lower];
  return lower.replace(/(^|-)([a-z])/g, (_m, sep: string, ch: string) => sep + ch.toUpperCase());
}

/** Ordered, case-insensitive multimap of header values (one entry per comma-separated value where allowed). */
export class SipHeaders {
  private readonly list: [string, string][] = [];

  static from(entries: [string, string][]): SipHeaders {
    const h = new SipHeaders();
    for (const [n, v] of entries) h.append(n, v);
    return h;
  }
  append(name: string, value: string): this {
    this.list.push([canonicalName(name), value]);
    return this;
  }
  set(name: string, value: string): this {
    this.delete(name);
    return this.append(name, value);
  }
  prepend(name: string, value: string): this {
    this.list.unshift([canonicalName(name), value]);
    return this;
  }
  delete(name: string): this {
    const c = canonicalName(name);
    for (let i = this.list.length - 1; i >= 0; i--) if (this.list[i][0] === c) this.list.splice(i, 1);
    return this;
  }
  get(name: string): string | undefined {
    const c = canonicalName(name);
    return this.list.find((e) => e[0] === c)?.[1];
  }
  getAll(name: string): string[] {
    const c = canonicalName(name);
    return this.list.filter((e) => e[0] === c).map((e) => e[1]);
  }
  has(name: string): boolean {
    return this.get(name) !== undefined;
  }
  entries(): [string, string][] {
    return this.list.map(([n, v]) => [n, v]);
  }
  clone(): SipHeaders {
    return SipHeaders.from(this.entries());
  }
}

/** Headers whose values may be comma-joined lists (RFC 3261 §7.3.1); split them on parse. */
const LIST_HEADERS = new Set(['Via', 'Route', 'Record-Route', 'Contact', 'Allow', 'Supported', 'Require']);

/** Splits on commas outside quotes and angle brackets. */
export function splitList(value: string): string[] {
  const out: string[] = [];
  let depthAngle = 0;
  let inQuote = false;
  let cur = '';
  for (let i = 0; i < value.length; i++) {
    const ch = value[i];
    if (inQuote) {
      cur += ch;
      if (ch === '\\' && i + 1 < value.length) cur += value[++i];
      else if (ch === '"') inQuote = false;
      continue;
    }
    if (ch === '"') inQuote = true;
    else if (ch === '<') depthAngle++;
    else if (ch === '>') depthAngle = Math.max(0, depthAngle - 1);
    if (ch === ',' && depthAngle === 0) {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
      continue;
    }
    cur += ch;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

const TOKEN = /^[A-Za-z0-9\-.!%*_+`'~]+$/;
const REQUEST_LINE = /^([A-Za-z0-9\-.!%*_+`'~]+) (\S+) SIP\/2\.0$/;
const STATUS_LINE = /^SIP\/2\.0 ([1-6]\d\d) (.*)$/;

/**
 * Finds the end of the header section (CRLFCRLF; bare LFLF tolerated as RFC 3261 §7.5 asks
 * implementations to be liberal about line ends). Returns [headerEnd, bodyStart] or null.
 */
function findHeaderEnd(buf: Buffer, from = 0): [number, number] | null {
  const crlf = buf.indexOf('\r\n\r\n', from);
  const lf = buf.indexOf('\n\n', from);
  if (crlf >= 0 && (lf < 0 || crlf <= lf)) return [crlf, crlf + 4];
  if (lf >= 0) return [lf, lf + 2];
  return null;
}

interface Head {
  startLine: string;
  headers: SipHeaders;
  /** The first refused value (a control character); the headers hold it with those removed. */
  defect?: string;
}

function parseHead(head: string): Head {
  const rawLines = head.split(/\r?\n/);
  const startLine = rawLines.shift() ?? '';
  if (hasControl(startLine)) throw new SipParseError('control character in the start line');
  let defect: string | undefined;
  // RFC 3261 §7.3.1: a line starting with whitespace continues the previous header.
  const lines: string[] = [];
  for (let l of rawLines) {
    if (hasControl(l)) {
      // Looked for before any trimming (trim() would take a CR or VT at either end for blank).
      // Kept without them only so that a request can still be answered 400 (buildMessage).
      defect ??= `control character in a header line${lines.length ? ` after ${printable(lines[lines.length - 1].split(':')[0].slice(0, 40))}` : ''}`;
      l = l.replace(CONTROL_ALL, '');
    }
    if (/^[ \t]/.test(l) && lines.length > 0) lines[lines.length - 1] += ' ' + l.trim();
    else lines.push(l);
  }
  const headers = new SipHeaders();
  for (const line of lines) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new SipParseError(`malformed header line: ${printable(line.slice(0, 60))}`);
    const name = line.slice(0, colon).trim();
    if (!TOKEN.test(name)) throw new SipParseError(`bad header name: ${printable(name.slice(0, 60))}`);
    const value = line.slice(colon + 1).trim();
    const canon = canonicalName(name);
    if (LIST_HEADERS.has(canon)) for (const v of splitList(value)) headers.append(canon, v);
    else headers.append(canon, value);
  }
  return { startLine, headers, defect };
}

/** For error messages (which reach the log): control characters shown as `?`. */
function printable(s: string): string {
  return s.replace(CONTROL_ALL, '?');
}

function buildMessage({ startLine, headers, defect }: Head, body: Buffer): SipMessage {
  const req = REQUEST_LINE.exec(startLine);
  let msg: SipMessage;
  if (req) {
    msg = { kind: 'request', method: req[1].toUpperCase(), uri: req[2], headers, body };
  } else {
    const st = STATUS_LINE.exec(startLine);
    if (!st) throw new SipParseError(`bad start line: ${startLine.slice(0, 80)}`);
    msg = { kind: 'response', status: Number(st[1]), reason: st[2], headers, body };
  }
  // RFC 3261 §8.1.1: these are mandatory in every request and response we act on.
  for (const h of ['Via', 'From', 'To', 'Call-ID', 'CSeq']) {
    if (!headers.has(h)) throw new SipParseError(`missing ${h}`);
  }
  parseCSeq(headers.get('CSeq') as string);
  if (defect) {
    // RFC 3261 §8.2: a request the UAS cannot accept as it is gets 400 (the reply echoes the
    // cleaned headers, never the refused bytes); a response is dropped, and so is an ACK (§17.2.1:
    // nothing answers an ACK).
    throw new SipParseError(defect, msg.kind === 'request' && msg.method !== 'ACK' ? makeResponse(msg, 400, 'Bad Request', newTag()) : undefined);
  }
  return msg;
}

/** Parses one datagram (UDP). Content-Length, when present, must not exceed the body (§18.3). */
export function parseDatagram(buf: Buffer): SipMessage {
  const end = findHeaderEnd(buf);
  if (!end) throw new SipParseError('no end of headers');
  const head = parseHead(buf.subarray(0, end[0]).toString('utf8'));
  let body = buf.subarray(end[1]);
  const cl = head.headers.get('Content-Length');
  if (cl !== undefined) {
    if (!/^\d+$/.test(cl)) throw new SipParseError('bad Content-Length');
    const n = Number(cl);
    if (n > body.length) throw new SipParseError('Content-Length larger than datagram');
    body = body.subarray(0, n); // §18.3: extra bytes after the body are discarded
  }
  return buildMessage(head, Buffer.from(body));
}

/**
 * Stream framer for TCP (RFC 3261 §18.3: Content-Length is mandatory on streams).
 * Feed it chunks; it returns complete messages and keeps the rest. A message that is framed but
 * refused (a SipParseError with a reply) goes to `refused` and the stream goes on; anything that
 * breaks the framing throws.
 */
export class StreamFramer {
  private buf: Buffer = Buffer.alloc(0);
  static readonly MAX_BUFFER = 256 * 1024;

  /**
   * `keepalive`: told of the RFC 5626 §3.5.1 keepalives between messages, a double CRLF (the
   * client's ping, to be answered) or a single CRLF (the server's pong).
   */
  constructor(private readonly keepalive?: (kind: 'ping' | 'pong') => void) {}

  push(chunk: Buffer, refused?: (err: SipParseError) => void): SipMessage[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: SipMessage[] = [];
    for (;;) {
      // RFC 5626 §3.5.1 keepalive CRLFs between messages are skipped (and reported).
      let start = 0;
      while (start < this.buf.length && (this.buf[start] === 0x0d || this.buf[start] === 0x0a)) start++;
      if (start) {
        this.buf = this.buf.subarray(start);
        this.keepalive?.(start >= 4 ? 'ping' : 'pong');
      }
      const end = findHeaderEnd(this.buf);
      if (!end) break;
      const head = parseHead(this.buf.subarray(0, end[0]).toString('utf8'));
      const cl = head.headers.get('Content-Length');
      if (cl === undefined || !/^\d+$/.test(cl)) throw new SipParseError('missing or bad Content-Length on stream');
      const n = Number(cl);
      if (this.buf.length < end[1] + n) break;
      const body = Buffer.from(this.buf.subarray(end[1], end[1] + n));
      this.buf = this.buf.subarray(end[1] + n);
      try {
        out.push(buildMessage(head, body));
      } catch (err) {
        if (!(err instanceof SipParseError) || !err.reply || !refused) throw err;
        refused(err);
      }
    }
    if (this.buf.length > StreamFramer.MAX_BUFFER) throw new SipParseError('message too large');
    return out;
  }
}

/**
 * Serialises with CRLF line ends and a correct Content-Length (always written). Refuses (throws)
 * a start line, header name or value with a control character: nothing we send can carry a
 * header of someone else's making.
 */
export function serialize(msg: SipMessage): Buffer {
  const start = msg.kind === 'request' ? `${msg.method} ${msg.uri} SIP/2.0` : `SIP/2.0 ${msg.status} ${msg.reason}`;
  if (hasControl(start)) throw new SipParseError('refusing to send a control character in the start line');
  const lines = [start];
  for (const [n, v] of msg.headers.entries()) {
    if (n === 'Content-Length') continue;
    if (!TOKEN.test(n) || hasControl(v)) throw new SipParseError(`refusing to send a control character in ${printable(n)}`);
    lines.push(`${n}: ${v}`);
  }
  lines.push(`Content-Length: ${msg.body.length}`);
  return Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'utf8'), msg.body]);
}

// ---- header value helpers ----

export function parseCSeq(v: string): { seq: number; method: string } {
  const m = /^(\d{1,10})\s+([A-Za-z]+)$/.exec(v.trim());
  if (!m) throw new SipParseError(`bad CSeq: ${v.slice(0, 40)}`);
  const seq = Number(m[1]);
  if (seq > 2 ** 31 - 1) throw new SipParseError('CSeq out of range'); // §8.1.1.5
  return { seq, method: m[2].toUpperCase() };
}

/**
 * Generic parameter parsing for `;a=b;c` tails (or `a=b, c="d"` lists with `sep` ','). Quoted
 * values unquoted. Keys lowercased.
 */
export function parseParams(tail: string, sep = ';'): Record<string, string> {
  const params: Record<string, string> = {};
  for (const part of splitOutsideQuotes(tail, sep)) {
    const p = part.trim();
    if (!p) continue;
    const eq = p.indexOf('=');
    if (eq < 0) params[p.toLowerCase()] = '';
    else params[p.slice(0, eq).trim().toLowerCase()] = unquote(p.slice(eq + 1).trim());
  }
  return params;
}

function splitOutsideQuotes(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = '';
  let q = false;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (q && ch === '\\' && i + 1 < s.length) {
      // §25.1 quoted-pair: the next character is taken as it is (an escaped quote ends nothing).
      cur += ch + s[++i];
      continue;
    }
    if (ch === '"') q = !q;
    if (ch === sep && !q) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

export function unquote(s: string): string {
  if (s.length >= 2 && s.startsWith('"') && s.endsWith('"')) return s.slice(1, -1).replace(/\\(.)/g, '$1');
  return s;
}

/** A name-addr / addr-spec header (From, To, Contact, Route, Record-Route, Refer-To). */
export interface NameAddr {
  display: string;
  uri: string;
  params: Record<string, string>;
}

/**
 * RFC 3261 §25.1: `name-addr = [ display-name ] LAQUOT addr-spec RAQUOT`, `display-name =
 * *(token LWS) / quoted-string`; a value without `<` is an addr-spec whose `;` parameters belong
 * to the header (§20.10). A quoted display name may hold `<`, `>`, `,` and `;`: the addr-spec is
 * the `<...>` after the closing quote, never a `<` inside it.
 */
export function parseNameAddr(v: string): NameAddr {
  const s = v.trim();
  if (hasControl(s)) throw new SipParseError('control character in a name-addr');
  let display = '';
  let rest = s;
  if (s.startsWith('"')) {
    const close = endOfQuoted(s, 0);
    if (close < 0) throw new SipParseError('unterminated quoted display name');
    display = unquote(s.slice(0, close + 1));
    rest = s.slice(close + 1).trimStart();
    if (!rest.startsWith('<')) throw new SipParseError('a quoted display name must be followed by <addr-spec>');
  }
  const lt = rest.indexOf('<');
  if (lt >= 0) {
    const before = rest.slice(0, lt).trim();
    // An unquoted display name is tokens and spaces only (no quote, no second name-addr).
    if (before.includes('"')) throw new SipParseError('quote outside a quoted display name');
    if (before) display = before;
    const gt = rest.indexOf('>', lt);
    if (gt < 0) throw new SipParseError('unterminated <');
    const uri = rest.slice(lt + 1, gt);
    if (uri.includes('<')) throw new SipParseError('< inside an addr-spec');
    return { display, uri, params: parseParams(rest.slice(gt + 1).replace(/^\s*;/, '')) };
  }
  // §20.10: without angle brackets, parameters after the URI belong to the header.
  const semi = s.indexOf(';');
  if (semi < 0) return { display: '', uri: s, params: {} };
  return { display: '', uri: s.slice(0, semi), params: parseParams(s.slice(semi + 1)) };
}

/** Index of the `"` closing the quoted-string that opens at `start` (quoted-pairs skipped), or -1. */
function endOfQuoted(s: string, start: number): number {
  for (let i = start + 1; i < s.length; i++) {
    if (s[i] === '\\') i++;
    else if (s[i] === '"') return i;
  }
  return -1;
}

/** Control characters in a display name (free text from a caller or the API) are dropped, never sent. */
export function formatNameAddr(na: NameAddr): string {
  const name = na.display.replace(CONTROL_ALL, '');
  const disp = name ? `"${name.replace(/(["\\])/g, '\\$1')}" ` : '';
  const params = Object.entries(na.params)
    .map(([k, v]) => (v === '' ? `;${k}` : `;${k}=${v}`))
    .join('');
  return `${disp}<${na.uri}>${params}`;
}

export interface Via {
  transport: string;
  host: string;
  port: number | null;
  params: Record<string, string>;
}

export function parseVia(v: string): Via {
  const m = /^SIP\s*\/\s*2\.0\s*\/\s*([A-Za-z]+)\s+([^;\s]+)\s*(?:;(.*))?$/.exec(v.trim());
  if (!m) throw new SipParseError(`bad Via: ${v.slice(0, 60)}`);
  const hp = m[2];
  let host = hp;
  let port: number | null = null;
  const ipv6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(hp);
  if (ipv6) {
    host = ipv6[1];
    port = ipv6[2] ? Number(ipv6[2]) : null;
  } else {
    const i = hp.lastIndexOf(':');
    if (i > 0) {
      host = hp.slice(0, i);
      port = Number(hp.slice(i + 1));
    }
  }
  return { transport: m[1].toUpperCase(), host, port, params: parseParams(m[3] ?? '') };
}

export interface SipUri {
  scheme: string;
  user: string;
  host: string;
  port: number | null;
  params: Record<string, string>;
}

export function parseUri(uri: string): SipUri {
  const m = /^(sips?):(?:([^@]*)@)?([^;?]+)((?:;[^?]*)?)/i.exec(uri.trim());
  if (!m) throw new SipParseError(`bad SIP URI: ${uri.slice(0, 60)}`);
  const hp = m[3];
  let host = hp;
  let port: number | null = null;
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(hp);
  if (v6) {
    host = v6[1];
    port = v6[2] ? Number(v6[2]) : null;
  } else {
    const i = hp.lastIndexOf(':');
    if (i > 0) {
      host = hp.slice(0, i);
      port = Number(hp.slice(i + 1));
    }
  }
  return { scheme: m[1].toLowerCase(), user: m[2] ?? '', host, port, params: parseParams(m[4].replace(/^;/, '')) };
}

// ---- identifiers (RFC 3261 §8.1.1.4, §8.1.1.7, §19.3) ----

/** Via branch with the RFC 3261 magic cookie. */
export function newBranch(): string {
  return 'z9hG4bK' + randomBytes(10).toString('hex');
}
export function newTag(): string {
  return randomBytes(6).toString('hex');
}
export function newCallId(host: string): string {
  return `${randomBytes(12).toString('hex')}@${host}`;
}

export function branchOf(msg: SipMessage): string {
  const top = msg.headers.get('Via');
  return top ? (parseVia(top).params.branch ?? '') : '';
}
export function tagOf(headerValue: string | undefined): string {
  return headerValue ? (parseNameAddr(headerValue).params.tag ?? '') : '';
}

/** RFC 3261 §21 reason phrases for the statuses we generate. */
export const REASONS: Record<number, string> = {
  100: 'Trying',
  200: 'OK',
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  481: 'Call/Transaction Does Not Exist',
  486: 'Busy Here',
  487: 'Request Terminated',
  500: 'Server Internal Error',
  501: 'Not Implemented',
};

/** Builds a response to a request per RFC 3261 §8.2.6.2 (copies Via, From, To, Call-ID, CSeq). */
export function makeResponse(req: SipRequest, status: number, reason = REASONS[status] ?? 'Unknown', toTag?: string): SipResponse {
  const h = new SipHeaders();
  for (const v of req.headers.getAll('Via')) h.append('Via', v);
  h.append('From', req.headers.get('From') as string);
  let to = req.headers.get('To') as string;
  if (toTag && !tagOf(to)) to += `;tag=${toTag}`;
  h.append('To', to);
  h.append('Call-ID', req.headers.get('Call-ID') as string);
  h.append('CSeq', req.headers.get('CSeq') as string);
  return { kind: 'response', status, reason, headers: h, body: Buffer.alloc(0) };
}
