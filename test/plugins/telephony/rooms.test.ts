import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { startTestServer, tempDir, type TestServer } from '../../support/server.ts';
import { GeminiLiveFake } from '../../support/gemini-live-fake.ts';
import { tonePower, WebRtcVisitor } from '../../support/webrtc-visitor.ts';
import { adm, eventsOf, j, until } from './helpers.ts';
import { freePort, startSipp } from '../../support/sipp.ts';

/**
 * Browser voice in virtual-number rooms, both halves together: the appliance with its embedded
 * real bridge (WebRTC terminated there by werift), Chromium with a fake microphone playing a wav
 * as the visitor, and the Gemini Live fake as the number's AI. Audio is checked both ways by its
 * content: the fake engine's copy of what it heard carries the wav's 700 Hz tone, and the page's
 * WebAudio analyser hears the AI's 440 Hz tone.
 */
const V1 = '/api.ashx/v1';
const KEY = 'AIza-room-key';
const VISITOR_HZ = 700;
let s: TestServer;
let engine: GeminiLiveFake;
let browser: Browser;
let wav: string;

/**
 * Runs in the page (a string: the tests are type-checked without the DOM library): 2.5 s of the
 * remote stream through a WebAudio analyser; the loudest moment's RMS and its peak frequency.
 */
const MEASURE_REMOTE = `(async () => {
  const ctx = new AudioContext();
  const an = ctx.createAnalyser();
  an.fftSize = 4096;
  ctx.createMediaStreamSource(window.sovRoom.remote).connect(an);
  const bins = new Float32Array(an.frequencyBinCount);
  const wave = new Float32Array(an.fftSize);
  let best = { rms: 0, peakHz: 0 };
  for (let i = 0; i < 25; i++) {
    await new Promise((r) => setTimeout(r, 100));
    an.getFloatTimeDomainData(wave);
    let sum = 0;
    for (const x of wave) sum += x * x;
    const rms = Math.sqrt(sum / wave.length);
    if (rms > best.rms) {
      an.getFloatFrequencyData(bins);
      let peak = 0;
      for (let k = 1; k < bins.length; k++) if (bins[k] > bins[peak]) peak = k;
      best = { rms, peakHz: (peak * ctx.sampleRate) / an.fftSize };
    }
  }
  await ctx.close();
  return best;
})()`;

/** 16-bit mono 48 kHz wav: `hz` at half scale for `sec` seconds (Chromium loops it). */
function writeWav(file: string, hz: number, sec: number): void {
  const rate = 48_000;
  const n = rate * sec;
  const b = Buffer.alloc(44 + n * 2);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + n * 2, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(rate * 2, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36);
  b.writeUInt32LE(n * 2, 40);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(16000 * Math.sin((2 * Math.PI * hz * i) / rate)), 44 + i * 2);
  fs.writeFileSync(file, b);
}

beforeAll(async () => {
  // No OPTIONS keepalive to trunks: a SIPp far end would take it for its one call.
  process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
  engine = new GeminiLiveFake({
    apiKey: KEY,
    usage: { prompt: 100, response: 20 },
    keepAudioMs: 8000,
    scriptsByKey: {
      // A room whose AI hands the visitor to another number's AI, which ends the call.
      'key-room-to-vnum': [
        { say: 'Let me connect you to billing.', audioMs: 400 },
        { tool: 'transfer_to_user', args: { phone: '+4930559' } },
      ],
      'key-room-billing': [{ say: 'Billing here. Goodbye.', audioMs: 1500 }, { tool: 'end_call' }],
      'key-room-to-user': [{ say: 'Let me get a colleague.', audioMs: 400 }, { tool: 'transfer_to_user', args: { user: 'admin' } }, { wait: 60_000 }],
      'key-room-to-bob': [{ say: 'Let me get Bob.', audioMs: 400 }, { tool: 'transfer_to_user', args: { user: 'bob' } }, { wait: 60_000 }],
      // Wideband speech: a 6 kHz tone, which only a wideband codec carries (G.711 stops at 4 kHz).
      'key-room-wide': [{ say: 'Wideband.', audioMs: 4000, hz: 6000 }, { wait: 60_000 }],
      'key-room-to-pstn': [
        { say: 'Putting you through to the duty phone.', audioMs: 400 },
        { tool: 'transfer_to_user', args: { phone: '+4915112345678' } },
        { wait: 60_000 },
      ],
    },
    script: [
      { say: 'Welcome to the front desk.', audioMs: 4000 },
      { hear: 'Hello, I need help.', ms: 3000 },
      { say: 'Of course.', audioMs: 400 },
      { wait: 120_000 },
    ],
  });
  await engine.start();
  const base = 44000 + 2 * Math.floor(Math.random() * 4000);
  s = await startTestServer({
    overrides: {
      plugins: {
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${base}-${base + 99}`, readyTimeoutMs: 20_000 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
          rooms: { connectTimeoutSec: 3, silenceTimeoutSec: 6, joinsPerMinutePerIp: 100 },
        },
      },
    },
  });
  await until(async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.state === 'ready', 20_000, 'bridge ready');
  const save = (b: object) => adm(s, '/signal.ashx?numbers=save', 'numbers-save', { mode: 'live-voice-ai', voice: 'Puck', geminiApiKey: KEY, ...b });
  expect((await save({ number: '+4930555', name: 'Front desk', visibility: 'public', maxDurationSec: 600 })).status).toBe(200);
  expect((await save({ number: '+4930556', name: 'Staff room', visibility: 'signed-in' })).status).toBe(200);
  expect((await save({ number: '+4930557', name: 'Short', visibility: 'public', maxDurationSec: 10 })).status).toBe(200);
  expect((await save({ number: '+4930558', name: 'Lobby', visibility: 'public', geminiApiKey: 'key-room-to-vnum' })).status).toBe(200);
  expect((await save({ number: '+4930559', name: 'Billing', visibility: 'public', geminiApiKey: 'key-room-billing' })).status).toBe(200);
  expect((await save({ number: '+4930560', name: 'Help', visibility: 'public', geminiApiKey: 'key-room-to-user', maxDurationSec: 10 })).status).toBe(200);
  expect((await save({ number: '+4930561', name: 'Desk', visibility: 'public', geminiApiKey: 'key-room-to-bob', maxDurationSec: 60 })).status).toBe(200);
  expect((await save({ number: '+4930562', name: 'Duty', visibility: 'public', geminiApiKey: 'key-room-to-pstn', maxDurationSec: 60 })).status).toBe(200);
  expect((await save({ number: '+4930563', name: 'Wide', visibility: 'public', geminiApiKey: 'key-room-wide', maxDurationSec: 60 })).status).toBe(200);
  wav = path.join(tempDir('sovcomms-wav-'), 'visitor.wav');
  writeWav(wav, VISITOR_HZ, 4);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--autoplay-policy=no-user-gesture-required',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${wav}`,
    ],
  });
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await s?.stop();
  await engine?.stop();
  delete process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC;
});

const roomRow = (id: string) => s.appliance.core.db.prepare('SELECT * FROM tel_room_calls WHERE call_id = ?').get(id) as Record<string, unknown> | undefined;
// page.evaluate of a string runs through DevTools (CSP does not apply to it); waitForFunction with
// a string would need 'unsafe-eval', which the room page's CSP rightly refuses.
const ended = (id: string, ms = 20_000) => until(() => (roomRow(id)?.ended_at ? roomRow(id) : null), ms, `room call ${id} ended`);

async function join(number: string, v: WebRtcVisitor, headers: Record<string, string> = {}) {
  return j(s.fetch(`${V1}/rooms/join`, { method: 'POST', headers, json: { number, sdp: await v.offer() } }));
}

describe('virtual-number rooms in the browser (WebRTC in the appliance)', () => {
  it('a Chromium visitor in a public room talks with the AI: audio both ways, events, transcript', async () => {
    const page = await browser.newPage();
    const sessionsBefore = engine.sessions.length;
    const res = await page.goto(`${s.url}/room.ashx?number=%2B4930555`);
    expect(res!.status()).toBe(200);
    const csp = res!.headers()['content-security-policy'];
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    await page.click('#join');
    await until(async () => (await page.evaluate('window.sovRoom.phase')) === 'connected', 20_000, 'page connected');
    // The AI's greeting is a 440 Hz tone: measure it in the page, off the remote stream.
    const heard = (await page.evaluate(MEASURE_REMOTE)) as { rms: number; peakHz: number };
    expect(heard.rms).toBeGreaterThan(0.02);
    expect(Math.abs(heard.peakHz - 440)).toBeLessThan(30);
    // The bridge offers only AES-CM SRTP (webrtc/srtp.ts does it without a cipher object per
    // packet): Chromium agreed to it, and the tone above came through that path.
    const srtpCipher = await page.evaluate("window.sovRoom.pc.getStats().then((r) => [...r.values()].find((x) => x.type === 'transport')?.srtpCipher)");
    expect(srtpCipher).toBe('SRTP_AES128_CM_HMAC_SHA1_80');
    // The fake engine heard the visitor's 700 Hz tone (16 kHz PCM as the bridge sent it).
    const session = engine.sessions[sessionsBefore]!;
    expect(session.key).toBe(KEY);
    await until(() => session.audioBytesIn >= 8000 * 2 * 2, 15_000, 'visitor audio at the engine');
    const pcm16 = Buffer.concat(session.audioIn);
    const samples = Array.from({ length: pcm16.length / 2 }, (_, i) => pcm16.readInt16LE(i * 2));
    const voiced = samples.slice(-16000 * 2);
    expect(tonePower(voiced, VISITOR_HZ, 16000)).toBeGreaterThan(50 * tonePower(voiced, 1300, 16000));
    expect(tonePower(voiced, VISITOR_HZ, 16000)).toBeGreaterThan(1e5);
    // The conversation goes on (the AI's answer after hearing the visitor), then the visitor leaves.
    const callId = (await page.evaluate('window.sovRoom.callId')) as string;
    expect(callId).toMatch(/^vnum[0-9a-f]{12}$/);
    await until(() => eventsOf(s, callId).some((e) => e.name === 'call.started'), 5000, 'call.started');
    await until(() => engine.sessions[sessionsBefore]!.realtimeMessages > 0 && session.audioBytesIn >= 3 * 32000, 15_000, 'heard 3 s');
    await new Promise((r) => setTimeout(r, 800)); // the AI's answer is transcribed
    await page.click('#leave');
    const row = await ended(callId);
    expect(row).toMatchObject({ outcome: 'far-hangup', number: '+4930555', room: '+4930555', visitor: '' });
    const ev = eventsOf(s, callId);
    expect(ev.map((e) => e.name)).toEqual(['call.started', 'call.ended', 'transcript.saved']);
    expect(ev[0]!.data).toMatchObject({ callId, number: '+4930555', room: '+4930555', direction: 'inbound', source: 'vnum', phone: '', did: '' });
    expect(ev[1]!.data).toMatchObject({ callId, number: '+4930555', room: '+4930555', outcome: 'far-hangup', source: 'vnum', tokens: expect.any(Number) });
    expect(ev[1]!.data.durationSec).toBeGreaterThanOrEqual(3);
    expect(ev[2]!.data).toMatchObject({ callId, number: '+4930555', file: `${callId}.json`, outcome: 'far-hangup', source: 'vnum' });
    const t = (await j(s.fetch(`${V1}/transcripts/${callId}`, { key: s.adminKey }))).body;
    expect(t).toMatchObject({ callId, callerSource: 'vnum', answered: true, outcome: 'far-hangup', voice: 'Puck' });
    expect(t.turns.map((x: { speaker: string; text: string }) => [x.speaker, x.text])).toEqual([
      ['AI', 'Welcome to the front desk.'],
      ['Caller', 'Hello, I need help.'],
      ['AI', 'Of course.'],
    ]);
    const list = (await j(s.fetch(`${V1}/transcripts?source=vnum`, { key: s.adminKey }))).body;
    expect(list.data.find((x: { callId: string }) => x.callId === callId)).toMatchObject({ callerSource: 'vnum', number: '+4930555', outcome: 'far-hangup' });
    const outbound = (await j(s.fetch(`${V1}/transcripts?source=outbound-ai`, { key: s.adminKey }))).body;
    expect(outbound.data.some((x: { callId: string }) => x.callId === callId)).toBe(false);
    // Leaving again is a no-op; a wrong token is a 404 like an unknown call.
    expect(s.logs.text()).not.toContain(KEY);
    await page.close();
  }, 90_000);

  it('a signed-in room refuses an anonymous join and takes one with a bearer of the tenant', async () => {
    const v = new WebRtcVisitor();
    const anon = await join('+4930556', v);
    expect(anon.status).toBe(401);
    expect(anon.body.error).toBe('login_required');
    const bad = await join('+4930556', v, { authorization: 'Bearer not-a-token' });
    expect(bad.status).toBe(401);
    const forged = await join('+4930556', v, { cookie: 'sov_room=v1.AAAA.BBBB.CCCC' });
    expect(forged.status).toBe(401);
    expect(forged.body.error).toBe('login_required');
    expect(s.appliance.core.db.prepare("SELECT COUNT(*) AS n FROM tel_room_calls WHERE number = '+4930556'").get()).toEqual({ n: 0 });
    // With an OIDC access token of the tenant (password grant of the console client):
    const tok = await s.fetch('/oauth2/v1/token', {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'password', client_id: 'sovcomms-console', username: 'admin', password: s.adminPassword, scope: 'openid' }),
    });
    const access = ((await tok.json()) as { access_token: string }).access_token;
    const ok = await join('+4930556', v, { authorization: `Bearer ${access}` });
    expect(ok.status).toBe(201);
    expect(roomRow(ok.body.callId)).toMatchObject({ visitor: 'admin', number: '+4930556' });
    expect((await j(s.fetch(`${V1}/rooms/leave`, { method: 'POST', json: { callId: ok.body.callId, leaveToken: 'wrong' } }))).status).toBe(404);
    const left = await j(s.fetch(`${V1}/rooms/leave`, { method: 'POST', json: { callId: ok.body.callId, leaveToken: ok.body.leaveToken } }));
    expect(left.body).toMatchObject({ ok: true, callId: ok.body.callId });
    expect(await ended(ok.body.callId)).toMatchObject({ outcome: 'empty-room' });
    await v.close();
  }, 60_000);

  it("a signed-in room in Chromium: sign-in through the appliance's OIDC provider, the AI answers, the session stays in its tenant", async () => {
    const A = `localhost:${s.port}`;
    // Tenant B on the IPv6 loopback name (only its Host header is used; its sign-in callback is a loopback URI).
    const B = `[::1]:${s.port}`;
    // The test signs tenant B's admin calls the spec's way (V1), which a tenant added later must switch on.
    const tenantB = s.appliance.core.tenants.add('[::1]', 'Clinic', { hmacV1: true });
    await s.appliance.core.users.add(s.primary, { name: 'alice', role: 'user', password: 'correct horse battery', email: 'alice@office.test' });
    await s.appliance.core.users.add(tenantB, { name: 'alice', role: 'user', password: 'another password 42', email: 'alice@clinic.test' });
    const saveB = await adm(
      s,
      '/signal.ashx?numbers=save',
      'numbers-save',
      { mode: 'live-voice-ai', voice: 'Puck', geminiApiKey: KEY, number: '+4930556', name: 'Clinic staff', visibility: 'signed-in' },
      B,
    );
    expect(saveB.status).toBe(200);
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const sessionsBefore = engine.sessions.length;
    // By this machine's IP address (an address of its own, so the appliance's public origin for this
    // request): the sign-in stays on it, through the provider's sign-in page.
    await page.goto(`${s.url}/room.ashx?number=%2B4930556`);
    await page.waitForURL(/\/login\.html/);
    expect(new URL(page.url()).host).toBe(new URL(s.url).host);
    await page.getByLabel('User name or e-mail').fill('alice');
    await page.getByLabel('Password').fill('correct horse battery');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    // No consent page (the built-in client): straight back into the room.
    await page.waitForURL(`${s.url}/room.ashx?number=%2B4930556`);
    expect(await page.textContent('#visitor')).toContain('alice');
    const cookies = await ctx.cookies(s.url);
    const session = cookies.find((c) => c.name === 'sov_room')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
    const client = s.appliance.core.db.prepare("SELECT * FROM oidc_clients WHERE client_id = 'sovcomms-rooms' AND tenant_id = ?").get(s.primary.id);
    expect(client).toBeTruthy();
    await page.click('#join');
    await until(async () => (await page.evaluate('window.sovRoom.phase')) === 'connected', 20_000, 'page connected');
    const heard = (await page.evaluate(MEASURE_REMOTE)) as { rms: number; peakHz: number };
    expect(heard.rms).toBeGreaterThan(0.02);
    expect(Math.abs(heard.peakHz - 440)).toBeLessThan(30);
    const callId = (await page.evaluate('window.sovRoom.callId')) as string;
    expect(engine.sessions.length).toBeGreaterThan(sessionsBefore);
    expect(roomRow(callId)).toMatchObject({ visitor: 'alice', number: '+4930556', tenant_id: s.primary.id });
    await until(() => eventsOf(s, callId).some((e) => e.name === 'call.started'), 5000, 'call.started');

    // The same session cookie, sent to tenant B's host: it does not open there.
    const cookie = `sov_room=${session.value}`;
    const v = new WebRtcVisitor();
    const cross = await j(s.fetch(`${V1}/rooms/join`, { method: 'POST', host: B, headers: { cookie }, json: { number: '+4930556', sdp: await v.offer() } }));
    expect(cross.status).toBe(401);
    expect(cross.body.error).toBe('login_required');
    const crossPage = await s.fetch('/room.ashx?number=%2B4930556', { host: B, headers: { cookie } });
    expect(crossPage.status).toBe(302);
    expect(crossPage.headers.get('location')).toContain(`http://${B}/oauth2/v1/authorize`);
    expect(s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_room_calls WHERE tenant_id = ?').get(tenantB.id)).toEqual({ n: 0 });
    await v.close();

    await page.click('#leave');
    const row = await ended(callId);
    expect(row).toMatchObject({ visitor: 'alice' });
    const t = (await j(s.fetch(`${V1}/transcripts/${callId}`, { key: s.adminKey }))).body;
    expect(t).toMatchObject({ callId, callerSource: 'vnum', requestedBy: 'alice' });
    const audit = s.appliance.core.db.prepare("SELECT * FROM audit_log WHERE event = 'room-sign-in'").all() as Record<string, unknown>[];
    expect(audit.length).toBe(1);

    // Signed out (the session cookie removed): the page's join is refused.
    expect((await page.evaluate("fetch('/api.ashx/v1/rooms/sign-out', { method: 'POST' }).then((r) => r.status)")) as number).toBe(200);
    expect((await ctx.cookies(`http://${A}`)).some((c) => c.name === 'sov_room')).toBe(false);
    await page.click('#join');
    await until(async () => (await page.evaluate('window.sovRoom.phase')) === 'refused', 15_000, 'join refused');
    expect(await page.evaluate('window.sovRoom.error')).toBe('login_required');
    await ctx.close();

    // A callback that this browser did not start, and one with a forged state: no session.
    const noLogin = await s.fetch('/room/callback?code=x&state=y', { host: A });
    expect(noLogin.status).toBe(400);
    expect(noLogin.headers.get('set-cookie')).toBeNull();
  }, 120_000);

  it('Opus in Chromium: the room agrees Opus and carries wideband both ways (the AI’s 6 kHz, the visitor’s 5.2 kHz: neither fits G.711)', async () => {
    const page = await browser.newPage();
    // The visitor's microphone: a 5.2 kHz oscillator instead of the wav (an init script runs
    // before the page's own, outside its CSP).
    await page.addInitScript(`navigator.mediaDevices.getUserMedia = async () => {
      const ctx = new AudioContext({ sampleRate: 48000 });
      const o = ctx.createOscillator();
      o.frequency.value = 5200;
      const g = ctx.createGain();
      g.gain.value = 0.4;
      const d = ctx.createMediaStreamDestination();
      o.connect(g).connect(d);
      o.start();
      return d.stream;
    };`);
    const sessionsBefore = engine.sessions.length;
    await page.goto(`${s.url}/room.ashx?number=%2B4930563`);
    await page.click('#join');
    await until(async () => (await page.evaluate('window.sovRoom.phase')) === 'connected', 20_000, 'page connected');
    const codecs = (await page.evaluate(
      "window.sovRoom.pc.getStats().then((r) => [...r.values()].filter((x) => x.type === 'codec').map((x) => x.mimeType))",
    )) as string[];
    expect(codecs.length).toBeGreaterThan(0);
    expect(new Set(codecs)).toEqual(new Set(['audio/opus']));
    const heard = (await page.evaluate(MEASURE_REMOTE)) as { rms: number; peakHz: number };
    expect(heard.rms).toBeGreaterThan(0.02);
    expect(Math.abs(heard.peakHz - 6000)).toBeLessThan(60);
    const session = engine.sessions[sessionsBefore]!;
    await until(() => session.audioBytesIn >= 16000 * 2 * 2, 15_000, 'visitor audio at the engine');
    const pcm16 = Buffer.concat(session.audioIn);
    const samples = Array.from({ length: pcm16.length / 2 }, (_, i) => pcm16.readInt16LE(i * 2)).slice(-16000);
    expect(tonePower(samples, 5200, 16000)).toBeGreaterThan(1e4);
    // Through G.711 the tone would have folded to 2.8 kHz.
    expect(tonePower(samples, 5200, 16000)).toBeGreaterThan(20 * tonePower(samples, 2800, 16000));
    const callId = (await page.evaluate('window.sovRoom.callId')) as string;
    await page.click('#leave');
    await ended(callId);
    await page.close();
  }, 90_000);

  it('maxDurationSec ends the call with max-duration', async () => {
    const v = new WebRtcVisitor({ toneHz: 600, keepMs: 3000 });
    const r = await join('+4930557', v);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ maxDurationSec: 10, codec: 'PCMU' });
    // ICE lite, host candidates only: no server-reflexive candidate (werift's full agent asks Google's STUN).
    expect(r.body.sdp).toContain('a=ice-lite');
    expect(r.body.sdp).not.toContain('typ srflx');
    await v.accept(r.body.sdp);
    const row = await ended(r.body.callId, 25_000);
    expect(row).toMatchObject({ outcome: 'max-duration' });
    const ev = eventsOf(s, r.body.callId);
    expect(ev.map((e) => e.name)).toEqual(['call.started', 'call.ended', 'transcript.saved']);
    expect(ev[1]!.data).toMatchObject({ outcome: 'max-duration', source: 'vnum', number: '+4930557' });
    expect(ev[1]!.data.durationSec).toBeGreaterThanOrEqual(9);
    // The bridge closed the connection: nothing more arrives.
    expect(v.packetsReceived).toBeGreaterThan(300);
    expect(v.receivedTone(440)).toBeGreaterThan(20 * v.receivedTone(1000));
    expect(v.lost).toBe(0);
    await v.close();
  }, 40_000);

  it("vnum-to-vnum from a room: the AI hands the visitor to another number's AI on the same WebRTC leg; a user with no endpoint is not reached", async () => {
    const v = new WebRtcVisitor({ toneHz: 600, keepMs: 3000 });
    const r = await join('+4930558', v);
    expect(r.status).toBe(201);
    await v.accept(r.body.sdp);
    const row = await ended(r.body.callId, 30_000);
    expect(row).toMatchObject({ outcome: 'transferred-to-vnum' });
    const ev = eventsOf(s, r.body.callId);
    expect(ev.map((e) => e.name)).toEqual(['call.started', 'call.transferred', 'call.ended', 'transcript.saved']);
    expect(ev[1]!.data).toMatchObject({ fromVnum: '+4930558', toPhone: '+4930559', transferType: 'vnum-to-vnum', source: 'vnum', room: expect.any(String) });
    expect(ev[2]!.data).toMatchObject({ outcome: 'transferred-to-vnum', source: 'vnum', number: '+4930558' });
    // Both AIs spoke to the visitor over the one leg, and the transcript has both.
    const text = JSON.stringify((await j(s.fetch(`${V1}/transcripts/${r.body.callId}`, { key: s.adminKey }))).body.turns);
    expect(text).toContain('connect you to billing');
    expect(text).toContain('Billing here');
    expect(v.lost).toBe(0);
    await v.close();

    // To a user with no tab open and no desk phone: the AI is told why and the room goes on.
    const w = new WebRtcVisitor({ toneHz: 600, keepMs: 3000 });
    const r2 = await join('+4930560', w);
    await w.accept(r2.body.sdp);
    expect(await ended(r2.body.callId, 25_000)).toMatchObject({ outcome: 'max-duration' });
    expect(eventsOf(s, r2.body.callId).map((e) => e.name)).not.toContain('call.transferred');
    const toolAnswers = engine.sessions.flatMap((x) => x.toolResponses);
    expect(JSON.stringify(toolAnswers)).toContain('no endpoint of admin is reachable');
    await w.close();
  }, 60_000);

  it('vnum-to-officetab from a room: the AI rings the user, whose desk phone answers; visitor and phone hear each other, the AI leaves', async () => {
    // Desk phone "bob" (SIPp): digest REGISTER with the generated password, then a SIPp on the
    // same port answers and echoes every RTP packet back (-rtp_echo), and hangs up after 5 s.
    const added = (await j(adm(s, '/signal.ashx?phones=add', 'phones-add', { user: 'bob' }))).body;
    expect(added).toMatchObject({ ok: true, user: 'bob' });
    const sipPort = (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health.sip.port as number;
    const port = await freePort();
    await until(
      async () => (await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones.some((p: { user: string }) => p.user === 'bob'),
      5000,
      'login at the bridge',
    );
    const reg = await startSipp({
      scenario: 'deskphone-register-ok',
      port,
      remote: `127.0.0.1:${sipPort}`,
      keys: { user: 'bob' },
      template: { user: 'bob', pass: added.generatedPassword as string },
    });
    const regExit = await reg.exited;
    expect(regExit.code, regExit.output).toBe(0);
    const phone = await startSipp({ scenario: 'deskphone-answer-echo', port, rtpEcho: true, timeoutSec: 40 });
    try {
      const v = new WebRtcVisitor({ toneHz: 600, keepMs: 20_000 });
      const r = await join('+4930561', v);
      expect(r.status).toBe(201);
      await v.accept(r.body.sdp);
      // The phone hangs up after 5 s of talk: the room ends, as any call handed on.
      expect(await ended(r.body.callId, 40_000)).toMatchObject({ outcome: 'transferred-to-vnum' });
      const exit = await phone.exited;
      expect(exit.code, exit.output).toBe(0);
      const ev = eventsOf(s, r.body.callId);
      expect(ev.map((e) => e.name)).toEqual(['call.started', 'call.transferred', 'call.ended', 'transcript.saved']);
      expect(ev[1]!.data).toMatchObject({ fromVnum: '+4930561', toUser: 'bob', toPhone: '', transferType: 'vnum-to-officetab', source: 'vnum' });
      // The visitor's own 600 Hz came back through the phone's echo: room → phone (PCMA) → room.
      expect(v.receivedTone(600)).toBeGreaterThan(20 * v.receivedTone(1000));
      expect(v.lost).toBe(0);
      const text = JSON.stringify((await j(s.fetch(`${V1}/transcripts/${r.body.callId}`, { key: s.adminKey }))).body.turns);
      expect(text).toContain('Let me get Bob');
      await v.close();
    } finally {
      await phone.stop();
    }
  }, 90_000);

  it('vnum-to-pstn from a room: the AI hands the visitor to a whitelisted number, dialled through the outbound routes', async () => {
    // The "PSTN": a SIPp trunk that answers and echoes the RTP it gets, then hangs up after 5 s.
    const pstn = await startSipp({ scenario: 'deskphone-answer-echo', rtpEcho: true, timeoutSec: 40 });
    try {
      await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
        id: 'pstn',
        name: 'pstn',
        host: '127.0.0.1',
        port: pstn.port,
        transport: 'udp',
        codecs: ['PCMA'],
      });
      expect((await s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: '+49151*', trunkIds: ['pstn'] } })).status).toBe(201);
      expect((await adm(s, '/signal.ashx?whitelist=add', 'whitelist-add', { number: '+4915112345678', comment: 'duty phone' })).status).toBeLessThan(300);
      await until(
        async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health?.trunks?.some((t: { id: string }) => t.id.endsWith('.pstn')),
        5000,
        'pstn trunk at the bridge',
      );
      const v = new WebRtcVisitor({ toneHz: 600, keepMs: 20_000 });
      const r = await join('+4930562', v);
      expect(r.status).toBe(201);
      await v.accept(r.body.sdp);
      expect(await ended(r.body.callId, 40_000)).toMatchObject({ outcome: 'transferred-to-vnum' });
      const exit = await pstn.exited;
      expect(exit.code, exit.output).toBe(0);
      const ev = eventsOf(s, r.body.callId);
      expect(ev.map((e) => e.name)).toEqual(['call.started', 'call.transferred', 'call.ended', 'transcript.saved']);
      expect(ev[1]!.data).toMatchObject({ fromVnum: '+4930562', toUser: '', toPhone: '+4915112345678', transferType: 'vnum-to-pstn', source: 'vnum' });
      // The visitor's tone came back from the far end over the trunk.
      expect(v.receivedTone(600)).toBeGreaterThan(20 * v.receivedTone(1000));
      expect(v.lost).toBe(0);
      await v.close();
    } finally {
      await pstn.stop();
    }
  }, 90_000);

  it('empty-room: a visitor who never connects, and one who connects but never speaks', async () => {
    const never = new WebRtcVisitor();
    const a = await join('+4930555', never);
    expect(a.status).toBe(201);
    // The answer is never applied: no ICE, no DTLS → empty-room after connectTimeoutSec (3 s).
    expect(await ended(a.body.callId)).toMatchObject({ outcome: 'empty-room', connected_at: null });
    expect(eventsOf(s, a.body.callId).map((e) => e.name)).toEqual(['call.ended']);
    expect(eventsOf(s, a.body.callId)[0]!.data).toMatchObject({ outcome: 'empty-room', source: 'vnum', durationSec: 0 });
    await never.close();

    const silent = new WebRtcVisitor({ toneHz: 0 });
    const b = await join('+4930555', silent);
    await silent.accept(b.body.sdp);
    // Connected, silence only: empty-room after silenceTimeoutSec (6 s).
    const row = await ended(b.body.callId, 20_000);
    expect(row).toMatchObject({ outcome: 'empty-room' });
    expect(row!.connected_at).not.toBeNull();
    expect(eventsOf(s, b.body.callId).map((e) => e.name)).toEqual(['call.started', 'call.ended', 'transcript.saved']);
    expect(silent.packetsReceived).toBeGreaterThan(100);
    await silent.close();
  }, 40_000);

  it('bad input: 404 page and 404 join for an unknown room, 400 naming the field, and the endpoints in /openapi.json', async () => {
    const page = await s.fetch('/room.ashx?number=%2B4999');
    expect(page.status).toBe(404);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const r404 = await j(s.fetch(`${V1}/rooms/join`, { method: 'POST', json: { number: '+4999', sdp: 'v=0 and more' } }));
    expect(r404.status).toBe(404);
    const r400 = await j(s.fetch(`${V1}/rooms/join`, { method: 'POST', json: { number: '+4930555' } }));
    expect(r400.status).toBe(400);
    expect(JSON.stringify(r400.body)).toContain('sdp');
    const junk = await j(s.fetch(`${V1}/rooms/join`, { method: 'POST', json: { number: '+4930555', sdp: 'v=0\r\nnot an offer at all' } }));
    expect(junk.status).toBe(400);
    expect(junk.body.error).toBe('invalid_request');
    const big = await s.fetch(`${V1}/rooms/join`, { method: 'POST', json: { number: '+4930555', sdp: 'x'.repeat(40_000) } });
    expect([400, 413]).toContain(big.status);
    const spec = (await j(s.fetch('/openapi.json'))).body;
    expect(Object.keys(spec.paths)).toEqual(expect.arrayContaining([`${V1}/rooms/join`, `${V1}/rooms/leave`, `${V1}/rooms/sign-out`]));
    expect(JSON.stringify(spec.paths)).toContain('/room.ashx?signed-in');
  }, 30_000);
});
