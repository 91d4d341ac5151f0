/**
 * GET /lotl.ashx?status before and after the first runs (spec LotlManifest: as_of and
 * next_refresh_at are date-times). Before any run there is no time to give: as_of is null and the
 * `state` extension says no list was ever loaded; a run that stores nothing gives as_of a real
 * time and stays never-loaded; the first stored list makes it current. Real server, one small
 * import (the LOTL alone), no network.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { main } from '../../../server/cli.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { SNAPSHOT } from './support.ts';

const FIXED = Date.parse('2026-08-22T00:00:00Z');
const clock = new ManualClock(FIXED);
let s: TestServer;

// The default test server: autoRefresh off, so next_refresh_at is null throughout.
beforeAll(async () => {
  s = await startTestServer({ clock });
});
afterAll(async () => {
  await s?.stop();
});

interface Status {
  state: string;
  as_of: string | null;
  next_refresh_at: string | null;
  auto_refresh: boolean;
  lists: unknown[];
}
const status = async (): Promise<Status> => {
  const r = await s.fetch('/lotl.ashx?status');
  expect(r.status).toBe(200);
  return r.json() as Promise<Status>;
};
const importXml = (name: string, body: Buffer) =>
  s.fetch(`/lotl.ashx?import&name=${name}`, {
    method: 'POST',
    body,
    headers: { 'Content-Type': 'application/xml', 'X-Service-Admin-Signature': s.hmac('lotl-import') },
  });
const cliStatus = async (): Promise<string[]> => {
  const out: string[] = [];
  expect(await main(['lotl', 'status', '--data-dir', s.dataDir], { out: (l) => out.push(l), err: () => undefined, stdin: async () => '' })).toBe(0);
  return out;
};

describe('trusted-list status: as_of and state', () => {
  it('before any run: as_of null (never the epoch), state never-loaded, auto_refresh false explains the null next_refresh_at', async () => {
    expect(await status()).toMatchObject({ state: 'never-loaded', as_of: null, next_refresh_at: null, auto_refresh: false, lists: [] });
    const out = await cliStatus();
    // (The CLI reads config.json, not this server's overrides, so its autoRefresh may differ.)
    expect(out[0]).toMatch(/^state never-loaded {2}as_of - {2}next_refresh_at \S+ /);
    expect(out[1]).toMatch(/no trusted list was ever loaded/);
  });

  it('a run that stores nothing gives as_of its real time and stays never-loaded', async () => {
    clock.set(FIXED + 60_000);
    const r = await importXml('broken.xml', Buffer.from('<TrustServiceStatusList>'));
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ accepted: 0, rejected: 1 });
    const st = await status();
    expect(st).toMatchObject({ state: 'never-loaded', as_of: new Date(FIXED + 60_000).toISOString(), lists: [] });
  });

  it('the first stored list makes it current, as_of the end of that run', async () => {
    clock.set(FIXED + 120_000);
    const r = await importXml('eu-lotl.xml', fs.readFileSync(path.join(SNAPSHOT, 'eu-lotl.xml')));
    expect(await r.json()).toMatchObject({ accepted: 1 });
    expect(await status()).toMatchObject({ state: 'current', as_of: new Date(FIXED + 120_000).toISOString() });
    expect((await cliStatus())[0]).toMatch(new RegExp(`^state current {2}as_of ${new Date(FIXED + 120_000).toISOString()} `));
  });

  it('/openapi.json says as_of and next_refresh_at are nullable date-times and documents state', async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON Schema, walked by the assertions
    const doc = (await (await s.fetch('/openapi.json')).json()) as any;
    const props = doc.paths['/lotl.ashx?status'].get.responses['200'].content['application/json'].schema.properties;
    for (const k of ['as_of', 'next_refresh_at']) {
      expect(props[k].anyOf, k).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'string', format: 'date-time' }), { type: 'null' }]));
      expect(props[k].description, k).toMatch(/null/);
    }
    expect(props.state).toMatchObject({ enum: ['never-loaded', 'current', 'stale'], description: expect.stringContaining('never-loaded') });
    expect(props.auto_refresh.description).toMatch(/next_refresh_at/);
  });
});
