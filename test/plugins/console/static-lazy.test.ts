import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { ConsoleAssets } from '../../../plugins/console/static.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sovcomms-console-lazy-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function get(assets: ConsoleAssets, url: string): { status: number; headers: Record<string, string>; body: Buffer | undefined } {
  const headers: Record<string, string> = {};
  const out = { status: 0, headers, body: undefined as Buffer | undefined };
  const req = { url, method: 'GET', headers: { 'accept-encoding': 'gzip' } } as unknown as IncomingMessage;
  const res = {
    statusCode: 0,
    setHeader(k: string, v: string) {
      headers[k.toLowerCase()] = v;
    },
    end(this: { statusCode: number }, b?: Buffer | string) {
      out.status = this.statusCode;
      out.body = typeof b === 'string' ? Buffer.from(b) : b;
    },
  } as unknown as ServerResponse;
  expect(assets.handle(req, res)).toBe(true);
  return out;
}

describe('the console files are listed at start and read on first request', () => {
  it('start only lists; a file is read, compressed and kept when first asked for', () => {
    const page = '<!doctype html><title>console</title>' + 'x'.repeat(2000);
    fs.mkdirSync(path.join(dir, 'assets'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'index.html'), page);
    fs.writeFileSync(path.join(dir, 'assets', 'app-1.js'), 'console.log(1);'.repeat(100));
    fs.writeFileSync(path.join(dir, 'assets', 'app-1.js.map'), '{}');
    const assets = new ConsoleAssets(dir);
    expect(assets.built).toBe(true);
    // index.html and the script; the source map is never served.
    expect(assets.count).toBe(2);

    // Changed after start but before its first request: what is served is what is read then.
    fs.writeFileSync(path.join(dir, 'assets', 'app-1.js'), 'console.log(2);'.repeat(100));
    const js = get(assets, '/console/assets/app-1.js');
    expect(js.status).toBe(200);
    expect(js.headers['content-encoding']).toBe('gzip');
    expect(zlib.gunzipSync(js.body!).toString()).toBe('console.log(2);'.repeat(100));
    expect(js.headers['cache-control']).toContain('immutable');

    // Kept once read: a later change on disk does not alter the served bytes or the ETag.
    fs.writeFileSync(path.join(dir, 'assets', 'app-1.js'), 'changed');
    const again = get(assets, '/console/assets/app-1.js');
    expect(again.headers.etag).toBe(js.headers.etag);

    // Client-side routes get the page; a file that was not listed at start is a 404 even if it exists now.
    expect(zlib.gunzipSync(get(assets, '/console/calls').body!).toString()).toBe(page);
    fs.writeFileSync(path.join(dir, 'assets', 'late.js'), 'late');
    expect(get(assets, '/console/assets/late.js').status).toBe(404);
    expect(get(assets, '/console/assets/app-1.js.map').status).toBe(404);
    expect(get(assets, '/console/..%2F..%2Fetc%2Fpasswd.txt').status).toBe(404);
  });

  it('a listed file removed before its first request is a 404, not a failure', () => {
    const d = path.join(dir, 'gone');
    fs.mkdirSync(d);
    fs.writeFileSync(path.join(d, 'index.html'), '<!doctype html>');
    fs.writeFileSync(path.join(d, 'old.css'), 'body{}');
    const assets = new ConsoleAssets(d);
    fs.rmSync(path.join(d, 'old.css'));
    expect(get(assets, '/console/old.css').status).toBe(404);
    expect(get(assets, '/console/').status).toBe(200);
  });
});
