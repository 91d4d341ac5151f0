import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePlugin } from '../../server/plugin.ts';
import { policy } from '../../server/auth.ts';
import { ConflictError } from '../../server/errors.ts';
import { withBuiltins } from './fixtures/test-plugins.ts';
import { httpFetch, startTestServer, type TestServer } from '../support/server.ts';

/**
 * The appliance's listener (Appliance.frontDoor) serves a request the dispatcher has a route for
 * without Express's router, and hands everything else to Express. Each answer here is compared,
 * byte for byte and header for header, with the answer Express gives to the same request when it
 * takes it from the start (the same appliance's `app` on a listener of its own, whose first
 * middleware dispatches routes as before the front door): the front door must change nothing a
 * client sees.
 */
const frontDoorPlugin = definePlugin({
  name: 'frontdoor',
  description: 'front door test routes',
  routes(r) {
    r.add({
      method: 'GET',
      path: '/api.ashx/v1/frontdoor/echo/:id',
      summary: 'what a handler reads of Express’s request',
      auth: policy.public,
      params: z.object({ id: z.string() }),
      query: z.object({ x: z.string().max(5).optional(), n: z.coerce.number().int().optional() }),
      handler: (req) => ({
        params: req.params,
        query: req.query,
        path: req.raw.path,
        originalUrl: req.raw.originalUrl,
        baseUrl: req.raw.baseUrl,
        rawParams: req.raw.params,
        rawQuery: req.raw.query,
        protocol: req.raw.protocol,
        hostname: req.raw.hostname,
        ip: req.ip,
        origin: req.origin,
        next: typeof req.raw.next,
      }),
    });
    r.add({
      method: 'GET',
      path: '/api.ashx/v1/frontdoor/async',
      summary: 'an asynchronous handler',
      auth: policy.v1Admin,
      handler: async () => {
        await new Promise((res) => setTimeout(res, 5));
        return { async: true };
      },
    });
    r.add({
      method: 'GET',
      path: '/api.ashx/v1/frontdoor/conflict',
      summary: 'an asynchronous handler that fails',
      auth: policy.v1Admin,
      handler: async () => {
        await new Promise((res) => setTimeout(res, 5));
        throw new ConflictError('conflict', 'taken');
      },
    });
    r.add({
      method: 'GET',
      path: '/api.ashx/v1/frontdoor/pre',
      summary: 'also served by a pre-router when asked',
      auth: policy.public,
      handler: () => ({ by: 'dispatcher' }),
    });
    r.preRouter((req, res) => {
      if (req.url !== '/api.ashx/v1/frontdoor/pre' || req.headers['x-pre'] !== '1') return false;
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('pre-router');
      return true;
    });
  },
});

let s: TestServer;
let viaExpress: http.Server;
let expressUrl: string;

beforeAll(async () => {
  s = await startTestServer({ plugins: await withBuiltins(frontDoorPlugin) });
  viaExpress = http.createServer(s.appliance.app);
  await new Promise<void>((r) => viaExpress.listen(0, '127.0.0.1', r));
  expressUrl = `http://127.0.0.1:${(viaExpress.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((r) => {
    viaExpress?.close(() => r());
    viaExpress?.closeAllConnections();
  });
  await s?.stop();
});

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function answer(base: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  const r = await httpFetch(base + path, {
    method: init.method ?? 'GET',
    // The same Host on both listeners (it picks the tenant and shows in origins).
    headers: { host: `127.0.0.1:${s.port}`, 'x-request-id': 'front-door-test-0001', ...init.headers },
    body: init.body,
  });
  const headers: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    if (k !== 'date') headers[k] = v;
  });
  return { status: r.status, headers, body: await r.text() };
}

/** The front door's answer, checked equal to Express's own for the same request. */
async function same(path: string, init: Parameters<typeof answer>[2] = {}): Promise<Answer> {
  const front = await answer(s.url, path, init);
  const express = await answer(expressUrl, path, init);
  expect(front).toEqual(express);
  return front;
}

describe('the front door', () => {
  it('serves a matched route as Express did: body, X-Request-Id, security and cache headers', async () => {
    const a = await same('/api.ashx/v1/auditlog?limit=5', { headers: { authorization: `Bearer ${s.adminKey}` } });
    expect(a.status).toBe(200);
    expect(a.headers['x-request-id']).toBe('front-door-test-0001');
    expect(a.headers['x-content-type-options']).toBe('nosniff');
    expect(a.headers['referrer-policy']).toBe('no-referrer');
    expect(a.headers['cache-control']).toBe('no-store');
    expect(a.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(a.headers['content-length'])).toBe(Buffer.byteLength(a.body));
  });

  it('gives a handler the request Express gave it (own properties and getters)', async () => {
    const a = await same('/api.ashx/v1/frontdoor/echo/a%20b?x=1&n=2&y=3');
    expect(JSON.parse(a.body)).toMatchObject({
      params: { id: 'a b' },
      query: { x: '1', n: 2 },
      path: '/api.ashx/v1/frontdoor/echo/a%20b',
      originalUrl: '/api.ashx/v1/frontdoor/echo/a%20b?x=1&n=2&y=3',
      baseUrl: '',
      rawParams: {},
      rawQuery: { x: '1', n: '2', y: '3' },
      protocol: 'http',
      hostname: '127.0.0.1',
      next: 'function',
    });
    // The query refused by its schema: zod's own message, as before.
    const bad = await same('/api.ashx/v1/frontdoor/echo/a?x=toolong&n=1.5');
    expect(bad.status).toBe(400);
  });

  it('answers HEAD of a GET route with its headers and no body', async () => {
    const a = await same('/api.ashx/v1/auditlog?limit=5', { method: 'HEAD', headers: { authorization: `Bearer ${s.adminKey}` } });
    expect(a.status).toBe(200);
    expect(a.body).toBe('');
    expect(Number(a.headers['content-length'])).toBeGreaterThan(0);
  });

  it('answers credential errors of a matched route as before (401, 403)', async () => {
    expect((await same('/api.ashx/v1/auditlog')).status).toBe(401);
    expect((await same('/api.ashx/v1/auditlog', { headers: { authorization: 'Bearer ak_nope' } })).status).toBe(401);
    expect((await same('/api.ashx/v1/auditlog', { headers: { authorization: 'Basic x' } })).status).toBe(401);
  });

  it('settles asynchronous handlers and their errors as before', async () => {
    const ok = await same('/api.ashx/v1/frontdoor/async', { headers: { authorization: `Bearer ${s.adminKey}` } });
    expect(JSON.parse(ok.body)).toEqual({ async: true });
    expect((await same('/api.ashx/v1/frontdoor/conflict', { headers: { authorization: `Bearer ${s.adminKey}` } })).status).toBe(409);
  });

  it('leaves a request without a route to Express: 404 unchanged', async () => {
    const a = await same('/nope/at/all?x=1');
    expect(a.status).toBe(404);
    expect(a.headers['x-request-id']).toBe('front-door-test-0001');
    expect(JSON.parse(a.body)).toMatchObject({ error: 'not_found' });
  });

  it('leaves a wrong method to Express: 405 with Allow unchanged', async () => {
    const a = await same('/api.ashx/v1/auditlog', { method: 'DELETE', headers: { authorization: `Bearer ${s.adminKey}` } });
    expect(a.status).toBe(405);
    expect(a.headers.allow).toBe('GET');
    // With a body it never read: the connection closes after the answer, as before.
    const b = await same('/api.ashx/v1/auditlog', { method: 'PUT', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(b.status).toBe(405);
    expect(b.headers.connection).toBe('close');
  });

  it('leaves a malformed path parameter to Express: 400 unchanged', async () => {
    expect((await same('/api.ashx/v1/frontdoor/echo/%E0%A4%A')).status).toBe(400);
  });

  it('answers a Host that names no tenant the way the first middleware did', async () => {
    const a = await same('/api.ashx/v1/auditlog', { headers: { host: 'a.example:@attacker.example', authorization: `Bearer ${s.adminKey}` } });
    expect(a.status).toBe(400);
    expect(a.headers['x-request-id']).toBe('front-door-test-0001');
    expect(a.headers['x-content-type-options']).toBe('nosniff');
    expect(JSON.parse(a.body)).toMatchObject({ error: 'invalid_request' });
  });

  it('lets a pre-router take a request before the dispatcher, even on a route address', async () => {
    const pre = await httpFetch(`${s.url}/api.ashx/v1/frontdoor/pre`, { headers: { 'x-pre': '1' } });
    expect(await pre.text()).toBe('pre-router');
    const routed = await httpFetch(`${s.url}/api.ashx/v1/frontdoor/pre`);
    expect(await routed.json()).toEqual({ by: 'dispatcher' });
  });

  it('counts and logs a front-door request like one through Express (access log, metrics label)', async () => {
    const before = s.logs.lines.length;
    await answer(s.url, '/api.ashx/v1/auditlog?limit=1', { headers: { authorization: `Bearer ${s.adminKey}`, 'x-request-id': 'front-door-log-0002' } });
    await new Promise((r) => setTimeout(r, 50));
    const line = s.logs.lines
      .slice(before)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.msg === 'request' && l.reqId === 'front-door-log-0002');
    expect(line).toMatchObject({ method: 'GET', path: '/api.ashx/v1/auditlog', status: 200 });
  });
});
