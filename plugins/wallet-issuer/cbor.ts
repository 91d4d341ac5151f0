/**
 * A small CBOR encoder (RFC 8949) for what the issuer writes: unsigned and negative integers,
 * text and byte strings, arrays, maps (Map or plain object, definite length, keys in insertion
 * order), booleans, null, floats (64-bit) and tags. It writes straight into a growing buffer:
 * an mdoc is some twenty small structures, and a general encoder's per-call set-up cost more
 * than the signature. Tests decode what it writes with cbor-x, @owf/mdoc and @animo-id/mdoc.
 */
export class CborTag {
  constructor(
    readonly tag: number,
    readonly value: unknown,
  ) {}
}

/** Bytes that are CBOR already: written as they are. */
export class CborRaw {
  constructor(readonly bytes: Buffer) {}
}

class Writer {
  buf = Buffer.allocUnsafe(1024);
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

  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }

  text(s: string): void {
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
      this.bytes(v.bytes);
    } else if (v instanceof Uint8Array) {
      this.head(2, v.length);
      this.bytes(v);
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
}

/** One scratch buffer, reused: each encoding copies out exactly its bytes. */
let scratch: Writer | undefined;

export function cborEncode(v: unknown): Buffer {
  const w = scratch ?? new Writer();
  scratch = undefined;
  w.at = 0;
  try {
    w.value(v);
    return Buffer.from(w.buf.subarray(0, w.at));
  } finally {
    scratch = w;
  }
}

/** #6.24(bstr .cbor v): embedded CBOR (ISO 18013-5 IssuerSignedItemBytes, MobileSecurityObjectBytes). */
export function embedded(v: unknown): CborTag {
  return new CborTag(24, cborEncode(v));
}

/**
 * The complete encoding of #6.24(bstr .cbor v) in one pass: `v` is written after room for the
 * tag and byte-string heads, which are then filled in (what a digest of IssuerSignedItemBytes
 * is computed over, and what the IssuerSigned carries).
 */
export function embeddedBytes(v: unknown): Buffer {
  const w = scratch ?? new Writer();
  scratch = undefined;
  try {
    w.at = 7;
    w.value(v);
    const n = w.at - 7;
    // d8 18 = tag 24; then the byte string head, as short as the length allows.
    const head = n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
    const start = 7 - head - 2;
    w.buf[start] = 0xd8;
    w.buf[start + 1] = 0x18;
    if (head === 1) w.buf[start + 2] = 0x40 | n;
    else if (head === 2) {
      w.buf[start + 2] = 0x58;
      w.buf[start + 3] = n;
    } else if (head === 3) {
      w.buf[start + 2] = 0x59;
      w.buf.writeUInt16BE(n, start + 3);
    } else {
      w.buf[start + 2] = 0x5a;
      w.buf.writeUInt32BE(n, start + 3);
    }
    return Buffer.from(w.buf.subarray(start, w.at));
  } finally {
    scratch = w;
  }
}
