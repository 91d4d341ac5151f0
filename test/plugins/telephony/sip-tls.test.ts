import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { startSipp, type SippRun } from '../../support/sipp.ts';
import { GeminiLiveFake } from '../../support/gemini-live-fake.ts';
import { DnsServer } from '../../support/dns-server.ts';
import { Baresip } from '../../support/baresip.ts';
import { SipTlsTrunk } from '../../support/sip-tls-trunk.ts';
import { makeCa } from '../../support/test-ca.ts';
import { concat, frameShare, rms, rtpParty, toneShare } from '../../support/tones.ts';
import { adm, bridgeListening, call, callEnded, j, until, type Json } from './helpers.ts';

/**
 * SIP over TLS end to end (RFC 3261 §26): the appliance with its embedded real bridge.
 * - Desk phone: Debian's baresip registers over TLS with digest, trusting the CA the console shows
 *   (`?phones=tls`); a carrier's call (SIPp over UDP, the caller's RTP the test's own socket) rings
 *   it over its own TLS connection (it has no certificate, so it could not take one of ours) and
 *   audio is checked both ways by tone (caller 440 Hz → phone, phone's 1000 Hz → caller).
 * - Trunk: Debian's SIPp has no TLS (`sipp -v`: v3.6.1-SCTP-PCAP-RTPSTREAM; `sipp -t l1` exits
 *   with "To use a TLS transport you must compile SIPp with OpenSSL") and no SRTP of its own (its
 *   man page names none), so the TLS trunk is a Node `tls` server speaking SIP
 *   (test/support/sip-tls-trunk.ts), located by `_sips._tcp` SRV from a loopback DNS server, its
 *   certificate from a test CA given as the trunk's CA. SRTP on a TLS trunk is checked against the
 *   same server answering SDES and protecting its media with the bridge's own SDES code
 *   (media/sdes.ts, itself checked against werift's SRTP in bridge-g722-srtp.test.ts); SRTP with
 *   a real SRTP stack is the baresip desk phone in baresip-deskphone.test.ts.
 */
const V1 = '/api.ashx/v1';
const ALICE_DID = '+4930999';
const PASSWORD = 'alice-desk-phone-pw';
let s: TestServer;
let engine: GeminiLiveFake;
let trunk: SipTlsTrunk;
const dns = new DnsServer();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'siptls-'));
const sipps: SippRun[] = [];
const phones: Baresip[] = [];
let sipPort = 0;
let tlsPort = 0;
let testCa = '';
let trunkCa: ReturnType<typeof makeCa>;
let otherCa = '';

beforeAll(async () => {
  const ca = makeCa(dir, 'trunkca');
  testCa = ca.ca;
  trunkCa = ca;
  otherCa = makeCa(dir, 'otherca').ca;
  trunk = new SipTlsTrunk(ca.issue('edge', 'DNS:trunk.test'), { flowTimerSec: 2, toneHz: 700 });
  await trunk.start();
  await dns.start();
  dns.records.set('_sips._tcp.trunk.test', [{ type: 'SRV', priority: 10, weight: 1, port: trunk.port, target: 'edge.trunk.test' }]);
  dns.records.set('_sips._tcp.other.test', [{ type: 'SRV', priority: 10, weight: 1, port: trunk.port, target: 'edge.trunk.test' }]);
  dns.records.set('edge.trunk.test', [{ type: 'A', address: '127.0.0.1' }]);
  process.env.SOVCOMMS_BRIDGE_DNS_SERVERS = `127.0.0.1:${dns.port}`;
  process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC = '0';
  engine = new GeminiLiveFake({
    script: [],
    usage: { prompt: 10, response: 5 },
    keepAudioMs: 3000,
    scriptsByKey: {
      'key-tls': [{ say: 'Hello over TLS.', audioMs: 1500 }, { wait: 1500 }, { say: 'Goodbye.', audioMs: 200 }, { tool: 'end_call' }],
      'key-srtp': [{ say: 'Hello over SRTP.', audioMs: 1500 }, { wait: 1500 }, { say: 'Goodbye.', audioMs: 200 }, { tool: 'end_call' }],
    },
  });
  await engine.start();
  const base = 44000 + 2 * Math.floor(Math.random() * 4000);
  // The real clock: the appliance's certificate is checked by real peers against the real time.
  s = await startTestServer({
    overrides: {
      plugins: {
        telephony: {
          bridge: { mode: 'embedded', sipPort: 0, sipTlsPort: 0, rtpPorts: `${base}-${base + 99}`, readyTimeoutMs: 20_000 },
          engine: { url: engine.url, model: 'gemini-live-2.5-flash-preview' },
          ringTimeoutSec: 10,
        },
      },
    },
  });
  const health = await bridgeListening(s, { tls: true });
  sipPort = health.sip.port;
  tlsPort = health.sip.tlsPort;
  await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
    id: 'carrier',
    name: 'carrier',
    host: '127.0.0.1',
    port: 5999,
    transport: 'udp',
    codecs: ['PCMA'],
  });
  expect((await s.fetch(`${V1}/inbound-routes`, { method: 'POST', key: s.adminKey, json: { Did: ALICE_DID, User: 'alice' } })).status).toBe(201);
  expect((await adm(s, '/signal.ashx?phones=add', 'phones-add', { user: 'alice', password: PASSWORD })).status).toBe(200);
}, 90_000);

afterAll(async () => {
  for (const p of phones) await p.stop();
  await s?.stop();
  for (const x of sipps) await x.stop();
  await engine?.stop();
  await trunk?.stop();
  await dns.stop();
  delete process.env.SOVCOMMS_BRIDGE_DNS_SERVERS;
  delete process.env.SOVCOMMS_BRIDGE_KEEPALIVE_SEC;
  fs.rmSync(dir, { recursive: true, force: true });
});

const trunkRow = async (id: string): Promise<Json> => (await j(adm(s, '/signal.ashx?trunks=list', 'trunks-list'))).body.trunks.find((t: Json) => t.id === id);

describe('SIP over TLS (real bridge, baresip desk phone, a TLS trunk)', () => {
  it("?phones=tls shows the listener and the CA a phone trusts; the listener serves the appliance's certificate, naming the SIP host", async () => {
    const v = (await j(adm(s, '/signal.ashx?phones=tls', 'phones-tls'))).body;
    expect(v).toMatchObject({ enabled: true, host: '127.0.0.1', port: tlsPort, reason: '' });
    expect(v.caSha256).toBe(new X509Certificate(v.caPem).fingerprint256);
    const peer = await new Promise<tls.PeerCertificate>((resolve, reject) => {
      // Verified against the CA shown, for the name phones dial (the SIP host): no other trust.
      const c = tls.connect({ host: '127.0.0.1', port: tlsPort, ca: v.caPem }, () => {
        resolve(c.getPeerCertificate());
        c.end();
      });
      c.once('error', reject);
    });
    expect(peer.fingerprint256).toBe(v.certSha256);
    // RFC 5626 §4.4.1: a double-CRLF ping on the connection is answered by a single-CRLF pong.
    const pong = await new Promise<string>((resolve, reject) => {
      const c = tls.connect({ host: '127.0.0.1', port: tlsPort, ca: v.caPem }, () => c.write('\r\n\r\n'));
      c.once('data', (d: Buffer) => {
        resolve(d.toString());
        c.end();
      });
      c.once('error', reject);
    });
    expect(pong).toBe('\r\n');
    // The key went to the bridge only over the control hop: never into a log line.
    expect(s.logs.text()).not.toMatch(/PRIVATE KEY/);
  }, 30_000);

  it('baresip registers over TLS with digest; a call rings it over that connection, audio both ways', async () => {
    const v = (await j(adm(s, '/signal.ashx?phones=tls', 'phones-tls'))).body;
    const caFile = path.join(dir, 'appliance-ca.pem');
    fs.writeFileSync(caFile, v.caPem);
    const phone = await Baresip.start({
      account: `<sip:alice@127.0.0.1:${tlsPort};transport=tls>;auth_pass=${PASSWORD};answermode=auto;regint=600`,
      caFile,
      sineHz: 1000,
      trace: true,
    });
    phones.push(phone);
    // Its REGISTER_OK event, or its 200 line when it registered before the control port was up.
    await phone.waitRegistered(15_000);
    await until(
      async () => (await j(adm(s, '/signal.ashx?phones=list', 'phones-list'))).body.phones.some((p: Json) => p.user === 'alice' && p.registered === 1),
      5000,
      'alice registered',
    );
    const caller = await rtpParty({ toneHz: 440 });
    const run = await startSipp({
      scenario: 'inbound-uac',
      remote: `127.0.0.1:${sipPort}`,
      keys: { from: '+4917612345678', rtpport: String(caller.port) },
      extraArgs: ['-s', ALICE_DID],
      timeoutSec: 45,
    });
    sipps.push(run);
    const since = phone.events.length;
    await phone.waitEvent('CALL_ESTABLISHED', 15_000, since).catch((e: unknown) => {
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n${phone.output.slice(-3000)}\n${s.logs.text().slice(-3000)}`);
    });
    await new Promise((r) => setTimeout(r, 3000));
    phone.command('hangup');
    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    caller.close();
    // The INVITE reached the phone over TLS, on the connection it registered on (its trace).
    expect(phone.output).toMatch(/TLS 127\.0\.0\.1:\d+ -> 127\.0\.0\.1:\d+[^\n]*\n\s*INVITE sip:/);
    // Caller → phone: the phone's recording carries the caller's 440 Hz.
    const heard = phone.heard();
    expect(heard.samples.length).toBeGreaterThan(2 * heard.rate);
    expect(frameShare(heard.samples, 440, heard.rate)).toBeGreaterThan(0.9);
    expect(frameShare(heard.samples, 1000, heard.rate)).toBeLessThan(0.05);
    // Phone → caller: the caller hears the phone's 1000 Hz.
    const got = concat(caller.heard);
    expect(got.length).toBeGreaterThan(2 * 8000);
    expect(frameShare(got, 1000, 8000)).toBeGreaterThan(0.9);
    expect(frameShare(got, 440, 8000)).toBeLessThan(0.05);
    const c = await until(
      () => s.appliance.core.db.prepare('SELECT * FROM tel_inbound_calls WHERE did = ? AND ended_at IS NOT NULL').get(ALICE_DID) as Json,
      10_000,
      'call ended',
    );
    expect(c).toMatchObject({ outcome: 'finished', target: 'alice' });
  }, 90_000);

  it('an outbound AI call through a TLS trunk located by _sips._tcp SRV: SNI and name checked, one connection, CRLF keepalive, audio both ways', async () => {
    const saved = await j(
      adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
        id: 'tls',
        name: 'TLS carrier',
        host: 'trunk.test',
        transport: 'tls',
        dnsSrv: true,
        register: true,
        username: 'acme',
        password: 'trunk-secret',
        codecs: ['PCMA'],
        tlsCaPem: testCa,
      }),
    );
    expect(saved.status).toBe(200);
    // RFC 3261 §19.1.2: 5061 unless given.
    expect(await trunkRow('tls')).toMatchObject({ transport: 'tls', port: 5061, tlsCaPem: testCa });
    await until(async () => (await trunkRow('tls'))?.registered === true, 15_000, 'TLS trunk registered');
    await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'tls' });
    const id = (await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: 'key-tls', email: undefined }) }))).body
      .callId as string;
    const done = await callEnded(s, id);
    expect(done).toMatchObject({ status: 'ended-success', endedReason: 'finished', trunkId: 'tls' });
    // One connection for REGISTER, INVITE, ACK and BYE, with SNI = the trunk's host.
    expect(trunk.connections).toHaveLength(1);
    expect(trunk.connections[0]!.servername).toBe('trunk.test');
    const methods = trunk.requests.map((r) => r.method);
    expect(methods).toEqual(expect.arrayContaining(['REGISTER', 'INVITE', 'ACK', 'BYE']));
    const reg = trunk.requests.filter((r) => r.method === 'REGISTER').at(-1)!;
    expect(reg.headers.get('Authorization')).toMatch(/username="acme"/);
    expect(reg.headers.get('Contact')).toMatch(/^<sip:acme@127\.0\.0\.1:\d+;transport=tls>;reg-id=1;\+sip\.instance="<urn:uuid:[0-9a-f-]{36}>"$/);
    expect(reg.headers.getAll('Supported')).toContain('outbound');
    const invite = trunk.requests.find((r) => r.method === 'INVITE')!;
    expect(invite.headers.get('Via')).toMatch(/^SIP\/2\.0\/TLS 127\.0\.0\.1:\d+;branch=z9hG4bK[^;]+;rport;alias$/);
    expect(invite.headers.get('Contact')).toMatch(/;transport=tls>$/);
    // RFC 5626 §4.4.1: Flow-Timer 2 → pings every 1.6 to 2 s while the call ran.
    expect(trunk.connections[0]!.pings).toBeGreaterThanOrEqual(1);
    // The AI's 440 Hz reached the callee; the callee's 700 Hz reached the AI (16 kHz).
    const speech = concat(trunk.heard.filter((f) => rms(f) > 500));
    expect(speech.length).toBeGreaterThan(8000);
    expect(toneShare(speech.subarray(0, 8000), 440, 8000)).toBeGreaterThan(0.5);
    const session = engine.sessions.find((x) => x.key === 'key-tls')!;
    const pcm = Buffer.concat(session.audioIn);
    const in16 = new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + (pcm.length & ~1)));
    expect(toneShare(in16.subarray(8000), 700, 16000)).toBeGreaterThan(0.5);
    expect(s.logs.text()).not.toContain('trunk-secret');
  }, 90_000);

  it('an outbound AI call over a TLS trunk that requires SRTP: RTP/SAVP with SDES both ways, every packet authenticated, audio both ways, no key in the log', async () => {
    const srtpTrunk = new SipTlsTrunk(trunkCa.issue('srtp-edge', 'IP:127.0.0.1'), { flowTimerSec: 30, toneHz: 700, srtp: true });
    await srtpTrunk.start();
    try {
      expect(
        (
          await adm(s, '/signal.ashx?trunks=save', 'trunks-save', {
            id: 'tlssrtp',
            name: 'TLS and SRTP carrier',
            host: '127.0.0.1',
            port: srtpTrunk.port,
            transport: 'tls',
            codecs: ['PCMA'],
            tlsCaPem: testCa,
            srtp: 'required',
          })
        ).status,
      ).toBe(200);
      await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'tlssrtp' });
      // The trunk reaches the bridge by an asynchronous push: call once the bridge reports it.
      await until(
        async () => {
          const b = (await j(adm(s, '/signal.ashx?bridge=status', 'bridge-status'))).body;
          return ((b.health?.trunks ?? []) as Json[]).some((t) => String(t.id).endsWith('tlssrtp'));
        },
        15_000,
        'the TLS + SRTP trunk at the bridge',
      );
      const id = (await j(s.fetch(`${V1}/calls`, { method: 'POST', key: s.adminKey, json: call({ apiKey: 'key-srtp', email: undefined }) }))).body
        .callId as string;
      const done = await callEnded(s, id);
      expect(done).toMatchObject({ status: 'ended-success', endedReason: 'finished', trunkId: 'tlssrtp' });
      // RFC 4568: our offer is RTP/SAVP with a crypto line per suite; the answer took the first.
      expect(srtpTrunk.lastOffer).toMatch(/m=audio \d+ RTP\/SAVP /);
      expect(srtpTrunk.lastOffer).toMatch(/a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:/);
      expect(srtpTrunk.lastOffer).toMatch(/a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:/);
      expect(srtpTrunk.lastAnswer).toMatch(/RTP\/SAVP 8/);
      // Every packet from the bridge authenticated under the key it offered.
      expect(srtpTrunk.srtpStats.ok).toBeGreaterThan(50);
      expect(srtpTrunk.srtpStats.failed).toBe(0);
      // The AI's 440 Hz reached the callee; the callee's 700 Hz (protected with its key) reached the AI.
      const speech = concat(srtpTrunk.heard.filter((f) => rms(f) > 500));
      expect(speech.length).toBeGreaterThan(8000);
      expect(toneShare(speech.subarray(0, 8000), 440)).toBeGreaterThan(0.5);
      const session = engine.sessions.find((x) => x.key === 'key-srtp')!;
      const pcm = Buffer.concat(session.audioIn);
      const in16 = new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + (pcm.length & ~1)));
      expect(toneShare(in16.subarray(8000), 700, 16000)).toBeGreaterThan(0.5);
      const keys = [...`${srtpTrunk.lastOffer}\n${srtpTrunk.lastAnswer}`.matchAll(/inline:([A-Za-z0-9+/=]+)/g)].map((m) => m[1]!);
      const logs = s.logs.text();
      expect(logs).not.toMatch(/a=crypto|inline:/);
      for (const k of keys) expect(logs).not.toContain(k);
    } finally {
      await adm(s, '/signal.ashx?telephony=settings-save', 'telephony-settings-save', { defaultTrunkId: 'tls' });
      await srtpTrunk.stop();
    }
  }, 60_000);

  it("a certificate that does not verify is refused with the trunk's error: another CA, another name, the system store", async () => {
    const base = { transport: 'tls', dnsSrv: true, register: true, username: 'acme', password: 'pw', codecs: ['PCMA'] };
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { ...base, id: 'wrongca', name: 'wrong CA', host: 'trunk.test', tlsCaPem: otherCa });
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { ...base, id: 'wrongname', name: 'wrong name', host: 'other.test', tlsCaPem: testCa });
    await adm(s, '/signal.ashx?trunks=save', 'trunks-save', { ...base, id: 'nostore', name: 'system store', host: 'trunk.test' });
    const connections = trunk.connections.length;
    expect((await until(async () => (await trunkRow('wrongca'))?.lastError, 15_000, 'wrongca error')) as string).toMatch(
      /TLS: the server certificate of trunk\.test does not chain to the trunk's CA/,
    );
    expect((await until(async () => (await trunkRow('wrongname'))?.lastError, 15_000, 'wrongname error')) as string).toMatch(
      /TLS: the server certificate does not name other\.test/,
    );
    expect((await until(async () => (await trunkRow('nostore'))?.lastError, 15_000, 'nostore error')) as string).toMatch(
      /TLS: the server certificate of trunk\.test does not chain to the system CA store/,
    );
    for (const id of ['wrongca', 'wrongname', 'nostore']) expect((await trunkRow(id)).registered).toBe(false);
    // No request of theirs reached the server: the handshake failed before any SIP.
    expect(trunk.connections.slice(connections).every((c) => c.requests.length === 0)).toBe(true);
    // A PEM that is not a certificate is refused on save, naming the field.
    const bad = await j(adm(s, '/signal.ashx?trunks=save', 'trunks-save', { ...base, id: 'bad', name: 'bad', host: 'trunk.test', tlsCaPem: 'not a pem' }));
    expect(bad.status).toBe(400);
    expect(bad.body.error_description).toMatch(/tlsCaPem/);
  }, 60_000);
});
