/**
 * The werift the bridge was built against, checked once at start.
 *
 * The rooms reach past werift's public API in three places: `srtp.ts` reads the session keys of
 * its SRTP contexts, replaces its DTLS transport's `srtp.decrypt`, offers its own SRTP profile
 * list and keeps its RTCRtpSender's report counters; `native-x25519.ts` swaps two functions of
 * the tweetnacl instance its DTLS calls; `dtls-hvr.ts` wraps its DTLS client's handshake handler.
 * Those are internals, free to change in any release, so
 * package.json pins werift exactly, and the bridge refuses to start when the werift it loads is
 * another version or lacks one of the parts (a clear error at start, not a room that quietly
 * falls back to werift's slower paths, or breaks, under load).
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { readFileSync } from 'node:fs';
import * as werift from 'werift';

/** Keep in step with package.json (`"werift": "0.25.2"`, an exact pin). */
export const WERIFT_EXPECTED = '0.25.2';

/** What is checked: werift's exports (ESM, as the bridge imports them), its version and its tweetnacl. */
export interface WeriftFound {
  version: string;
  module: Record<string, unknown>;
  nacl: unknown;
}

/** The werift this process loads: its package.json's version and the tweetnacl it resolves. */
export function installedWerift(): WeriftFound {
  const require = createRequire(import.meta.url);
  const entry = require.resolve('werift');
  let version = 'unknown';
  // werift's `exports` does not list package.json: walk up from its entry point to it.
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'werift') {
        version = pkg.version ?? 'unknown';
        break;
      }
    } catch {
      // no package.json at this level
    }
  }
  let nacl: unknown = null;
  try {
    nacl = createRequire(entry)('tweetnacl');
  } catch {
    // reported below as a missing part
  }
  return { version, module: werift as unknown as Record<string, unknown>, nacl };
}

type Ctor = new (...args: unknown[]) => Record<string, unknown>;

function ctor(m: Record<string, unknown>, name: string, problems: string[]): Ctor | null {
  const c = m[name];
  if (typeof c === 'function') return c as Ctor;
  problems.push(`no export ${name}`);
  return null;
}

const isBuffer = (v: unknown) => Buffer.isBuffer(v);

/**
 * What differs from the werift the bridge patches: an empty list when it is the one expected.
 * Every part named here is one `srtp.ts` or `native-x25519.ts` uses.
 */
export function weriftProblems(found: WeriftFound): string[] {
  const problems: string[] = [];
  if (found.version !== WERIFT_EXPECTED) problems.push(`version ${found.version}`);
  const m = found.module;
  if (typeof m.SrtpAuthenticationError !== 'function') problems.push('no export SrtpAuthenticationError');
  try {
    const Sender = ctor(m, 'RTCRtpSender', problems);
    if (Sender) {
      const s = new Sender('audio');
      const want: [string, string][] = [
        ['ssrc', 'number'],
        ['packetCount', 'number'],
        ['octetCount', 'number'],
        ['rtpTimestamp', 'number'],
        ['ntpTimestamp', 'bigint'],
        ['runRtcp', 'function'],
      ];
      for (const [k, t] of want) if (typeof s[k] !== t) problems.push(`RTCRtpSender.${k} is not a ${t}`);
      if (!Array.isArray(s.headerExtensions)) problems.push('RTCRtpSender.headerExtensions is not an array');
      if (!('dtlsTransport' in s)) problems.push('RTCRtpSender has no dtlsTransport');
    }
    const Dtls = ctor(m, 'RTCDtlsTransport', problems);
    if (Dtls) {
      const d = new Dtls({}, {}, {}, [1]);
      if (!Array.isArray(d.srtpProfiles)) problems.push('RTCDtlsTransport.srtpProfiles is not an array');
      if (d.state !== 'new') problems.push('RTCDtlsTransport.state is not "new" before a handshake');
      for (const k of ['srtp', 'iceTransport']) if (!(k in d)) problems.push(`RTCDtlsTransport has no ${k}`);
    }
    const Session = ctor(m, 'SrtpSession', problems);
    if (Session) {
      const key = Buffer.alloc(16, 1);
      const salt = Buffer.alloc(14, 2);
      const sess = new Session({ keys: { localMasterKey: key, localMasterSalt: salt, remoteMasterKey: key, remoteMasterSalt: salt }, profile: 1 });
      if (typeof sess.decrypt !== 'function') problems.push('SrtpSession.decrypt is not a function');
      for (const side of ['localContext', 'remoteContext']) {
        const c = sess[side] as Record<string, unknown> | undefined;
        if (!c || c.profile !== 1 || !isBuffer(c.srtpSessionKey) || !isBuffer(c.srtpSessionSalt) || !isBuffer(c.srtpSessionAuthTag)) {
          problems.push(`SrtpSession.${side} has no profile and session key, salt and auth key`);
        }
      }
    }
    const Client = ctor(m, 'DtlsClient', problems);
    if (Client) {
      // dtls-hvr.ts wraps the client's handshake handler and reads its flight (made, never connected).
      const c = new Client({ transport: { send: () => Promise.resolve(), close: () => undefined } });
      if (typeof c.onHandleHandshakes !== 'function') problems.push('DtlsClient.onHandleHandshakes is not a function');
      if (typeof (c.dtls as { flight?: unknown } | undefined)?.flight !== 'number') problems.push('DtlsClient.dtls.flight is not a number');
    }
    const Connection = ctor(m, 'Connection', problems);
    if (Connection && typeof (Connection.prototype as Record<string, unknown>).send !== 'function') {
      // werift declares `send` as an instance field: look at one (made, never started).
      const c = new Connection(false, {});
      if (typeof c.send !== 'function') problems.push('ICE Connection.send is not a function');
    }
  } catch (err) {
    problems.push(`its classes could not be made as expected (${(err as Error).message})`);
  }
  const nacl = found.nacl as { scalarMult?: unknown; box?: { keyPair?: unknown } } | null;
  if (typeof nacl?.scalarMult !== 'function' || typeof nacl.box?.keyPair !== 'function') {
    problems.push('the tweetnacl it resolves has no scalarMult and box.keyPair');
  }
  return problems;
}

/** Throws one error naming the werift expected when the one loaded is not it (bridge start). */
export function assertWerift(found: WeriftFound = installedWerift()): void {
  const problems = weriftProblems(found);
  if (problems.length) {
    throw new Error(
      `werift ${WERIFT_EXPECTED} expected (the rooms patch its internals, webrtc/srtp.ts and native-x25519.ts); the werift loaded differs: ${problems.join('; ')}. Install werift@${WERIFT_EXPECTED} exactly (npm ci).`,
    );
  }
}
