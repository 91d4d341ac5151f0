import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { RegisteredRoute } from '../../server/http/dispatch.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { adminToken, j, type Json } from '../plugins/admin/helpers.ts';

/**
 * Tenant isolation, generated from the route table (issue 18 "What must be true" 2): every
 * credentialed route of every plugin is called
 * - with tenant A's key and A's bearer under B's Host,
 * - with A's credentials under A's Host but B's ids in the path, the query and the body,
 * - with B's key under an unknown Host (which falls back to the primary tenant),
 * - with a bearer minted by B's provider under A's Host,
 * and every answer must refuse (no 2xx that acts on B) and carry nothing of B. A and B are both
 * ordinary tenants (the primary's admins are super-admins by design and reach every tenant).
 * Afterwards B's data is all still there, unchanged.
 */
const V1 = '/api.ashx/v1';
let s: TestServer;
const A = { host: 'a.test', key: '', token: '', hostPort: '' };
const B = { host: 'b.test', key: '', token: '', hostPort: '' };
/** B's ids by the parameter names that carry such ids. */
const bIds: Record<string, string[]> = {};
/** Strings that only B's data contains: none may appear in an answer to A. */
const markers: string[] = [];

const add = (name: string, v: string | undefined) => {
  if (!v) return;
  (bIds[name] ??= []).push(v);
  markers.push(v);
};

async function asB(method: string, p: string, json?: unknown): Promise<Json> {
  const r = await j(s.fetch(p, { method, host: B.hostPort, key: B.token, json }));
  expect(r.status, `${method} ${p}: ${JSON.stringify(r.body)}`).toBeLessThan(300);
  return r.body;
}

beforeAll(async () => {
  s = await startTestServer();
  for (const t of [A, B]) {
    t.key = (await s.addTenant(t.host)).adminKey;
    t.hostPort = `${t.host}:${s.port}`;
    t.token = await adminToken(s, t.hostPort, 'admin', 'correct horse battery');
  }
  // B's data, through B's own API.
  add('id', (await asB('POST', '/signal.ashx?webhooks=add', { url: 'http://10.9.9.9/b-marker-hook', events: '*' })).id);
  const user = await asB('POST', `${V1}/users`, { name: 'bmarkeruser', role: 'user', generatePassword: true });
  add('id', user.id);
  markers.push('bmarkeruser');
  add('id', (await asB('POST', '/signal.ashx?apikey-create=1', { name: 'bmarkerkey' })).id);
  await asB('POST', '/signal.ashx?trunks=save', { id: 'bmarkertrunk', name: 'bmarkertrunk', host: '10.9.9.8' });
  add('id', 'bmarkertrunk');
  await asB('POST', '/signal.ashx?numbers=save', { number: '+4940999111', name: 'bmarkernumber' });
  add('number', '+4940999111');
  await asB('POST', `${V1}/outbound-routes`, { match: '+4471*', trunkIds: ['bmarkertrunk'] });
  add('match', '+4471*');
  await asB('POST', `${V1}/inbound-routes`, { did: '+4940999222', user: 'bmarkeruser' });
  add('did', '+4940999222');
  await asB('POST', '/signal.ashx?whitelist=add', { number: '+4940999333', comment: 'bmarkerwl' });
  markers.push('+4940999333', 'bmarkerwl');
  await asB('POST', '/signal.ashx?oidc-clients-save=1', { client_id: 'bmarkerclient', redirect_uris: ['https://b.example/cb'] });
  add('client_id', 'bmarkerclient');
  // The CA issues only for a registered client of the tenant.
  await asB('POST', '/signal.ashx?oidc-clients-save=1', { client_id: 'bmarker-verifier', redirect_uris: ['https://bmarker-verifier/cb'] });
  const cert = await j(
    s.fetch('/rp-cert.ashx?issue', { method: 'POST', host: B.hostPort, key: B.token, json: { client_id: 'bmarker-verifier', include_key: false } }),
  );
  if (cert.status < 300) add('serial', cert.body.serial);
  // A call and its id (the bridge is off in this server: the row is written as the API would leave it).
  const bTenant = s.appliance.core.tenants.byHost('b.test')!;
  const callId = 'oac-b0b0b0b0b0b0';
  s.appliance.core.db
    .prepare(
      `INSERT INTO tel_calls (call_id, tenant_id, requested_by, phone, display_name, email, system_prompt, api_key_sealed, model, voice, language, max_seconds,
        status, created_at, scheduled_for, dispatched_at, answered_at, ended_at, ended_reason, duration_sec, trunk_id, transcript_path, error_detail, attempt,
        retries_left, retry_delay_minutes)
       VALUES (?, ?, 'admin', '+4940999444', 'bmarkercallee', '', 'p', '', 'm', 'Aoede', 'en-US', 300, 'scheduled', ?, ?, '', '', NULL, '', 0, '', '', '', 0, 0, 5)`,
    )
    .run(callId, bTenant.id, new Date().toISOString(), new Date(Date.now() + 86_400_000).toISOString());
  add('id', callId);
  add('callId', callId);
  markers.push('bmarkercallee', bTenant.id);
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

/** Fills a route's path parameters with a value. */
const fill = (address: string, v: string) => address.replace(/:[A-Za-z0-9_]+/g, encodeURIComponent(v));
const paramNames = (address: string) => [...address.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);

/** A body for the route holding B's ids in every field of its schema that names one. */
function bodyWith(r: RegisteredRoute, v: string): unknown {
  const shape = (r.def.body as z.ZodObject | undefined)?.shape as Record<string, unknown> | undefined;
  if (!shape) return r.def.method === 'GET' || r.def.method === 'DELETE' ? undefined : {};
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(shape))
    if (/^(id|ids|number|match|did|serial|client_id|clientId|user|deliveryId|callId|trunkIds)$/.test(k)) out[k] = k.endsWith('s') && k !== 'ids' ? [v] : v;
  return out;
}

/** B's markers in an answer, except the value the request itself sent (an error may name what it was given). */
function leaks(text: string, sent?: string): string[] {
  return markers.filter((m) => m !== sent && text.includes(m));
}

// A live stream never ends (its tenant scoping is tested in test/server/live.test.ts).
const credentialed = () =>
  s.appliance.dispatcher.routes.filter((r) => r.def.auth.kind === 'credentials' && r.def.responses?.[200]?.description !== 'text/event-stream');

describe('tenant isolation over every credentialed route', { timeout: 120_000 }, () => {
  it('A’s key and A’s bearer under B’s Host: refused, nothing of B', async () => {
    const bad: string[] = [];
    let n = 0;
    for (const r of credentialed()) {
      for (const address of r.addresses) {
        for (const cred of [A.key, A.token]) {
          for (const v of bIds[paramNames(address)[0] ?? 'id'] ?? ['x']) {
            const res = await s.fetch(fill(address, v), { method: r.def.method, host: B.hostPort, key: cred, json: bodyWith(r, v) });
            const text = await res.text();
            n++;
            if (res.status !== 401 && res.status !== 403) bad.push(`${res.status} ${r.def.method} ${address}`);
            if (leaks(text, v).length) bad.push(`leak ${r.def.method} ${address}: ${leaks(text, v).join(',')}`);
          }
        }
      }
    }
    expect(n).toBeGreaterThan(100);
    expect(bad).toEqual([]);
  });

  it('A’s credentials under A’s Host with B’s ids in path and body: never a success on B, nothing of B', async () => {
    const bad: string[] = [];
    let n = 0;
    const allIds = [...new Set(Object.values(bIds).flat())];
    // A may write B's id strings into its own data (an RP certificate for a host named like one):
    // reading that back is A's data, not B's.
    const writtenByA = new Set<string>();
    for (const r of credentialed()) {
      const cred = r.def.auth.kind === 'credentials' && r.def.auth.accept.includes('apiKey') ? A.key : A.token;
      for (const address of r.addresses) {
        const names = paramNames(address);
        const values = names.length ? (bIds[names[0]!] ?? allIds) : r.def.body ? allIds : ['-'];
        for (const v of values) {
          const res = await s.fetch(fill(address, v), { method: r.def.method, host: A.hostPort, key: cred, json: bodyWith(r, v) });
          const text = await res.text();
          n++;
          const found = leaks(text, v).filter((m) => !writtenByA.has(m));
          if (found.length) bad.push(`leak ${res.status} ${r.def.method} ${address} with ${v}: ${found.join(',')}`);
          if (r.def.method !== 'GET' && res.ok) writtenByA.add(v);
        }
      }
    }
    expect(n).toBeGreaterThan(100);
    expect(bad).toEqual([]);
  });

  it('B’s key under an unknown Host (the primary’s fallback) and B’s bearer under A’s Host: refused', async () => {
    const bad: string[] = [];
    for (const r of credentialed()) {
      const address = r.addresses[0]!;
      const url = fill(address, 'x');
      const viaUnknown = await s.fetch(url, { method: r.def.method, host: `unknown.example:${s.port}`, key: B.key, json: bodyWith(r, 'x') });
      const viaA = await s.fetch(url, { method: r.def.method, host: A.hostPort, key: B.token, json: bodyWith(r, 'x') });
      for (const [label, res] of [
        ['B key, unknown Host', viaUnknown],
        ['B bearer, A Host', viaA],
      ] as const) {
        const text = await res.text();
        if (res.status !== 401 && res.status !== 403) bad.push(`${label}: ${res.status} ${r.def.method} ${address}`);
        if (leaks(text).length) bad.push(`${label}: leak ${address}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('afterwards B’s data is all there, unchanged', async () => {
    const hooks = await asB('GET', '/signal.ashx?webhooks=list');
    expect(hooks.map((h: Json) => h.url)).toEqual(['http://10.9.9.9/b-marker-hook']);
    expect(hooks[0].active).toBe(true);
    const users = await asB('GET', `${V1}/users`);
    expect(users.data.find((u: Json) => u.name === 'bmarkeruser').status).toBe('active');
    const keys = await asB('GET', `${V1}/apikeys`);
    expect(keys.data.find((k: Json) => k.name === 'bmarkerkey').revokedAtUtc ?? null).toBeNull();
    expect((await asB('GET', '/signal.ashx?trunks=list')).trunks.map((t: Json) => t.id)).toContain('bmarkertrunk');
    expect((await asB('GET', `${V1}/outbound-routes`)).data.map((x: Json) => x.match)).toContain('+4471*');
    expect((await asB('GET', `${V1}/inbound-routes`)).data.map((x: Json) => x.did)).toContain('+4940999222');
    expect((await asB('GET', `${V1}/calls/oac-b0b0b0b0b0b0`)).status).toBe('scheduled');
    expect((await asB('GET', '/signal.ashx?oidc-clients=1')).map((c: Json) => c.client_id)).toContain('bmarkerclient');
  });
});
