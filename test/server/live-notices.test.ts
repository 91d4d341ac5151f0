import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../server/auth.ts';
import { changeNotice } from '../../server/http/dispatch.ts';
import type { RouteDef } from '../../server/http/route.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { openLive, type Frame, type LiveStream } from '../support/sse.ts';
import { until } from '../support/until.ts';

/**
 * Every change an integration makes over the API reaches the tenant's open consoles at once
 * (issue 27 item 5): a call's every state (`call.state`) and each admin change (`<collection>.changed`),
 * and nothing of one tenant ever reaches another tenant's console.
 */
let s: TestServer;
let bKey: string;
const A = () => `127.0.0.1:${s.port}`;

beforeAll(async () => {
  s = await startTestServer({
    // A bridge that never answers: a call scheduled for next week is stored and never dialled.
    overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: 'http://127.0.0.1:9/', token: 'live-notice-bridge-token-0123456789' } } } },
  });
  bKey = (await s.addTenant('b.test')).adminKey;
});
afterAll(async () => {
  await s?.stop();
});

const notices = (l: LiveStream, name?: string) =>
  l.frames.filter(
    (f): f is Frame & { data: { name: string; data: Record<string, unknown> } } =>
      f.event === 'notice' && (!name || (f.data as { name: string }).name === name),
  );

async function json(method: string, path: string, body: unknown, auth: { key?: string; hmac?: string; host?: string }) {
  const text = JSON.stringify(body);
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (auth.hmac) headers['X-Service-Admin-Signature'] = s.hmac(auth.hmac, auth.host ?? A(), Buffer.byteLength(text));
  return s.fetch(path, { method, key: auth.key, headers, body: text, host: auth.host });
}

describe('change notices', () => {
  it('are named after the collection an admin route changes; reads, public routes and custom-auth callbacks send none', () => {
    const def = (method: RouteDef['method'], path: string, auth = policy.v1Admin) => ({ method, path, auth, summary: '', handler: () => null }) as RouteDef;
    expect(changeNotice(def('POST', '/api.ashx/v1/outbound-routes'))).toBe('outbound-routes.changed');
    expect(changeNotice(def('DELETE', '/api.ashx/v1/outbound-routes/:match'))).toBe('outbound-routes.changed');
    expect(changeNotice(def('POST', '/api.ashx/v1/users/:id/disable'))).toBe('users.changed');
    expect(changeNotice(def('POST', '/signal.ashx?trunks=save', policy.adminOrHmac('trunks-save')))).toBe('trunks.changed');
    expect(changeNotice(def('POST', '/signal.ashx?oidc-invite=1', policy.adminOrHmac('oidc-invite')))).toBe('oidc-invite.changed');
    expect(changeNotice(def('POST', '/rp-cert.ashx?issue', policy.adminOrHmac('rp-cert-issue')))).toBe('rp-cert.changed');
    expect(changeNotice(def('POST', '/chat.ashx?op=settings', policy.bearer('admin')))).toBe('chat.changed');
    expect(changeNotice(def('GET', '/api.ashx/v1/users'))).toBeUndefined();
    expect(changeNotice(def('POST', '/token', policy.public))).toBeUndefined();
    expect(changeNotice(def('POST', '/chat.ashx?op=send', policy.bearer()))).toBeUndefined();
    expect(changeNotice(def('POST', '/internal/bridge/events', policy.custom('bridge', 'bridge token')))).toBeUndefined();
  });

  it("reach the tenant's live feed for a call placed and cancelled with an ak_ key, a trunk and a route; never another tenant's", async () => {
    const a = openLive(s.port, A(), s.adminKey);
    const b = openLive(s.port, 'b.test', bKey);
    try {
      expect(await a.status).toBe(200);
      expect(await b.status).toBe(200);
      await until(() => a.frames.some((f) => f.event === 'status') && b.frames.some((f) => f.event === 'status'), 5000, 'both feeds open');

      const next = new Date(Date.now() + 7 * 86400_000).toISOString();
      const placed = await json(
        'POST',
        '/api.ashx/v1/calls',
        { phone: '+4930111222', systemPrompt: 'Hello.', scheduleAtUtc: next, apiKey: 'AIza-live-test' },
        { key: s.adminKey },
      );
      expect(placed.status, await placed.clone().text()).toBe(200);
      const { callId } = (await placed.json()) as { callId: string };
      await until(() => notices(a, 'calls.changed').length === 1, 2000, 'calls.changed');
      expect(notices(a, 'call.state').map((n) => n.data.data)).toContainEqual({ callId, status: 'scheduled' });

      const cancel = await s.fetch(`/api.ashx/v1/calls/${callId}/hangup`, { method: 'POST', key: s.adminKey });
      expect(cancel.status).toBe(200);
      await until(() => notices(a, 'call.state').some((n) => n.data.data.status === 'cancelled'), 2000, 'call.state cancelled');

      expect((await json('POST', '/signal.ashx?trunks=save', { id: 'main', name: 'Main', host: '127.0.0.1' }, { hmac: 'trunks-save' })).status).toBe(200);
      await until(() => notices(a, 'trunks.changed').length === 1, 2000, 'trunks.changed');
      const route = await json('POST', '/api.ashx/v1/outbound-routes', { match: '+49*', trunkIds: ['main'] }, { key: s.adminKey });
      expect(route.status, await route.clone().text()).toBe(201);
      await until(() => notices(a, 'outbound-routes.changed').length === 1, 2000, 'outbound-routes.changed');
      // A refused change changes nothing and tells nobody.
      expect((await json('POST', '/api.ashx/v1/outbound-routes', { match: '+49*', trunkIds: ['main'] }, { key: s.adminKey })).status).toBe(409);

      // Tenant b's own change reaches b, and only b.
      expect(
        (await json('POST', '/signal.ashx?trunks=save', { id: 'other', name: 'Other', host: '127.0.0.2' }, { hmac: 'trunks-save', host: 'b.test' })).status,
      ).toBe(200);
      await until(() => notices(b, 'trunks.changed').length === 1, 2000, "b's trunks.changed");
      await new Promise((r) => setTimeout(r, 300));
      expect(notices(b).map((n) => n.data.name)).toEqual(['trunks.changed']);
      expect(notices(a, 'trunks.changed')).toHaveLength(1);
      expect(notices(a, 'outbound-routes.changed')).toHaveLength(1);
      expect(JSON.stringify(b.frames)).not.toContain(callId);
    } finally {
      a.close();
      b.close();
    }
  });
});
