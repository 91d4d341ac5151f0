import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { main } from '../../../server/cli.ts';
import { Receiver, admin, testPlugins, until } from './support.ts';

/**
 * A subscription names declared events only (issue 24, issue 27 item 10): the names and their
 * descriptions come from the plugins' declarations, a typo is refused, `*` stays valid, and what
 * is already stored keeps working.
 */
let s: TestServer;
let rx: Receiver;

beforeAll(async () => {
  rx = await new Receiver().start();
  s = await startTestServer({ plugins: testPlugins(), overrides: { plugins: { webhooks: { allowCidrs: ['127.0.0.1/32'] } } } });
});
afterAll(async () => {
  await s?.stop();
  await rx?.stop();
});

describe('declared events', () => {
  it('GET /api.ashx/v1/webhooks/events lists every declared event with its plugin and description, and is in /openapi.json', async () => {
    const r = await s.fetch('/api.ashx/v1/webhooks/events', { key: s.adminKey });
    expect(r.status).toBe(200);
    const env = (await r.json()) as { data: { name: string; plugin: string; description: string }[]; total: number };
    expect(env.data.map((e) => e.name)).toEqual(['backup.failed', 'call.ended', 'webhook.test']);
    expect(env.total).toBe(3);
    expect(env.data[0]).toEqual({ name: 'backup.failed', plugin: 'core', description: expect.any(String) });
    expect(env.data[2]).toEqual({ name: 'webhook.test', plugin: 'webhooks', description: expect.stringMatching(/test delivery/i) });
    expect(env.data[1]).toMatchObject({ name: 'call.ended', plugin: 'test-calls' });
    expect((await s.fetch('/api.ashx/v1/webhooks/events')).status).toBe(401);

    const doc = (await (await s.fetch('/openapi.json')).json()) as {
      paths: Record<string, unknown>;
      webhooks: Record<string, { post: { requestBody: unknown } }>;
    };
    expect(doc.paths['/api.ashx/v1/webhooks/events']).toBeDefined();
    expect(Object.keys(doc.webhooks).sort()).toEqual(['backup.failed', 'call.ended', 'webhook.test']);
    expect(JSON.stringify(doc.webhooks['webhook.test']!.post.requestBody)).toContain('subscriptionId');
  });

  it('refuses a subscription to an event nobody declares with 400 unknown_event naming the known names; * and declared names pass', async () => {
    const bad = await admin(s, 'add', { body: { url: `${rx.url}/typo`, events: ['call.ended', 'not.an.event'] } });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toBe('unknown_event');
    expect(bad.json.error_description).toContain('"not.an.event"');
    expect(bad.json.error_description).toContain('call.ended, webhook.test');
    expect(bad.json.known).toEqual(['*', 'backup.failed', 'call.ended', 'webhook.test']);
    expect((await admin(s, 'list')).json.some((x: { url: string }) => x.url.endsWith('/typo'))).toBe(false);

    const all = await admin(s, 'add', { body: { url: `${rx.url}/all`, events: ['*'] } });
    expect(all.status).toBe(200);
    const one = await admin(s, 'add', { body: { url: `${rx.url}/one`, events: 'call.ended,webhook.test' } });
    expect(one.status).toBe(200);
    for (const id of [all.json.id, one.json.id]) await admin(s, 'remove', { body: { id } });
  });

  it('the CLI refuses an undeclared name too, and accepts names of plugins it does not set up', async () => {
    const run = async (...args: string[]) => {
      const err: string[] = [];
      const out: string[] = [];
      const code = await main(
        [...args, '--data-dir', s.dataDir],
        { out: (l) => out.push(l), err: (l) => err.push(l), stdin: async () => '' },
        { plugins: testPlugins() },
      );
      return { code, out, err };
    };
    const bad = await run('webhook', 'add', '--url', 'http://10.9.9.9/cli-typo', '--events', 'call.endded');
    expect(bad.code).toBe(1);
    expect(bad.err.join('\n')).toMatch(/"call\.endded" is not an event any plugin declares; known: \*, backup\.failed, call\.ended, webhook\.test/);
    // call.ended is declared by test-calls, which `webhook` neither depends on nor sets up.
    const ok = await run('webhook', 'add', '--url', 'http://10.9.9.9/cli-ok', '--events', 'call.ended');
    expect(ok.code).toBe(0);
    const id = /^id\s+([0-9a-f]{16})$/.exec(ok.out[0]!)![1]!;
    expect((await run('webhook', 'remove', id)).code).toBe(0);
  });

  it('a stored subscription naming an event no plugin declares any more is listed and still gets the events it names', async () => {
    const add = await admin(s, 'add', { body: { url: `${rx.url}/stored`, events: ['call.ended'] } });
    s.appliance.core.db.prepare('UPDATE webhook_subscriptions SET events = ? WHERE id = ?').run(JSON.stringify(['call.ended', 'gone.event']), add.json.id);
    expect((await admin(s, 'list')).json.find((x: { id: string }) => x.id === add.json.id).events).toEqual(['call.ended', 'gone.event']);
    s.appliance.core.events.emit(s.appliance.core.tenants.primary()!.id, 'call.ended', { callId: 'stored-1' });
    await until(() => rx.received.find((x) => x.path === '/stored'), 5000, 'delivery to the stored subscription');
    await admin(s, 'remove', { body: { id: add.json.id } });
  });
});
