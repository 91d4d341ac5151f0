import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import dgram from 'node:dgram';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { freePort, startSipp, type SippRun } from '../../support/sipp.ts';
import { GeminiLiveFake } from '../../support/gemini-live-fake.ts';
import { rms, rtpParty, toneShare, type RtpParty } from '../../support/tones.ts';
import { adm, bridgeListening, call, eventsOf, j, until, type Json } from './helpers.ts';
import { newBranch, parseDatagram, type SipResponse } from '../../../plugins/telephony/bridge/sip/message.ts';
import { digestAuthorization, parseChallenge } from '../../../plugins/telephony/bridge/sip/digest.ts';
import type { TelephonyServices } from '../../../plugins/telephony/services.ts';

/**
 * Inbound SIP end to end: the appliance with its embedded real bridge, SIPp as the
 * carrier placing calls and as LAN desk phones (REGISTER with digest, then answering), the Gemini
 * Live fake as every number's AI. Routing, the AI's audio checked as a 440 Hz tone in the RTP the
 * caller receives, desk phones, fallbacks, each transfer type, events and transcripts.
 */
const V1 = '/api.ashx/v1';
let s: TestServer;
let engine: GeminiLiveFake;
let sipPort = 0;
const clock = new ManualClock(Date.parse('2026-05-04T09:00:00Z'));
const sipps: SippRun[] = [];
/** The port desk phone "alice" registered from (a UAS SIPp takes it over to answer). */
let alicePort = 0;

const RECEPTION = '+4930100';
const TO_VNUM = '+4930200';
const BILLING = '+4930300';
const TO_USER = '+4930400';
const TO_PSTN = '+4930500';
const ALICE_DID = '+4930999';
const BOB_DID = '+4930888';
const PSTN = '+4915112345';
const LONG = '+4930600';

beforeAll(async () => {
  process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
  engine = new GeminiLiveFake({
    script: [],
    usage: { prompt: 100, response: 20 },
    scriptsByKey: {
      'key-reception': [
        { say: 'Welcome to Acme reception.', audioMs: 800 },
        { hear: 'I have a question.', ms: 400 },
        { say: 'Thank you for calling. Goodbye.', audioMs: 400 },
        { tool: 'end_call' },
      ],
      'key-to-vnum': [
        { say: 'Let me connect you to billing.', audioMs: 400 },
        { tool: 'transfer_to_user', args: { phone: BILLING } },
      ],
      'key-billing': [{ say: 'Billing here. Your invoice is paid. Goodbye.', audioMs: 400 }, { tool: 'end_call' }],
      'key-to-user': [
        { say: 'Connecting you to Alice.', audioMs: 400 },
        { tool: 'transfer_to_user', args: { user: 'alice' } },
      ],
      'key-to-pstn': [
        { say: 'Connecting you to the duty phone.', audioMs: 400 },
        { tool: 'transfer_to_user', args: { phone: PSTN } },
      ],
      'key-long': [{ say: 'Please hold the line.', audioMs: 400 }, { wait: 30_000 }],
      'key-outbound': [
        { say: 'Hello, a colleague wants to talk to you.', audioMs: 400 },
        { tool: 'transfer_to_user', args: { user: 'alice' } },
      ],
    },
  });
  await engine.start();
  const base = 44000 + 2 * Math.floor(Math.random() * 4000);
  s = await startTestServer({
    clock,
    overrides: {
      plugins: {
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, rtpPorts: `${base}-${base + 199}`, readyTimeoutMs: 20_000 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
          ringTimeoutSec: 8,
        },
      },
    },
  });
  const health = await bridgeListening(s, { ms: 20_000 });
  sipPort = health.sip.port;
  // The carrier: known by its address (127.0.0.1). Its port is where we would send outbound calls.
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
    id: 'carrier',
    name: 'carrier',
    host: '127.0.0.1',
    port: 5999,
    transport: 'udp',
    codecs: ['PCMA'],
  });
  const numbers: [string, string][] = [
    [RECEPTION, 'key-reception'],
    [TO_VNUM, 'key-to-vnum'],
    [BILLING, 'key-billing'],
    [TO_USER, 'key-to-user'],
    [TO_PSTN, 'key-to-pstn'],
  ];
  for (const [number, key] of numbers) {
    const r = await adm(s, '/signal.ashx?numbers=save', 'numbers-save', { number, name: `n${number}`, voice: 'Puck', language: 'en-GB', geminiApiKey: key });
    expect(r.status).toBe(200);
  }
  const route = async (Did: string, User: string, FromNumber?: string) =>
    expect(
      (await s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did, User, ...(FromNumber ? { FromNumber } : {}) } })).status,
    ).toBe(201);
  expect((await adm(s, '/signal.ashx?numbers=save', 'numbers-save', { number: LONG, name: 'hold', geminiApiKey: 'key-long', maxDurationSec: 10 })).status).toBe(
    200,
  );
  for (const n of [RECEPTION, TO_VNUM, TO_USER, TO_PSTN, LONG]) await route(n, n);
  await route(ALICE_DID, 'alice');
  // Bob has no phone: the row after his (same Did, any caller) is the fallback, the reception AI.
  await route(BOB_DID, 'bob');
  await route(BOB_DID, RECEPTION, '*');
  await adm(s, '/signal.ashx?whitelist=add', 'whitelist-add', { number: PSTN, comment: 'duty phone' });
  await until(
    async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health?.trunks?.some((t: { id: string }) => t.id.endsWith('.carrier')),
    5000,
    'trunk at the bridge',
  );
}, 60_000);

afterAll(async () => {
  await s?.stop();
  for (const x of sipps) await x.stop();
  await engine?.stop();
  delete process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC;
});

async function sipp(o: Parameters<typeof startSipp>[0]): Promise<SippRun> {
  const r = await startSipp(o);
  sipps.push(r);
  return r;
}

interface Placed {
  run: SippRun;
  /** The caller's media: it echoes what the appliance sends (symmetric RTP, as a carrier's media gateway). */
  sink: RtpParty;
}

/** The carrier calls `did` from `from`; the appliance ends the call (SIPp waits for its BYE). */
async function carrierCall(did: string, from = '+4917612345678'): Promise<Placed> {
  const sink = await rtpParty({ echo: true });
  const run = await sipp({
    scenario: 'inbound-uac',
    remote: `127.0.0.1:${sipPort}`,
    keys: { from, rtpport: String(sink.port) },
    extraArgs: ['-s', did],
    timeoutSec: 45,
  });
  return { run, sink };
}

function lastCallTo(did: string): Json {
  return s.appliance.core.db.prepare('SELECT * FROM tel_inbound_calls WHERE did = ? ORDER BY rowid DESC LIMIT 1').get(did);
}

async function ended(did: string): Promise<Json> {
  return until(
    () => {
      const r = lastCallTo(did);
      return r?.ended_at ? r : null;
    },
    30_000,
    `call to ${did} ended`,
  );
}

const transcript = (id: string) => j(s.fetch(`${V1}/transcripts/${id}`, { key: s.adminKey })).then((r) => r.body);
const turns = (t: Json) => t.turns.map((x: { speaker: string; text: string }) => [x.speaker, x.text]);

/** Desk phone "alice": a SIPp REGISTERs with digest; a second one on the same port answers. */
async function registerAlice(password: string): Promise<void> {
  alicePort = await freePort();
  const bad = await sipp({
    scenario: 'deskphone-register-bad',
    port: alicePort,
    remote: `127.0.0.1:${sipPort}`,
    keys: { user: 'alice' },
    template: { user: 'alice', pass: 'wrong-password' },
  });
  const badExit = await bad.exited;
  expect(badExit.code, badExit.output).toBe(0); // 401, then 403 for the wrong password
  const ok = await sipp({
    scenario: 'deskphone-register-ok',
    port: alicePort,
    remote: `127.0.0.1:${sipPort}`,
    keys: { user: 'alice' },
    template: { user: 'alice', pass: password },
  });
  const exit = await ok.exited;
  expect(exit.code, exit.output).toBe(0);
}

const aliceAnswers = () => sipp({ scenario: 'deskphone-answer', port: alicePort, timeoutSec: 40 });

/**
 * A desk phone (or someone posing as one) written with a UDP socket on `ip`: sends REGISTERs for
 * `user` and returns each answer. `auth` builds the Authorization from the last challenge.
 */
async function sipClient(ip: string, user: string) {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, ip, r));
  const port = sock.address().port;
  const callId = `${user}-${port}@${ip}`;
  let cseq = 0;
  let waiting: ((res: SipResponse) => void) | null = null;
  sock.on('message', (buf) => {
    let m;
    try {
      m = parseDatagram(buf);
    } catch {
      return; // the check below fails on the missing answer
    }
    if (m.kind === 'response' && m.headers.get('Call-ID') === callId && m.headers.get('CSeq') === `${cseq} REGISTER`) waiting?.(m);
  });
  let last: SipResponse | null = null;
  const c = {
    port,
    /** The raw REGISTER (to replay it elsewhere). */
    build(authorization?: string, contact = `sip:${user}@${ip}:${port}`): Buffer {
      cseq++;
      return Buffer.from(
        [
          `REGISTER sip:127.0.0.1:${sipPort} SIP/2.0`,
          `Via: SIP/2.0/UDP ${ip}:${port};branch=${newBranch()}`,
          `From: <sip:${user}@127.0.0.1:${sipPort}>;tag=${port}`,
          `To: <sip:${user}@127.0.0.1:${sipPort}>`,
          `Call-ID: ${callId}`,
          `CSeq: ${cseq} REGISTER`,
          `Contact: <${contact}>`,
          'Expires: 600',
          ...(authorization ? [`Authorization: ${authorization}`] : []),
          'Content-Length: 0',
          '',
          '',
        ].join('\r\n'),
      );
    },
    async send(datagram: Buffer): Promise<SipResponse> {
      const res = new Promise<SipResponse>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no answer to REGISTER ${cseq} from ${ip}`)), 3000);
        waiting = (r) => {
          clearTimeout(t);
          resolve(r);
        };
      });
      sock.send(datagram, sipPort, '127.0.0.1');
      const r = await res;
      if (r.status === 401) last = r;
      return r;
    },
    /** An Authorization for the last challenge this client got. */
    auth(password: string, nc = 1): string {
      const ch = parseChallenge(last?.headers.get('WWW-Authenticate') ?? '');
      if (!ch) throw new Error('no challenge yet');
      return digestAuthorization(ch, { method: 'REGISTER', uri: `sip:127.0.0.1:${sipPort}`, username: user, password, nc });
    },
    /** The whole exchange: challenge, then the answer with `password`. */
    async register(password: string): Promise<SipResponse> {
      const first = await c.send(c.build());
      if (first.status !== 401) return first;
      return c.send(c.build(c.auth(password)));
    },
    close: () => sock.close(),
  };
  return c;
}

async function addPhone(user: string, password: string): Promise<void> {
  expect((await adm(s, '/signal.ashx?phones=add', 'phones-add', { user, password })).status).toBe(200);
  await until(
    async () => (await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones.some((p: Json) => p.user === user && p.registered === 0),
    5000,
    `${user}'s login at the bridge`,
  );
}

const registered = async (user: string) =>
  (await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones.find((p: Json) => p.user === user)?.registered;

describe('inbound SIP calls (real bridge, SIPp carrier and desk phones, Gemini Live fake)', () => {
  it('an INVITE from a source no trunk knows gets 403 and nothing else; no call, no event', async () => {
    const before = s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get() as { n: number };
    const run = await sipp({ scenario: 'inbound-uac-403', ip: '127.0.0.2', remote: `127.0.0.1:${sipPort}`, extraArgs: ['-s', RECEPTION] });
    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    expect(s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get()).toEqual(before);
    expect(engine.sessions.length).toBe(0);
  }, 30_000);

  it('a carrier trunk with digest: 407, then the INVITE with its credentials is taken; a wrong password gets 403', async () => {
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
      id: 'carrier2',
      name: 'carrier2',
      host: '192.0.2.10',
      port: 5060,
      transport: 'udp',
      username: 'carrier2',
      password: 'trunk-pw-42',
      inboundAuth: 'digest',
    });
    await until(
      async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health?.trunks?.some((t: { id: string }) => t.id.endsWith('.carrier2')),
      5000,
      'digest trunk at the bridge',
    );
    const common = { ip: '127.0.0.2', remote: `127.0.0.1:${sipPort}`, extraArgs: ['-s', RECEPTION], timeoutSec: 30 };
    const bad = await sipp({
      ...common,
      scenario: 'inbound-uac-digest-403',
      keys: { from: '+4917600000001', rtpport: '9' },
      template: { user: 'carrier2', pass: 'guess' },
    });
    const badExit = await bad.exited;
    expect(badExit.code, badExit.output).toBe(0);
    const sink = await rtpParty({ echo: true, ip: '127.0.0.2' }); // SIPp names its own address (-mi) in the SDP
    const ok = await sipp({
      ...common,
      scenario: 'inbound-uac-digest',
      keys: { from: '+4917600000002', rtpport: String(sink.port) },
      template: { user: 'carrier2', pass: 'trunk-pw-42' },
    });
    const exit = await ok.exited;
    sink.close();
    expect(exit.code, exit.output).toBe(0);
    const c = await ended(RECEPTION);
    expect(c).toMatchObject({ trunk_id: 'carrier2', from_number: '+4917600000002', outcome: 'finished' });
    expect(s.logs.text()).not.toContain('trunk-pw-42');
  }, 60_000);

  it("a virtual number's AI answers: its voice reaches the caller as RTP (440 Hz tone), the caller's audio reaches the AI; events and transcript", async () => {
    const { run, sink } = await carrierCall(RECEPTION);
    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    const c = await ended(RECEPTION);
    sink.close();
    expect(c.call_id).toMatch(/^vnum[0-9a-f]{12}$/);
    expect(c).toMatchObject({ outcome: 'finished', number: RECEPTION, from_number: '+4917612345678', trunk_id: 'carrier', caller_source: 'vnum' });
    // The AI's speech (the fake's 440 Hz tone, 24 kHz → 8 kHz A-law) as the caller heard it.
    const heard = sink.samples(1000);
    expect(heard.length).toBeGreaterThan(8000 * 0.8); // 1.2 s of speech, less what the caller's BYE cut
    expect(toneShare(heard, 440)).toBeGreaterThan(0.5);
    const session = engine.sessions.find((x) => x.key === 'key-reception')!;
    expect(session.audioBytesIn).toBeGreaterThan(400 * 32); // the caller's (echoed) audio, as 16 kHz PCM
    const ev = eventsOf(s, c.call_id);
    expect(ev.map((e) => e.name)).toEqual(['call.answered', 'call.started', 'call.ended', 'transcript.saved']);
    expect(ev[0]!.data).toMatchObject({ did: RECEPTION, fromNumber: '+4917612345678', direction: 'inbound', source: 'vnum', trunkId: 'carrier' });
    expect(ev[0]!.data.answerMs).toBeGreaterThanOrEqual(0);
    // call.started and transcript.saved name the caller, as call.answered does.
    expect(ev[1]!.data).toMatchObject({ number: RECEPTION, did: RECEPTION, direction: 'inbound', source: 'vnum', phone: '+4917612345678', room: '' });
    expect(ev[2]!.data).toMatchObject({ number: RECEPTION, outcome: 'finished', source: 'sip', tokens: 240 });
    expect(ev[3]!.data).toMatchObject({ number: RECEPTION, file: `${c.call_id}.json`, source: 'vnum', phone: '+4917612345678' });
    const t = await transcript(c.call_id);
    expect(turns(t)).toEqual([
      ['AI', 'Welcome to Acme reception.'],
      ['Caller', 'I have a question.'],
      ['AI', 'Thank you for calling. Goodbye.'],
    ]);
    expect(t).toMatchObject({ callerSource: 'vnum', answered: true, outcome: 'finished', voice: 'Puck', language: 'en-GB', inputTurns: 1, outputTurns: 2 });
    const list = (await j(s.fetch(`${V1}/transcripts?source=vnum`, { key: s.adminKey }))).body;
    expect(list.data.find((x: Json) => x.callId === c.call_id)).toMatchObject({ callerSource: 'vnum', number: RECEPTION, outcome: 'finished' });
    expect(s.logs.text()).not.toContain('key-reception');
  }, 60_000);

  it('desk phones: digest REGISTER (a wrong password refused), an office-tab route rings the phone; its audio reaches the caller', async () => {
    const added = (await j(adm(s, '/signal.ashx?phones=add', 'phones-add', { user: 'alice' }))).body;
    expect(added).toMatchObject({ ok: true, user: 'alice', username: 'alice' });
    // 128 bits by default (16 random bytes, base64url).
    expect(added.generatedPassword).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(Buffer.from(added.generatedPassword, 'base64url')).toHaveLength(16);
    // Sealed at rest, shown once: the list never has it.
    const stored = s.appliance.core.db.prepare('SELECT password_sealed FROM tel_phones WHERE user = ?').get('alice') as { password_sealed: string };
    expect(stored.password_sealed).not.toContain(added.generatedPassword);
    await until(
      async () => (await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones.some((p: Json) => p.user === 'alice' && p.registered === 0),
      5000,
      'login at the bridge',
    );
    await registerAlice(added.generatedPassword);
    expect((await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones).toEqual([
      { user: 'alice', username: 'alice', createdAtUtc: expect.any(String), srtp: 'off', registered: 1 },
    ]);
    expect(JSON.stringify((await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body)).not.toContain(added.generatedPassword);
    const phone = await aliceAnswers();
    const { run, sink } = await carrierCall(ALICE_DID, '+4917699999999');
    const [callerExit, phoneExit] = await Promise.all([run.exited, phone.exited]);
    expect(phoneExit.code, phoneExit.output).toBe(0);
    expect(callerExit.code, callerExit.output).toBe(0);
    const c = await ended(ALICE_DID);
    sink.close();
    expect(c).toMatchObject({ outcome: 'finished', target: 'alice', caller_source: 'office-tab', number: '' });
    // The phone's audio (its pcap) reached the caller through the bridge.
    expect(sink.packets()).toBeGreaterThan(50);
    expect(rms(sink.samples())).toBeGreaterThan(100);
    const ev = eventsOf(s, c.call_id);
    expect(ev.map((e) => e.name)).toEqual(['call.answered', 'call.started', 'call.ended', 'transcript.saved']);
    expect(ev[0]!.data).toMatchObject({ did: ALICE_DID, fromNumber: '+4917699999999', direction: 'inbound' });
    // A route to a user: the number in the events is the Did that was called, and the caller is named.
    expect(ev[1]!.data).toMatchObject({ number: ALICE_DID, did: ALICE_DID, phone: '+4917699999999', direction: 'inbound', source: 'vnum' });
    expect(ev[2]!.data).toMatchObject({ number: ALICE_DID, outcome: 'finished', source: 'sip' });
    expect(ev[3]!.data).toMatchObject({ number: ALICE_DID, phone: '+4917699999999', source: 'vnum' });
    const t = await transcript(c.call_id);
    expect(t).toMatchObject({ callerSource: 'office-tab', answered: true, outcome: 'finished', turns: [] });
  }, 60_000);

  it("no endpoint reachable: the route's fallback (the next matching row, here the reception AI) takes the call", async () => {
    const { run, sink } = await carrierCall(BOB_DID);
    const exit = await run.exited;
    sink.close();
    expect(exit.code, exit.output).toBe(0);
    const c = await ended(BOB_DID);
    expect(c).toMatchObject({ outcome: 'finished', target: 'bob' });
    const t = await transcript(c.call_id);
    expect(turns(t)[0]).toEqual(['AI', 'Welcome to Acme reception.']);
  }, 60_000);

  it("maxDurationSec: the AI's call ends with max-duration (BYE to the caller)", async () => {
    const { run, sink } = await carrierCall(LONG);
    // While it lasts the bridge lists it (GET /calls): a core reconciling after a restart keeps it.
    const live = await until(() => (lastCallTo(LONG)?.answered_at && !lastCallTo(LONG).ended_at ? lastCallTo(LONG) : null), 15_000, 'call answered');
    const tel = s.appliance.host.services('telephony') as TelephonyServices;
    expect((await tel.bridge.listCalls()).calls).toContainEqual(expect.objectContaining({ callId: live.call_id, state: 'answered' }));
    const exit = await run.exited;
    sink.close();
    expect(exit.code, exit.output).toBe(0);
    const c = await ended(LONG);
    expect(c).toMatchObject({ outcome: 'max-duration', number: LONG });
    expect(c.duration_sec).toBeGreaterThanOrEqual(9);
    expect(eventsOf(s, c.call_id).find((e) => e.name === 'call.ended')!.data).toMatchObject({ outcome: 'max-duration', source: 'sip' });
  }, 60_000);

  it('vnum-to-vnum: the AI hands the caller to another number, whose AI ends the call', async () => {
    const { run, sink } = await carrierCall(TO_VNUM);
    const exit = await run.exited;
    sink.close();
    expect(exit.code, exit.output).toBe(0);
    const c = await ended(TO_VNUM);
    expect(c.outcome).toBe('transferred-to-vnum');
    const ev = eventsOf(s, c.call_id);
    expect(ev.map((e) => e.name)).toEqual(['call.answered', 'call.started', 'call.transferred', 'call.ended', 'transcript.saved']);
    expect(ev[2]!.data).toMatchObject({ transferType: 'vnum-to-vnum', fromVnum: TO_VNUM, toPhone: BILLING, toUser: '', source: 'vnum', trunkId: 'carrier' });
    expect(ev[3]!.data).toMatchObject({ outcome: 'transferred-to-vnum', source: 'sip' });
    expect(turns(await transcript(c.call_id))).toEqual([
      ['AI', 'Let me connect you to billing.'],
      ['AI', 'Billing here. Your invoice is paid. Goodbye.'],
    ]);
  }, 60_000);

  it("vnum-to-officetab: the AI transfers to a user; the user's desk phone rings and answers", async () => {
    const phone = await aliceAnswers();
    const { run, sink } = await carrierCall(TO_USER);
    const [callerExit, phoneExit] = await Promise.all([run.exited, phone.exited]);
    expect(phoneExit.code, phoneExit.output).toBe(0);
    expect(callerExit.code, callerExit.output).toBe(0);
    const c = await ended(TO_USER);
    sink.close();
    expect(c.outcome).toBe('transferred-to-vnum');
    const ev = eventsOf(s, c.call_id);
    expect(ev.find((e) => e.name === 'call.transferred')!.data).toMatchObject({ transferType: 'vnum-to-officetab', toUser: 'alice', fromVnum: TO_USER });
    expect(turns(await transcript(c.call_id))).toEqual([['AI', 'Connecting you to Alice.']]);
    expect(rms(sink.samples())).toBeGreaterThan(100);
  }, 60_000);

  it('vnum-to-pstn: the AI transfers to a whitelisted number through the outbound routes', async () => {
    const pstn = await sipp({ scenario: 'deskphone-answer', timeoutSec: 40 });
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
      id: 'pstn',
      name: 'pstn',
      host: '127.0.0.1',
      port: pstn.port,
      transport: 'udp',
      codecs: ['PCMA'],
      // Same host as the carrier: only the carrier's address is taken for inbound calls.
      inboundAuth: 'digest',
    });
    expect((await s.fetch(`${V1}/outbound-routes`, { method: 'POST', key: s.adminKey, json: { match: '+49151*', trunkIds: ['pstn'] } })).status).toBe(201);
    await until(
      async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health?.trunks?.some((t: { id: string }) => t.id.endsWith('.pstn')),
      5000,
      'pstn trunk at the bridge',
    );
    const { run, sink } = await carrierCall(TO_PSTN);
    const [callerExit, pstnExit] = await Promise.all([run.exited, pstn.exited]);
    sink.close();
    expect(pstnExit.code, pstnExit.output).toBe(0);
    expect(callerExit.code, callerExit.output).toBe(0);
    const c = await ended(TO_PSTN);
    expect(c.outcome).toBe('transferred-to-vnum');
    expect(eventsOf(s, c.call_id).find((e) => e.name === 'call.transferred')!.data).toMatchObject({ transferType: 'vnum-to-pstn', toPhone: PSTN });
  }, 60_000);

  it('outbound-to-user: the AI of an outbound call transfers the callee to a user, whose desk phone answers', async () => {
    const callee = await sipp({ scenario: 'answer-play-pcap', timeoutSec: 40 });
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
      id: 'callee',
      name: 'callee',
      host: '127.0.0.1',
      port: callee.port,
      transport: 'udp',
      codecs: ['PCMA'],
      inboundAuth: 'digest',
    });
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'callee' });
    await until(
      async () => (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body.health?.trunks?.some((t: { id: string }) => t.id.endsWith('.callee')),
      5000,
      'callee trunk at the bridge',
    );
    const phone = await aliceAnswers();
    const r = await j(
      s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: 'key-outbound', phone: '+4930777000', email: undefined }) }),
    );
    const id = r.body.callId as string;
    const phoneExit = await phone.exited;
    expect(phoneExit.code, phoneExit.output).toBe(0);
    const done = await until(
      async () => {
        const x = (await j(s.fetch(`${V1}/calls/${id}`, { key: s.adminKey }))).body;
        return x.status.startsWith('ended') ? x : null;
      },
      30_000,
      'outbound call ended',
    );
    expect(done).toMatchObject({ endedReason: 'transferred-to-vnum' });
    expect(eventsOf(s, id).find((e) => e.name === 'call.transferred')!.data).toMatchObject({
      transferType: 'outbound-to-user',
      toUser: 'alice',
      source: 'outbound-ai',
    });
    const calleeExit = await callee.exited;
    expect(calleeExit.code, calleeExit.output).toBe(0);
  }, 60_000);

  it('a caller display name holding <sip:...> does not name the caller: routing, the call row and the events take the addr-spec', async () => {
    const DID = '+4930700';
    const SPOOFED = '+4930999';
    for (const json of [
      { Did: DID, User: TO_VNUM, FromNumber: SPOOFED },
      { Did: DID, User: BILLING },
    ])
      expect((await s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json })).status).toBe(201);
    const sink = await rtpParty({ echo: true });
    const run = await sipp({
      scenario: 'inbound-uac-display',
      remote: `127.0.0.1:${sipPort}`,
      keys: { from: '+491700000', rtpport: String(sink.port), display: `"<sip:${SPOOFED}@x>"` },
      extraArgs: ['-s', DID],
      timeoutSec: 45,
    });
    const exit = await run.exited;
    sink.close();
    expect(exit.code, exit.output).toBe(0);
    const c = await ended(DID);
    // Before RFC 3261 §25.1 parsing, the first < (inside the quotes) made the caller +4930999
    // and the FromNumber row sent the call to another number's AI.
    expect(c).toMatchObject({ from_number: '+491700000', from_name: `<sip:${SPOOFED}@x>`, target: BILLING, outcome: 'finished' });
    expect(eventsOf(s, c.call_id)[0]!.data).toMatchObject({ fromNumber: '+491700000' });
  }, 60_000);

  it('an INVITE whose caller name carries a lone CR, DEL or ESC is answered 400 and rings nobody (NUL cannot pass through argv to SIPp; the parser tests send it)', async () => {
    const before = s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get() as { n: number };
    const sessions = engine.sessions.length;
    for (const display of ['"Mallory\rINVITE sip:+4930100@x SIP/2.0" ', '"Mallory\u007f" ', '"\u001b[2JMallory" ']) {
      const run = await sipp({
        scenario: 'inbound-uac-display-400',
        remote: `127.0.0.1:${sipPort}`,
        keys: { from: '+4917600000009', display },
        extraArgs: ['-s', ALICE_DID],
      });
      const exit = await run.exited;
      expect(exit.code, exit.output).toBe(0);
    }
    // No call row, no AI session, so no INVITE to alice's desk phone: the name never got past the parser.
    expect(s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get()).toEqual(before);
    expect(engine.sessions.length).toBe(sessions);
  }, 60_000);

  it('a caller number with RFC 3261 §19.1.2 escapes is decoded (%2B → +); call.started and transcript.saved name the caller and their display name', async () => {
    const DID = '+4930710';
    expect((await s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: DID, User: BILLING } })).status).toBe(201);
    const sink = await rtpParty({ echo: true });
    const run = await sipp({
      scenario: 'inbound-uac-display',
      remote: `127.0.0.1:${sipPort}`,
      keys: { from: '%2B4917612%33%34%35%36', rtpport: String(sink.port), display: '"Anna Beispiel"' },
      extraArgs: ['-s', DID],
      timeoutSec: 45,
    });
    const exit = await run.exited;
    sink.close();
    expect(exit.code, exit.output).toBe(0);
    const c = await ended(DID);
    expect(c).toMatchObject({ from_number: '+49176123456', from_name: 'Anna Beispiel', target: BILLING });
    const ev = eventsOf(s, c.call_id);
    const byName = (n: string) => ev.find((e) => e.name === n)!.data;
    expect(byName('call.answered')).toMatchObject({ fromNumber: '+49176123456', phone: '+49176123456', displayName: 'Anna Beispiel' });
    expect(byName('call.started')).toMatchObject({ phone: '+49176123456', displayName: 'Anna Beispiel', number: BILLING, did: DID });
    expect(byName('transcript.saved')).toMatchObject({ phone: '+49176123456', displayName: 'Anna Beispiel', number: BILLING });
  }, 60_000);

  it('a caller or dialled number that unescapes to a control character, or holds a malformed escape, is answered 400 and rings nobody', async () => {
    const before = s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get() as { n: number };
    const sessions = engine.sessions.length;
    for (const [from, did] of [
      ['%2B4930%0D%0AINVITE', ALICE_DID],
      ['%1B[2J%2B4930', ALICE_DID],
      ['%7F', ALICE_DID],
      ['%00', ALICE_DID],
      ['%ZZ49', ALICE_DID],
      ['%C3%28', ALICE_DID], // not UTF-8
      ['+4917600000010', '%2B4930%0A1'],
    ]) {
      const run = await sipp({ scenario: 'inbound-uac-display-400', remote: `127.0.0.1:${sipPort}`, keys: { from, display: '"x"' }, extraArgs: ['-s', did] });
      const exit = await run.exited;
      expect(exit.code, `${from} → ${did}: ${exit.output}`).toBe(0);
    }
    expect(s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get()).toEqual(before);
    expect(engine.sessions.length).toBe(sessions);
  }, 60_000);

  it('a route whose target became unusable (its virtual number removed: an E.164 number not on the whitelist) is answered 480, not 404, and logged', async () => {
    const DID = '+4930800';
    const GONE = '+4930810';
    expect((await adm(s, '/signal.ashx?numbers=save', 'numbers-save', { number: GONE, name: 'gone', geminiApiKey: 'key-gone' })).status).toBe(200);
    expect((await s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: DID, User: GONE } })).status).toBe(201);
    expect((await adm(s, '/signal.ashx?numbers=remove', 'numbers-remove', { number: GONE })).status).toBe(200);
    const before = s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get() as { n: number };
    const run = await sipp({
      scenario: 'inbound-uac-480',
      remote: `127.0.0.1:${sipPort}`,
      keys: { from: '+4917600000011', display: '"x"' },
      extraArgs: ['-s', DID],
    });
    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    expect(s.appliance.core.db.prepare('SELECT COUNT(*) AS n FROM tel_inbound_calls').get()).toEqual(before);
    expect(s.logs.text()).toContain(`${GONE} is not on the PSTN whitelist`);
  }, 60_000);

  it('3,000 wrong desk-phone REGISTERs: the right password waits (503, Retry-After) for the backoff, then a real phone registers', async () => {
    await addPhone('carol', 'carol-desk-phone-password-1');
    const guesser = await sipClient('127.0.0.3', 'carol');
    const statuses: Record<number, number> = {};
    const started = Date.now();
    let auth = '';
    for (let i = 0; i < 3000; i++) {
      // Every REGISTER carries a wrong answer: to the newest challenge, else to the last one seen.
      const r = await guesser.send(guesser.build(auth || undefined));
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      if (r.status === 401) auth = guesser.auth(`guess-${i}`);
    }
    const took = Date.now() - started;
    // Only the 10 free guesses and one per elapsed wait (1 s, 2 s, 4 s ... doubling) met the
    // password check (403); the rest waited (503) or were re-challenged.
    const failures = statuses[403] ?? 0;
    expect(failures).toBeGreaterThanOrEqual(11);
    expect(failures).toBeLessThanOrEqual(11 + Math.ceil(Math.log2(took / 1000 + 1)));
    expect(statuses[503]).toBeGreaterThan(2500);
    const refused = await guesser.register('carol-desk-phone-password-1');
    expect(refused.status).toBe(503);
    const wait = Number(refused.headers.get('Retry-After'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(2 ** (failures - 11)); // the last failure's doubled wait
    expect(await registered('carol')).toBe(0);
    guesser.close();
    await new Promise((r) => setTimeout(r, wait * 1000));
    // Past the wait, a real phone (SIPp) at that address registers with the right password.
    const phone = await sipp({
      scenario: 'deskphone-register-ok',
      ip: '127.0.0.3',
      remote: `127.0.0.1:${sipPort}`,
      keys: { user: 'carol' },
      template: { user: 'carol', pass: 'carol-desk-phone-password-1' },
    });
    const exit = await phone.exited;
    expect(exit.code, exit.output).toBe(0);
    expect(await registered('carol')).toBe(1);
    expect(s.logs.text()).not.toContain('carol-desk-phone-password-1');
    console.log(`3,000 wrong REGISTERs in ${took} ms: ${JSON.stringify(statuses)}, then Retry-After ${wait} s`);
  }, 150_000);

  it('a captured desk-phone Authorization replayed from another address, or again, binds nothing', async () => {
    await addPhone('dave', 'dave-desk-phone-password-1');
    const phone = await sipClient('127.0.0.4', 'dave');
    await phone.send(phone.build());
    const auth = phone.auth('dave-desk-phone-password-1');
    expect((await phone.send(phone.build(auth))).status).toBe(200);
    const attacker = await sipClient('127.0.0.5', 'dave');
    const elsewhere = await attacker.send(attacker.build(auth));
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.headers.get('WWW-Authenticate')).not.toContain('stale');
    // Again from the phone's own address (a spoofed source on the LAN): its nc was used.
    expect((await phone.send(phone.build(auth, 'sip:dave@127.0.0.5:5060'))).status).toBe(401);
    expect(await registered('dave')).toBe(1);
    // The phone itself answers the new challenge it got and refreshes.
    expect((await phone.send(phone.build(phone.auth('dave-desk-phone-password-1')))).status).toBe(200);
    phone.close();
    attacker.close();
  }, 30_000);
});
