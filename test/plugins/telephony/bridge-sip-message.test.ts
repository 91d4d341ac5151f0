import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  parseDatagram,
  serialize,
  StreamFramer,
  SipParseError,
  parseNameAddr,
  formatNameAddr,
  parseVia,
  parseUri,
  newBranch,
  makeResponse,
  type SipRequest,
} from '../../../plugins/telephony/bridge/sip/message.ts';
import { digestAuthorization, parseChallenge, pickChallenge } from '../../../plugins/telephony/bridge/sip/digest.ts';

const INVITE = [
  'INVITE sip:+4930123@trunk.example.com SIP/2.0',
  'v: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK776asdhds, SIP/2.0/TCP proxy.example:5061;branch=z9hG4bKabc',
  'Max-Forwards: 70',
  't: <sip:+4930123@trunk.example.com>',
  'f: "Alice, A." <sip:alice@example.com>;tag=1928301774',
  'i: a84b4c76e66710@pc33.example.com',
  'CSeq: 314159 INVITE',
  'm: <sip:alice@10.0.0.1:5060>',
  'Subject: a long',
  '  folded line',
  'c: application/sdp',
  'l: 4',
  '',
  'v=0\r\nEXTRA',
].join('\r\n');

describe('SIP message parser (RFC 3261 §7)', () => {
  it('parses a request with compact headers, folded lines and comma-joined Via', () => {
    const m = parseDatagram(Buffer.from(INVITE)) as SipRequest;
    expect(m.kind).toBe('request');
    expect(m.method).toBe('INVITE');
    expect(m.uri).toBe('sip:+4930123@trunk.example.com');
    expect(m.headers.getAll('Via')).toHaveLength(2);
    expect(parseVia(m.headers.get('Via') as string).params.branch).toBe('z9hG4bK776asdhds');
    expect(m.headers.get('Call-ID')).toBe('a84b4c76e66710@pc33.example.com');
    expect(m.headers.get('Subject')).toBe('a long folded line');
    // Content-Length frames the body in a datagram; extra bytes are discarded (§18.3).
    expect(m.body.toString()).toBe('v=0\r');
    const from = parseNameAddr(m.headers.get('From') as string);
    expect(from).toEqual({ display: 'Alice, A.', uri: 'sip:alice@example.com', params: { tag: '1928301774' } });
  });

  it('parses a status line and round-trips through serialize', () => {
    const req = parseDatagram(Buffer.from(INVITE)) as SipRequest;
    const res = makeResponse(req, 486, 'Busy Here', 'abc');
    const again = parseDatagram(serialize(res));
    expect(again.kind).toBe('response');
    if (again.kind !== 'response') return;
    expect(again.status).toBe(486);
    expect(again.reason).toBe('Busy Here');
    expect(again.headers.get('To')).toContain(';tag=abc');
    expect(again.headers.getAll('Via')).toHaveLength(2);
    expect(serialize(res).toString()).toContain('Content-Length: 0\r\n\r\n');
  });

  it('rejects bad start lines, missing mandatory headers, bad CSeq and short bodies', () => {
    const bad = [
      'HELLO\r\n\r\n',
      INVITE.replace('SIP/2.0\r\n', 'SIP/3.0\r\n'),
      INVITE.replace(/i: .*\r\n/, ''),
      INVITE.replace('CSeq: 314159 INVITE', 'CSeq: x INVITE'),
      INVITE.replace('l: 4', 'l: 400'),
      INVITE.replace('Max-Forwards: 70', 'Max Forwards 70'),
      'SIP/2.0 99 Odd\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n\r\n',
    ];
    for (const b of bad) expect(() => parseDatagram(Buffer.from(b)), b.slice(0, 40)).toThrow(SipParseError);
  });

  it('frames TCP streams by Content-Length across arbitrary chunk boundaries (§18.3)', () => {
    const one = INVITE.replace('\r\nEXTRA', '').replace('l: 4', 'l: 5') + '\r\n';
    const stream = Buffer.from('\r\n' + one + one);
    for (const step of [1, 7, 64, stream.length]) {
      const framer = new StreamFramer();
      const got = [];
      for (let i = 0; i < stream.length; i += step) got.push(...framer.push(stream.subarray(i, i + step)));
      expect(got).toHaveLength(2);
      expect(got[1].body.toString()).toBe('v=0\r\n');
    }
    expect(() => new StreamFramer().push(Buffer.from(INVITE.replace(/l: 4\r\n/, '')))).toThrow(SipParseError);
  });

  it('only ever throws SipParseError on mutated input (fuzz)', () => {
    const base = Buffer.from(INVITE);
    let parsed = 0;
    for (let i = 0; i < 3000; i++) {
      const b = Buffer.from(base);
      const n = 1 + (i % 8);
      for (let k = 0; k < n; k++) b[randomBytes(2).readUInt16BE() % b.length] = randomBytes(1)[0];
      try {
        parseDatagram(i % 5 === 0 ? b.subarray(0, i % b.length) : b);
        parsed++;
      } catch (err) {
        expect(err).toBeInstanceOf(SipParseError);
      }
    }
    expect(parsed).toBeGreaterThan(0);
  });

  it('parses URIs and makes RFC 3261 branches', () => {
    expect(parseUri('sip:+49301@[::1]:5070;transport=tcp')).toMatchObject({ user: '+49301', host: '::1', port: 5070, params: { transport: 'tcp' } });
    expect(parseUri('sip:trunk.example')).toMatchObject({ user: '', host: 'trunk.example', port: null });
    expect(newBranch()).toMatch(/^z9hG4bK[0-9a-f]{20}$/);
  });
});

describe('name-addr and control characters (RFC 3261 §25.1, header injection)', () => {
  const invite = (from: string) => Buffer.from(INVITE.replace(/f: .*\r\n/, `f: ${from}\r\n`));

  it('takes the addr-spec after a quoted display name, even when the name holds a < (no caller spoofing)', () => {
    expect(parseNameAddr('"<sip:+4930999@x>" <sip:+491700000@host>;tag=9')).toEqual({
      display: '<sip:+4930999@x>',
      uri: 'sip:+491700000@host',
      params: { tag: '9' },
    });
    // An escaped quote does not end the name; the name's own > ; , stay in it.
    expect(parseNameAddr('"a\\"<sip:evil@x>;tag=1, b" <sip:real@h>;tag=2')).toEqual({
      display: 'a"<sip:evil@x>;tag=1, b',
      uri: 'sip:real@h',
      params: { tag: '2' },
    });
    expect(parseNameAddr('Alice Smith <sip:alice@h>')).toMatchObject({ display: 'Alice Smith', uri: 'sip:alice@h' });
    expect(parseNameAddr('sip:bob@h;tag=3')).toEqual({ display: '', uri: 'sip:bob@h', params: { tag: '3' } });
    for (const bad of [
      '"unterminated <sip:a@b>',
      '"name" sip:a@b',
      '"a" "b" <sip:a@b>',
      'x"y" <sip:a@b>',
      '<sip:a@b',
      '"\u001b[2J" <sip:a@b>',
      '<sip:a\u0000@b>',
    ])
      expect(() => parseNameAddr(bad), bad).toThrow(SipParseError);
    // Through the whole message: the caller is the addr-spec's user.
    const m = parseDatagram(invite('"<sip:+4930999@x>" <sip:+491700000@host>;tag=1')) as SipRequest;
    expect(parseUri(parseNameAddr(m.headers.get('From')!).uri).user).toBe('+491700000');
  });

  it('a request with a lone CR, NUL or ESC in a header is refused with a clean 400; such a response is dropped', () => {
    for (const ch of ['\r', '\u0000', '\u001b', '\u007f']) {
      let err: unknown;
      try {
        parseDatagram(invite(`"Evil${ch}INVITE sip:x SIP/2.0" <sip:+4917@h>;tag=1`));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SipParseError);
      const reply = (err as SipParseError).reply!;
      expect(reply).toMatchObject({ kind: 'response', status: 400, reason: 'Bad Request' });
      // The 400 echoes the cleaned From, never the refused byte, and goes out as one message.
      const wire = serialize(reply).toString('latin1');
      // eslint-disable-next-line no-control-regex -- control characters (and a CR not before LF) are what it looks for
      expect(wire).not.toMatch(/[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]|\r(?!\n)/);
      expect(reply.headers.get('From')).toBe('"EvilINVITE sip:x SIP/2.0" <sip:+4917@h>;tag=1');
    }
    const response =
      'SIP/2.0 180 Ringing\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:a@h>;tag=1\r\nTo: "x\u001by" <sip:b@h>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\n\r\n';
    expect(() => parseDatagram(Buffer.from(response))).toThrow(SipParseError);
    try {
      parseDatagram(Buffer.from(response));
    } catch (e) {
      expect((e as SipParseError).reply).toBeUndefined();
    }
    const ack = INVITE.replace('INVITE sip:', 'ACK sip:')
      .replace('314159 INVITE', '314159 ACK')
      .replace(/f: .*\r\n/, 'f: "a\rb" <sip:a@h>;tag=1\r\n');
    expect(() => parseDatagram(Buffer.from(ack))).toThrow(SipParseError);
    try {
      parseDatagram(Buffer.from(ack));
    } catch (e) {
      expect((e as SipParseError).reply).toBeUndefined(); // nothing answers an ACK
    }
    expect(() => parseDatagram(Buffer.from(INVITE.replace('sip:+4930123@trunk.example.com SIP/2.0', 'sip:+4930123@trunk\u001b.example.com SIP/2.0')))).toThrow(
      SipParseError,
    );
  });

  it('on a stream, a refused request is answered and the next message still arrives', () => {
    const one = (from: string) =>
      INVITE.replace('\r\nEXTRA', '')
        .replace('l: 4', 'l: 5')
        .replace(/f: .*\r\n/, `f: ${from}\r\n`) + '\r\n';
    const refused: SipParseError[] = [];
    const got = new StreamFramer().push(Buffer.from(one('"a\rb" <sip:a@h>;tag=1') + one('<sip:ok@h>;tag=2')), (e) => refused.push(e));
    expect(refused.map((e) => e.reply?.status)).toEqual([400]);
    expect(got.map((m) => m.headers.get('From'))).toEqual(['<sip:ok@h>;tag=2']);
  });

  it('never sends a control character: formatNameAddr drops them from a display name, serialize refuses any', () => {
    const v = formatNameAddr({ display: 'Mallory\r\nINVITE\u0000\u001b"\\', uri: 'sip:+49@h', params: { tag: 'x' } });
    expect(v).toBe('"MalloryINVITE\\"\\\\" <sip:+49@h>;tag=x');
    expect(parseNameAddr(v).display).toBe('MalloryINVITE"\\');
    const req = parseDatagram(Buffer.from(INVITE)) as SipRequest;
    for (const bad of ['x\ry', 'x\ny', 'x\u0000', '\u001b[31m']) {
      const r = { ...req, headers: req.headers.clone().set('Subject', bad) };
      expect(() => serialize(r), JSON.stringify(bad)).toThrow(SipParseError);
    }
    expect(() => serialize({ ...req, uri: 'sip:a@h\r\nX: y' })).toThrow(SipParseError);
  });
});

describe('digest authentication', () => {
  it('matches the RFC 2617 §3.5 MD5 example', () => {
    const ch = parseChallenge(
      'Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"',
    );
    expect(ch).not.toBeNull();
    const v = digestAuthorization(ch!, { method: 'GET', uri: '/dir/index.html', username: 'Mufasa', password: 'Circle Of Life', nc: 1, cnonce: '0a4f113b' });
    expect(v).toContain('response="6629fae49393a05397450978507c4ef1"');
    expect(v).toContain('qop=auth, nc=00000001');
    expect(v).toContain('opaque="5ccc069c403ebaf9f0171e9517f40e41"');
  });

  it('matches the RFC 7616 §3.9.1 SHA-256 example and prefers SHA-256', () => {
    const headers = [
      'Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=MD5, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"',
      'Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"',
    ];
    const ch = pickChallenge(headers);
    expect(ch?.algorithm).toBe('SHA-256');
    const v = digestAuthorization(ch!, {
      method: 'GET',
      uri: '/dir/index.html',
      username: 'Mufasa',
      password: 'Circle of Life',
      nc: 1,
      cnonce: 'f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ',
    });
    expect(v).toContain('response="753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"');
  });

  it('answers a challenge without qop the RFC 2069 way', () => {
    const ch = parseChallenge('Digest realm="sip", nonce="abc"')!;
    expect(digestAuthorization(ch, { method: 'INVITE', uri: 'sip:1@h', username: 'u', password: 'p', nc: 1 })).not.toContain('qop=');
    expect(parseChallenge('Basic realm="x"')).toBeNull();
  });
});
