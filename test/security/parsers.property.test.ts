import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decode as cborDecode } from 'cbor-x';
import * as jose from 'jose';
import { formatNameAddr, parseDatagram, parseUri, parseVia, parseNameAddr, serialize, SipParseError } from '../../plugins/telephony/bridge/sip/message.ts';
import { parseChallenge, parseDigestAnswer } from '../../plugins/telephony/bridge/sip/digest.ts';
import { parseAnswer, parseReoffer, SdpError } from '../../plugins/telephony/bridge/media/sdp.ts';
import { parseRtp } from '../../plugins/telephony/bridge/media/rtp.ts';
import { parseRtcp } from '../../plugins/telephony/bridge/media/rtcp.ts';
import { parseXml, XmlError } from '../../plugins/lotl/xml.ts';
import { readTar, TarError } from '../../plugins/lotl/tar.ts';

/**
 * The property layer of the fuzz suite (issue 18): every parser that reads bytes from the network
 * or an upload, fed arbitrary and near-valid input, either answers or refuses with its own error
 * type: never a TypeError, RangeError (stack overflow) or any other crash, and never a hang.
 */
const RUNS = 400;

/** Runs `f`; a thrown error must be one of `allowed` (the parser's own refusal). */
function refusesCleanly(f: () => unknown, ...allowed: (new (...a: never[]) => Error)[]): boolean {
  try {
    f();
    return true;
  } catch (e) {
    if (allowed.some((A) => e instanceof A)) return true;
    throw e;
  }
}

const sipLike = fc
  .tuple(
    fc.constantFrom('INVITE sip:bob@example.com SIP/2.0', 'SIP/2.0 200 OK', 'BYE sip:x SIP/2.0', 'garbage', ''),
    fc.array(
      fc.tuple(
        fc.constantFrom('Via', 'From', 'To', 'Call-ID', 'CSeq', 'Content-Length', 'Contact', 'Max-Forwards', 'v', 'f', 't', 'i', 'X'),
        fc.string({ maxLength: 80 }),
      ),
      { maxLength: 12 },
    ),
    fc.string({ maxLength: 200 }),
  )
  .map(([start, headers, body]) => Buffer.from(`${start}\r\n${headers.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${body}`));

describe('parsers under arbitrary input', () => {
  it('SIP datagrams: parsed or refused with SipParseError; a parsed one serializes and parses again', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)),
          sipLike,
        ),
        (buf) => {
          let msg;
          try {
            msg = parseDatagram(buf);
          } catch (e) {
            if (e instanceof SipParseError) return true;
            throw e;
          }
          expect(() => parseDatagram(serialize(msg))).not.toThrow();
          return true;
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('SIP header values (URI, Via, name-addr, digest challenge)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (v) => {
        refusesCleanly(() => parseUri(v), SipParseError);
        refusesCleanly(() => parseVia(v), SipParseError);
        refusesCleanly(() => parseNameAddr(v), SipParseError);
        refusesCleanly(() => parseChallenge(v));
        refusesCleanly(() => parseDigestAnswer(v));
        return true;
      }),
      { numRuns: RUNS },
    );
  });

  // Control characters and the characters that delimit a name-addr, mixed into free text.
  const hostile = fc
    .array(
      fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('\r', '\n', '\u0000', '\u001b', '\u007f', '\t', '"', '\\', '<', '>', ';', ',', 'sip:+4930999@x')),
      {
        maxLength: 12,
      },
    )
    .map((parts) => parts.join(''));
  // eslint-disable-next-line no-control-regex -- control characters are what these properties look for
  const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;

  it('name-addr: any display name formats into one header that parses back to the same address, without control characters', () => {
    fc.assert(
      fc.property(hostile, (display) => {
        const v = formatNameAddr({ display, uri: 'sip:+491700000@host', params: { tag: 'a1' } });
        expect(v).not.toMatch(CONTROL);
        const na = parseNameAddr(v);
        expect(na.uri).toBe('sip:+491700000@host');
        expect(na.params).toEqual({ tag: 'a1' });
        expect(na.display).toBe(display.replace(new RegExp(CONTROL.source, 'g'), ''));
        // Through a whole datagram too: the caller stays the addr-spec's user.
        const m = parseDatagram(
          Buffer.from(
            `INVITE sip:+4930100@h SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: ${v}\r\nTo: <sip:+4930100@h>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\n\r\n`,
          ),
        );
        expect(parseUri(parseNameAddr(m.headers.get('From')!).uri).user).toBe('+491700000');
        return true;
      }),
      { numRuns: RUNS },
    );
  });

  it('a header value with a control character: refused; a request gets a 400 that serializes without one', () => {
    fc.assert(
      fc.property(
        hostile.filter((x) => CONTROL.test(x.replace(/\r\n|\n/g, ''))),
        fc.constantFrom('From', 'To', 'Call-ID', 'Subject', 'Contact', 'Via'),
        fc.boolean(),
        (value, header, request) => {
          // A CRLF or LF would only end the line (another header or the body): the lone ones stay.
          const injected = value.replace(/\r\n|\n/g, '');
          const lines = new Map([
            ['Via', 'SIP/2.0/UDP h;branch=z9hG4bK1'],
            ['From', '<sip:a@h>;tag=1'],
            ['To', '<sip:b@h>'],
            ['Call-ID', 'c'],
            ['CSeq', '1 INVITE'],
          ]);
          lines.set(header, header === 'Via' ? `SIP/2.0/UDP h;branch=z9hG4bK1;x=${injected}` : `${lines.get(header) ?? ''}${injected}`);
          const start = request ? 'INVITE sip:+4930100@h SIP/2.0' : 'SIP/2.0 180 Ringing';
          const buf = Buffer.from(`${start}\r\n${[...lines].map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`);
          try {
            parseDatagram(buf);
          } catch (e) {
            expect(e).toBeInstanceOf(SipParseError);
            const reply = (e as SipParseError).reply;
            if (reply) expect(serialize(reply).toString('latin1').replace(/\r\n/g, '')).not.toMatch(CONTROL);
            return true;
          }
          return false;
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('SDP answers and re-offers', () => {
    const sdpLike = fc
      .array(fc.tuple(fc.constantFrom('v', 'o', 's', 'c', 't', 'm', 'a', 'b'), fc.string({ maxLength: 60 })), { maxLength: 15 })
      .map((lines) => lines.map(([k, v]) => `${k}=${v}`).join('\r\n'));
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 400 }), sdpLike), (sdp) => {
        refusesCleanly(() => parseAnswer(sdp, ['PCMU', 'PCMA']), SdpError);
        refusesCleanly(() => parseReoffer(sdp), SdpError);
        return true;
      }),
      { numRuns: RUNS },
    );
  });

  it('RTP and RTCP packets: a packet or null, payload within the datagram', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (a) => {
        const buf = Buffer.from(a);
        const p = parseRtp(buf);
        if (p) expect(p.payload.length).toBeLessThanOrEqual(buf.length);
        const r = parseRtcp(buf);
        expect(r === null || Array.isArray(r)).toBe(true);
        return true;
      }),
      { numRuns: RUNS * 2 },
    );
  });

  it('trusted-list XML: parsed or XmlError, also for deep nesting, entities and many attributes', () => {
    const xmlish = fc
      .array(
        fc.constantFrom(
          '<a>',
          '</a>',
          '<b x="1" y="2"/>',
          '&amp;',
          '&e;',
          '<!DOCTYPE x [<!ENTITY e "z">]>',
          '<?xml version="1.0"?>',
          ']]>',
          '<![CDATA[',
          'text',
          '<a x="1" x="2">',
        ),
        {
          maxLength: 40,
        },
      )
      .map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 400 }), xmlish, fc.uint8Array({ maxLength: 300 })), (input) =>
        refusesCleanly(() => parseXml(input), XmlError),
      ),
      { numRuns: RUNS },
    );
    expect(refusesCleanly(() => parseXml('<a>'.repeat(100_000) + '</a>'.repeat(100_000)), XmlError)).toBe(true);
  });

  it('tar archives (plain and gzip): entries or TarError, within the limits', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 3000 }), fc.boolean(), async (a, gz) => {
        const buf = Buffer.from(a);
        if (gz) {
          buf[0] = 0x1f;
          buf[1] = 0x8b;
        }
        let entries;
        try {
          entries = await readTar(buf, { maxFiles: 10, maxBytes: 100_000 });
        } catch (e) {
          if (e instanceof TarError) return true;
          throw e;
        }
        expect(entries.length).toBeLessThanOrEqual(10);
        return true;
      }),
      { numRuns: RUNS },
    );
  });

  it('CBOR (the mdoc and COSE input): decoded or an Error, never a crash of another kind', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (a) => {
        try {
          cborDecode(Buffer.from(a));
        } catch (e) {
          // cbor-x refuses with plain Errors (and RangeError for truncated input, which is its "unexpected end").
          expect(e).toBeInstanceOf(Error);
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- whatever was thrown, as text
          expect(String((e as Error).message)).not.toMatch(/Maximum call stack/);
        }
        return true;
      }),
      { numRuns: RUNS },
    );
  });

  it('JWS/JWT inputs: verification refuses with a JOSE error, never another crash, never alg none', async () => {
    const { publicKey } = await jose.generateKeyPair('ES256');
    const part = fc.oneof(fc.base64String({ maxLength: 60 }), fc.string({ maxLength: 40 }), fc.constant('eyJhbGciOiJub25lIn0'));
    await fc.assert(
      fc.asyncProperty(fc.tuple(part, part, part), async ([h, p, sig]) => {
        const token = `${h}.${p}.${sig}`;
        try {
          await jose.jwtVerify(token, publicKey, { algorithms: ['ES256'] });
          return false; // nothing random verifies
        } catch (e) {
          expect(e).toBeInstanceOf(jose.errors.JOSEError);
          return true;
        }
      }),
      { numRuns: RUNS },
    );
  });
});
