import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as werift from 'werift';
import { assertWerift, installedWerift, WERIFT_EXPECTED, weriftProblems, type WeriftFound } from '../../../plugins/telephony/bridge/webrtc/werift-check.ts';

/** The installed werift with one part changed. */
function altered(change: Partial<WeriftFound> & { exports?: Record<string, unknown> }): WeriftFound {
  const real = installedWerift();
  return { ...real, ...change, module: { ...(werift as unknown as Record<string, unknown>), ...change.exports } };
}

describe('the werift the rooms patch is checked at bridge start', () => {
  it('the installed werift is the one expected, with every part srtp.ts and native-x25519.ts use', () => {
    const found = installedWerift();
    expect(found.version).toBe(WERIFT_EXPECTED);
    expect(weriftProblems(found)).toEqual([]);
    expect(() => assertWerift()).not.toThrow();
  });

  it('package.json pins werift exactly to that version, and the lock agrees', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string> };
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
      packages: Record<string, { version?: string; dependencies?: Record<string, string> }>;
    };
    expect(pkg.dependencies.werift).toBe(WERIFT_EXPECTED);
    expect(lock.packages[''].dependencies?.werift).toBe(WERIFT_EXPECTED);
    expect(lock.packages['node_modules/werift'].version).toBe(WERIFT_EXPECTED);
  });

  it('another version fails with one error naming the version expected', () => {
    expect(() => assertWerift(altered({ version: '0.26.0' }))).toThrow(
      /^werift 0\.25\.2 expected \(the rooms patch its internals, webrtc\/srtp\.ts and native-x25519\.ts\); the werift loaded differs: version 0\.26\.0\. Install werift@0\.25\.2 exactly/,
    );
  });

  it('a sender without the report loop, an SRTP session without its keys, a DTLS transport without its profile list: each named', () => {
    class Sender {
      ssrc = 1;
      packetCount = 0;
      octetCount = 0;
      rtpTimestamp = 0;
      ntpTimestamp = 0n;
      headerExtensions = [];
      dtlsTransport = undefined;
    }
    class Session {
      localContext = { profile: 1 };
      remoteContext = { profile: 1 };
      decrypt = () => Buffer.alloc(0);
    }
    class Dtls {
      state = 'new';
      srtp = undefined;
      iceTransport = {};
    }
    const problems = weriftProblems(altered({ exports: { RTCRtpSender: Sender, SrtpSession: Session, RTCDtlsTransport: Dtls } }));
    expect(problems).toEqual([
      'RTCRtpSender.runRtcp is not a function',
      'RTCDtlsTransport.srtpProfiles is not an array',
      'SrtpSession.localContext has no profile and session key, salt and auth key',
      'SrtpSession.remoteContext has no profile and session key, salt and auth key',
    ]);
    expect(() => assertWerift(altered({ exports: { RTCRtpSender: Sender } }))).toThrow(/werift 0\.25\.2 expected .*RTCRtpSender\.runRtcp is not a function/);
  });

  it('a missing export, a constructor that throws and a tweetnacl without scalarMult are named too', () => {
    const problems = weriftProblems(
      altered({
        exports: {
          SrtpAuthenticationError: undefined,
          Connection: undefined,
          RTCRtpSender: function Sender() {
            throw new Error('needs a track');
          },
        },
        nacl: { box: { keyPair: () => null } },
      }),
    );
    expect(problems).toEqual([
      'no export SrtpAuthenticationError',
      'its classes could not be made as expected (needs a track)',
      'the tweetnacl it resolves has no scalarMult and box.keyPair',
    ]);
  });
});
