import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { Receiver, admin } from '../webhooks/support.ts';
import { adm, call, j, until, type Json } from './helpers.ts';

/**
 * Transcript share links end to end: the v1 API (create, list, revoke), the public page in a real
 * Chromium (hostile transcript text does not run, no Referer leaves the page), expiry on the
 * appliance's clock, tenant isolation, one 404 for every link that does not open, the three
 * events reaching a signed webhook, the audit trail, and the page's rate limit.
 */
const TOKEN = 'fake-bridge-control-token-0123456789';
const V1 = '/api.ashx/v1';
const B = 'office-b.example';
const VIEWS_PER_MINUTE = 60;

let s: TestServer;
let fake: FakeBridge;
let hook: Receiver;
let site: Receiver;
let clock: ManualClock;
let keyB: string;
let hookSecret: string;
let browser: Browser;

/** Places a call and ends it through the bridge callback with these turns: a real saved transcript. */
async function transcriptWith(texts: string[]): Promise<string> {
  const placed = await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ email: undefined }) }));
  expect(placed.status).toBe(200);
  const id = placed.body.callId as string;
  const t0 = Date.parse('2026-01-01T00:00:10Z');
  const turns = texts.map((text, i) => ({ speaker: i % 2 ? 'Caller' : 'AI', text, ts: new Date(t0 + 1000 * (i + 1)).toISOString() }));
  const ended = FakeBridge.ended(id, 'finished', {
    transcript: { turns, tokensTotal: 10, tokensPrompt: 5, inputTurns: 1, outputTurns: 1, model: 'm', voice: 'Aoede', language: 'en-US' },
  });
  expect((await fake.emit(ended)).body).toMatchObject({ ok: true, applied: true });
  return id;
}

const share = (callId: string, json: unknown = { ttlHours: 24 }, key = s.adminKey, host?: string) =>
  j(s.fetch(`${V1}/transcripts/${callId}/shares`, { method: 'POST', key, host, json }));
const list = (callId: string, key = s.adminKey, host?: string) => j(s.fetch(`${V1}/transcripts/${callId}/shares`, { key, host }));
const revoke = (callId: string, id: string, key = s.adminKey, host?: string) =>
  j(s.fetch(`${V1}/transcripts/${callId}/shares/${id}/revoke`, { method: 'POST', key, host }));
const page = (token: string, host?: string) => s.fetch(`/transcript.ashx?share=${encodeURIComponent(token)}`, { host });

const HOSTILE = [
  'Hello, this is the practice calling.',
  `<script>window.__pwned = 'script'; fetch('SITE/script-ran')</script>`,
  `<img src="SITE/img-loaded" onerror="window.__pwned = 'onerror'; fetch('SITE/onerror-ran')">`,
  `"><svg onload="window.__pwned = 'svg'">& 'quotes' </textarea><style>body{display:none}</style>`,
];

beforeAll(async () => {
  fake = new FakeBridge(TOKEN, '');
  await fake.start();
  hook = await new Receiver().start();
  site = await new Receiver().start();
  clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
  s = await startTestServer({
    clock,
    overrides: {
      plugins: {
        telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN }, shares: { viewsPerMinutePerIp: VIEWS_PER_MINUTE } },
        webhooks: { allowLoopback: true },
      },
    },
  });
  fake.callbackUrl = `${s.url}/internal/bridge/events`;
  keyB = (await s.addTenant(B)).adminKey;
  expect((await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' })).status).toBe(200);
  await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
  const sub = await admin(s, 'add', {
    body: { url: `${hook.url}/hook`, events: ['transcript.share.created', 'transcript.share.viewed', 'transcript.share.revoked'] },
  });
  expect(sub.status).toBe(200);
  hookSecret = sub.json.secret as string;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.stop();
  await fake?.stop();
  await hook?.stop();
  await site?.stop();
});

describe('creating, listing and revoking share links (v1)', () => {
  let callId = '';
  let created: Json;
  it('POST answers 201 with the token and URL once; only its SHA-256 is stored', async () => {
    callId = await transcriptWith(['Hello.', 'Tuesday works.']);
    const r = await share(callId, { ttlHours: 48 });
    expect(r.status).toBe(201);
    created = r.body;
    expect(created.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({
      id: expect.stringMatching(/^shr_[0-9a-f]{16}$/),
      callId,
      file: `${callId}.json`,
      tokenTail: created.token.slice(-8),
      ttlHours: 48,
      createdBy: 'admin',
      createdUtc: '2026-01-01T00:00:00.000Z',
      expiresUtc: '2026-01-03T00:00:00.000Z',
      status: 'active',
      revokedUtc: null,
      revokedBy: null,
      views: 0,
      lastViewedUtc: null,
      // Asked for at 127.0.0.1 (not one of the tenant's names, but an address of this machine):
      // the link names this appliance as it was reached, on the port it listens on.
      url: `http://127.0.0.1:${s.port}/transcript.ashx?share=${created.token}`,
    });
    const row = s.appliance.core.db.prepare('SELECT * FROM tel_transcript_shares WHERE id = ?').get(created.id) as Record<string, unknown>;
    expect(row.token_hash).toBe(crypto.createHash('sha256').update(created.token).digest('hex'));
    expect(JSON.stringify(row)).not.toContain(created.token);
  });
  it('the list shows the share without its token; PascalCase TtlHours is accepted; ttlHours defaults to 24', async () => {
    const second = await share(callId, { TtlHours: 0 });
    expect(second.body).toMatchObject({ ttlHours: 0, expiresUtc: null });
    const third = await share(callId, {});
    expect(third.body).toMatchObject({ ttlHours: 24, expiresUtc: '2026-01-02T00:00:00.000Z' });
    const l = await list(callId);
    expect(l.status).toBe(200);
    expect(l.body).toMatchObject({ total: 3, limit: 50, offset: 0, next: null });
    expect(l.body.data.map((x: Json) => x.id).sort()).toEqual([created.id, second.body.id, third.body.id].sort());
    const text = JSON.stringify(l.body);
    for (const t of [created.token, second.body.token, third.body.token]) expect(text).not.toContain(t);
    expect(l.body.data.every((x: Json) => !('token' in x) && !('url' in x))).toBe(true);
  });
  it('the page opens; revoke answers the share as revoked and the page is gone; revoking again is a no-op', async () => {
    expect((await page(created.token)).status).toBe(200);
    const r = await revoke(callId, created.id);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: created.id, status: 'revoked', revokedBy: 'admin', revokedUtc: '2026-01-01T00:00:00.000Z', views: 1 });
    expect((await page(created.token)).status).toBe(404);
    const again = await revoke(callId, created.id);
    expect(again.status).toBe(200);
    expect(again.body.revokedUtc).toBe(r.body.revokedUtc);
  });
  it('bad input answers 4xx, never 500', async () => {
    for (const ttlHours of [-1, 8761, 1.5, 'abc', null]) {
      const r = await share(callId, { ttlHours });
      expect(r.status, String(ttlHours)).toBe(400);
      expect(r.body).toMatchObject({ error: 'invalid_request', field: 'ttlHours' });
    }
    expect(
      (
        await j(
          s.fetch(`${V1}/transcripts/${callId}/shares`, {
            method: 'POST',
            key: s.adminKey,
            body: '{"ttlHours":',
            headers: { 'content-type': 'application/json' },
          }),
        )
      ).status,
    ).toBe(400);
    expect((await share('oac-000000000000')).body.error).toBe('not_found');
    expect((await list('oac-000000000000')).status).toBe(404);
    expect((await revoke(callId, 'shr_0000000000000000')).body.error).toBe('not_found');
    expect((await revoke('oac-000000000000', created.id)).status).toBe(404);
    const withBody = await j(s.fetch(`${V1}/transcripts/${callId}/shares/${created.id}/revoke`, { method: 'POST', key: s.adminKey, json: { now: true } }));
    expect(withBody.status).toBe(400);
    expect((await j(s.fetch(`${V1}/transcripts/${callId}/shares?limit=abc`, { key: s.adminKey }))).status).toBe(400);
    expect((await j(s.fetch(`/transcript.ashx?share=a&share=b`))).status).toBe(400);
    expect((await j(s.fetch(`${V1}/transcripts/${callId}/shares`, { method: 'DELETE', key: s.adminKey }))).status).toBe(405);
  });
  it("needs role admin: no credential 401, a user's key 403", async () => {
    expect((await list(callId, '')).status).toBe(401);
    const u = await s.appliance.core.users.add(s.primary, { name: 'clerk', role: 'user', password: 'clerk password 1' });
    const key = s.appliance.core.auth.createApiKey(s.primary, u, { createdBy: 'test' }).key;
    expect((await share(callId, { ttlHours: 1 }, key)).status).toBe(403);
  });
});

describe('the public page', () => {
  let callId = '';
  let token = '';
  beforeAll(async () => {
    callId = await transcriptWith(HOSTILE.map((t) => t.replaceAll('SITE', site.url)));
    token = (await share(callId, { ttlHours: 1 })).body.token as string;
  });

  it('is escaped HTML with a strict CSP, noindex, no Referer and no caching', async () => {
    const r = await page(token);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = r.headers.get('content-security-policy')!;
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/);
    expect(r.headers.get('x-robots-tag')).toContain('noindex');
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    expect(r.headers.get('cache-control')).toBe('no-store');
    const html = await r.text();
    expect(html).toContain('<meta name="robots" content="noindex, nofollow, noarchive">');
    expect(html).toContain('<meta name="referrer" content="no-referrer">');
    expect(html).not.toMatch(/<script|<img|<svg|<textarea/i);
    expect(html).toContain('&lt;script&gt;window.__pwned = &#39;script&#39;');
    // No personal data beyond the conversation: the callee's number and name stay out.
    expect(html).not.toContain('+4930123456');
    expect(html).not.toContain('Dr. Example');
    // The inline style block is the one the CSP hash allows.
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
    expect(csp).toContain(`'sha256-${crypto.createHash('sha256').update(style).digest('base64')}'`);
  });

  it('in Chromium: hostile transcript text is shown as text, nothing runs or loads, styles apply', async () => {
    const ctx = await browser.newContext();
    const p = await ctx.newPage();
    const requests: string[] = [];
    const dialogs: string[] = [];
    const cspErrors: string[] = [];
    p.on('request', (rq) => requests.push(rq.url()));
    p.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    p.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
    });
    const url = `${s.url}/transcript.ashx?share=${token}`;
    const res = await p.goto(url);
    expect(res!.status()).toBe(200);
    await p.waitForTimeout(300);
    expect(await p.evaluate('typeof window.__pwned')).toBe('undefined');
    expect(dialogs).toEqual([]);
    expect(requests.filter((u) => !u.endsWith('/favicon.ico'))).toEqual([url]);
    expect(site.received.map((x) => x.path)).toEqual([]);
    const texts = await p.locator('p.text').allTextContents();
    expect(texts[1]).toBe(HOSTILE[1]!.replaceAll('SITE', site.url));
    expect(texts[3]).toBe(HOSTILE[3]);
    expect(await p.locator('li').count()).toBe(HOSTILE.length);
    // The hashed style block applied (a blocked one would leave the default transparent body).
    expect(await p.evaluate('getComputedStyle(document.body).backgroundColor')).toBe('rgb(246, 247, 249)');
    expect(cspErrors).toEqual([]);
    await ctx.close();
  });

  it('in Chromium: leaving the page sends no Referer (and Chromium does send one from an ordinary page)', async () => {
    site.respond = (r) =>
      r.path === '/control'
        ? { status: 200, headers: { 'content-type': 'text/html' }, body: '<a id="go" href="/landing-from-control">go</a>' }
        : { status: 200, headers: { 'content-type': 'text/plain' }, body: 'landed' };
    const ctx = await browser.newContext();
    const p = await ctx.newPage();
    await p.goto(`${site.url}/control`);
    await Promise.all([p.waitForURL(`${site.url}/landing-from-control`), p.click('#go')]);
    const control = site.received.find((x) => x.path === '/landing-from-control')!;
    expect(control.headers.referer).toBe(`${site.url}/control`);

    await p.goto(`${s.url}/transcript.ashx?share=${token}`);
    await Promise.all([p.waitForURL(`${site.url}/landing-from-share`), p.evaluate(`location.href = ${JSON.stringify(`${site.url}/landing-from-share`)}`)]);
    const landed = site.received.find((x) => x.path === '/landing-from-share')!;
    expect(landed).toBeDefined();
    expect(landed.headers.referer).toBeUndefined();
    expect(JSON.stringify(site.received)).not.toContain(token);
    await ctx.close();
  });

  it("expires on the appliance's clock; ttlHours 0 never does", async () => {
    const forever = (await share(callId, { ttlHours: 0 })).body.token as string;
    expect((await page(token)).status).toBe(200);
    clock.advance(3600_000);
    expect((await page(token)).status).toBe(404);
    const l = await list(callId);
    expect(l.body.data.find((x: Json) => x.tokenTail === token.slice(-8)).status).toBe('expired');
    clock.advance(10 * 365 * 86_400_000);
    expect((await page(forever)).status).toBe(200);
  });

  it("one 404 page for unknown, malformed, expired, revoked and other tenants' links: no oracle", async () => {
    const live = (await share(callId, { ttlHours: 0 })).body;
    const revoked = (await share(callId, { ttlHours: 0 })).body;
    await revoke(callId, revoked.id);
    const variants: [string, Promise<Response>][] = [
      ['unknown', page(crypto.randomBytes(32).toString('base64url'))],
      ['malformed', page('../../etc/passwd')],
      ['empty', page('')],
      ['expired', page(token)],
      ['revoked', page(revoked.token)],
      ['other tenant', page(live.token, B)],
    ];
    const answers = await Promise.all(
      variants.map(async ([what, r]) => {
        const res = await r;
        const h = Object.fromEntries(
          ['content-type', 'content-security-policy', 'x-robots-tag', 'referrer-policy', 'cache-control'].map((k) => [k, res.headers.get(k)]),
        );
        return { what, status: res.status, body: await res.text(), h };
      }),
    );
    for (const a of answers) {
      expect(a.status, a.what).toBe(404);
      expect(a.body, a.what).toBe(answers[0]!.body);
      expect(a.h, a.what).toEqual(answers[0]!.h);
    }
    expect(answers[0]!.body).toContain('Link not available');
    // The same link on its own tenant's host opens.
    expect((await page(live.token)).status).toBe(200);
  });

  it("tenant isolation on the v1 API: another tenant's admin cannot see, create or revoke shares of this transcript", async () => {
    const mine = (await list(callId)).body.data[0];
    expect((await list(callId, keyB, B)).status).toBe(404);
    expect((await share(callId, { ttlHours: 1 }, keyB, B)).status).toBe(404);
    expect((await revoke(callId, mine.id, keyB, B)).status).toBe(404);
    // A's key on B's host is refused outright.
    expect((await list(callId, s.adminKey, B)).status).toBe(401);
  });
});

describe('events, audit and logs', () => {
  it("created, viewed and revoked reach the webhook, signed, with only the token's last 8 characters", async () => {
    const callId = await transcriptWith(['Webhook test.']);
    const c = (await share(callId, { ttlHours: 2 })).body;
    expect((await page(c.token)).status).toBe(200);
    await revoke(callId, c.id);
    const mine = () => hook.received.map((x) => ({ raw: x, env: JSON.parse(x.body) as Json })).filter((x) => x.env.data.shareId === c.id);
    // Deliveries are at least once: wait for each kind, whatever else arrives.
    await until(() => new Set(mine().map((x) => x.env.event)).size === 3, 10_000, 'three share events delivered');
    const byName = Object.fromEntries(mine().map((x) => [x.env.event, x]));
    expect(byName['transcript.share.created']!.env).toMatchObject({
      tenant: s.primary.host,
      data: { token: c.tokenTail, file: `${callId}.json`, ttlHours: 2, createdBy: 'admin', expiresUtc: c.expiresUtc, callId, shareId: c.id },
    });
    expect(byName['transcript.share.viewed']!.env.data).toEqual({ token: c.tokenTail, file: `${callId}.json`, viewerIp: '127.0.0.1', callId, shareId: c.id });
    expect(byName['transcript.share.revoked']!.env.data).toEqual({ token: c.tokenTail, file: `${callId}.json`, revokedBy: 'admin', callId, shareId: c.id });
    for (const { raw, env } of mine()) {
      expect(raw.headers['x-service-event']).toBe(env.event);
      const sig = 'sha256=' + crypto.createHmac('sha256', hookSecret).update(raw.body).digest('hex');
      expect(raw.headers['x-service-signature']).toBe(sig);
      expect(raw.body).not.toContain(c.token);
    }
    // ttlHours 0 announces expiresUtc null.
    const never = (await share(callId, { ttlHours: 0 })).body;
    await until(() => hook.received.some((x) => JSON.parse(x.body).data.shareId === never.id), 10_000, 'created event');
    expect(JSON.parse(hook.received.find((x) => JSON.parse(x.body).data.shareId === never.id)!.body).data).toMatchObject({ ttlHours: 0, expiresUtc: null });
  });

  it('every create, view and revoke is audited; no full token in the audit log, the events table or the server log', async () => {
    const callId = await transcriptWith(['Audit test.']);
    const c = (await share(callId, { ttlHours: 1 })).body;
    await page(c.token);
    await revoke(callId, c.id);
    const audit = (await j(s.fetch(`${V1}/auditlog?event=transcript-share&limit=500`, { key: s.adminKey }))).body;
    const forShare = audit.data.filter((e: Json) => e.extra.includes(c.id));
    expect(forShare.map((e: Json) => e.event).sort()).toEqual(['transcript-share-create', 'transcript-share-revoke', 'transcript-share-view']);
    expect(forShare.find((e: Json) => e.event === 'transcript-share-create')).toMatchObject({ user: 'admin', ip: '127.0.0.1' });
    expect(JSON.stringify(audit)).not.toContain(c.token);
    const events = JSON.stringify(s.appliance.core.db.prepare('SELECT data FROM events').all());
    expect(events).toContain(c.tokenTail);
    expect(events).not.toContain(c.token);
    expect(s.logs.text()).not.toContain(c.token);
  });

  it('every new endpoint is in /openapi.json', async () => {
    const doc = (await j(s.fetch('/openapi.json'))).body;
    expect(doc.paths['/api.ashx/v1/transcripts/{callId}/shares']).toHaveProperty('post');
    expect(doc.paths['/api.ashx/v1/transcripts/{callId}/shares']).toHaveProperty('get');
    expect(doc.paths['/api.ashx/v1/transcripts/{callId}/shares/{shareId}/revoke']).toHaveProperty('post');
    expect(doc.paths['/transcript.ashx?share'].get.security).toEqual([]);
  });
});

describe('rate limit of the public page', () => {
  it('answers 429 with Retry-After past the per-IP budget, for found and unknown links alike', async () => {
    let limited: Response | undefined;
    for (let i = 0; i <= VIEWS_PER_MINUTE && !limited; i++) {
      const r = await page(crypto.randomBytes(32).toString('base64url'));
      if (r.status === 429) limited = r;
      else expect(r.status).toBe(404);
    }
    expect(limited).toBeDefined();
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
