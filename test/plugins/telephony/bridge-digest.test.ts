import { describe, expect, it } from 'vitest';
import { makeResponse, parseDatagram, type SipRequest, type SipResponse } from '../../../plugins/telephony/bridge/sip/message.ts';
import { DigestServer, digestAuthorization, parseChallenge, parseDigestAnswer } from '../../../plugins/telephony/bridge/sip/digest.ts';
import type { ServerRequestContext } from '../../../plugins/telephony/bridge/sip/transaction.ts';
import { DigestGuard } from '../../../plugins/telephony/bridge/inbound/auth.ts';
import { Registrar } from '../../../plugins/telephony/bridge/inbound/registrar.ts';

/**
 * The UAS side of SIP digest (sip/digest.ts DigestServer) and the guessing limits on it
 * (inbound/auth.ts), answered by our own UAC side (digestAuthorization) as a phone would.
 */

const ALICE = { tenantId: 't1', user: 'alice', username: 'alice', password: 'right-password-0123456789' };

function register(opts: { user?: string; auth?: string; contact?: string; cseq?: number } = {}): SipRequest {
  const user = opts.user ?? 'alice';
  const lines = [
    'REGISTER sip:192.0.2.1 SIP/2.0',
    `Via: SIP/2.0/UDP 192.0.2.50:5060;branch=z9hG4bK${Math.random().toString(16).slice(2)}`,
    `From: <sip:${user}@192.0.2.1>;tag=1`,
    `To: <sip:${user}@192.0.2.1>`,
    'Call-ID: reg-1',
    `CSeq: ${opts.cseq ?? 1} REGISTER`,
    `Contact: <${opts.contact ?? `sip:${user}@192.0.2.50:5060`}>`,
    'Expires: 600',
    ...(opts.auth ? [`Authorization: ${opts.auth}`] : []),
    '',
    '',
  ];
  return parseDatagram(Buffer.from(lines.join('\r\n'))) as SipRequest;
}

/** Sends one request to the registrar from `host` and returns its answer. */
function send(reg: Registrar, req: SipRequest, host: string): SipResponse {
  let got: SipResponse | undefined;
  const ctx: ServerRequestContext = { req, from: { host, port: 5060, transport: 'udp' }, respond: (r) => (got = r) };
  reg.handle(ctx);
  if (!got) throw new Error('no answer');
  return got;
}

function answer(res: SipResponse, password: string, nc = 1, username = 'alice'): string {
  const ch = parseChallenge(res.headers.get('WWW-Authenticate') ?? '');
  if (!ch) throw new Error(`no challenge in ${res.status}`);
  return digestAuthorization(ch, { method: 'REGISTER', uri: 'sip:192.0.2.1', username, password, nc });
}

function clock(start = 1_800_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe('DigestServer: nonces bound to the address, single use or a rising nc', () => {
  const c = clock();
  const server = new DigestServer('sovcomms', c.now);
  const req = (nonceHeader: string, password: string, nc = 1, qop = true) => {
    const ch = parseChallenge(nonceHeader)!;
    if (!qop) delete ch.qop;
    return parseDigestAnswer(digestAuthorization(ch, { method: 'REGISTER', uri: 'sip:h', username: 'alice', password, nc }))!;
  };

  it('accepts an answer once per nonce-count, from the address the nonce was issued to only', () => {
    const ch = server.challenge('192.0.2.50');
    const a1 = req(ch, 'pw');
    expect(server.verify(a1, 'REGISTER', 'pw', '192.0.2.66')).toBe('unknown'); // replayed from elsewhere
    expect(server.verify(a1, 'REGISTER', 'pw', '192.0.2.50')).toBe('ok');
    expect(server.verify(a1, 'REGISTER', 'pw', '192.0.2.50')).toBe('unknown'); // replayed nc
    expect(server.verify(req(ch, 'pw', 2), 'REGISTER', 'pw', '192.0.2.50')).toBe('ok'); // the phone's next nc
    expect(server.verify(req(ch, 'pw', 2), 'REGISTER', 'pw', '192.0.2.50')).toBe('unknown');
    // Another method with the same answer: a different digest, a guess.
    expect(server.verify(req(ch, 'pw', 3), 'INVITE', 'pw', '192.0.2.50')).toBe('bad');
  });

  it('an answer without qop (RFC 2069 form) is good once', () => {
    const a = req(server.challenge('192.0.2.50'), 'pw', 1, false);
    expect(a.qop).toBeUndefined();
    expect(server.verify(a, 'REGISTER', 'pw', '192.0.2.50')).toBe('ok');
    expect(server.verify(a, 'REGISTER', 'pw', '192.0.2.50')).toBe('unknown');
  });

  it('a wrong answer spends its nonce; a forged nonce is unknown; an expired one is stale only with the right password', () => {
    const ch = server.challenge('192.0.2.50');
    expect(server.verify(req(ch, 'guess'), 'REGISTER', 'pw', '192.0.2.50')).toBe('bad');
    expect(server.verify(req(ch, 'pw', 2), 'REGISTER', 'pw', '192.0.2.50')).toBe('unknown');
    const forged = ch.replace(/nonce="([^.]+)\.([^.]+)\.[0-9a-f]+"/, 'nonce="$1.$2.00000000000000000000000000000000"');
    expect(server.verify(req(forged, 'pw'), 'REGISTER', 'pw', '192.0.2.50')).toBe('unknown');
    const old = server.challenge('192.0.2.50');
    c.advance(5 * 60_000 + 1);
    expect(server.verify(req(old, 'pw'), 'REGISTER', 'pw', '192.0.2.50')).toBe('stale');
    expect(server.verify(req(old, 'guess'), 'REGISTER', 'pw', '192.0.2.50')).toBe('bad');
  });
});

describe('desk-phone registrar: guessing limits and replays', () => {
  function setup() {
    const c = clock();
    const reg = new Registrar('sovcomms', { now: c.now });
    reg.setAccounts([ALICE, { ...ALICE, user: 'bob', username: 'bob', password: 'bobs-password-0123456789' }]);
    return { c, reg };
  }

  /** One full attempt from `host`: the challenge, then the answer with `password`. */
  function attempt(reg: Registrar, host: string, password: string, user = 'alice'): SipResponse {
    const first = send(reg, register({ user }), host);
    if (first.status !== 401) return first;
    return send(reg, register({ user, cseq: 2, auth: answer(first, password, 1, user) }), host);
  }

  it('3,000 wrong REGISTERs (about 3 s), then the right password is refused with 503 and Retry-After until the wait is over', () => {
    const { c, reg } = setup();
    const statuses = new Map<number, number>();
    let last: SipResponse | undefined;
    for (let i = 0; i < 3000; i++) {
      c.advance(1);
      // A guesser reuses the last nonce it got when it gets no new one.
      const r =
        last?.status === 401 || !last
          ? attempt(reg, '192.0.2.66', `guess-${i}`)
          : send(
              reg,
              register({ cseq: 2, auth: 'Digest username="alice", realm="sovcomms", nonce="x.y.z", uri="sip:192.0.2.1", response="00"' }),
              '192.0.2.66',
            );
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      last = r.status === 503 ? undefined : r;
    }
    // A few guesses were checked (403), the rest waited (503): far fewer than 3,000 reached the password.
    expect(statuses.get(403)).toBeLessThanOrEqual(13);
    expect(statuses.get(503)).toBeGreaterThan(2900);
    const refused = attempt(reg, '192.0.2.66', ALICE.password);
    expect(refused.status).toBe(503);
    const wait = Number(refused.headers.get('Retry-After'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(attempt(reg, '192.0.2.66', ALICE.password).status).toBe(503);
    c.advance(wait * 1000);
    expect(attempt(reg, '192.0.2.66', ALICE.password).status).toBe(200);
    expect(reg.status().find((s) => s.user === 'alice')?.registered).toBe(1);
  });

  it("the waits double with each further failure, up to 15 minutes; an hour's quiet starts over", () => {
    const { c, reg } = setup();
    for (let i = 0; i < 10; i++) expect(attempt(reg, '192.0.2.66', 'guess').status).toBe(403);
    const waits: number[] = [];
    for (let i = 0; i < 14; i++) {
      expect(attempt(reg, '192.0.2.66', 'guess').status).toBe(403);
      const r = attempt(reg, '192.0.2.66', 'guess');
      expect(r.status).toBe(503);
      waits.push(Number(r.headers.get('Retry-After')));
      c.advance(waits[waits.length - 1] * 1000);
    }
    expect(waits).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900, 900]);
    c.advance(60 * 60_000 + 1);
    expect(attempt(reg, '192.0.2.66', ALICE.password).status).toBe(200);
  });

  it("guesses from many addresses hold alice's name back, but not the address her phone registered from", () => {
    const { reg } = setup();
    expect(attempt(reg, '192.0.2.50', ALICE.password).status).toBe(200); // her phone
    for (let i = 0; i < 11; i++) expect(attempt(reg, `198.51.100.${i + 1}`, 'guess').status).toBe(403);
    // The right password from an address alice never used waits; her phone's re-REGISTER does not.
    const other = attempt(reg, '198.51.100.200', ALICE.password);
    expect(other.status).toBe(503);
    expect(Number(other.headers.get('Retry-After'))).toBeGreaterThanOrEqual(1);
    expect(attempt(reg, '192.0.2.50', ALICE.password).status).toBe(200);
    // Bob's name is not alice's: unaffected.
    expect(attempt(reg, '198.51.100.201', 'bobs-password-0123456789', 'bob').status).toBe(200);
  });

  it('a captured Authorization replayed from another address, or again from the same, never binds a contact', () => {
    const { reg } = setup();
    const challenge = send(reg, register(), '192.0.2.50');
    const auth = answer(challenge, ALICE.password);
    expect(send(reg, register({ cseq: 2, auth }), '192.0.2.50').status).toBe(200);
    const evil = { cseq: 3, auth, contact: 'sip:alice@203.0.113.9:5060' };
    const elsewhere = send(reg, register(evil), '203.0.113.9');
    expect(elsewhere.status).toBe(401); // a new challenge: the old nonce is not this address's
    expect(elsewhere.headers.get('WWW-Authenticate')).not.toContain('stale');
    expect(send(reg, register(evil), '192.0.2.50').status).toBe(401); // nc 1 was used
    expect(reg.bindingsOf('t1', 'alice').map((b) => b.contact)).toEqual(['sip:alice@192.0.2.50:5060']);
    // The phone's own next nonce-count on the same nonce is fine (phones refresh that way).
    const ch = parseChallenge(challenge.headers.get('WWW-Authenticate')!)!;
    const next = digestAuthorization(ch, { method: 'REGISTER', uri: 'sip:192.0.2.1', username: 'alice', password: ALICE.password, nc: 2 });
    expect(send(reg, register({ cseq: 4, auth: next }), '192.0.2.50').status).toBe(200);
  });

  it("an unknown user name and another user's login answer 403 like a wrong password, and count as failures", () => {
    const { reg } = setup();
    expect(attempt(reg, '192.0.2.70', 'x', 'mallory').status).toBe(403);
    // Bob's right password for alice's AOR: refused.
    const first = send(reg, register(), '192.0.2.70');
    expect(send(reg, register({ cseq: 2, auth: answer(first, 'bobs-password-0123456789', 1, 'bob') }), '192.0.2.70').status).toBe(403);
    for (let i = 0; i < 9; i++) attempt(reg, '192.0.2.70', 'x', `u${i}`);
    expect(attempt(reg, '192.0.2.70', 'bobs-password-0123456789', 'bob').status).toBe(503);
  });
});

describe('trunk digest (407 / Proxy-Authorization) through the same guard', () => {
  it('challenges with 407, accepts the right answer once, limits guesses per address', () => {
    const c = clock();
    const guard = new DigestGuard({ realm: 'sovcomms-trunk', proxy: true, now: c.now });
    const invite = (auth?: string) =>
      parseDatagram(
        Buffer.from(
          [
            'INVITE sip:+4930100@192.0.2.1 SIP/2.0',
            'Via: SIP/2.0/UDP 192.0.2.9:5060;branch=z9hG4bK1',
            'From: <sip:+49170@192.0.2.9>;tag=1',
            'To: <sip:+4930100@192.0.2.1>',
            'Call-ID: inv-1',
            'CSeq: 1 INVITE',
            ...(auth ? [`Proxy-Authorization: ${auth}`] : []),
            '',
            '',
          ].join('\r\n'),
        ),
      ) as SipRequest;
    const run = (req: SipRequest, host = '192.0.2.9') => {
      let res: SipResponse = makeResponse(req, 500);
      const user = guard.check({ req, from: { host, port: 5060, transport: 'udp' }, respond: (r) => (res = r) }, (u) =>
        u === 'carrier' ? 'trunk-pw' : undefined,
      );
      return { user, res };
    };
    const first = run(invite()).res;
    expect(first.status).toBe(407);
    const ch = parseChallenge(first.headers.get('Proxy-Authenticate')!)!;
    const auth = digestAuthorization(ch, { method: 'INVITE', uri: 'sip:+4930100@192.0.2.1', username: 'carrier', password: 'trunk-pw', nc: 1 });
    expect(run(invite(auth), '192.0.2.99').res.status).toBe(407); // another address
    expect(run(invite(auth)).user).toBe('carrier');
    expect(run(invite(auth)).res.status).toBe(407); // replayed
    for (let i = 0; i < 10; i++) {
      const ch2 = parseChallenge(run(invite()).res.headers.get('Proxy-Authenticate')!)!;
      const wrong = digestAuthorization(ch2, { method: 'INVITE', uri: 'sip:+4930100@192.0.2.1', username: 'carrier', password: `g${i}`, nc: 1 });
      expect(run(invite(wrong)).res.status).toBe(403);
    }
    const ch3 = parseChallenge(run(invite()).res.headers.get('Proxy-Authenticate')!)!;
    const wrong = digestAuthorization(ch3, { method: 'INVITE', uri: 'sip:+4930100@192.0.2.1', username: 'carrier', password: 'g', nc: 1 });
    expect(run(invite(wrong)).res.status).toBe(403);
    const waiting = run(invite());
    expect(waiting.res.status).toBe(503);
    expect(waiting.res.headers.get('Retry-After')).toBe('1');
  });
});
