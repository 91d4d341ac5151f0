import fs from 'node:fs';
import path from 'node:path';
import { ArchiveError } from './archive.ts';

/**
 * What an archive's plaintext holds: a sequence of entries, then an end mark.
 *
 *   entry := u8 kind (1 = file) | u16 BE path length | path (UTF-8, '/'-separated, relative) | u64 BE size | bytes
 *   end   := u8 0
 *
 * The first entry is the database (`appliance.db`, a consistent snapshot, create-worker.ts: the
 * store's pages 1..page_count as one read transaction sees them, free pages included, as
 * `sqlite3 .backup` copies them; or, from archives made before 2026-12-05 and from the fallback,
 * a `VACUUM INTO` copy without free pages. Both are the same entry kind, a whole SQLite database
 * file, and restore alike: the archive format stayed at version 1);
 * the rest are the data dir's files (config.json, tenants/<id>/..., issued certificates) as
 * found. The master key is not an entry: the header carries it wrapped.
 */
export const KIND_FILE = 1;
export const KIND_END = 0;
export const DB_ENTRY = 'appliance.db';

/** Top-level names of a data dir that are never archived as files. */
const SKIP_TOP = new Set([
  'appliance.db', // archived from its snapshot, never copied while it changes
  'appliance.db-wal',
  'appliance.db-shm',
  'master.key', // wrapped in the header
  'tmp', // spooled bodies, backup scratch
  'backups', // the default target: archives inside archives would double each time
  'restore', // a console restore waiting for the next start
]);

export function entryHead(rel: string, size: number): Buffer {
  const p = Buffer.from(rel, 'utf8');
  const b = Buffer.alloc(1 + 2 + p.length + 8);
  b[0] = KIND_FILE;
  b.writeUInt16BE(p.length, 1);
  p.copy(b, 3);
  b.writeBigUInt64BE(BigInt(size), 3 + p.length);
  return b;
}

/**
 * The data dir's regular files to archive, relative with '/' separators, sorted: everything but
 * the store, the key, scratch and the archive folder (and `exclude`, an archive folder inside the
 * data dir). Half-written uploads (`*.part`, `chat/tmp`) are left out: no row names them.
 */
export function filesToArchive(dataDir: string, exclude: string[] = []): string[] {
  const out: string[] = [];
  const skipAbs = new Set(exclude.map((e) => path.resolve(e)));
  const walk = (dir: string, rel: string) => {
    let names: fs.Dirent[];
    try {
      names = fs.readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    for (const d of names) {
      const abs = path.join(dir, d.name);
      const r = rel ? `${rel}/${d.name}` : d.name;
      if (!rel && SKIP_TOP.has(d.name)) continue;
      if (!rel && /^\.|\.pre-restore-/.test(d.name)) continue;
      if (skipAbs.has(abs)) continue;
      if (d.isDirectory()) {
        if (d.name === 'tmp' && rel.endsWith('/chat')) continue;
        walk(abs, r);
      } else if (d.isFile() && !d.name.endsWith('.part')) out.push(r);
    }
  };
  walk(dataDir, '');
  return out.sort();
}

/** A relative entry path from an archive, checked before it names anything on disk. */
export function safeRelative(rel: string): string {
  const parts = rel.split('/');
  if (!rel || rel.length > 1024 || rel.startsWith('/') || rel.includes('\\') || rel.includes('\0') || parts.some((p) => p === '' || p === '.' || p === '..'))
    throw new ArchiveError('damaged', `archive entry with an unsafe path: ${JSON.stringify(rel.slice(0, 100))}`);
  if (SKIP_TOP.has(parts[0]!) && rel !== DB_ENTRY) throw new ArchiveError('damaged', `archive entry at a reserved path: ${rel}`);
  return rel;
}

/**
 * Parses the entry stream fed to it chunk by chunk and writes each file under `root` (0600,
 * folders 0700). Synchronous writes: this runs on a staging folder, in the CLI or a job.
 */
export class EntryReader {
  #pending: Buffer = Buffer.alloc(0);
  #file: { fd: number; left: number; rel: string } | undefined;
  #ended = false;
  readonly files: string[] = [];
  bytes = 0;

  constructor(private readonly root: string) {}

  get ended(): boolean {
    return this.#ended;
  }

  push(chunk: Buffer): void {
    let buf = this.#pending.length ? Buffer.concat([this.#pending, chunk]) : chunk;
    this.#pending = Buffer.alloc(0);
    while (buf.length) {
      if (this.#ended) throw new ArchiveError('damaged', 'archive has data after its end mark: altered');
      if (this.#file) {
        const n = Math.min(this.#file.left, buf.length);
        let off = 0;
        while (off < n) off += fs.writeSync(this.#file.fd, buf, off, n - off);
        this.#file.left -= n;
        this.bytes += n;
        buf = buf.subarray(n);
        if (this.#file.left === 0) this.closeFile();
        continue;
      }
      const kind = buf[0]!;
      if (kind === KIND_END) {
        this.#ended = true;
        buf = buf.subarray(1);
        continue;
      }
      if (kind !== KIND_FILE) throw new ArchiveError('damaged', `archive entry of unknown kind ${kind}: damaged`);
      if (buf.length < 3) break;
      const plen = buf.readUInt16BE(1);
      if (buf.length < 3 + plen + 8) break;
      const rel = safeRelative(buf.subarray(3, 3 + plen).toString('utf8'));
      const size = buf.readBigUInt64BE(3 + plen);
      if (size > BigInt(Number.MAX_SAFE_INTEGER)) throw new ArchiveError('damaged', 'archive entry size out of bounds: damaged');
      buf = buf.subarray(3 + plen + 8);
      const abs = path.join(this.root, ...rel.split('/'));
      fs.mkdirSync(path.dirname(abs), { recursive: true, mode: 0o700 });
      // wx: an archive naming one path twice is altered, not a newer copy.
      let fd: number;
      try {
        fd = fs.openSync(abs, 'wx', 0o600);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new ArchiveError('damaged', `archive names ${rel} twice: altered`);
        throw e;
      }
      this.files.push(rel);
      this.#file = { fd, left: Number(size), rel };
      if (size === 0n) this.closeFile();
    }
    if (buf.length) this.#pending = Buffer.from(buf);
  }

  private closeFile(): void {
    fs.closeSync(this.#file!.fd);
    this.#file = undefined;
  }

  /** After the last chunk: the end mark must have come, and nothing be half read. */
  finish(): void {
    if (this.#file) {
      this.closeFile();
      throw new ArchiveError('truncated', 'archive ends inside a file: truncated');
    }
    if (!this.#ended || this.#pending.length) throw new ArchiveError('truncated', 'archive ends without its end mark: truncated');
  }

  /** Closes a file left open by a failure (the staging folder is then deleted). */
  abort(): void {
    if (this.#file) this.closeFile();
  }
}
