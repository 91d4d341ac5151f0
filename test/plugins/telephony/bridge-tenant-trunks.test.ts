/**
 * The real bridge's per-tenant trunk sets (CONTROL-API.md `PUT /tenants/:tenantId/trunks`): one
 * tenant's set replaces that tenant's trunks alone, so neither its volume nor a refused set takes
 * another tenant's trunks off the bridge (SECURITY.md "Per-tenant caps").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Bridge } from '../../../plugins/telephony/bridge/bridge.ts';
import type { Json } from './helpers.ts';

const TOKEN = 'tenant-trunks-test-token-0123456789';
let bridge: Bridge;

beforeAll(async () => {
  const base = 42000 + 2 * Math.floor(Math.random() * 2000);
  bridge = new Bridge({
    token: TOKEN,
    controlPort: 0,
    callbackUrl: 'http://127.0.0.1:9/internal/bridge/events',
    sipHost: '127.0.0.1',
    sipPort: 0,
    rtpMin: base,
    rtpMax: base + 9,
    maxCalls: 2,
    keepaliveMs: 0,
    mediaThread: false,
    webrtc: { hostAddresses: ['127.0.0.1'] },
  });
  await bridge.start();
}, 30_000);

afterAll(async () => {
  await bridge?.stop();
});

async function ctl(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const r = await fetch(bridge.controlUrl + path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const trunk = (id: string) => ({ id, host: '127.0.0.1', port: 5060, transport: 'udp', register: false, maxConcurrentCalls: 10, codecs: ['PCMU'] });
const many = (tenant: string, n: number) => Array.from({ length: n }, (_, i) => trunk(`${tenant}.t${i}`));
const ids = async (): Promise<string[]> => ((await ctl('GET', '/health')).body.trunks as { id: string }[]).map((t) => t.id);

describe('PUT /tenants/:tenantId/trunks', () => {
  it("replaces one tenant's trunks only; a refused set or another tenant's volume leaves the others in service", async () => {
    expect(await ctl('PUT', '/tenants/big/trunks', { trunks: many('big', 995) })).toMatchObject({ status: 200, body: { ok: true, count: 995, rejected: [] } });
    expect(await ctl('PUT', '/tenants/small/trunks', { trunks: [trunk('small.main')] })).toMatchObject({ status: 200, body: { count: 1 } });
    expect(await ids()).toHaveLength(996);

    // Beyond the bridge's bounds: refused, and nobody's trunks change.
    expect((await ctl('PUT', '/tenants/big/trunks', { trunks: many('big', 1001) })).status).toBe(400);
    expect(await ids()).toContain('small.main');
    expect(await ids()).toHaveLength(996);

    // A trunk of another tenant in a tenant's set is refused alone.
    const cross = await ctl('PUT', '/tenants/small/trunks', { trunks: [trunk('small.main'), trunk('big.t0'), trunk('small.b')] });
    expect(cross.body).toMatchObject({ ok: true, count: 2, rejected: [{ id: 'big.t0' }] });
    expect((await ids()).filter((id) => id.startsWith('big.'))).toHaveLength(995);

    // A tenant's empty set takes its trunks off, the others' stay; a tenant id with a dot is whole.
    expect((await ctl('PUT', '/tenants/big/trunks', { trunks: [] })).body).toMatchObject({ count: 0 });
    expect((await ctl('PUT', `/tenants/${encodeURIComponent('a.b')}/trunks`, { trunks: [trunk('a.b.main')] })).body).toMatchObject({ count: 1 });
    expect((await ids()).sort()).toEqual(['a.b.main', 'small.b', 'small.main']);

    // The full set still replaces everything.
    expect((await ctl('PUT', '/trunks', { trunks: [trunk('x.only')] })).body).toMatchObject({ count: 1 });
    expect(await ids()).toEqual(['x.only']);
  });
});
