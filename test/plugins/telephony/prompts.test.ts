import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../../server/cli.ts';
import telephony from '../../../plugins/telephony/index.ts';
import type { AnyPlugin } from '../../../server/plugin.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { adm, call, j } from './helpers.ts';

const TOKEN = 'fake-bridge-control-token-prompts-0123';
const V1 = '/api.ashx/v1';
const B = 'office-b.example';
let s: TestServer;
let fake: FakeBridge;
let keyB: string;
let dir: string;

beforeAll(async () => {
  fake = new FakeBridge(TOKEN, '');
  await fake.start();
  s = await startTestServer({ overrides: { plugins: { telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN } } } } });
  fake.callbackUrl = `${s.url}/internal/bridge/events`;
  keyB = (await s.addTenant(B)).adminKey;
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { id: 'main', name: 'Main', host: '127.0.0.1' });
  await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'main' });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prompts-'));
});
afterAll(async () => {
  await s?.stop();
  await fake?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function cli(args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), stdin: () => Promise.resolve('') };
  const code = await main([...args, '--data-dir', s.dataDir], io, { plugins: [telephony as AnyPlugin] });
  return { code, out, err };
}
const api = (method: string, p: string, json?: unknown, key = s.adminKey, host?: string) => j(s.fetch(`${V1}${p}`, { method, key, host, json }));
const placed = (id: string) => fake.placed.filter((p) => p.callId === id);

describe('prompts kept per tenant, named by a call systemPrompt slug', () => {
  it('sovcomms prompt add SLUG --file F, list, remove; the API sees the same rows', async () => {
    const f = path.join(dir, 'reminder.txt');
    fs.writeFileSync(f, 'You remind the callee of the appointment on Tuesday at 10.\nBe brief.\n');
    const added = await cli(['prompt', 'add', 'dentist-reminder', '--file', f]);
    expect(added).toMatchObject({ code: 0, out: [expect.stringContaining('prompt dentist-reminder added')] });
    // Again without --replace: refused; with it: replaced.
    expect((await cli(['prompt', 'add', 'dentist-reminder', '--file', f])).code).toBe(1);
    fs.writeFileSync(f, 'You remind the callee of the appointment on Wednesday at 9.');
    expect((await cli(['prompt', 'add', 'dentist-reminder', '--file', f, '--replace'])).out[0]).toContain('replaced');
    expect((await cli(['prompt', 'list'])).out).toEqual([expect.stringMatching(/^dentist-reminder\t59 characters\t/)]);
    const got = await api('GET', '/prompts/dentist-reminder');
    expect(got).toMatchObject({
      status: 200,
      body: { slug: 'dentist-reminder', text: 'You remind the callee of the appointment on Wednesday at 9.', createdBy: 'cli' },
    });
    // A slug outside the rule, an empty file and a missing file are refused with a reason.
    const bad = await cli(['prompt', 'add', 'Not A Slug', '--file', f]);
    expect(bad.code).toBe(1);
    expect(bad.err.join('\n')).toContain('slug');
    fs.writeFileSync(path.join(dir, 'empty.txt'), '\n');
    expect((await cli(['prompt', 'add', 'x', '--file', path.join(dir, 'empty.txt')])).err.join('\n')).toContain('is empty');
    expect((await cli(['prompt', 'add', 'x', '--file', path.join(dir, 'none.txt')])).err.join('\n')).toContain('ENOENT');
    expect((await cli(['prompt', 'remove', 'dentist-reminder'])).code).toBe(0);
    expect((await api('GET', '/prompts/dentist-reminder')).status).toBe(404);
  });

  it('the API: POST 201 (409 on an existing slug), PUT replaces, DELETE; bad input 400 naming the field; audited', async () => {
    expect(await api('POST', '/prompts', { slug: 'survey_2026', text: 'Ask three questions about our service.' })).toMatchObject({
      status: 201,
      body: { slug: 'survey_2026', text: 'Ask three questions about our service.' },
    });
    expect(await api('POST', '/prompts', { slug: 'survey_2026', text: 'x' })).toMatchObject({
      status: 409,
      body: { error: 'conflict', reason: 'prompt_exists', name: 'survey_2026' },
    });
    expect(await api('PUT', '/prompts/survey_2026', { text: 'Ask two questions.' })).toMatchObject({ status: 200, body: { text: 'Ask two questions.' } });
    for (const [body, field] of [
      [{ slug: '-bad', text: 'x' }, 'slug'],
      [{ slug: 'UPPER', text: 'x' }, 'slug'],
      [{ slug: 'ok', text: '' }, 'text'],
      [{ slug: 'ok', text: 'x'.repeat(20_001) }, 'text'],
    ] as const) {
      const r = await api('POST', '/prompts', body);
      expect(r.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(r.body).toMatchObject({ error: 'invalid_request', field });
    }
    const list = await api('GET', '/prompts');
    expect(list.body).toMatchObject({ total: 1, data: [{ slug: 'survey_2026' }] });
    // Another tenant sees none of them.
    expect((await api('GET', '/prompts', undefined, keyB, B)).body.total).toBe(0);
    const audit = s.appliance.core.db.prepare("SELECT event FROM audit_log WHERE event LIKE 'prompt-%'").all() as { event: string }[];
    expect(audit.map((a) => a.event)).toEqual(['prompt-save', 'prompt-save']);
    const openapi = (await j(s.fetch('/openapi.json'))).body;
    expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining([`${V1}/prompts`, `${V1}/prompts/{slug}`]));
  });

  it("a call's systemPrompt naming a slug reaches the AI as the prompt's text; an unknown slug is 400 naming it and nothing is placed", async () => {
    await api('PUT', '/prompts/renewal', { text: 'Offer the contract renewal, politely.' });
    const ok = await api('POST', '/calls', call({ systemPrompt: 'renewal' }));
    expect(ok.status).toBe(200);
    expect(placed(ok.body.callId)[0]!.engine.systemPrompt).toBe('Offer the contract renewal, politely.');
    // Prompt text stays text, even with slug-like words in it.
    const text = await api('POST', '/calls', call({ systemPrompt: 'Offer the renewal.' }));
    expect(placed(text.body.callId)[0]!.engine.systemPrompt).toBe('Offer the renewal.');
    const before = fake.placed.length;
    const unknown = await api('POST', '/calls', call({ systemPrompt: 'renewl' }));
    expect(unknown).toMatchObject({ status: 400, body: { error: 'invalid_request', field: 'systemPrompt' } });
    expect(unknown.body.error_description).toContain('renewl');
    // Another tenant's slug is unknown here.
    const other = await api('POST', '/calls', call({ systemPrompt: 'renewal' }), keyB, B);
    expect(other).toMatchObject({ status: 400, body: { field: 'systemPrompt' } });
    expect(fake.placed.length).toBe(before);
    expect(fake.placed.map((p) => p.engine.systemPrompt)).not.toContain('renewl');
  });

  it("a call's voicemail policy: hang up (the default) or leave the given message, as PlaceCall carries it to the bridge", async () => {
    const plain = await api('POST', '/calls', call());
    expect(placed(plain.body.callId)[0]!.engine).not.toHaveProperty('leaveVoicemailMessage');
    const hang = await api('POST', '/calls', call({ voicemail: { action: 'hangup' } }));
    expect(placed(hang.body.callId)[0]!.engine).not.toHaveProperty('voicemailMessage');
    const msg = await api('POST', '/calls', call({ voicemail: { action: 'message', text: 'This is Acme, please call us back.' } }));
    expect(placed(msg.body.callId)[0]!.engine).toMatchObject({ leaveVoicemailMessage: true, voicemailMessage: 'This is Acme, please call us back.' });
    for (const v of [{ action: 'message' }, { action: 'message', text: '' }, { action: 'beep' }, { action: 'message', text: 'x'.repeat(1001) }]) {
      const r = await api('POST', '/calls', call({ voicemail: v }));
      expect(r.status, JSON.stringify(v).slice(0, 60)).toBe(400);
      expect(r.body.field).toMatch(/^voicemail/);
    }
  });
});
