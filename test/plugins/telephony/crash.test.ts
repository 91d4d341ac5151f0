import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { main, type CliIo } from '../../../server/cli.ts';
import { startServe, type ServeProcess } from '../../support/cli.ts';
import { httpFetch, tempDir } from '../../support/server.ts';
import { FakeBridge } from '../../support/fake-bridge.ts';
import { call, until } from './helpers.ts';

/**
 * A hard crash (SIGKILL of `sovcomms serve`) while a scheduled call is being handed to the bridge:
 * after the restart the dial job runs again and the bridge's 409 duplicate_call makes the re-send
 * harmless, so the callee is called exactly once and the call ends up in flight, not stuck.
 */
const TOKEN = 'fake-bridge-control-token-crash-000001';
const dataDir = tempDir();
const fake = new FakeBridge(TOKEN, '');
const serves: ServeProcess[] = [];
afterAll(async () => {
  for (const s of serves) await s.stop('SIGKILL');
  await fake.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function cli(args: string[]): Promise<string[]> {
  const out: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: () => {}, stdin: async () => '' };
  const code = await main([...args, '--data-dir', dataDir], io);
  if (code !== 0) throw new Error(`sovcomms ${args.join(' ')} exited ${code}`);
  return out;
}

describe('hard crash between the scheduled time and the bridge accepting the call', () => {
  it('SIGKILL mid-dial, restart: dialed again, deduplicated by the bridge, in flight once', { timeout: 120_000 }, async () => {
    await fake.start();
    const env = {
      SOVCOMMS_CONFIG_JSON: JSON.stringify({ jobs: { pollMs: 50 }, plugins: { telephony: { bridge: { mode: 'remote', url: fake.url, token: TOKEN } } } }),
    };
    const s1 = await startServe(dataDir, [], env);
    serves.push(s1);
    const key = (await cli(['apikey', 'create', '--user', 'admin']))[0]!;
    await cli(['trunk', 'add', '--id', 'main', '--name', 'Main', '--host', '127.0.0.1', '--default']);
    const killed = new Promise<void>((resolve) => {
      fake.onPlace = () => {
        fake.onPlace = undefined;
        void s1.stop('SIGKILL').then(() => resolve());
      };
    });
    fake.placeDelayMs = 1500;
    const at = new Date(Date.now() + 1500).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const r = await httpFetch(`${s1.url}/api.ashx/v1/calls`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(call({ scheduleAtUtc: at, email: undefined })),
    });
    const id = ((await r.json()) as { callId: string }).callId;
    await killed;
    await until(() => fake.placed.some((p) => p.callId === id), 10_000, 'the first send recorded by the bridge');
    fake.placeDelayMs = 0;

    const s2 = await startServe(dataDir, [], env);
    serves.push(s2);
    const get = async () =>
      (await (await httpFetch(`${s2.url}/api.ashx/v1/calls/${id}`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
        status: string;
        attempt: number;
      };
    const rec = await until(
      async () => {
        const c = await get();
        return c.status === 'in-flight' ? c : null;
      },
      30_000,
      'in flight after the restart',
    );
    expect(rec.attempt).toBe(1);
    expect(fake.placeRequests.filter((x) => x === id)).toHaveLength(2);
    expect(fake.placed.filter((p) => p.callId === id)).toHaveLength(1);
  });
});
