/**
 * A small CBOR encoder (RFC 8949) for what the issuer writes: unsigned and negative integers,
 * text and byte strings, arrays, maps (Map or plain object, definite length, keys in insertion
 * order), booleans, null, floats (64-bit) and tags. It writes straight into a growing buffer:
 * an mdoc is some twenty small structures, and a general encoder's per-call set-up cost more
 * than the signature. Byte strings whose content is itself CBOR (ISO 18013-5's tag 24 items,
 * a COSE payload) are written in place and their length head filled in afterwards, so a whole
 * IssuerSigned is one pass over one buffer. Tests decode what it writes with cbor-x, @owf/mdoc
 * and @animo-id/mdoc.
 */
export class CborTag {
  constructor(
    readonly tag: number,
    readonly value: unknown,
  ) {}
}

/** Bytes that are CBOR already: written as they are. */
export class CborRaw {
  constructor(readonly bytes: Uint8Array) {}
}

/** Room kept in front of a byte string written in place: the longest head this writer makes for it (0x5a + 4 bytes). */
const BSTR_ROOM = 5;

export class CborWriter {
  buf = Buffer.allocUnsafe(2048);
  at = 0;

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }

  head(major: number, n: number): void {
    this.room(9);
    const m = major << 5;
    if (n < 24) this.buf[this.at++] = m | n;
    else if (n < 0x100) {
      this.buf[this.at++] = m | 24;
      this.buf[this.at++] = n;
    } else if (n < 0x10000) {
      this.buf[this.at++] = m | 25;
      this.buf.writeUInt16BE(n, this.at);
      this.at += 2;
    } else if (n < 0x100000000) {
      this.buf[this.at++] = m | 26;
      this.buf.writeUInt32BE(n, this.at);
      this.at += 4;
    } else {
      this.buf[this.at++] = m | 27;
      this.buf.writeBigUInt64BE(BigInt(n), this.at);
      this.at += 8;
    }
  }

  /** Bytes that are already CBOR. */
  raw(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }

  bstr(b: Uint8Array): void {
    this.head(2, b.length);
    this.raw(b);
  }

  /** `n` raw bytes of `src` from `from` on, copied byte by byte (for a few bytes, cheaper than a subarray). */
  copyFrom(src: Uint8Array, from: number, n: number): void {
    this.room(n);
    const b = this.buf;
    let at = this.at;
    for (let k = from; k < from + n; k++) b[at++] = src[k]!;
    this.at = at;
  }

  /** A byte string given as text in `encoding` (base64url, latin1...), decoded straight into the buffer. */
  encodedBstr(s: string, encoding: 'base64url' | 'latin1'): void {
    if (encoding === 'latin1' && s.length < 64) {
      // A digest as binary text: one byte per character, copied directly.
      const len = s.length;
      this.head(2, len);
      this.room(len);
      const b = this.buf;
      const at = this.at;
      for (let k = 0; k < len; k++) b[at + k] = s.charCodeAt(k);
      this.at = at + len;
      return;
    }
    const n = Buffer.byteLength(s, encoding);
    this.head(2, n);
    this.room(n);
    this.at += this.buf.write(s, this.at, n, encoding);
  }

  text(s: string): void {
    // Short ASCII text (names, country codes, dates: nearly all of it) byte by byte: Buffer#write
    // and byteLength cost more than the copy for a few characters.
    const len = s.length;
    if (len < 64) {
      let k = 0;
      while (k < len && s.charCodeAt(k) < 0x80) k++;
      if (k === len) {
        this.head(3, len);
        this.room(len);
        const b = this.buf;
        const at = this.at;
        for (k = 0; k < len; k++) b[at + k] = s.charCodeAt(k);
        this.at = at + len;
        return;
      }
    }
    const n = Buffer.byteLength(s);
    this.head(3, n);
    this.room(n);
    this.at += this.buf.write(s, this.at, 'utf8');
  }

  value(v: unknown): void {
    if (typeof v === 'string') this.text(v);
    else if (typeof v === 'number') {
      if (Number.isSafeInteger(v)) {
        if (v >= 0) this.head(0, v);
        else this.head(1, -1 - v);
      } else {
        this.room(9);
        this.buf[this.at++] = 0xfb;
        this.buf.writeDoubleBE(v, this.at);
        this.at += 8;
      }
    } else if (typeof v === 'boolean') {
      this.room(1);
      this.buf[this.at++] = v ? 0xf5 : 0xf4;
    } else if (v === null || v === undefined) {
      this.room(1);
      this.buf[this.at++] = 0xf6;
    } else if (v instanceof CborRaw) {
      this.raw(v.bytes);
    } else if (v instanceof Uint8Array) {
      this.bstr(v);
    } else if (Array.isArray(v)) {
      this.head(4, v.length);
      for (const x of v) this.value(x);
    } else if (v instanceof CborTag) {
      this.head(6, v.tag);
      this.value(v.value);
    } else if (v instanceof Map) {
      this.head(5, v.size);
      for (const [k, x] of v) {
        this.value(k);
        this.value(x);
      }
    } else if (typeof v === 'object') {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined);
      this.head(5, entries.length);
      for (const [k, x] of entries) {
        this.text(k);
        this.value(x);
      }
    } else throw new TypeError(`CBOR: cannot encode a ${typeof v}`);
  }

  /** Starts a byte string whose content is written next (with any of the methods); end it with closeBstr(mark). */
  openBstr(): number {
    this.room(BSTR_ROOM);
    const mark = this.at;
    this.at += BSTR_ROOM;
    return mark;
  }

  /**
   * Ends the byte string opened at `mark`: its head, as short as the length allows (RFC 8949
   * §4.2.1 preferred serialization), goes in front of the content, which moves up to meet it.
   * Offsets taken inside the content before this call are stale afterwards.
   */
  closeBstr(mark: number): void {
    const start = mark + BSTR_ROOM;
    const n = this.at - start;
    const h = n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
    const b = this.buf;
    if (h === 1) b[mark] = 0x40 | n;
    else if (h === 2) {
      b[mark] = 0x58;
      b[mark + 1] = n;
    } else if (h === 3) {
      b[mark] = 0x59;
      b.writeUInt16BE(n, mark + 1);
    } else {
      b[mark] = 0x5a;
      b.writeUInt32BE(n, mark + 1);
    }
    if (h < BSTR_ROOM) {
      b.copyWithin(mark + h, start, this.at);
      this.at -= BSTR_ROOM - h;
    }
  }

  /** Starts #6.24(bstr .cbor X) (RFC 8949 §3.4.5.1): X is written next; end it with closeBstr(mark). */
  openEmbedded(): number {
    this.room(2);
    this.buf[this.at++] = 0xd8;
    this.buf[this.at++] = 0x18;
    return this.openBstr();
  }

  /** A copy of what was written from `from` on. */
  copy(from = 0): Buffer {
    return Buffer.from(this.buf.subarray(from, this.at));
  }
}

/** Writers not in use. An issuance holds its writer across the (asynchronous) signature, so each takes its own. */
const idle: CborWriter[] = [];

/** A writer of the caller's own (reset to empty); give it back with releaseWriter when done. */
export function takeWriter(): CborWriter {
  const w = idle.pop() ?? new CborWriter();
  w.at = 0;
  return w;
}

export function releaseWriter(w: CborWriter): void {
  // A writer grown for an unusually large credential is dropped rather than kept.
  if (idle.length < 8 && w.buf.length <= 65_536) idle.push(w);
}

/** The encoding of one value. */
export function cborEncode(v: unknown): Buffer {
  const w = idle.pop() ?? new CborWriter();
  w.at = 0;
  try {
    w.value(v);
    return w.copy();
  } finally {
    if (idle.length < 8 && w.buf.length <= 65_536) idle.push(w);
  }
}
