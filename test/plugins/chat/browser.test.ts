import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { addUser, type ChatUser } from './support.ts';

let s: TestServer;
let browser: Browser;
let alice: ChatUser;
let bob: ChatUser;

beforeAll(async () => {
  s = await startTestServer();
  const host = `127.0.0.1:${s.port}`;
  alice = await addUser(s, s.primary, 'alice', host);
  bob = await addUser(s, s.primary, 'bob', host);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

/**
 * A page of the appliance's origin that talks to the chat as the console would: fetch with the
 * bearer, a one-time ticket for the WebSocket (browsers cannot set its headers), frames kept in
 * `window.chatFrames`.
 */
async function chatPage(u: ChatUser): Promise<Page> {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  await page.goto(`${s.url}/healthz`);
  await page.evaluate(async (key) => {
    const w = globalThis as unknown as { chatFrames: unknown[]; chatKey: string };
    w.chatFrames = [];
    w.chatKey = key;
    const t = (await (await fetch('/chat.ashx?op=socket-ticket', { method: 'POST', headers: { Authorization: `Bearer ${key}` } })).json()) as {
      ticket: string;
    };
    const ws = new WebSocket(
      `ws://${(globalThis as unknown as { location: { host: string } }).location.host}/chat.ashx?op=socket&ticket=${encodeURIComponent(t.ticket)}`,
    );
    ws.onmessage = (e) => w.chatFrames.push(JSON.parse(String(e.data)));
    await new Promise((r, j) => {
      ws.onopen = r;
      ws.onerror = j;
    });
  }, u.key);
  return page;
}

function frames(page: Page): Promise<{ type: string; message?: { text: string | null; file: { sha: string; name: string } | null } }[]> {
  return page.evaluate(() => (globalThis as unknown as { chatFrames: { type: string }[] }).chatFrames);
}

describe('chat in two Chromium pages', () => {
  it('two users exchange messages and a file live, over ticket-opened sockets', { timeout: 60_000 }, async () => {
    const a = await chatPage(alice);
    const b = await chatPage(bob);
    await a.evaluate(async () => {
      const w = globalThis as unknown as { chatKey: string };
      await fetch('/chat.ashx?op=send&with=bob', {
        method: 'POST',
        headers: { Authorization: `Bearer ${w.chatKey}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ text: 'hello from <i>alice</i>' }),
      });
    });
    await expect
      .poll(async () => (await frames(b)).some((f) => f.type === 'message' && f.message?.text === 'hello from <i>alice</i>'), { timeout: 10_000 })
      .toBe(true);

    // Bob answers with a file, as a drag-and-drop upload would send it (FormData).
    const up = await b.evaluate(async () => {
      const w = globalThis as unknown as { chatKey: string };
      const bytes = new Uint8Array(70_000).map((_, i) => (i * 31) % 256);
      const fd = new FormData();
      fd.append('file', new File([bytes], 'plan ü.bin', { type: 'application/octet-stream' }));
      const r = await fetch('/chat.ashx?op=upload&with=alice', { method: 'POST', headers: { Authorization: `Bearer ${w.chatKey}` }, body: fd });
      return { status: r.status, body: (await r.json()) as { file: { sha: string } } };
    });
    expect(up.status).toBe(200);
    await expect
      .poll(async () => (await frames(a)).find((f) => f.message?.file?.sha === up.body.file.sha)?.message?.file?.name, { timeout: 10_000 })
      .toBe('plan ü.bin');
    const got = await a.evaluate(async (sha) => {
      const w = globalThis as unknown as { chatKey: string };
      const r = await fetch(`/chat.ashx?op=download&sha=${sha}`, { headers: { Authorization: `Bearer ${w.chatKey}` } });
      const buf = new Uint8Array(await r.arrayBuffer());
      const ok = buf.length === 70_000 && buf.every((v, i) => v === (i * 31) % 256);
      return { ok, disposition: r.headers.get('content-disposition'), nosniff: r.headers.get('x-content-type-options') };
    }, up.body.file.sha);
    expect(got).toEqual({ ok: true, disposition: `attachment; filename="plan _.bin"; filename*=UTF-8''plan%20%C3%BC.bin`, nosniff: 'nosniff' });
  });
});
