import zlib from 'node:zlib';

/**
 * Reads the regular files of a POSIX tar archive (ustar, pax and GNU long names), optionally
 * gzip-compressed: the shape an operator carries trusted lists in on a stick. Only names and
 * bytes are taken; paths are never used to write anything.
 */
export interface TarEntry {
  name: string;
  bytes: Buffer;
}

export interface TarLimits {
  /** Regular files in the archive, kept or not. */
  maxFiles: number;
  /** Bytes of the (inflated) archive read before the end-of-archive marker. */
  maxBytes: number;
  /** Bytes of one kept file: a larger one is refused at its header, before its data is read. */
  maxEntryBytes?: number;
  /** Which regular files to keep (default all); the others are skipped unread, but counted. */
  keep?: (name: string) => boolean;
}

export class TarError extends Error {}

/**
 * A gzip stream is inflated as a stream (zlib's asynchronous inflate runs on the libuv thread
 * pool, a chunk at a time) and read as its bytes arrive, so the event loop keeps turning, memory
 * holds only the files kept, and a bomb is refused once `maxBytes` have come out (or at the header
 * of a file past `maxEntryBytes`) instead of after inflating all of it in one synchronous call.
 */
export function readTar(input: Buffer, limits: TarLimits): Promise<TarEntry[]> {
  const reader = new TarReader(limits);
  if (!(input[0] === 0x1f && input[1] === 0x8b)) {
    try {
      reader.push(input);
      return Promise.resolve(reader.finish());
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }
  return new Promise<TarEntry[]>((resolve, reject) => {
    const gunzip = zlib.createGunzip({ chunkSize: 1024 * 1024 });
    let settled = false;
    const settle = (fn: () => TarEntry[]) => {
      if (settled) return;
      settled = true;
      gunzip.destroy();
      try {
        resolve(fn());
      } catch (e) {
        reject(e as Error);
      }
    };
    gunzip.on('data', (chunk: Buffer) => {
      if (settled) return;
      try {
        reader.push(chunk);
      } catch (e) {
        settle(() => {
          throw e;
        });
        return;
      }
      // The end-of-archive marker: whatever follows is padding (or a bomb's tail), not read.
      if (reader.ended) settle(() => reader.finish());
    });
    gunzip.on('end', () => settle(() => reader.finish()));
    gunzip.on('error', (e) =>
      settle(() => {
        throw new TarError(`not a readable gzip stream: ${e.message}`);
      }),
    );
    gunzip.end(input);
  });
}

/** The tar format read incrementally: fed chunks of any size, it keeps the files it is asked to. */
class TarReader {
  readonly #limits: TarLimits;
  readonly #out: TarEntry[] = [];
  #files = 0;
  #read = 0;
  /** Bytes of a header that is still arriving. */
  #head: Buffer[] = [];
  #headLen = 0;
  /** The file (or long-name / pax record) whose data is arriving. */
  #entry: { name: string; type: string; size: number; got: number; keep: boolean; chunks: Buffer[] } | undefined;
  /** Padding to the next 512-byte block. */
  #skip = 0;
  #longName: string | undefined;
  #paxPath: string | undefined;
  ended = false;

  constructor(limits: TarLimits) {
    this.#limits = limits;
  }

  push(chunk: Buffer): void {
    if (this.ended) return;
    this.#read += chunk.length;
    if (this.#read > this.#limits.maxBytes) throw new TarError(`the archive unpacks to more than ${mib(this.#limits.maxBytes)}`);
    let off = 0;
    while (off < chunk.length && !this.ended) {
      if (this.#skip) {
        const n = Math.min(this.#skip, chunk.length - off);
        this.#skip -= n;
        off += n;
      } else if (this.#entry) {
        const e = this.#entry;
        const n = Math.min(e.size - e.got, chunk.length - off);
        if (e.keep) e.chunks.push(chunk.subarray(off, off + n));
        e.got += n;
        off += n;
        if (e.got === e.size) this.#close(e);
      } else {
        const n = Math.min(512 - this.#headLen, chunk.length - off);
        this.#head.push(chunk.subarray(off, off + n));
        this.#headLen += n;
        off += n;
        if (this.#headLen === 512) {
          const h = Buffer.concat(this.#head);
          this.#head = [];
          this.#headLen = 0;
          this.#header(h, this.#read - chunk.length + off - 512);
        }
      }
    }
  }

  finish(): TarEntry[] {
    if (this.#entry) throw new TarError('truncated tar archive');
    return this.#out;
  }

  #header(h: Buffer, at: number): void {
    if (h.every((b) => b === 0)) {
      this.ended = true; // end-of-archive marker
      return;
    }
    const sum = h.reduce((s, b, i) => s + (i >= 148 && i < 156 ? 0x20 : b), 0);
    const stored = parseInt(str(h, 148, 8).trim() || '0', 8);
    if (sum !== stored) throw new TarError(`bad tar header checksum at offset ${at}`);
    const size = parseInt(str(h, 124, 12).trim() || '0', 8);
    if (!Number.isSafeInteger(size) || size < 0) throw new TarError('bad tar entry size');
    const type = String.fromCharCode(h[156]!);
    const prefix = str(h, 345, 155);
    const base = str(h, 0, 100);
    let name = '';
    let keep = type === 'L' || type === 'x';
    if (type === '0' || type === '\0') {
      name = this.#paxPath ?? this.#longName ?? (prefix ? `${prefix}/${base}` : base);
      if (++this.#files > this.#limits.maxFiles) throw new TarError(`more than ${this.#limits.maxFiles} files in the archive`);
      keep = this.#limits.keep?.(name) ?? true;
      const max = this.#limits.maxEntryBytes;
      if (keep && max !== undefined && size > max) throw new TarError(`${name.split('/').pop()} is larger than ${max} bytes`);
    }
    // A long name or pax record applies to the next header only, whatever that is.
    if (type !== 'L' && type !== 'x' && type !== 'g') this.#longName = this.#paxPath = undefined;
    // Long names and pax records are small: a claim of more is a malformed archive, not a file.
    if (keep && (type === 'L' || type === 'x') && size > 1024 * 1024) throw new TarError('oversized tar name record');
    const e = { name, type, size, got: 0, keep, chunks: [] as Buffer[] };
    if (size === 0) this.#close(e);
    else this.#entry = e;
  }

  #close(e: { name: string; type: string; size: number; keep: boolean; chunks: Buffer[] }): void {
    this.#entry = undefined;
    this.#skip = (512 - (e.size % 512)) % 512;
    if (!e.keep) return;
    const data = Buffer.concat(e.chunks);
    if (e.type === 'L') this.#longName = data.toString('utf8').replace(/\0.*$/s, '');
    else if (e.type === 'x') this.#paxPath = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(data.toString('utf8'))?.[1];
    else this.#out.push({ name: e.name, bytes: data });
  }
}

function mib(n: number): string {
  return n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : `${n} bytes`;
}

function str(b: Buffer, at: number, len: number): string {
  const s = b.subarray(at, at + len);
  const z = s.indexOf(0);
  return s.subarray(0, z < 0 ? len : z).toString('utf8');
}
