import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import type { IncomingMessage, ServerResponse } from 'node:http';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};

/**
 * The console's Content-Security-Policy: scripts only from the appliance itself (no inline
 * script, no eval); styles may be inline because the component library sets CSS variables in a
 * style element; connections only to the appliance (API and the live feed).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "media-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  body: Buffer;
  gzip: Buffer | undefined;
  type: string;
  etag: string;
  immutable: boolean;
}

/**
 * The built console: every file under the build folder, listed once at start and keyed by its URL
 * path; a file's bytes, gzip and ETag are made on its first request and kept (a few hundred KB in
 * all). Only these keys are ever served, so no request path can reach a file outside the build:
 * traversal is impossible by construction, not by checking. Reading and compressing at first use
 * rather than at start keeps about 1.3 MB of gzip level 9 out of the appliance's time to ready.
 */
export class ConsoleAssets {
  /** URL path to the file's absolute path, from the listing at start. */
  readonly #paths = new Map<string, string>();
  readonly #files = new Map<string, Asset>();

  constructor(readonly dir: string | undefined) {
    if (dir) this.list(dir, '');
  }

  get built(): boolean {
    return this.#paths.has('index.html');
  }

  get count(): number {
    return this.#paths.size;
  }

  private list(dir: string, prefix: string): void {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (e.name.startsWith('.')) continue;
      const rel = prefix + e.name;
      if (e.isDirectory()) {
        this.list(path.join(dir, e.name), rel + '/');
        continue;
      }
      // Source maps stay on disk (they are for a developer's tools, not the operator's browser).
      if (!e.isFile() || e.name.endsWith('.map')) continue;
      this.#paths.set(rel, path.join(dir, e.name));
    }
  }

  /** The listed file's asset, read and compressed on its first request; undefined if not listed or gone. */
  private asset(rel: string): Asset | undefined {
    const known = this.#files.get(rel);
    if (known) return known;
    const file = this.#paths.get(rel);
    if (!file) return undefined;
    let body: Buffer;
    try {
      body = fs.readFileSync(file);
    } catch {
      // A rebuild running right now may have removed it: a 404 now, the next start lists the new build.
      return undefined;
    }
    const ext = path.extname(rel).toLowerCase();
    const type = TYPES[ext] ?? 'application/octet-stream';
    const compressible = /text|json|svg|manifest/.test(type) && body.length > 512;
    const a: Asset = {
      body,
      gzip: compressible ? zlib.gzipSync(body, { level: 9 }) : undefined,
      type,
      etag: `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
      // Vite names what it emits under assets/ by content hash: a new build is a new name.
      immutable: rel.startsWith('assets/'),
    };
    this.#files.set(rel, a);
    return a;
  }

  /** Serves GET/HEAD of `/` and `/favicon.ico` (redirects) and `/console/...`; false for anything else. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const pathname = q === -1 ? url : url.slice(0, q);
    if (pathname !== '/' && pathname !== '/console' && pathname !== '/favicon.ico' && !pathname.startsWith('/console/')) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const common = (h: Record<string, string>) => {
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.setHeader('Referrer-Policy', 'no-referrer');
      for (const [k, v] of Object.entries(h)) res.setHeader(k, v);
    };
    if (pathname === '/' || pathname === '/console' || pathname === '/favicon.ico') {
      // Browsers ask every page's origin for /favicon.ico (the sign-in pages too): the console's icon.
      common({
        Location: pathname === '/favicon.ico' ? '/console/favicon.svg' : '/console/',
        'Cache-Control': pathname === '/favicon.ico' ? 'public, max-age=86400' : 'no-store',
      });
      res.statusCode = 302;
      res.end();
      return true;
    }
    let rel = pathname.slice('/console/'.length);
    try {
      rel = decodeURIComponent(rel);
    } catch {
      rel = '\0';
    }
    // Client-side routes (/console/calls, /console/callback) get the app's page; a missing file
    // that looks like one (it has an extension) is a 404, so a broken asset link fails visibly.
    const a = this.asset(this.#paths.has(rel) || path.extname(rel) ? rel : 'index.html');
    if (!a) {
      common({ 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
      res.statusCode = 404;
      res.end(
        JSON.stringify(
          this.built
            ? { error: 'not_found', error_description: `no console file ${rel.slice(0, 100)}` }
            : { error: 'not_found', error_description: 'the console is not built: run `npm run build:console` (npm install does it)' },
        ),
      );
      return true;
    }
    const headers: Record<string, string> = {
      'Content-Type': a.type,
      ETag: a.etag,
      'Cache-Control': a.immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      Vary: 'Accept-Encoding',
    };
    if (a.type.startsWith('text/html')) {
      headers['Content-Security-Policy'] = CONSOLE_CSP;
      headers['X-Frame-Options'] = 'DENY';
    }
    common(headers);
    if (req.headers['if-none-match'] === a.etag) {
      res.statusCode = 304;
      res.end();
      return true;
    }
    const gz = a.gzip && /\bgzip\b/.test(req.headers['accept-encoding'] ?? '');
    const body = gz ? a.gzip! : a.body;
    if (gz) res.setHeader('Content-Encoding', 'gzip');
    res.setHeader('Content-Length', String(body.length));
    res.statusCode = 200;
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  }
}

/** Where the built console is: `dist/console` beside resources/ (TypeScript tree) or `console` beside it (compiled dist/). */
export function findConsoleDir(resourcesDir: string, configured: string | undefined): string | undefined {
  const root = path.dirname(resourcesDir);
  const candidates = configured ? [path.resolve(configured)] : [path.join(root, 'dist', 'console'), path.join(root, 'console')];
  return candidates.find((d) => fs.existsSync(path.join(d, 'index.html')));
}
