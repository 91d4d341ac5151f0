/**
 * The bridge's office-tab endpoints (inbound/officetab-provider.ts) against its real control API:
 * the tab set, the ring and stop notices to a local "core", an accept answered by werift with a
 * werift client as the tab (audio checked both ways by tone), decline, a closed tab, a late accept.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Bridge } from '../../../plugins/telephony/bridge/bridge.ts';
import type { AnsweredEndpoint, RingRequest } from '../../../plugins/telephony/bridge/inbound/endpoints.ts';
import type { MediaLeg, PlayRate } from '../../../plugins/telephony/bridge/media/leg.ts';
import { ToLegRate } from '../../../plugins/telephony/bridge/media/resample.ts';
import type { OfficeTabNotice } from '../../../plugins/telephony/bridge/inbound/officetab-control.ts';
import { tonePower, WebRtcVisitor } from '../../support/webrtc-visitor.ts';
import { until, type Json } from './helpers.ts';

const TOKEN = 'officetab-test-token-0123456789';
let bridge: Bridge;
let core: http.Server;
const notices: OfficeTabNotice[] = [];
/** Tabs the "core" says are gone when rung. */
const gone = new Set<string>();

const T1 = 'tenant-one';
const TAB_A = 'tab-aaaaaaaaaaaa';
const TAB_B = 'tab-bbbbbbbbbbbb';
const TAB_OTHER = 'tab-other-tenant';

beforeAll(async () => {
  core = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const n = JSON.parse(body) as OfficeTabNotice;
      expect(req.url).toBe('/internal/bridge/officetab');
      expect(req.headers.authorization).toBe(`Bearer ${TOKEN}`);
      notices.push(n);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(gone.has(n.tabId) ? { ok: false, error: 'no such tab' } : { ok: true }));
    });
  });
  await new Promise<void>((r) => core.listen(0, '127.0.0.1', () => r()));
  const base = 46000 + 2 * Math.floor(Math.random() * 2000);
  bridge = new Bridge({
    token: TOKEN,
    controlPort: 0,
    callbackUrl: `http://127.0.0.1:${(core.address() as AddressInfo).port}/internal/bridge/events`,
    sipHost: '127.0.0.1',
    sipPort: 0,
    rtpMin: base,
    rtpMax: base + 49,
    maxCalls: 10,
    keepaliveMs: 0,
    mediaThread: false,
    webrtc: { hostAddresses: ['127.0.0.1'] },
  });
  await bridge.start();
}, 30_000);

afterAll(async () => {
  await bridge?.stop();
  await new Promise<void>((r) => (core ? core.close(() => r()) : r()));
});

async function ctl(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const r = await fetch(bridge.controlUrl + path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const req = (over: Partial<RingRequest> = {}): RingRequest => ({
  tenantId: T1,
  user: 'alice',
  callId: 'vnum0123456789ab',
  callerNumber: '+4917612345678',
  callerName: 'Caller',
  ringTimeoutSec: 10,
  ...over,
});

const ringsFor = (tabId: string, callId: string) => notices.filter((n) => n.op === 'ring' && n.tabId === tabId && n.callId === callId);

/** A caller's media leg as far as a tab's endpoint uses it: it collects what the tab says. */
function callerSink(): { leg: MediaLeg; heard: number[] } {
  const heard: number[] = [];
  // A G.711 caller's leg: what it is given is brought to its 8 kHz, as a real leg does.
  const to8k = new ToLegRate(8000);
  const leg = { play: (pcm: Int16Array, rate: PlayRate = 8000) => heard.push(...to8k.convert(pcm, rate)) } as unknown as MediaLeg;
  return { leg, heard };
}

describe('office tabs at the bridge', () => {
  it('refuses bad control bodies naming the field; an unknown ring is 404 to answer and a no-op to decline', async () => {
    const bad = await ctl('PUT', '/officetabs', { tabs: [{ tabId: 'x', tenantId: T1, user: 'alice' }] });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'invalid_request' });
    expect(bad.body.error_description).toContain('tabs.0.tabId');
    expect((await ctl('POST', '/officetabs/answer', { ringId: 'r'.repeat(16) })).status).toBe(400);
    expect((await ctl('POST', '/officetabs/answer', { ringId: 'r'.repeat(16), tabId: TAB_A, offerSdp: 'v=0 nothing' })).status).toBe(404);
    expect(await ctl('POST', '/officetabs/decline', { ringId: 'r'.repeat(16), tabId: TAB_A })).toEqual({ status: 200, body: { ok: true } });
  });

  it("rings only the user's tabs of that tenant; the first accept wins, the other tab gets stop and a late accept 409; audio both ways", async () => {
    const put = await ctl('PUT', '/officetabs', {
      tabs: [
        { tabId: TAB_A, tenantId: T1, user: 'alice' },
        { tabId: TAB_B, tenantId: T1, user: 'alice' },
        { tabId: TAB_OTHER, tenantId: 'tenant-two', user: 'alice' },
      ],
    });
    expect(put).toEqual({ status: 200, body: { ok: true, count: 3 } });
    const ringing = bridge.inbound.endpoints.ring(req({ callId: 'vnum00000000000a' }));
    await until(() => ringsFor(TAB_A, 'vnum00000000000a').length && ringsFor(TAB_B, 'vnum00000000000a').length, 5000, 'both tabs rung');
    expect(ringsFor(TAB_OTHER, 'vnum00000000000a')).toEqual([]);
    const ringA = ringsFor(TAB_A, 'vnum00000000000a')[0]!;
    const ringB = ringsFor(TAB_B, 'vnum00000000000a')[0]!;
    expect(ringA).toMatchObject({ tenantId: T1, user: 'alice', callerNumber: '+4917612345678', callerName: 'Caller', ringTimeoutSec: 10 });

    const tab = new WebRtcVisitor({ toneHz: 700, keepMs: 3000 });
    const a = await ctl('POST', '/officetabs/answer', { ringId: ringA.ringId, tabId: TAB_A, offerSdp: await tab.offer() });
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ ok: true, codec: 'PCMU' });
    const who = (await ringing) as AnsweredEndpoint;
    expect(who).toMatchObject({ kind: 'office-tab', id: TAB_A });
    await until(() => notices.some((n) => n.op === 'stop' && n.ringId === ringB.ringId), 5000, 'the other tab told to stop');
    const late = await ctl('POST', '/officetabs/answer', { ringId: ringB.ringId, tabId: TAB_B, offerSdp: await new WebRtcVisitor().offer() });
    expect(late.status).toBe(409);
    expect(late.body.error).toBe('not_ringing');

    await tab.accept(a.body.answerSdp);
    await tab.connected;
    const caller = callerSink();
    who.connect(caller.leg);
    // The caller speaks 440 Hz (16 kHz batches as a started MediaLeg hands them on).
    const feed = setInterval(() => {
      const pcm = new Int16Array(1280);
      for (let i = 0; i < 640; i++) pcm[2 * i + 1] = pcm[2 * i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 8000));
      who.hear!(pcm);
    }, 80);
    await until(() => caller.heard.length > 8000 && tab.received.length > 8000, 8000, 'audio both ways');
    clearInterval(feed);
    expect(tonePower(caller.heard.slice(-8000), 700)).toBeGreaterThan(20 * tonePower(caller.heard.slice(-8000), 1000));
    const got = tab.received.slice(-8000);
    expect(tonePower(got, 440)).toBeGreaterThan(20 * tonePower(got, 1000));
    // A tab in a call is not rung again.
    const again = bridge.inbound.endpoints.ring(req({ callId: 'vnum00000000000b', ringTimeoutSec: 1 }));
    await until(() => ringsFor(TAB_B, 'vnum00000000000b').length, 5000, 'the free tab rung');
    expect(ringsFor(TAB_A, 'vnum00000000000b')).toEqual([]);
    expect(await again).toContain(`alice did not answer`);

    // The tab hangs up: the caller's side learns it once.
    let ended = 0;
    who.onEnded(() => ended++);
    expect(await ctl('POST', '/officetabs/hangup', { ringId: ringA.ringId, tabId: TAB_A })).toEqual({ status: 200, body: { ok: true } });
    expect(ended).toBe(1);
    who.hangup();
    expect(ended).toBe(1);
    await tab.close();
  }, 30_000);

  it('decline, a tab that closes while ringing, and a tab the core no longer has each end that ring with the reason', async () => {
    const declined = bridge.inbound.endpoints.ring(req({ callId: 'vnum00000000000c', user: 'alice' }));
    await until(() => ringsFor(TAB_A, 'vnum00000000000c').length && ringsFor(TAB_B, 'vnum00000000000c').length, 5000, 'rung');
    await ctl('POST', '/officetabs/decline', { ringId: ringsFor(TAB_A, 'vnum00000000000c')[0]!.ringId, tabId: TAB_A });
    // TAB_B leaves the set while ringing.
    await ctl('PUT', '/officetabs', { tabs: [{ tabId: TAB_A, tenantId: T1, user: 'alice' }] });
    const why = await declined;
    expect(why).toContain('declined in the office tab');
    expect(why).toContain('the tab closed');

    gone.add(TAB_A);
    expect(await bridge.inbound.endpoints.ring(req({ callId: 'vnum00000000000d' }))).toContain('the tab is not reachable');
    gone.clear();
    await ctl('PUT', '/officetabs', { tabs: [] });
    expect(await bridge.inbound.endpoints.ring(req({ callId: 'vnum00000000000e' }))).toBe('no endpoint of alice is reachable');
  }, 30_000);
});
