import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';

/**
 * The token endpoint is served before the router (a pre-router handler) for speed, but through the
 * same pipeline pieces as every other endpoint: a form over the body limit gets 413
 * `payload_too_large` with the JSON error body, declared or chunked, at every address of the
 * endpoint. The pre-router's own body reader once cut a chunked one with a connection reset.
 */
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ overrides: { http: { bodyLimitBytes: 64 * 1024 } } });
});
afterAll(async () => {
  await s?.stop();
});

function postChunked(
  path: string,
  bytes: number,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${s.url}${path}`,
      { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Transfer-Encoding': 'chunked', ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    // 512 KiB of form in 16 KiB chunks, the first one a valid start of a token form.
    const chunk = Buffer.from('grant_type=client_credentials&x=' + 'a'.repeat(16 * 1024 - 32));
    let sent = 0;
    const write = () => {
      while (sent < bytes) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', write);
      }
      req.end();
    };
    write();
  });
}

describe('token endpoint body limit', () => {
  for (const path of ['/oauth2/v1/token', '/oidc.ashx/token', '/oidc.ashx?action=token']) {
    it(`a 512 KiB chunked form to ${path} answers 413 payload_too_large with the JSON error body`, async () => {
      const r = await postChunked(path, 512 * 1024);
      expect(r.status).toBe(413);
      expect(r.headers['content-type']).toMatch(/^application\/json/);
      expect(JSON.parse(r.body)).toMatchObject({ error: 'payload_too_large', error_description: 'request body over 65536 bytes' });
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.headers['x-request-id']).toMatch(/^[0-9a-f]{16}$/);
    });
  }

  it('behind a proxy (the router path) the answer is the same', async () => {
    const r = await postChunked('/oauth2/v1/token', 512 * 1024, { 'X-Forwarded-For': '203.0.113.5' });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body)).toMatchObject({ error: 'payload_too_large', error_description: 'request body over 65536 bytes' });
  });
});
