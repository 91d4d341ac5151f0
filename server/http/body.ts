import type { IncomingMessage } from 'node:http';
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
  if (req.method === 'GET' || req.method === 'HEAD') return Promise.resolve(Buffer.alloc(0));
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(tooLarge(limit));
  }
  if (!req.readable || declared === 0) return Promise.resolve(Buffer.alloc(0));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      settled = true;
      chunks.length = 0;
      req.removeListener('data', onData);
      let discarded = 0;
      req.on('data', (c: Buffer) => {
        discarded += c.length;
        if (discarded > DISCARD_CAP) req.socket.destroy();
      });
      reject(tooLarge(limit));
    };
    req.on('data', onData);
    req.once('end', () => {
      if (settled) return;
      settled = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
    req.once('error', (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      // The client went away mid-body: its mistake, not a fault of ours (no error log, no stack).
      if (e.code === 'ECONNRESET' || e.message === 'aborted') reject(new InputError('the client closed the connection before its body was complete'));
      else reject(e);
    });
    // A client that goes away mid-body: 'end' never comes; settle so the handler returns.
    req.once('close', () => {
      if (settled) return;
      settled = true;
      reject(new InputError('request body incomplete: the client closed the connection'));
    });
  });
}
