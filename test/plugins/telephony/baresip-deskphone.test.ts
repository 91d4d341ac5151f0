import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { startSipp, type SippRun } from '../../support/sipp.ts';
import { Baresip } from '../../support/baresip.ts';
import { concat, frameShare, rtpParty, type RtpParty } from '../../support/tones.ts';
import { newBranch, newTag, StreamFramer, type SipMessage, type SipRequest } from '../../../plugins/telephony/bridge/sip/message.ts';
import { digestAuthorization, parseChallenge } from '../../../plugins/telephony/bridge/sip/digest.ts';
import { adm, bridgeListening, j, until, type Json } from './helpers.ts';

/**
 * Desk phones against the appliance with its embedded real bridge, as a new user sets them up:
 * - Debian's baresip over TLS to sipTlsPort, trusting the CA `/rp-cert.ashx?ca` serves, with
 *   mandatory SDES SRTP (`mediaenc=srtp-mand`, the login's `srtp: required`) and G.722: a
 *   carrier's call (SIPp over UDP, the caller's media the test's own socket) rings it over the
 *   connection it registered on; audio is checked both ways by tone (caller 440 Hz → phone,
 *   phone 1000 Hz → caller), the SDP both ways is RTP/SAVP with G722/8000, and no crypto
 *   attribute or key reaches the appliance's log.
 * - baresip offering only G.711 and plain RTP (over UDP): the same call works narrowband.
 * - RFC 5626 §4.4.1 on a phone's TLS flow: a phone (a raw TLS client: baresip pings only at the
 *   registrar's Flow-Timer, 120 s) registers a flow, pings with a double CRLF, gets the single
 *   CRLF pong, and is rung on that same connection afterwards.
 * A desk phone's own outgoing call (to an AI number or out) is not tested: the bridge takes
 * INVITEs from trunks only (inbound/service.ts), so a phone's call is refused (403, or 407 when a trunk authenticates by digest) where
 * it is not a trunk; the product offers no route for it yet.
 */
const ALICE_DID = '+4930999001';
const BOB_DID = '+4930999002';
const CAROL_DID = '+4930999003';
const PASSWORDS = { alice: 'alice-desk-pw-1', bob: 'bob-desk-pw-2', carol: 'carol-desk-pw-3' };
let s: TestServer;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baresip-desk-'));
const cleanups: (() => unknown)[] = [];
let sipPort = 0;
let tlsPort = 0;
let caPem = '';
let caFile = '';

beforeAll(async () => {
  const base = 46000 + 2 * Math.floor(Math.random() * 4000);
  // The real clock: the appliance's certificate is checked by baresip against the real time.
  s = await startTestServer({
    overrides: {
      plugins: {
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, sipTlsPort: 0, rtpPorts: `${base}-${base + 99}`, readyTimeoutMs: 20_000 },
          ringTimeoutSec: 10,
        },
      },
    },
  });
  const health = await bridgeListening(s, { tls: true });
  sipPort = health.sip.port;
  tlsPort = health.sip.tlsPort;
  // What a new user does: the CA from the public download, saved for the phone.
  const ca = await s.fetch('/rp-cert.ashx?ca');
  expect(ca.status).toBe(200);
  caPem = await ca.text();
  expect(caPem).toMatch(/^-----BEGIN CERTIFICATE-----/);
  caFile = path.join(dir, 'appliance-ca.pem');
  fs.writeFileSync(caFile, caPem);
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
    id: 'carrier',
    name: 'carrier',
    host: '127.0.0.1',
    port: 5999,
    transport: 'udp',
    codecs: ['PCMA'],
  });
  for (const [did, user] of [
    [ALICE_DID, 'alice'],
    [BOB_DID, 'bob'],
    [CAROL_DID, 'carol'],
  ] as const) {
    expect((await s.fetch('/api.ashx/v1/inbound-routes', { method: 'POST', key: s.adminKey, json: { Did: did, User: user } })).status).toBe(201);
  }
  expect((await adm(s, '/signal.ashx?phones=add', 'phones-add', { user: 'alice', password: PASSWORDS.alice, srtp: 'required' })).status).toBe(200);
  expect((await adm(s, '/signal.ashx?phones=add', 'phones-add', { user: 'bob', password: PASSWORDS.bob })).status).toBe(200);
  expect((await adm(s, '/signal.ashx?phones=add', 'phones-add', { user: 'carol', password: PASSWORDS.carol })).status).toBe(200);
}, 60_000);

afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await s?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function phone(o: Parameters<typeof Baresip.start>[0]): Promise<Baresip> {
  const p = await Baresip.start(o);
  cleanups.push(() => p.stop());
  await p.waitRegistered();
  return p;
}

async function registered(user: string): Promise<void> {
  await until(
    async () => (await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones.some((p: Json) => p.user === user && p.registered === 1),
    5000,
    `${user} registered`,
  );
}

/** A carrier's call to `did` (SIPp over UDP; its media our 440 Hz socket); SIPp waits for our BYE. */
async function carrierCall(did: string): Promise<{ run: SippRun; caller: RtpParty }> {
  const caller = await rtpParty({ toneHz: 440 });
  cleanups.push(() => caller.close());
  const run = await startSipp({
    scenario: 'inbound-uac',
    remote: `127.0.0.1:${sipPort}`,
    keys: { from: '+4917612345678', rtpport: String(caller.port) },
    extraArgs: ['-s', did],
    timeoutSec: 40,
  });
  cleanups.push(() => run.stop());
  return { run, caller };
}

/** The SIP messages of baresip's trace (`-s`) with their direction line, as one string each. */
function traced(p: Baresip, re: RegExp): string[] {
  return p.output.split(/\n(?=\S*\s*(?:TLS|UDP|TCP) \d)/).filter((m) => re.test(m));
}

/** Audio both ways by tone: the phone heard the caller's 440 Hz, the caller heard the phone's 1000 Hz. */
function expectAudioBothWays(p: Baresip, caller: RtpParty, phoneRate: number): void {
  const heard = p.heard();
  expect(heard.rate).toBe(phoneRate);
  expect(heard.samples.length).toBeGreaterThan(2 * heard.rate);
  expect(frameShare(heard.samples, 440, heard.rate)).toBeGreaterThan(0.9);
  expect(frameShare(heard.samples, 1000, heard.rate)).toBeLessThan(0.05);
  const got = concat(caller.heard);
  expect(got.length).toBeGreaterThan(2 * 8000);
  expect(frameShare(got, 1000)).toBeGreaterThan(0.9);
  expect(frameShare(got, 440)).toBeLessThan(0.05);
}

async function endedCall(did: string): Promise<Json> {
  return until(
    () => s.appliance.core.db.prepare('SELECT * FROM tel_inbound_calls WHERE did = ? AND ended_at IS NOT NULL').get(did) as Json,
    10_000,
    `call to ${did} ended`,
  );
}

describe('desk phones with real peers: baresip over TLS with SRTP and G.722, a G.711-only phone, the CRLF keepalive', () => {
  it('baresip over TLS with mandatory SRTP and G.722: a carrier call rings it on its TLS connection, RTP/SAVP G722/8000, audio both ways, no key in the log', async () => {
    const p = await phone({
      account: `<sip:alice@127.0.0.1:${tlsPort};transport=tls>;auth_pass=${PASSWORDS.alice};answermode=auto;regint=600;mediaenc=srtp-mand;audio_codecs=G722/16000/1,PCMU,PCMA`,
      caFile,
      sineHz: 1000,
      trace: true,
      modules: ['g722.so', 'srtp.so'],
    });
    await registered('alice');
    const since = p.events.length;
    const { run, caller } = await carrierCall(ALICE_DID);
    await p.waitEvent('CALL_ESTABLISHED', 15_000, since).catch((e: unknown) => {
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n${p.output.slice(-3000)}\n${s.logs.text().slice(-3000)}`);
    });
    await new Promise((r) => setTimeout(r, 3000));
    p.command('hangup');
    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    // The INVITE came over TLS on the connection the REGISTER went out on (the same local port).
    const register = traced(p, /^\S*\s*TLS [\d.:]+ -> [\d.:]+[^\n]*\n\s*REGISTER sip:/m).at(-1)!;
    const invite = traced(p, /^\S*\s*TLS [\d.:]+ -> [\d.:]+[^\n]*\n\s*INVITE sip:/m).at(-1)!;
    const phoneEnd = /TLS ([\d.]+:\d+) -> /.exec(register)![1];
    expect(invite).toMatch(new RegExp(`TLS [\\d.:]+ -> ${phoneEnd!.replace(/\./g, '\\.')}\\b`));
    // The offer and baresip's answer: SAVP with G.722 at its RFC 3551 8000 clock and an SDES key.
    expect(invite).toMatch(/m=audio \d+ RTP\/SAVP 9\b/);
    expect(invite).toMatch(/a=rtpmap:9 G722\/8000/);
    expect(invite).toMatch(/a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:/);
    const answer = traced(p, /SIP\/2\.0 200 [^\n]*\n[\s\S]*CSeq: \d+ INVITE[\s\S]*m=audio/).at(-1)!;
    expect(answer).toMatch(/m=audio \d+ RTP\/SAVP 9\b/);
    expect(answer).toMatch(/a=rtpmap:9 G722\/8000/);
    const keys = [...`${invite}\n${answer}`.matchAll(/inline:([A-Za-z0-9+/=]+)/g)].map((m) => m[1]!);
    expect(keys.length).toBeGreaterThanOrEqual(2);
    // G.722 decodes at 16 kHz on the phone: wideband reached it.
    expectAudioBothWays(p, caller, 16000);
    expect(await endedCall(ALICE_DID)).toMatchObject({ outcome: 'finished', target: 'alice' });
    // RFC 4568 §8.1: the keys are secrets; neither the attribute nor any key is logged.
    const logs = s.logs.text();
    expect(logs).not.toMatch(/a=crypto|inline:/);
    for (const k of keys) expect(logs).not.toContain(k);
    expect(logs).not.toContain(PASSWORDS.alice);
  }, 60_000);

  it('a phone that offers only G.711 and plain RTP (baresip over UDP, no SRTP) still gets the call, audio both ways', async () => {
    const p = await phone({
      account: `<sip:bob@127.0.0.1:${sipPort};transport=udp>;auth_pass=${PASSWORDS.bob};answermode=auto;regint=600;audio_codecs=PCMU,PCMA`,
      sineHz: 1000,
      trace: true,
    });
    await registered('bob');
    const since = p.events.length;
    const { run, caller } = await carrierCall(BOB_DID);
    await p.waitEvent('CALL_ESTABLISHED', 15_000, since);
    await new Promise((r) => setTimeout(r, 3000));
    p.command('hangup');
    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    const answer = traced(p, /SIP\/2\.0 200 [^\n]*\n[\s\S]*CSeq: \d+ INVITE[\s\S]*m=audio/).at(-1)!;
    expect(answer).toMatch(/m=audio \d+ RTP\/AVP (0|8)\b/);
    expect(answer).not.toMatch(/G722|a=crypto/);
    expectAudioBothWays(p, caller, 8000);
    expect(await endedCall(BOB_DID)).toMatchObject({ outcome: 'finished', target: 'bob' });
  }, 60_000);

  it('RFC 5626 §4.4.1 on a phone flow over TLS: double-CRLF ping, single-CRLF pong, and the next call rings on that connection', async () => {
    const sock = tls.connect({ host: '127.0.0.1', port: tlsPort, ca: caPem });
    cleanups.push(() => sock.destroy());
    await new Promise<void>((resolve, reject) => {
      sock.once('secureConnect', resolve);
      sock.once('error', reject);
    });
    const local = `127.0.0.1:${sock.localPort}`;
    const inbox: SipMessage[] = [];
    let pongs = 0;
    let strayPings = 0;
    const framer = new StreamFramer((kind) => (kind === 'pong' ? pongs++ : strayPings++));
    sock.on('data', (d: Buffer) => inbox.push(...framer.push(d)));
    const next = async <T extends SipMessage>(pred: (m: SipMessage) => m is T, what: string): Promise<T> =>
      until(
        () => {
          const i = inbox.findIndex(pred);
          return i < 0 ? null : (inbox.splice(i, 1)[0] as T);
        },
        10_000,
        what,
      );
    const callId = `${randomUUID()}@127.0.0.1`;
    const instance = `<urn:uuid:${randomUUID()}>`;
    const register = (cseq: number, auth?: string) =>
      [
        `REGISTER sip:127.0.0.1:${tlsPort};transport=tls SIP/2.0`,
        `Via: SIP/2.0/TLS ${local};branch=${newBranch()};rport`,
        'Max-Forwards: 70',
        `From: <sip:carol@127.0.0.1>;tag=${newTag()}`,
        'To: <sip:carol@127.0.0.1>',
        `Call-ID: ${callId}`,
        `CSeq: ${cseq} REGISTER`,
        `Contact: <sip:carol@${local};transport=tls>;reg-id=1;+sip.instance="${instance}"`,
        'Supported: outbound, path',
        'Expires: 600',
        ...(auth ? [`Authorization: ${auth}`] : []),
        'Content-Length: 0',
        '',
        '',
      ].join('\r\n');
    const isResponse = (m: SipMessage): m is Extract<SipMessage, { kind: 'response' }> => m.kind === 'response';
    sock.write(register(1));
    const challenge = await next(isResponse, '401');
    expect(challenge.status).toBe(401);
    const ch = parseChallenge(challenge.headers.get('WWW-Authenticate') ?? '')!;
    const auth = digestAuthorization(ch, {
      method: 'REGISTER',
      uri: `sip:127.0.0.1:${tlsPort};transport=tls`,
      username: 'carol',
      password: PASSWORDS.carol,
      nc: 1,
    });
    sock.write(register(2, auth));
    const ok = await next(isResponse, '200 to REGISTER');
    expect(ok.status).toBe(200);
    // RFC 5626 §6: the registrar took the flow and says how often to ping it.
    expect(ok.headers.getAll('Require').join(',')).toMatch(/\boutbound\b/);
    expect(Number(ok.headers.get('Flow-Timer'))).toBeGreaterThan(0);
    await registered('carol');
    // §4.4.1: a double CRLF is answered by exactly one single CRLF, on this connection.
    for (let i = 1; i <= 2; i++) {
      sock.write('\r\n\r\n');
      await until(() => pongs === i, 5000, `pong ${i}`);
    }
    expect(strayPings).toBe(0);
    expect(inbox).toHaveLength(0);
    // After the pings the flow is still the phone's binding: the carrier's call rings here.
    const answerMedia = await rtpParty({ toneHz: 1000 });
    cleanups.push(() => answerMedia.close());
    const { run, caller } = await carrierCall(CAROL_DID);
    const isInvite = (m: SipMessage): m is SipRequest => m.kind === 'request' && m.method === 'INVITE';
    const invite = await next(isInvite, 'INVITE on the flow');
    expect(invite.uri).toMatch(/^sip:carol@/);
    expect(invite.headers.get('Via')).toMatch(/^SIP\/2\.0\/TLS /);
    const h = (n: string) => invite.headers.get(n) ?? '';
    const toTag = newTag();
    const sdp = [
      'v=0',
      'o=carol 1 1 IN IP4 127.0.0.1',
      's=-',
      'c=IN IP4 127.0.0.1',
      't=0 0',
      `m=audio ${answerMedia.port} RTP/AVP 8`,
      'a=rtpmap:8 PCMA/8000',
      '',
    ].join('\r\n');
    sock.write(
      [
        'SIP/2.0 200 OK',
        ...invite.headers.getAll('Via').map((v) => `Via: ${v}`),
        `From: ${h('From')}`,
        `To: ${h('To')};tag=${toTag}`,
        `Call-ID: ${h('Call-ID')}`,
        `CSeq: ${h('CSeq')}`,
        `Contact: <sip:carol@${local};transport=tls;ob>`,
        'Content-Type: application/sdp',
        `Content-Length: ${Buffer.byteLength(sdp)}`,
        '',
        sdp,
      ].join('\r\n'),
    );
    const isAck = (m: SipMessage): m is SipRequest => m.kind === 'request' && m.method === 'ACK';
    await next(isAck, 'ACK on the flow');
    // Our media socket answers the bridge's first packet with its tone (symmetric RTP).
    await until(() => concat(caller.heard).length > 2 * 8000, 10_000, 'two seconds of the phone at the caller');
    // The phone hangs up: a BYE in the dialog, on the same connection (RFC 3261 §15.1.1).
    const remoteTarget = /<([^>]+)>/.exec(h('Contact'))?.[1] ?? h('Contact');
    sock.write(
      [
        `BYE ${remoteTarget} SIP/2.0`,
        `Via: SIP/2.0/TLS ${local};branch=${newBranch()};rport`,
        'Max-Forwards: 70',
        `From: ${h('To')};tag=${toTag}`,
        `To: ${h('From')}`,
        `Call-ID: ${h('Call-ID')}`,
        'CSeq: 1 BYE',
        'Content-Length: 0',
        '',
        '',
      ].join('\r\n'),
    );
    expect((await next(isResponse, '200 to BYE')).status).toBe(200);
    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    expect(frameShare(concat(caller.heard), 1000)).toBeGreaterThan(0.9);
    expect(frameShare(answerMedia.samples(300), 440)).toBeGreaterThan(0.9);
    expect(await endedCall(CAROL_DID)).toMatchObject({ outcome: 'finished', target: 'carol' });
  }, 60_000);
});
