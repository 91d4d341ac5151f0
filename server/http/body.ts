import crypto from 'node:crypto';
import fs from 'node:fs';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { AppError, InputError } from '../errors.ts';

/** Bytes of an oversized body read and thrown away after the 413, before the socket is cut. */
const DISCARD_CAP = 1024 * 1024;

function tooLarge(limit: number): AppError {
  // Connection: close: the rest of an oversized body is not read, so the connection cannot carry
  // another request after the answer.
  return new AppError(413, 'payload_too_large', `request body over ${limit} bytes`, { headers: { Connection: 'close' } });
}

/**
 * A request body, at most `limit` bytes; 413 `payload_too_large` beyond (declared or chunked).
 * The one body reader of the appliance: the router and the pre-router handlers both use it.
 *
 * Listeners, not `for await`: leaving a for-await loop destroys the request and with it the
 * socket, so a chunked body over the limit got a reset instead of its 413 (RFC 9110 §15.5.14).
 * After the limit the reader keeps draining (bounded by DISCARD_CAP) so the client can read the
 * answer before the connection closes.
 */
export function readBounded(req: IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  return consume(req, limit, {
    chunk: (c) => {
      chunks.push(c);
    },
    drop: () => {
      chunks.length = 0;
    },
    result: () => (chunks.length === 1 ? chunks[0]! : chunks.length === 0 ? EMPTY : Buffer.concat(chunks)),
  });
}

const EMPTY = Buffer.alloc(0);

/** What `consume` does with the body's bytes as they arrive. */
interface BodySink<T> {
  /** One chunk within the limit; may return a promise to hold the reading until it is written. */
  chunk(c: Buffer): void | Promise<void>;
  /** The body went over the limit or the client left: forget what was kept. */
  drop(): void;
  /** What the read resolves with, once the whole body was taken (also for no body at all). */
  result(): T;
}

/** Reads a body into `sink` under `limit`, with readBounded's answers for too large and cut short. */
function consume<T>(req: IncomingMessage, limit: number, sink: BodySink<T>): Promise<T> {
  if (req.method === 'GET' || req.method === 'HEAD') return Promise.resolve(sink.result());
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(tooLarge(limit));
  }
  if (!req.readable || declared === 0) return Promise.resolve(sink.result());
  return new Promise<T>((resolve, reject) => {
    let size = 0;
    let settled = false;
    let writing: Promise<void> | undefined;
    const fail = (e: unknown) => {
      if (settled) return;
      settled = true;
      sink.drop();
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on the socket's or the sink's error as it came
      reject(e);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        const w = sink.chunk(chunk);
        if (w) {
          // A slow sink (a file): stop reading until it has taken the chunk, so nothing piles up in memory.
          req.pause();
          writing = w.then(
            () => {
              writing = undefined;
              req.resume();
            },
            (e: unknown) => {
              fail(e);
              req.resume();
            },
          );
        }
        return;
      }
      settled = true;
      sink.drop();
      req.removeListener('data', onData);
      let discarded = 0;
      req.on('data', (c: Buffer) => {
        discarded += c.length;
        if (discarded > DISCARD_CAP) req.socket.destroy();
      });
      reject(tooLarge(limit));
    };
    req.on('data', onData);
    const finish = () => {
      if (settled) return;
      settled = true;
      try {
        resolve(sink.result());
      } catch (e) {
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the sink's own error, as it came
        reject(e);
      }
    };
    // `on`, not `once`: each fires at most once for a request, or is a no-op once settled (no
    // wrapper bound per listener and removed on emit, three per request).
    req.on('end', () => {
      if (settled) return;
      // In memory (the common case) the body is complete now; a slow sink first finishes its write.
      if (writing) void writing.then(finish);
      else finish();
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      // The client went away mid-body: its mistake, not a fault of ours (no error log, no stack).
      if (e.code === 'ECONNRESET' || e.message === 'aborted') fail(new InputError('the client closed the connection before its body was complete'));
      else fail(e);
    });
    // A client that goes away mid-body: 'end' never comes; settle so the handler returns.
    req.on('close', () => {
      if (!req.readableEnded) fail(new InputError('request body incomplete: the client closed the connection'));
    });
  });
}

/** A signed body read before its signature is checked: its SHA-256 now, its bytes once it verified. */
export interface SignedBody {
  /** Hex SHA-256 of the whole body (what the admin signature V2 covers). */
  readonly digest: string;
  readonly size: number;
  /** The bytes, for the handler: read back from the spool file when the body was large. */
  bytes(): Promise<Buffer>;
  /** Removes the spool file, if any (after a refused signature, or once read). */
  discard(): void;
}

/**
 * Reads a body whose signature covers its digest. The digest is computed as the bytes arrive; a
 * body larger than `spoolAbove` goes to a 0600 file in `spoolDir` instead of memory, so bodies
 * sent with a bogus signature cost disk for a moment, never RAM, and are deleted unread.
 */
export async function readSigned(req: IncomingMessage, limit: number, o: { spoolDir: string; spoolAbove: number }): Promise<SignedBody> {
  const hash = crypto.createHash('sha256');
  const chunks: Buffer[] = [];
  let size = 0;
  let file: { path: string; fd: number } | undefined;
  const unlink = () => {
    if (!file) return;
    const f = file;
    file = undefined;
    try {
      fs.closeSync(f.fd);
    } catch {
      // already closed
    }
    fs.rmSync(f.path, { force: true });
  };
  const write = (fd: number, c: Buffer) =>
    new Promise<void>((resolve, reject) => {
      fs.write(fd, c, 0, c.length, null, (e) => (e ? reject(e) : resolve()));
    });
  await consume(req, limit, {
    chunk: (c) => {
      hash.update(c);
      size += c.length;
      if (!file && size > o.spoolAbove) {
        fs.mkdirSync(o.spoolDir, { recursive: true, mode: 0o700 });
        const p = path.join(o.spoolDir, `body-${crypto.randomBytes(12).toString('hex')}`);
        file = { path: p, fd: fs.openSync(p, 'wx+', 0o600) };
        const kept = Buffer.concat(chunks);
        chunks.length = 0;
        return write(file.fd, kept).then(() => write(file!.fd, c));
      }
      if (file) return write(file.fd, c);
      chunks.push(c);
    },
    drop: () => {
      chunks.length = 0;
      unlink();
    },
    result: () => undefined,
  });
  const digest = hash.digest('hex');
  return {
    digest,
    size,
    bytes: async () => {
      if (!file) return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const f = file;
      try {
        const out = Buffer.alloc(size);
        let at = 0;
        while (at < size) {
          const n = fs.readSync(f.fd, out, at, size - at, at);
          if (n === 0) break;
          at += n;
        }
        return out;
      } finally {
        unlink();
      }
    },
    discard: () => {
      chunks.length = 0;
      unlink();
    },
  };
}
