/**
 * The real bridge process (plugins/telephony/bridge/main.ts) against real SIPp far ends and the
 * local Gemini Live fake: every outcome of CONTROL-API.md reached through SIP on loopback.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import dgram from 'node:dgram';
import { startSipp, type SippOptions, type SippRun } from '../../support/sipp.ts';
import { toneShare } from '../../support/tones.ts';
import { DnsServer } from '../../support/dns-server.ts';
import { buildRtp, parseRtp } from '../../../plugins/telephony/bridge/media/rtp.ts';
import { GeminiLiveFake, type ScriptStep } from '../../support/gemini-live-fake.ts';
import { bridgeCommand } from '../../../plugins/telephony/bridge-link/link.ts';

const TOKEN = randomBytes(24).toString('hex');
let bridge: ChildProcess;
let controlUrl = '';
let callbacks: http.Server;
const dns = new DnsServer();
const events: Record<string, unknown>[] = [];
const waiters: (() => void)[] = [];
const cleanups: (() => Promise<unknown>)[] = [];

async function api(method: string, path: string, body?: unknown, token = TOKEN): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(controlUrl + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

function eventsOf(callId: string): Record<string, unknown>[] {
  return events.filter((e) => e.callId === callId);
}

async function waitFor<T>(fn: () => T | undefined, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise<void>((r) => {
      waiters.push(r);
      setTimeout(r, 100);
    });
  }
}

beforeAll(async () => {
  await dns.start();
  callbacks = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.headers.authorization !== `Bearer ${TOKEN}` || !req.headers['x-bridge-instance']) {
        res.writeHead(401).end();
        return;
      }
      events.push(JSON.parse(body) as Record<string, unknown>);
      res.writeHead(204).end();
      for (const w of waiters.splice(0)) w();
    });
  });
  await new Promise<void>((r) => callbacks.listen(0, '127.0.0.1', r));
  const base = 40000 + 2 * Math.floor(Math.random() * 5000);
  // As the supervisor starts it: the bridge's Node flags, then the entry through bin/run-ts.mjs.
  const cmd = bridgeCommand('plugins/telephony/bridge/main.ts');
  bridge = spawn(process.execPath, cmd.argv, {
    cwd: cmd.cwd,
    env: {
      ...process.env,
      SOVCOMMS_BRIDGE_TOKEN: TOKEN,
      SOVCOMMS_BRIDGE_CONTROL_PORT: '0',
      SOVCOMMS_BRIDGE_CALLBACK_URL: `http://127.0.0.1:${(callbacks.address() as AddressInfo).port}/internal/bridge/events`,
      SOVCOMMS_BRIDGE_SIP_PORT: '0',
      SOVCOMMS_BRIDGE_SIP_HOST: '127.0.0.1',
      SOVCOMMS_BRIDGE_RTP_PORTS: `${base}-${base + 199}`,
      SOVCOMMS_BRIDGE_KEEPALIVE_SEC: '0',
      SOVCOMMS_BRIDGE_DNS_SERVERS: `127.0.0.1:${dns.port}`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  bridge.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  controlUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    bridge.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.includes('bridge-ready'));
      if (line) resolve((JSON.parse(line) as { controlUrl: string }).controlUrl);
    });
    bridge.once('exit', (code) => reject(new Error(`bridge exited ${code}: ${err}`)));
  });
});

afterAll(async () => {
  await dns.stop();
  if (bridge && bridge.exitCode === null) {
    const exited = new Promise((r) => bridge.once('exit', r));
    bridge.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (bridge.exitCode === null) bridge.kill('SIGKILL');
  }
  await new Promise((r) => callbacks?.close(r));
});

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

interface CallSetup {
  sipp: SippOptions;
  script: ScriptStep[];
  trunk?: Record<string, unknown>;
  call?: Record<string, unknown>;
  /** Fields of PlaceCall's `engine` beside the defaults. */
  engine?: Record<string, unknown>;
  apiKey?: string;
  fakeKey?: string;
}

async function sipp(o: SippOptions): Promise<SippRun> {
  const s = await startSipp(o);
  cleanups.push(() => s.stop());
  return s;
}

async function fake(script: ScriptStep[], apiKey?: string): Promise<GeminiLiveFake> {
  const f = new GeminiLiveFake({ script, apiKey, usage: { prompt: 120, response: 30 } });
  await f.start();
  cleanups.push(() => f.stop());
  return f;
}

function trunkFor(id: string, s: SippRun, o: SippOptions, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id, host: '127.0.0.1', port: s.port, transport: o.transport ?? 'udp', register: false, maxConcurrentCalls: 10, codecs: ['PCMU', 'PCMA'], ...extra };
}

function placeBody(callId: string, trunkIds: string[], engineUrl: string, extra: Record<string, unknown> = {}, apiKey = 'test-key'): Record<string, unknown> {
  return {
    callId,
    tenantId: 'tenant-a',
    phone: '+4930123456',
    displayName: 'Acme Reminders',
    trunkIds,
    ringTimeoutSec: 10,
    maxSeconds: 60,
    engine: { url: engineUrl, apiKey, model: 'gemini-live-2.5-flash-preview', voice: 'Puck', language: 'de-DE', systemPrompt: 'Remind about the appointment.' },
    ...extra,
  };
}

/** One call against one SIPp far end; resolves with the `ended` event. */
async function runCall(
  c: CallSetup,
): Promise<{ ended: Record<string, unknown>; all: Record<string, unknown>[]; sippRun: SippRun; engine: GeminiLiveFake; callId: string }> {
  const s = await sipp(c.sipp);
  const engine = await fake(c.script, c.fakeKey);
  const put = await api('PUT', '/trunks', { trunks: [trunkFor('t1', s, c.sipp, c.trunk)] });
  expect(put).toEqual({ status: 200, json: { ok: true, count: 1, rejected: [] } });
  const callId = `oac-${randomBytes(6).toString('hex')}`;
  const body = placeBody(callId, ['t1'], engine.url, c.call, c.apiKey);
  if (c.engine) Object.assign(body.engine as Record<string, unknown>, c.engine);
  const res = await api('POST', '/calls', body);
  expect(res).toEqual({ status: 202, json: { accepted: true, callId } });
  const ended = await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'), 30_000);
  if (process.env.BRIDGE_DEBUG) console.log(JSON.stringify(ended));
  return { ended, all: eventsOf(callId), sippRun: s, engine, callId };
}

const GREET_AND_END: ScriptStep[] = [{ say: 'Guten Tag, hier ist Acme.', audioMs: 800 }, { tool: 'end_call' }];

describe('telephony bridge against SIPp', () => {
  it('announces readiness and answers /health with the contract shape; rejects a wrong token', async () => {
    const h = await api('GET', '/health');
    expect(h.status).toBe(200);
    expect(h.json).toMatchObject({ status: 'ok', activeCalls: 0, sip: { host: '127.0.0.1' } });
    expect(typeof (h.json.sip as { port: number }).port).toBe('number');
    // Linux: a sending and a receiving media thread, each saying what scheduling it got.
    if (process.platform === 'linux') expect(Object.keys(h.json.mediaThreads as object).sort()).toEqual(['rx', 'tx']);
    // Started with the flags of bridge/node-flags.ts: collections without normal-priority helper threads.
    expect((await api('GET', '/stats')).json.gc).toBe('single-threaded');
    const bad = await api('GET', '/health', undefined, 'x'.repeat(48));
    expect(bad.status).toBe(401);
    expect(bad.json.error).toBe('invalid_token');
  });

  it('answers 400 naming the field, 404 for unknown calls', async () => {
    const r = await api('POST', '/calls', { ...placeBody('c1', ['t1'], 'ws://127.0.0.1:1'), phone: '030 123' });
    expect(r.status).toBe(400);
    expect(r.json.error_description).toMatch(/^phone/);
    // One bad trunk is refused alone, with its reason; the good one in the same set is applied.
    const good = { id: 'ok1', host: '127.0.0.1', port: 5060, transport: 'udp', register: false, maxConcurrentCalls: 1, codecs: ['PCMU'] };
    const t = await api('PUT', '/trunks', {
      trunks: [{ id: 'x', host: 'h', port: 99999, transport: 'udp', register: false, maxConcurrentCalls: 1, codecs: [] }, good],
    });
    expect(t.status).toBe(200);
    expect(t.json).toMatchObject({ ok: true, count: 1, rejected: [{ id: 'x', error: expect.stringMatching(/^port: /) }] });
    const h = await api('GET', '/health');
    expect((h.json.trunks as { id: string }[]).map((x) => x.id)).toEqual(['ok1']);
    expect((await api('PUT', '/trunks', { trunks: 'nope' })).status).toBe(400);
    expect((await api('POST', '/calls/nope/hangup', {})).status).toBe(404);
  });

  it('UDP: answers, plays G.711 A-law from a pcap to the AI, the AI talks and ends the call (finished)', async () => {
    const { ended, all, sippRun, engine } = await runCall({
      sipp: { scenario: 'answer-play-pcap' },
      script: [
        { say: 'Guten Tag, hier ist Acme.', audioMs: 600 },
        { hear: 'Hallo?', ms: 400 },
        { say: 'Ihr Termin ist morgen. Auf Wiederhören.', audioMs: 600 },
        { tool: 'end_call' },
      ],
      trunk: { codecs: ['PCMA'] },
    });
    expect(all.map((e) => e.type)).toEqual(['dialing', 'answered', 'ended']);
    const answered = all[1];
    expect(answered).toMatchObject({ trunkId: 't1' });
    expect(answered.answerMs as number).toBeGreaterThanOrEqual(0);
    expect(ended).toMatchObject({ outcome: 'finished', answered: true, trunkId: 't1', errorDetail: '', sipStatus: null });
    const tr = ended.transcript as {
      turns: { speaker: string; text: string; ts: string }[];
      tokensTotal: number;
      tokensPrompt: number;
      inputTurns: number;
      outputTurns: number;
      model: string;
      voice: string;
      language: string;
    };
    expect(tr.turns.map((t) => [t.speaker, t.text])).toEqual([
      ['AI', 'Guten Tag, hier ist Acme.'],
      ['Caller', 'Hallo?'],
      ['AI', 'Ihr Termin ist morgen. Auf Wiederhören.'],
    ]);
    expect(tr).toMatchObject({
      tokensTotal: 300,
      tokensPrompt: 240,
      inputTurns: 1,
      outputTurns: 2,
      model: 'gemini-live-2.5-flash-preview',
      voice: 'Puck',
      language: 'de-DE',
    });
    // The caller's audio from the pcap reached the engine as 16 kHz PCM.
    expect(engine.sessions[0].audioBytesIn).toBeGreaterThan(400 * 32);
    const setup = engine.sessions[0].setup as {
      model: string;
      generationConfig: { responseModalities: string[]; speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: string } }; languageCode: string } };
      tools: { functionDeclarations: { name: string }[] }[];
      inputAudioTranscription: object;
      outputAudioTranscription: object;
      systemInstruction: { parts: { text: string }[] };
    };
    expect(setup.model).toBe('models/gemini-live-2.5-flash-preview');
    expect(setup.generationConfig.responseModalities).toEqual(['AUDIO']);
    expect(setup.generationConfig.speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName).toBe('Puck');
    expect(setup.generationConfig.speechConfig.languageCode).toBe('de-DE');
    expect(setup.systemInstruction.parts[0].text).toBe('Remind about the appointment.');
    expect(setup.tools[0].functionDeclarations.map((f) => f.name).sort()).toEqual(['callback_later', 'end_call', 'report_voicemail', 'transfer_to_user']);
    expect(engine.sessions[0].key).toBe('test-key');
    expect(engine.sessions[0].toolResponses[0]).toMatchObject({ name: 'end_call', response: { ok: true } });
    const exit = await sippRun.exited;
    expect(exit.code, exit.output).toBe(0);
  });

  it('RFC 4733 DTMF from the far end reaches the AI once per key press', async () => {
    const { ended, engine, sippRun } = await runCall({
      sipp: { scenario: 'answer-dtmf' },
      script: [{ say: 'Drücken Sie die Eins.', audioMs: 300 }, { wait: 1200 }, { tool: 'end_call' }],
    });
    expect(ended.outcome).toBe('finished');
    expect(engine.sessions[0].texts).toEqual(['The caller pressed the telephone key 1.']);
    expect((await sippRun.exited).code).toBe(0);
  });

  it('TCP: the RTP the bridge sends reaches SIPp and comes back through its RTP echo', async () => {
    const { ended, sippRun, callId } = await runCall({
      sipp: { scenario: 'answer', transport: 'tcp', rtpEcho: true },
      script: [{ say: 'Guten Tag.', audioMs: 1500 }, { wait: 300 }, { tool: 'end_call' }],
    });
    expect(ended).toMatchObject({ outcome: 'finished', answered: true });
    const stats = await api('GET', '/stats');
    const m = (stats.json.ended as { callId: string; packetsSent: number; packetsReceived: number }[]).find((x) => x.callId === callId)!;
    expect(m.packetsSent).toBeGreaterThan(50);
    expect(m.packetsReceived).toBeGreaterThan(m.packetsSent * 0.5); // SIPp's echo may drop some on a loaded machine
    expect((await sippRun.exited).code).toBe(0);
  });

  it('SRTP (SDES) and G.722 on a trunk that requires SRTP: RTP/SAVP both ways, the echo authenticated, 16 kHz to the engine', async () => {
    // SIPp answers RTP/SAVP G.722 with the key of our first crypto line and echoes our packets
    // (answer-srtp-g722.xml), so each one comes back protected with the key we expect from the far
    // end: decrypted, authenticated and G.722-decoded, the AI hears its own 440 Hz at 16 kHz.
    const s = await sipp({ scenario: 'answer-srtp-g722', rtpEcho: true });
    const engine = new GeminiLiveFake({ script: [{ say: 'Guten Tag.', audioMs: 2000 }, { wait: 1500 }, { tool: 'end_call' }], keepAudioMs: 4000 });
    await engine.start();
    cleanups.push(() => engine.stop());
    await api('PUT', '/trunks', { trunks: [trunkFor('t1', s, { scenario: 'answer-srtp-g722' }, { codecs: ['G722', 'PCMU'], srtp: 'required' })] });
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['t1'], engine.url))).status).toBe(202);
    const ended = await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'), 30_000);
    expect(ended).toMatchObject({ outcome: 'finished', answered: true });
    const m = ((await api('GET', '/stats')).json.ended as { callId: string; packetsSent: number; packetsReceived: number }[]).find((x) => x.callId === callId)!;
    expect(m.packetsSent).toBeGreaterThan(50);
    expect(m.packetsReceived).toBeGreaterThan(m.packetsSent * 0.5);
    const pcm = Buffer.concat(engine.sessions[0]!.audioIn);
    const samples = new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1);
    expect(samples.length).toBeGreaterThan(16000);
    expect(toneShare(samples, 440, 16000)).toBeGreaterThan(50 * toneShare(samples, 1000, 16000));
    expect((await s.exited).code).toBe(0);
  });

  it('a trunk that requires SRTP: an answer without our crypto (plain RTP/AVP) is hung up, outcome failed', async () => {
    const { ended } = await runCall({ sipp: { scenario: 'answer' }, script: GREET_AND_END, trunk: { srtp: 'required' } });
    expect(ended).toMatchObject({ outcome: 'failed', answered: true });
    expect(String(ended.errorDetail)).toContain('SRTP required');
  });

  it.each([
    ['401', 'udp'],
    ['407', 'tcp'],
  ] as const)('answers a %s digest challenge (MD5, qop=auth) over %s', async (kind, transport) => {
    const { ended, sippRun } = await runCall({
      sipp: { scenario: `auth-${kind}`, transport },
      script: GREET_AND_END,
      trunk: { username: 'alice', password: 's3cret' },
    });
    expect(ended).toMatchObject({ outcome: 'finished', answered: true });
    expect((await sippRun.exited).code).toBe(0);
  });

  it('a wrong password ends as failed with the SIP status', async () => {
    const { ended } = await runCall({ sipp: { scenario: 'auth-401' }, script: GREET_AND_END, trunk: { username: 'alice', password: 'wrong' } });
    expect(ended).toMatchObject({ outcome: 'failed', answered: false, sipStatus: 403, errorDetail: 'SIP 403 Forbidden' });
  });

  it('rings out: 180 and nothing else, CANCEL after ringTimeoutSec gives no-answer', async () => {
    const { ended, sippRun } = await runCall({ sipp: { scenario: 'ring-no-answer' }, script: GREET_AND_END, call: { ringTimeoutSec: 1 } });
    expect(ended).toMatchObject({ outcome: 'no-answer', answered: false, answeredAt: null, talkSec: 0, sipStatus: 487 });
    const exit = await sippRun.exited;
    expect(exit.code, exit.output).toBe(0);
  });

  it.each([
    [486, 'Busy Here', 'busy', ''],
    [600, 'Busy Everywhere', 'busy', ''],
    [503, 'Service Unavailable', 'failed', 'SIP 503 Service Unavailable'],
  ] as const)('a %s final response gives %s', async (status, reason, outcome, errorDetail) => {
    const { ended, sippRun } = await runCall({ sipp: { scenario: `reject-${status}` }, script: GREET_AND_END });
    // eslint-disable-next-line @typescript-eslint/no-meaningless-void-operator -- the parameter is deliberately unused
    void reason;
    expect(ended).toMatchObject({ outcome: outcome === 'busy' ? 'busy' : 'failed', sipStatus: status, errorDetail, answered: false });
    expect((await sippRun.exited).code).toBe(0);
  });

  it('the far end hanging up first gives far-hangup (BYE both ways: theirs answered 200)', async () => {
    const { ended, sippRun } = await runCall({ sipp: { scenario: 'answer-then-bye' }, script: [{ say: 'Hallo.', audioMs: 300 }, { wait: 15_000 }] });
    expect(ended).toMatchObject({ outcome: 'far-hangup', answered: true });
    expect(ended.talkSec as number).toBeGreaterThanOrEqual(1);
    expect((await sippRun.exited).code).toBe(0);
  });

  it('hang up mid-sentence: the AI turn so far is kept, outcome far-hangup', async () => {
    const { ended, sippRun } = await runCall({
      sipp: { scenario: 'hangup-mid-sentence' },
      script: [{ say: 'Ich erzähle Ihnen jetzt eine sehr lange Geschichte.', audioMs: 20_000, chunkMs: 500 }, { tool: 'end_call' }],
    });
    expect(ended.outcome).toBe('far-hangup');
    expect((ended.transcript as { turns: { speaker: string }[] }).turns[0].speaker).toBe('AI');
    expect(ended.talkSec as number).toBeLessThan(10);
    expect((await sippRun.exited).code).toBe(0);
  });

  it('maxSeconds ends the call with BYE as max-duration', async () => {
    const { ended, sippRun } = await runCall({
      sipp: { scenario: 'answer' },
      script: [{ say: 'Hallo.', audioMs: 300 }, { wait: 15_000 }],
      call: { maxSeconds: 1 },
    });
    expect(ended).toMatchObject({ outcome: 'max-duration', answered: true });
    expect((await sippRun.exited).code).toBe(0);
  });

  it('a far end that goes silent (no RTP, no RTCP, no BYE) is hung up after mediaTimeoutSec; one that keeps sending is not', async () => {
    // SIPp 'answer' without -rtp_echo sends no media at all after its 200 OK.
    const { ended, sippRun } = await runCall({
      sipp: { scenario: 'answer' },
      script: [{ say: 'Hallo.', audioMs: 300 }, { wait: 15_000 }],
      call: { mediaTimeoutSec: 1 },
    });
    expect(ended).toMatchObject({ outcome: 'failed', answered: true, errorDetail: 'no media from the far end for 1 s' });
    expect((await sippRun.exited).code).toBe(0); // it got our BYE
    expect(ended.talkSec as number).toBeLessThanOrEqual(3);

    const echo = await sipp({ scenario: 'answer', rtpEcho: true });
    const engine = await fake([{ say: 'Hallo.', audioMs: 300 }, { wait: 15_000 }]);
    await api('PUT', '/trunks', { trunks: [trunkFor('t1', echo, { scenario: 'answer' })] });
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['t1'], engine.url, { mediaTimeoutSec: 1 }))).status).toBe(202);
    await waitFor(() => eventsOf(callId).find((e) => e.type === 'answered'));
    await new Promise((r) => setTimeout(r, 2500)); // well past the timeout: the echo keeps it alive
    expect(eventsOf(callId).find((e) => e.type === 'ended')).toBeUndefined();
    await api('POST', `/calls/${callId}/hangup`, { reason: 'finished' });
    expect(await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'))).toMatchObject({ outcome: 'finished' });
    expect((await echo.exited).code).toBe(0);
  });

  it("follows a re-INVITE that moves the far end's media: RTP goes to the new port, media from there is accepted", async () => {
    const moved = dgram.createSocket('udp4');
    await new Promise<void>((r) => moved.bind(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => moved.close(() => r(undefined))));
    const newport = moved.address().port;
    let bridgePort = 0;
    let got = 0;
    moved.on('message', (b, rinfo) => {
      if (parseRtp(b)) {
        got++;
        bridgePort = rinfo.port;
      }
    });
    const s = await sipp({ scenario: 'answer-reinvite', keys: { newport: String(newport) } });
    const engine = await fake([{ say: 'Hallo.', audioMs: 300 }, { wait: 15_000 }]);
    await api('PUT', '/trunks', { trunks: [trunkFor('t1', s, { scenario: 'answer-reinvite' })] });
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['t1'], engine.url, { mediaTimeoutSec: 3 }))).status).toBe(202);
    await waitFor(() => (got >= 10 ? true : undefined), 10_000);
    // The far end's media from the new port reaches the call (the receiver re-connected there).
    const frame = Buffer.alloc(160, 0xff);
    for (let i = 0; i < 100; i++) {
      moved.send(buildRtp({ marker: i === 0, payloadType: 0, sequence: i, timestamp: i * 160, ssrc: 99, payload: frame }), bridgePort, '127.0.0.1');
      await new Promise((r) => setTimeout(r, 20)); // 2 s: also well past half the media timeout
    }
    expect(eventsOf(callId).find((e) => e.type === 'ended')).toBeUndefined();
    await api('POST', `/calls/${callId}/hangup`, { reason: 'finished' });
    await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'));
    expect((await s.exited).code).toBe(0);
    const st = (await api('GET', '/stats')).json.ended as { callId: string; packetsReceived: number }[];
    expect(st.find((m) => m.callId === callId)!.packetsReceived).toBeGreaterThanOrEqual(100);
  });

  it.each([
    ['report_voicemail', 'voicemail'],
    ['callback_later', 'not-now'],
  ] as const)('the %s tool ends the call as %s', async (tool, outcome) => {
    const { ended, sippRun } = await runCall({ sipp: { scenario: 'answer' }, script: [{ say: 'Hallo.', audioMs: 300 }, { tool }] });
    expect(ended).toMatchObject({ outcome, answered: true });
    expect((await sippRun.exited).code).toBe(0);
  });

  it("a call's voicemail message reaches the AI in report_voicemail's answer, and the call hangs up only once the AI has said it", async () => {
    const message = 'Hier ist Acme, bitte rufen Sie uns zurück.';
    const { ended, engine, sippRun } = await runCall({
      sipp: { scenario: 'answer' },
      // The model answers the tool after a moment (as Gemini does), then speaks the message.
      script: [{ say: 'Hallo?', audioMs: 300 }, { tool: 'report_voicemail' }, { wait: 1500 }, { say: message, audioMs: 1000 }, { wait: 15_000 }],
      engine: { leaveVoicemailMessage: true, voicemailMessage: message },
    });
    expect(ended).toMatchObject({ outcome: 'voicemail', answered: true });
    expect(engine.sessions[0]!.toolResponses[0]).toMatchObject({ name: 'report_voicemail', response: { ok: true, leaveMessage: message } });
    // The message was spoken before the hang-up: its turn is in the transcript.
    const turns = (ended.transcript as { turns: { speaker: string; text: string }[] }).turns;
    expect(turns.map((t) => t.text)).toContain(message);
    expect((await sippRun.exited).code).toBe(0);
  });

  it('transfer_to_user sends REFER to the number, emits transferred, then ends as transferred-to-vnum', async () => {
    const { ended, all, engine, sippRun } = await runCall({
      sipp: { scenario: 'answer-refer' },
      script: [
        { say: 'Ich verbinde Sie.', audioMs: 300 },
        { tool: 'transfer_to_user', args: { phone: '+4989777' } },
      ],
    });
    expect(all.map((e) => e.type)).toEqual(['dialing', 'answered', 'transferred', 'ended']);
    expect(all[2]).toMatchObject({ toPhone: '+4989777', toUser: '', transferType: 'outbound-to-user', trunkId: 't1' });
    expect(ended.outcome).toBe('transferred-to-vnum');
    expect(engine.sessions[0].toolResponses[0]).toMatchObject({ name: 'transfer_to_user', response: { ok: true } });
    const exit = await sippRun.exited;
    expect(exit.code, exit.output).toBe(0);
  });

  it('a trunk with dnsSrv is reached where its SRV records point (RFC 3263), not at its configured port', async () => {
    const s = await sipp({ scenario: 'answer' });
    dns.records.set('_sip._udp.trunk.example.test', [
      { type: 'SRV', priority: 20, weight: 0, port: 9, target: 'backup.example.test' }, // lower preference: never chosen
      { type: 'SRV', priority: 10, weight: 5, port: s.port, target: 'edge1.example.test' },
    ]);
    dns.records.set('edge1.example.test', [{ type: 'A', address: '127.0.0.1' }]);
    dns.records.set('backup.example.test', [{ type: 'A', address: '127.0.0.1' }]);
    dns.records.set('trunk.example.test', []);
    const engine = await fake(GREET_AND_END);
    const put = await api('PUT', '/trunks', { trunks: [trunkFor('t1', s, { scenario: 'answer' }, { host: 'trunk.example.test', port: 5, dnsSrv: true })] });
    expect(put.status).toBe(200);
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['t1'], engine.url))).status).toBe(202);
    const ended = await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'));
    expect(ended).toMatchObject({ outcome: 'finished', answered: true });
    expect((await s.exited).code).toBe(0);
    expect(dns.queries.some((q) => q.name === '_sip._udp.trunk.example.test' && q.type === 33)).toBe(true);
    // A name without SRV records or address: the trunk stays, /health says why.
    await api('PUT', '/trunks', { trunks: [{ ...trunkFor('t2', s, { scenario: 'answer' }), host: 'nowhere.example.test', dnsSrv: true }] });
    const h = await api('GET', '/health');
    expect((h.json.trunks as { id: string; lastError: string | null }[]).find((t) => t.id === 't2')!.lastError).toMatch(/nowhere\.example\.test/);
  });

  it('a 503 from the first SRV target moves the INVITE to the next one of the same trunk (RFC 3263 §4.3)', async () => {
    const busy = await sipp({ scenario: 'reject-503' });
    const good = await sipp({ scenario: 'answer' });
    dns.records.set('_sip._udp.pool.example.test', [
      { type: 'SRV', priority: 10, weight: 0, port: busy.port, target: 'node1.example.test' },
      { type: 'SRV', priority: 20, weight: 0, port: good.port, target: 'node2.example.test' },
    ]);
    dns.records.set('node1.example.test', [{ type: 'A', address: '127.0.0.1' }]);
    dns.records.set('node2.example.test', [{ type: 'A', address: '127.0.0.1' }]);
    dns.records.set('pool.example.test', []);
    const engine = await fake(GREET_AND_END);
    await api('PUT', '/trunks', { trunks: [{ ...trunkFor('t1', good, { scenario: 'answer' }), host: 'pool.example.test', dnsSrv: true }] });
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['t1'], engine.url))).status).toBe(202);
    const ended = await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'));
    expect(ended).toMatchObject({ outcome: 'finished', answered: true, trunkId: 't1' });
    expect(eventsOf(callId).filter((e) => e.type === 'dialing')).toHaveLength(1); // one trunk, two servers
    expect((await busy.exited).code).toBe(0);
    expect((await good.exited).code).toBe(0);
  });

  it('a refused REFER falls back to a second leg: the number is called, the parties are bridged, the AI leaves', async () => {
    const s = await sipp({ scenario: 'answer-refer-403', rtpEcho: true, calls: 2 });
    const engine = await fake([{ say: 'Ich verbinde Sie.', audioMs: 300 }, { tool: 'transfer_to_user', args: { phone: '+4989777' } }, { wait: 15_000 }]);
    await api('PUT', '/trunks', { trunks: [trunkFor('t1', s, { scenario: 'answer-refer-403' })] });
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['t1'], engine.url))).status).toBe(202);
    await waitFor(() => eventsOf(callId).find((e) => e.type === 'transferred'));
    expect(engine.sessions[0].toolResponses[0]).toMatchObject({ name: 'transfer_to_user', response: { ok: true } });
    expect(eventsOf(callId).find((e) => e.type === 'transferred')).toMatchObject({ toPhone: '+4989777', transferType: 'outbound-to-user', trunkId: 't1' });
    expect(((await api('GET', '/calls')).json.calls as { callId: string }[]).map((c) => c.callId)).toEqual([callId]); // still up, bridged
    await new Promise((r) => setTimeout(r, 600)); // media flows both ways through the echoes
    await api('POST', `/calls/${callId}/hangup`, { reason: 'finished' });
    const ended = await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'));
    expect(ended).toMatchObject({ outcome: 'transferred-to-vnum', answered: true });
    const exit = await s.exited; // both calls got their BYE
    expect(exit.code, exit.output).toBe(0);
    const st = (await api('GET', '/stats')).json.ended as { callId: string; relayedFrames: number }[];
    expect(st.find((m) => m.callId === callId)!.relayedFrames).toBeGreaterThan(10);
  });

  it('hangup while ringing sends CANCEL (cancelled); a full trunk answers 503 no_capacity', async () => {
    const s = await sipp({ scenario: 'ring-no-answer' });
    const engine = await fake(GREET_AND_END);
    await api('PUT', '/trunks', { trunks: [trunkFor('t1', s, { scenario: 'ring-no-answer' }, { maxConcurrentCalls: 1 })] });
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['t1'], engine.url))).status).toBe(202);
    const full = await api('POST', '/calls', placeBody(`${callId}-2`, ['t1'], engine.url));
    expect(full).toMatchObject({ status: 503, json: { error: 'no_capacity' } });
    await waitFor(() => eventsOf(callId).find((e) => e.type === 'dialing'));
    await new Promise((r) => setTimeout(r, 300)); // let the 180 arrive
    const h = await api('POST', `/calls/${callId}/hangup`, {});
    expect(h.json).toEqual({ ok: true, state: 'ringing' });
    const ended = await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'));
    expect(ended).toMatchObject({ outcome: 'cancelled', answered: false, sipStatus: 487 });
    const exit = await s.exited;
    expect(exit.code, exit.output).toBe(0);
  });

  it('goAway: the client resumes on a new socket with the sessionResumption handle', async () => {
    const { ended, engine } = await runCall({
      sipp: { scenario: 'answer' },
      script: [{ say: 'Teil eins.', audioMs: 300 }, { goAway: true }, { say: 'Teil zwei.', audioMs: 300 }, { tool: 'end_call' }],
    });
    expect(ended.outcome).toBe('finished');
    expect(engine.sessions).toHaveLength(2);
    expect(engine.sessions[1].resumedFrom).toMatch(/^h-/);
    expect((ended.transcript as { outputTurns: number }).outputTurns).toBe(2);
  });

  it('a rejected API key (close 1007) fails the call with the reason and never leaves it ringing', async () => {
    const { ended, sippRun, all } = await runCall({ sipp: { scenario: 'ring-no-answer' }, script: GREET_AND_END, fakeKey: 'the-right-key', apiKey: 'wrong' });
    expect(ended).toMatchObject({ outcome: 'failed', answered: false });
    expect(ended.errorDetail).toMatch(/1007: API key not valid/);
    // The engine connects while the call is set up. When its refusal arrives before the INVITE
    // went out, the phone never rings at all; otherwise the far end gets our CANCEL.
    if (all.some((e) => e.type === 'dialing')) expect((await sippRun.exited).code).toBe(0);
    else await sippRun.stop();
  });

  it('tries the next trunk when the first fails (503), and hangup through the API sends BYE', async () => {
    const bad = await sipp({ scenario: 'reject-503' });
    const good = await sipp({ scenario: 'answer' });
    const engine = await fake([{ say: 'Hallo.', audioMs: 300 }, { wait: 15_000 }]);
    await api('PUT', '/trunks', { trunks: [trunkFor('a', bad, { scenario: 'reject' }), trunkFor('b', good, { scenario: 'answer' })] });
    const callId = `oac-${randomBytes(6).toString('hex')}`;
    expect((await api('POST', '/calls', placeBody(callId, ['a', 'b'], engine.url))).status).toBe(202);
    expect((await api('POST', '/calls', placeBody(callId, ['a', 'b'], engine.url))).json.error).toBe('duplicate_call');
    await waitFor(() => eventsOf(callId).find((e) => e.type === 'answered'));
    const list = await api('GET', '/calls');
    expect(list.json.calls).toEqual([expect.objectContaining({ callId, state: 'answered', trunkId: 'b' })]);
    const h = await api('POST', `/calls/${callId}/hangup`, { reason: 'cancelled' });
    expect(h.json).toEqual({ ok: true, state: 'answered' });
    const ended = await waitFor(() => eventsOf(callId).find((e) => e.type === 'ended'));
    expect(ended).toMatchObject({ outcome: 'cancelled', trunkId: 'b', answered: true });
    expect(
      eventsOf(callId)
        .filter((e) => e.type === 'dialing')
        .map((e) => e.trunkId),
    ).toEqual(['a', 'b']);
    expect((await good.exited).code).toBe(0);
    const seqs = events.map((e) => e.seq as number);
    expect([...seqs].sort((x, y) => x - y)).toEqual(seqs); // delivered in order
  });
});
