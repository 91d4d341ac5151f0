import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import busboy from 'busboy';
import { AppError, type Clock, InputError, type Logger, type Paths, type Tenant } from '../../server/sdk.ts';
import type { FilePlacer, ReceivedFile } from './service.ts';
import type { ChatRepo } from './repo.ts';

/** Bytes file-type reads to sniff a type: its own minimum sample size. Never more: a zip is not opened beyond its first entry header. */
const SNIFF_BYTES = 4100;
/** Multipart framing allowed on top of the file itself when Content-Length is checked up front. */
const MULTIPART_SLACK = 64 * 1024;
/** Bytes of a refused upload read and thrown away after the answer, before the socket is cut. */
const DISCARD_CAP = 1024 * 1024;

/**
 * Types served as application/octet-stream whatever file-type said: anything a browser could
 * render as a document or run. (file-type does not detect HTML or SVG at all, being text; this
 * list holds the line should a future version start to.)
 */
const ACTIVE = /html|svg|xml|javascript|ecmascript|xhtml|pdf/;

export function servedType(type: string): string {
  return ACTIVE.test(type) ? 'application/octet-stream' : type;
}

/**
 * A display name from the client's filename: its last path component (either separator), no
 * control or bidi-override characters, no leading dots, at most 200 characters. Only ever shown
 * and put in Content-Disposition; names on disk are SHA-256 hashes, so nothing here reaches a path.
 */
export function safeName(raw: string | undefined): string {
  const base = (raw ?? '').split(/[/\\]/).pop() ?? '';
  const clean = base
    .normalize('NFC')
    .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, '')
    .replace(/^[\s.]+/, '')
    .trim()
    .slice(0, 200);
  return clean || 'file';
}

/** RFC 6266 §4.3: an ASCII fallback `filename` and the exact name in `filename*` (RFC 8187). */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\%]/g, '_');
  const star = encodeURIComponent(name).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
  return `attachment; filename="${ascii}"; filename*=UTF-8''${star}`;
}

/** RFC 9110 §14.2: one byte range, or null to answer the whole file (several ranges, bad syntax), or 'unsatisfiable'. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | null | 'unsatisfiable' {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return 'unsatisfiable';
  if (end < start) return null;
  return { start, end };
}

/**
 * Chat uploads on disk: data/tenants/<tenant>/chat/files/<sha[0:2]>/<sha>, written through
 * chat/tmp/<random>.part and renamed into place (atomic on one file system) only after the
 * database row committed (ChatService.shareFile). A process killed mid-upload leaves a .part no
 * row names; start-up recovery (recover) deletes those and finishes renames a crash interrupted.
 */
export class FileStore implements FilePlacer {
  constructor(
    private readonly paths: Paths,
    private readonly repo: ChatRepo,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  private tmpDir(t: Tenant): string {
    return this.paths.tenantFile(t, 'chat', 'tmp');
  }

  finalPath(t: Tenant, sha: string): string {
    return this.paths.tenantFile(t, 'chat', 'files', sha.slice(0, 2), sha);
  }

  /**
   * Streams one multipart file part to a temporary file, hashing as it goes; 413 beyond `limit`
   * (the partial file is deleted), 400 without exactly one file. The type is sniffed from the
   * first bytes only; the client's declared type is ignored.
   */
  async receive(req: IncomingMessage, t: Tenant, limit: number): Promise<ReceivedFile> {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (Number.isFinite(declared) && declared > limit + MULTIPART_SLACK) throw tooLarge(limit);
    fs.mkdirSync(this.tmpDir(t), { recursive: true, mode: 0o700 });
    const tmpName = crypto.randomBytes(12).toString('hex') + '.part';
    const tmpPath = path.join(this.tmpDir(t), tmpName);
    let bb: busboy.Busboy;
    try {
      bb = busboy({
        headers: req.headers,
        // busboy signals 'limit' on reaching fileSize: one byte more, so exactly `limit` bytes pass.
        limits: { files: 1, fileSize: limit + 1, fields: 10, fieldSize: 8192, parts: 12, headerPairs: 50 },
        defParamCharset: 'utf8',
      });
    } catch (e) {
      throw new InputError(`malformed multipart request: ${(e as Error).message}`);
    }
    let done: Promise<Omit<ReceivedFile, 'tmpName'>> | undefined;
    let out: fs.WriteStream | undefined;
    let abort: (e: AppError) => void = () => undefined;
    const parsed = new Promise<void>((resolve, reject) => {
      abort = reject;
      bb.once('close', () => resolve());
      bb.once('error', (e: Error) => reject(new InputError(`malformed multipart request: ${e.message}`)));
      req.once('close', () => {
        if (!req.complete) reject(new InputError('upload incomplete: the client closed the connection'));
      });
    });
    // Stops parsing at the first refusal; the rest of the body is drained (bounded) so the client
    // reads the answer before the connection closes (as readBounded does for the router).
    const fail = (e: AppError) => {
      req.unpipe(bb);
      let drained = 0;
      req.on('data', (c: Buffer) => {
        drained += c.length;
        if (drained > DISCARD_CAP) req.socket.destroy();
      });
      req.resume();
      abort(e);
    };
    bb.on('file', (_field, stream, info) => {
      if (done) {
        stream.resume();
        return;
      }
      const hash = crypto.createHash('sha256');
      const head: Buffer[] = [];
      let headLen = 0;
      let size = 0;
      stream.on('limit', () => fail(tooLarge(limit)));
      const tap = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          hash.update(chunk);
          size += chunk.length;
          if (headLen < SNIFF_BYTES) {
            head.push(chunk.subarray(0, SNIFF_BYTES - headLen));
            headLen += Math.min(chunk.length, SNIFF_BYTES - headLen);
          }
          cb(null, chunk);
        },
      });
      out = fs.createWriteStream(tmpPath, { flags: 'wx', mode: 0o600 });
      done = pipeline(stream, tap, out).then(async () => {
        // Durable before any row can name it: the rename after the commit must find whole bytes.
        const fh = await fs.promises.open(tmpPath, 'r+');
        try {
          await fh.sync();
        } finally {
          await fh.close();
        }
        // file-type (~40 ms of CPU and ~11 MB to load) on the first upload, not at every start.
        const { fileTypeFromBuffer } = await import('file-type');
        const sniffed = await fileTypeFromBuffer(Buffer.concat(head));
        return { sha: hash.digest('hex'), size, type: sniffed?.mime ?? 'application/octet-stream', name: safeName(info.filename) };
      });
      // Rejections are read after the parse below; keep Node from flagging this one meanwhile.
      done.catch(() => undefined);
    });
    bb.on('filesLimit', () => fail(new InputError('one file per upload')));
    bb.on('partsLimit', () => fail(new InputError('too many parts in the upload')));
    bb.on('fieldsLimit', () => fail(new InputError('too many fields in the upload')));
    req.pipe(bb);
    try {
      await parsed;
      if (!done) throw new InputError('no file in the upload (multipart/form-data with one file part)');
      const r = await done;
      return { ...r, tmpName };
    } catch (e) {
      // The write stream opens its file asynchronously: remove it only once the stream is closed.
      if (out && !out.closed) {
        const closed = new Promise<void>((r) => out!.once('close', () => r()));
        out.destroy();
        await closed;
      }
      fs.rmSync(tmpPath, { force: true });
      if (e instanceof AppError) throw e;
      throw new InputError(`upload failed: ${(e as Error).message}`);
    }
  }

  /** FilePlacer: the committed file's bytes into place (kept when the same bytes are already there). */
  place(t: Tenant, sha: string, tmpName: string): void {
    const tmp = path.join(this.tmpDir(t), tmpName);
    const final = this.finalPath(t, sha);
    if (fs.existsSync(final)) {
      fs.rmSync(tmp, { force: true });
      return;
    }
    fs.mkdirSync(path.dirname(final), { recursive: true, mode: 0o700 });
    fs.renameSync(tmp, final);
  }

  /** An upload whose row did not commit: its temporary file goes. */
  discard(t: Tenant, tmpName: string): void {
    fs.rmSync(path.join(this.tmpDir(t), path.basename(tmpName)), { force: true });
  }

  remove(t: Tenant, sha: string): void {
    fs.rmSync(this.finalPath(t, sha), { force: true });
  }

  /**
   * Start-up: rows a crash left staged get their rename finished when the temporary file is whole
   * (its hash matches), else the row goes and so does every message naming it; then every other
   * temporary file (an upload killed mid-stream) is deleted.
   */
  recover(tenants: Tenant[]): { finished: number; dropped: number; partsRemoved: number } {
    let finished = 0;
    let dropped = 0;
    let partsRemoved = 0;
    const byId = new Map(tenants.map((t) => [t.id, t]));
    for (const row of this.repo.stagedFiles()) {
      const t = byId.get(row.tenant_id);
      if (!t || !row.staged) continue;
      const tmp = path.join(this.tmpDir(t), path.basename(row.staged));
      const final = this.finalPath(t, row.sha);
      if (fs.existsSync(final) || (fs.existsSync(tmp) && sha256File(tmp) === row.sha)) {
        if (!fs.existsSync(final)) this.place(t, row.sha, path.basename(row.staged));
        else fs.rmSync(tmp, { force: true });
        this.repo.fileInPlace(t, row.sha);
        finished++;
      } else {
        this.repo.dropFile(t, row.sha, this.clock.now());
        dropped++;
      }
    }
    for (const t of tenants) {
      const dir = this.tmpDir(t);
      if (!fs.existsSync(dir)) continue;
      for (const f of fs.readdirSync(dir)) {
        fs.rmSync(path.join(dir, f), { force: true });
        partsRemoved++;
      }
    }
    if (finished || dropped || partsRemoved) this.log.info({ finished, dropped, partsRemoved }, 'chat uploads recovered after an unclean stop');
    return { finished, dropped, partsRemoved };
  }

  /**
   * Sends a stored file as an attachment, never inline: Content-Disposition attachment, nosniff,
   * a sandboxing CSP, active types as octet-stream; one byte range (206) or 416.
   */
  async serve(req: IncomingMessage, res: ServerResponse, t: Tenant, f: { sha: string; size: number; type: string; name: string }): Promise<void> {
    const file = this.finalPath(t, f.sha);
    const etag = `"${f.sha}"`;
    const ifRange = req.headers['if-range'];
    const range = ifRange && ifRange !== etag ? null : parseRange(req.headers.range, f.size);
    if (range === 'unsatisfiable') {
      throw new AppError(416, 'range_not_satisfiable', `range outside the file's ${f.size} bytes`, { headers: { 'Content-Range': `bytes */${f.size}` } });
    }
    res.setHeader('Content-Type', servedType(f.type));
    res.setHeader('Content-Disposition', contentDisposition(f.name));
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
    res.setHeader('Cache-Control', 'private, no-store');
    res.setHeader('Accept-Ranges', 'bytes');
    res.setHeader('ETag', etag);
    const { start, end } = range ?? { start: 0, end: f.size - 1 };
    res.statusCode = range ? 206 : 200;
    if (range) res.setHeader('Content-Range', `bytes ${start}-${end}/${f.size}`);
    res.setHeader('Content-Length', String(f.size === 0 ? 0 : end - start + 1));
    if (req.method === 'HEAD' || f.size === 0) {
      res.end();
      return;
    }
    try {
      await pipeline(fs.createReadStream(file, { start, end }), res);
    } catch (e) {
      // A client that goes away mid-download is not a server fault; anything else is.
      if (!res.destroyed && (e as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') throw e;
    }
  }
}

function tooLarge(limit: number): AppError {
  return new AppError(413, 'payload_too_large', `upload over ${limit} bytes`, { headers: { Connection: 'close' } });
}

function sha256File(p: string): string {
  const h = crypto.createHash('sha256');
  const fd = fs.openSync(p, 'r');
  try {
    const buf = Buffer.alloc(1 << 20);
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (!n) break;
      h.update(buf.subarray(0, n));
    }
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}
