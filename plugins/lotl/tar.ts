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

export class TarError extends Error {}

export function readTar(input: Buffer, limits: { maxFiles: number; maxBytes: number }): TarEntry[] {
  let buf = input;
  if (buf[0] === 0x1f && buf[1] === 0x8b) {
    try {
      buf = zlib.gunzipSync(buf, { maxOutputLength: limits.maxBytes });
    } catch (e) {
      throw new TarError(`not a readable gzip stream: ${(e as Error).message}`);
    }
  }
  const out: TarEntry[] = [];
  let off = 0;
  let longName: string | undefined;
  let paxPath: string | undefined;
  while (off + 512 <= buf.length) {
    const h = buf.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break; // end-of-archive marker
    const sum = h.reduce((s, b, i) => s + (i >= 148 && i < 156 ? 0x20 : b), 0);
    const stored = parseInt(str(h, 148, 8).trim() || '0', 8);
    if (sum !== stored) throw new TarError(`bad tar header checksum at offset ${off}`);
    const size = parseInt(str(h, 124, 12).trim() || '0', 8);
    if (!Number.isSafeInteger(size) || size < 0) throw new TarError('bad tar entry size');
    const type = String.fromCharCode(h[156]!);
    const prefix = str(h, 345, 155);
    const base = str(h, 0, 100);
    const dataStart = off + 512;
    if (dataStart + size > buf.length) throw new TarError('truncated tar archive');
    const data = buf.subarray(dataStart, dataStart + size);
    off = dataStart + Math.ceil(size / 512) * 512;
    if (type === 'L') {
      longName = data.toString('utf8').replace(/\0.*$/s, '');
      continue;
    }
    if (type === 'x') {
      paxPath = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(data.toString('utf8'))?.[1];
      continue;
    }
    if (type === 'g') continue;
    const name = paxPath ?? longName ?? (prefix ? `${prefix}/${base}` : base);
    longName = paxPath = undefined;
    if (type !== '0' && type !== '\0') continue; // directories, links, devices: ignored
    if (out.length >= limits.maxFiles) throw new TarError(`more than ${limits.maxFiles} files in the archive`);
    out.push({ name, bytes: Buffer.from(data) });
  }
  return out;
}

function str(b: Buffer, at: number, len: number): string {
  const s = b.subarray(at, at + len);
  const z = s.indexOf(0);
  return s.subarray(0, z < 0 ? len : z).toString('utf8');
}
