import http from 'node:http';
import https from 'node:https';

/**
 * The transport of the core's control requests to the telephony bridge (CONTROL-API.md): plain
 * node:http(s) over keep-alive agents. Global `fetch` did the same job, but it is Node's bundled
 * undici, loaded on first use with its web streams and http2 (about 13 MiB of RSS in a bare
 * process, 15-25 MB in the core), for a handful of small loopback requests a minute.
 *
 * One deadline covers connect, headers and body; the answer is read up to `maxBytes`.
 */

/** Larger than any answer of the contract (the bridge's event callbacks are bounded the same). */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024;
/** How long a kept-alive connection may sit idle (the bridge's control server keeps one 5 s). */
const IDLE_MS = 4000;

/** No answer: `reason` is the socket error's code (ECONNREFUSED...) or `TimeoutError`, as fetch named them. */
export class ControlUnreachable extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/** An answer longer than the bound: not a bridge speaking the contract. */
export class ControlAnswerTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`an answer of more than ${maxBytes} bytes`);
  }
}

export interface ControlHttpAnswer {
  status: number;
  text: string;
}

export class ControlHttp {
  // An idle connection is dropped before the server drops it (the bridge keeps one 5 s), so a request
  // never goes out on a socket the server is closing (ECONNRESET). Node applies the server's
  // Keep-Alive hint (less a second) only to shorten a timeout that is set, hence this one.
  // An active request is not cut by it: only idle sockets are closed (our own deadline is below).
  readonly #agents;

  constructor(
    private readonly maxBytes = MAX_ANSWER_BYTES,
    idleMs = IDLE_MS,
  ) {
    this.#agents = { http: new http.Agent({ keepAlive: true, timeout: idleMs }), https: new https.Agent({ keepAlive: true, timeout: idleMs }) };
  }

  /** Rejects with ControlUnreachable (no complete answer in time) or ControlAnswerTooLarge. */
  request(method: string, url: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<ControlHttpAnswer> {
    return new Promise((resolve, reject) => {
      let u: URL;
      try {
        u = new URL(url);
      } catch {
        return reject(new ControlUnreachable('ERR_INVALID_URL'));
      }
      const secure = u.protocol === 'https:';
      if (!secure && u.protocol !== 'http:') return reject(new ControlUnreachable('ERR_UNSUPPORTED_PROTOCOL'));
      let done = false;
      const finish = (err: Error | undefined, answer?: ControlHttpAnswer) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(answer!);
      };
      const req = (secure ? https : http).request(
        u,
        {
          method,
          agent: secure ? this.#agents.https : this.#agents.http,
          headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let n = 0;
          res.on('data', (c: Buffer) => {
            n += c.length;
            if (n > this.maxBytes) {
              finish(new ControlAnswerTooLarge(this.maxBytes));
              req.destroy();
              return;
            }
            chunks.push(c);
          });
          res.on('end', () => finish(undefined, { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          // The connection dropped while the body was on its way: no complete answer.
          res.on('error', (e: NodeJS.ErrnoException) => finish(new ControlUnreachable(e.code ?? e.name)));
          res.on('close', () => {
            if (!res.complete) finish(new ControlUnreachable('ECONNRESET'));
          });
        },
      );
      req.on('error', (e: NodeJS.ErrnoException) => finish(new ControlUnreachable(e.code ?? e.name)));
      const timer = setTimeout(() => {
        finish(new ControlUnreachable('TimeoutError'));
        req.destroy();
      }, timeoutMs);
      req.end(body);
    });
  }

  /** Closes the idle connections (the core stops, or the bridge it talked to is gone). */
  close(): void {
    this.#agents.http.destroy();
    this.#agents.https.destroy();
  }
}
