import crypto from 'node:crypto';
import fs from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { ArchiveError } from './archive-error.ts';
import { WRAP_AAD, type WrappedKey } from './key-wrap.ts';

export { ARCHIVE_EXT, ArchiveError } from './archive-error.ts';
export { wrapWith, type WrappedKey } from './key-wrap.ts';

/**
 * The backup archive (`.sovbak`), version 1: authenticated, streaming, chunked encryption.
 *
 *   file   := MAGIC (8) | u32 BE header length | header (JSON, UTF-8) | chunk*
 *   chunk  := u32 BE (bit 31: final, bits 0-30: plaintext length) | ciphertext | GCM tag (16)
 *
 * Each chunk is AES-256-GCM under the archive's stream key with the nonce
 * `prefix (7 random bytes) | u32 BE chunk counter | u8 final flag` and the SHA-256 of the file's
 * first bytes up to the end of the header as additional data: the STREAM construction (Hoang,
 * Reyhanitabar, Rogaway, Vizár, "Online Authenticated-Encryption and its Nonce-Reuse
 * Misuse-Resistance", 2015). So a changed byte, a reordered or dropped chunk, a changed header
 * (KDF parameters, schema versions) or a truncation (no chunk flagged final) all fail to open;
 * bytes after the final chunk are refused too. The reader never hands out plaintext of a chunk
 * before its tag checked.
 *
 * Keys: a 32-byte key K from the operator's passphrase (scrypt, parameters and salt in the
 * header) or from a generated recovery key (256 random bits, HKDF); per archive a random salt
 * and HKDF(K, salt) give the stream key and the wrap key. The appliance's master key travels only
 * wrapped (AES-256-GCM under the wrap key), never in clear: a wrong passphrase fails there, before
 * any chunk is read.
 */

export const MAGIC = Buffer.from('SOVBAK\x00\x01', 'latin1');
export const ARCHIVE_VERSION = 1;
/** Plaintext bytes per chunk: large enough that the per-chunk cost vanishes, small enough to hold one. */
export const CHUNK_BYTES = 1024 * 1024;
const TAG_BYTES = 16;
const FINAL = 0x8000_0000;
const MAX_HEADER_BYTES = 64 * 1024;

/** scrypt for a passphrase (RFC 7914; OWASP's N=2^17, r=8, p=1), HKDF for a 256-bit recovery key. */
const kdfSchema = z.discriminatedUnion('alg', [
  z.object({
    alg: z.literal('scrypt'),
    // Bounded on read: an archive cannot make the restore spend gigabytes or hours.
    N: z
      .number()
      .int()
      .min(2 ** 14)
      .max(2 ** 20)
      .refine((n) => (n & (n - 1)) === 0, 'N must be a power of two'),
    r: z.number().int().min(1).max(32),
    p: z.number().int().min(1).max(16),
    salt: z.string().min(16),
  }),
  z.object({ alg: z.literal('hkdf-sha256'), salt: z.string().min(16) }),
]);
export type KdfParams = z.infer<typeof kdfSchema>;

const wrappedSchema = z.object({ iv: z.string(), tag: z.string(), ct: z.string() });

export const headerSchema = z.object({
  format: z.literal('sovcomms-backup'),
  version: z.number().int(),
  created: z.string(),
  build: z.string(),
  kdf: kdfSchema,
  /** Per archive: HKDF salt of the stream and wrap keys. */
  salt: z.string(),
  noncePrefix: z.string(),
  chunkBytes: z.number().int().positive(),
  masterKey: wrappedSchema,
  /** Schema version of the core and of every plugin when the archive was made. */
  schema: z.record(z.string(), z.number().int().min(0)),
});
export type ArchiveHeader = z.infer<typeof headerSchema>;

export const SCRYPT_DEFAULT = { N: 2 ** 17, r: 8, p: 1 } as const;

/** The operator's secret, made usable: K and how it was derived (recorded in each header). */
export interface BackupKey {
  kdf: KdfParams;
  key: Buffer;
}

function scrypt(pass: string, salt: Buffer, p: { N: number; r: number; p: number }): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // On the thread pool: a scheduled backup must not stall the server's requests for its half second.
    crypto.scrypt(pass.normalize('NFC'), salt, 32, { N: p.N, r: p.r, p: p.p, maxmem: 256 * p.N * p.r + 1024 * 1024 }, (e, k) => (e ? reject(e) : resolve(k)));
  });
}

export async function keyFromPassphrase(passphrase: string, kdf?: Extract<KdfParams, { alg: 'scrypt' }>): Promise<BackupKey> {
  if (passphrase.length < 8) throw new ArchiveError('wrong_key', 'the passphrase must have at least 8 characters');
  const params = kdf ?? { alg: 'scrypt' as const, ...SCRYPT_DEFAULT, salt: crypto.randomBytes(16).toString('base64url') };
  return { kdf: params, key: await scrypt(passphrase, Buffer.from(params.salt, 'base64url'), params) };
}

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** A new recovery key: 256 random bits, RFC 4648 base32 in groups of four (what the operator writes down). */
export function newRecoveryKey(): string {
  const bytes = crypto.randomBytes(32);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out.match(/.{1,4}/g)!.join('-');
}

function decodeRecoveryKey(text: string): Buffer {
  const clean = text.replace(/[\s-]/g, '').toUpperCase();
  if (clean.length !== 52 || /[^A-Z2-7]/.test(clean)) throw new ArchiveError('wrong_key', 'not a recovery key (52 letters and digits 2-7, in groups of four)');
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const c of clean) {
    value = ((value << 5) | B32.indexOf(c)) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out.slice(0, 32));
}

export function keyFromRecoveryKey(recoveryKey: string, kdf?: Extract<KdfParams, { alg: 'hkdf-sha256' }>): BackupKey {
  const params = kdf ?? { alg: 'hkdf-sha256' as const, salt: crypto.randomBytes(16).toString('base64url') };
  const key = Buffer.from(crypto.hkdfSync('sha256', decodeRecoveryKey(recoveryKey), Buffer.from(params.salt, 'base64url'), 'sovcomms-backup-recovery-key', 32));
  return { kdf: params, key };
}

/** K for an archive's header, from what the operator typed. */
export async function keyForHeader(h: ArchiveHeader, secret: { passphrase?: string; recoveryKey?: string }): Promise<BackupKey> {
  if (h.kdf.alg === 'scrypt') {
    if (secret.passphrase === undefined) throw new ArchiveError('wrong_key', 'this archive is protected by a passphrase (--passphrase-stdin)');
    return keyFromPassphrase(secret.passphrase, h.kdf);
  }
  if (secret.recoveryKey === undefined) throw new ArchiveError('wrong_key', 'this archive is protected by a recovery key (--recovery-key-stdin)');
  return keyFromRecoveryKey(secret.recoveryKey, h.kdf);
}

function subkeys(k: Buffer, salt: Buffer): { stream: Buffer; wrap: Buffer } {
  const derive = (info: string) => Buffer.from(crypto.hkdfSync('sha256', k, salt, info, 32));
  return { stream: derive('sovcomms-backup-v1-stream'), wrap: derive('sovcomms-backup-v1-wrap') };
}

function unwrap(wrapKey: Buffer, w: ArchiveHeader['masterKey']): Buffer {
  try {
    const d = crypto.createDecipheriv('aes-256-gcm', wrapKey, Buffer.from(w.iv, 'base64url'));
    d.setAAD(WRAP_AAD);
    d.setAuthTag(Buffer.from(w.tag, 'base64url'));
    return Buffer.concat([d.update(Buffer.from(w.ct, 'base64url')), d.final()]);
  } catch {
    throw new ArchiveError('wrong_key', 'wrong passphrase or recovery key (or the archive header was altered)');
  }
}

function nonce(prefix: Buffer, counter: number, final: boolean): Buffer {
  const n = Buffer.alloc(12);
  prefix.copy(n, 0, 0, 7);
  n.writeUInt32BE(counter, 7);
  n[11] = final ? 1 : 0;
  return n;
}

/**
 * Writes an archive to an open file: `write` plaintext in any pieces, `finish` once. The last
 * chunk is held back until `finish`, so it, and only it, carries the final flag.
 */
export class ArchiveWriter {
  readonly #fd: number;
  readonly #key: Buffer;
  readonly #prefix: Buffer;
  readonly #aad: Buffer;
  readonly #buf = Buffer.allocUnsafe(CHUNK_BYTES);
  #fill = 0;
  #counter = 0;
  bytes = 0;
  /** Told the bytes of each chunk written (create-worker: early writeback). */
  onWrite: ((bytes: number) => void) | undefined;

  /** The writer of an archive's body, after `head` (its `head` bytes already written to `fd`). */
  constructor(fd: number, body: ArchiveBodyKeys) {
    this.#fd = fd;
    this.#key = body.stream;
    this.#prefix = body.prefix;
    this.#aad = body.aad;
    this.bytes = body.headBytes;
  }

  /**
   * An archive's header: per-archive salt and nonce prefix, the master key wrapped under the wrap
   * key (by `wrapMasterKey`, in the thread that holds the master key), and what the body's writer
   * needs (the stream key, never the operator's K nor the master key).
   */
  static head(
    key: BackupKey,
    meta: { created: string; build: string; schema: Record<string, number> },
    wrapMasterKey: (wrapKey: Buffer) => WrappedKey,
  ): { head: Buffer; body: ArchiveBodyKeys } {
    const salt = crypto.randomBytes(16);
    const prefix = crypto.randomBytes(7);
    const k = subkeys(key.key, salt);
    const header: ArchiveHeader = {
      format: 'sovcomms-backup',
      version: ARCHIVE_VERSION,
      created: meta.created,
      build: meta.build,
      kdf: key.kdf,
      salt: salt.toString('base64url'),
      noncePrefix: prefix.toString('base64url'),
      chunkBytes: CHUNK_BYTES,
      masterKey: wrapMasterKey(k.wrap),
      schema: meta.schema,
    };
    const json = Buffer.from(JSON.stringify(header), 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32BE(json.length);
    const head = Buffer.concat([MAGIC, len, json]);
    return { head, body: { stream: k.stream, prefix, aad: crypto.createHash('sha256').update(head).digest(), headBytes: head.length } };
  }

  /** Writes the header (with the master key wrapped under `key`) and returns the writer of the body. */
  static open(
    fd: number,
    key: BackupKey,
    meta: { created: string; build: string; schema: Record<string, number> },
    wrapMasterKey: (wrapKey: Buffer) => WrappedKey,
  ): ArchiveWriter {
    const { head, body } = ArchiveWriter.head(key, meta, wrapMasterKey);
    writeAll(fd, head);
    return new ArchiveWriter(fd, body);
  }

  /**
   * Synchronous on purpose: it runs on the backup's own thread (create-worker.ts), where a
   * blocking write holds up nothing but the backup itself.
   */
  write(data: Buffer): void {
    let off = 0;
    while (off < data.length) {
      if (this.#fill === CHUNK_BYTES) this.flush(false);
      const n = Math.min(CHUNK_BYTES - this.#fill, data.length - off);
      data.copy(this.#buf, this.#fill, off, off + n);
      this.#fill += n;
      off += n;
    }
  }

  /**
   * Appends `length` bytes that `read` puts straight into the chunk buffer (a file's pread), with
   * no copy between: `read(buf, offset, max)` returns how many it wrote there, 0 at the end of its
   * source (then `fill` returns what it got so far).
   */
  fill(length: number, read: (buf: Buffer, offset: number, max: number) => number): number {
    let done = 0;
    while (done < length) {
      if (this.#fill === CHUNK_BYTES) this.flush(false);
      const n = read(this.#buf, this.#fill, Math.min(CHUNK_BYTES - this.#fill, length - done));
      if (n === 0) break;
      this.#fill += n;
      done += n;
    }
    return done;
  }

  private flush(final: boolean): void {
    const c = crypto.createCipheriv('aes-256-gcm', this.#key, nonce(this.#prefix, this.#counter, final));
    c.setAAD(this.#aad);
    const ct = c.update(this.#buf.subarray(0, this.#fill));
    c.final(); // GCM: no bytes held back
    const len = Buffer.alloc(4);
    len.writeUInt32BE((this.#fill | (final ? FINAL : 0)) >>> 0);
    writeAllv(this.#fd, [len, ct, c.getAuthTag()]);
    this.bytes += 4 + ct.length + TAG_BYTES;
    this.onWrite?.(4 + ct.length + TAG_BYTES);
    this.#counter++;
    if (this.#counter >= 0xffff_ffff) throw new Error('archive too large for one nonce prefix');
    this.#fill = 0;
  }

  finish(): void {
    this.flush(true);
  }
}

/** What the body's writer needs: the stream key, the nonce prefix, the header's digest, the header's length. */
export interface ArchiveBodyKeys {
  stream: Buffer;
  prefix: Buffer;
  aad: Buffer;
  headBytes: number;
}

export function writeAll(fd: number, b: Buffer): void {
  let off = 0;
  while (off < b.length) off += fs.writeSync(fd, b, off, b.length - off);
}

/** One writev for a chunk's length, ciphertext and tag (then plain writes for whatever a short write left). */
function writeAllv(fd: number, parts: Buffer[]): void {
  let n = fs.writevSync(fd, parts);
  for (const p of parts) {
    if (n >= p.length) n -= p.length;
    else {
      writeAll(fd, p.subarray(n));
      n = 0;
    }
  }
}

async function readExactly(fh: FileHandle, pos: number, n: number): Promise<Buffer | 'eof'> {
  const b = Buffer.allocUnsafe(n);
  let got = 0;
  while (got < n) {
    const { bytesRead } = await fh.read(b, got, n - got, pos + got);
    if (bytesRead === 0) return got === 0 ? 'eof' : b.subarray(0, got);
    got += bytesRead;
  }
  return b;
}

/** The header of an archive, unauthenticated until the first chunk opens (list and restore read it). */
export async function readHeader(fh: FileHandle): Promise<{ header: ArchiveHeader; aad: Buffer; bodyAt: number }> {
  const head = await readExactly(fh, 0, 12);
  if (head === 'eof' || head.length < 12 || !head.subarray(0, 8).equals(MAGIC)) {
    if (head !== 'eof' && head.subarray(0, 6).equals(MAGIC.subarray(0, 6)))
      throw new ArchiveError('unsupported', `archive format ${head[7] ?? '?'} is newer than this appliance reads (${ARCHIVE_VERSION})`);
    throw new ArchiveError('not_an_archive', 'not a sovcomms backup archive');
  }
  const len = head.readUInt32BE(8);
  if (len > MAX_HEADER_BYTES) throw new ArchiveError('damaged', 'archive header too large: damaged');
  const json = await readExactly(fh, 12, len);
  if (json === 'eof' || json.length < len) throw new ArchiveError('truncated', 'archive truncated inside its header');
  let parsed: unknown;
  try {
    parsed = JSON.parse(json.toString('utf8'));
  } catch {
    throw new ArchiveError('damaged', 'archive header is not valid JSON: damaged');
  }
  const r = headerSchema.safeParse(parsed);
  if (!r.success) throw new ArchiveError('damaged', 'archive header is malformed: damaged or altered');
  if (r.data.version !== ARCHIVE_VERSION)
    throw new ArchiveError('unsupported', `archive version ${r.data.version} is not one this appliance reads (${ARCHIVE_VERSION})`);
  if (r.data.chunkBytes > 16 * CHUNK_BYTES) throw new ArchiveError('damaged', 'archive chunk size out of bounds: damaged');
  const aad = crypto
    .createHash('sha256')
    .update(Buffer.concat([head, json]))
    .digest();
  return { header: r.data, aad, bodyAt: 12 + len };
}

/** Opens the wrapped master key: the passphrase check, before any chunk is read. */
export function openMasterKey(h: ArchiveHeader, key: BackupKey): Buffer {
  return unwrap(subkeys(key.key, Buffer.from(h.salt, 'base64url')).wrap, h.masterKey);
}

/**
 * The archive's plaintext, one authenticated chunk at a time, in order. Throws ArchiveError when
 * a chunk does not open (damaged, altered, reordered), when the file ends before a final chunk
 * (truncated), or when bytes follow it.
 */
export async function* readChunks(fh: FileHandle, h: ArchiveHeader, aad: Buffer, bodyAt: number, key: BackupKey): AsyncGenerator<Buffer> {
  const stream = subkeys(key.key, Buffer.from(h.salt, 'base64url')).stream;
  const prefix = Buffer.from(h.noncePrefix, 'base64url');
  let pos = bodyAt;
  for (let counter = 0; ; counter++) {
    const lenBuf = await readExactly(fh, pos, 4);
    if (lenBuf === 'eof' || lenBuf.length < 4) throw new ArchiveError('truncated', `archive truncated: it ends after chunk ${counter} without its final chunk`);
    const word = lenBuf.readUInt32BE(0);
    const final = (word & FINAL) !== 0;
    const len = word & ~FINAL;
    if (len > h.chunkBytes) throw new ArchiveError('damaged', `archive damaged or altered at chunk ${counter} (length out of bounds)`);
    const body = await readExactly(fh, pos + 4, len + TAG_BYTES);
    if (body === 'eof' || body.length < len + TAG_BYTES) throw new ArchiveError('truncated', `archive truncated inside chunk ${counter}`);
    let plain: Buffer;
    try {
      const d = crypto.createDecipheriv('aes-256-gcm', stream, nonce(prefix, counter, final));
      d.setAAD(aad);
      d.setAuthTag(body.subarray(len));
      plain = Buffer.concat([d.update(body.subarray(0, len)), d.final()]);
    } catch {
      throw new ArchiveError('damaged', `archive damaged or altered at chunk ${counter} (authentication failed)`);
    }
    pos += 4 + len + TAG_BYTES;
    yield plain;
    if (final) {
      const more = await readExactly(fh, pos, 1);
      if (more !== 'eof') throw new ArchiveError('damaged', 'archive has bytes after its final chunk: altered');
      return;
    }
  }
}
