import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { certFingerprint, consolePolicy, CONSOLE_CSP, normaliseFingerprint, webPreferences } from '../../main/policy.ts';
import { tempDir } from '../support/server.ts';

const dir = tempDir('sovcomms-policy-');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A self-signed certificate made by openssl (a real DER, a real fingerprint). */
function selfSigned(name: string): string {
  const key = path.join(dir, `${name}.key`);
  const crt = path.join(dir, `${name}.crt`);
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', crt, '-days', '1', '-subj', `/CN=${name}`],
    {
      stdio: 'ignore',
    },
  );
  return fs.readFileSync(crt, 'utf8');
}

const ORIGIN = 'https://127.0.0.1:8443';

describe('console window policy', () => {
  it('web preferences: context isolation, sandbox, no Node, no webview, the preload', () => {
    expect(webPreferences('/app/preload.cjs')).toEqual({
      preload: '/app/preload.cjs',
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInSubFrames: false,
      webviewTag: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      spellcheck: false,
    });
  });

  it('navigation only within the console origin; nothing before the server has told its origin', () => {
    const state = { origin: null as string | null, pinnedCert: null };
    const p = consolePolicy(state);
    expect(p.allowNavigation(`${ORIGIN}/console/`)).toBe(false);
    state.origin = ORIGIN;
    expect(p.allowNavigation(`${ORIGIN}/console/calls`)).toBe(true);
    expect(p.allowNavigation(`${ORIGIN}/oauth2/v1/authorize?x=1`)).toBe(true);
    for (const bad of [
      'https://127.0.0.1:8444/console/',
      'http://127.0.0.1:8443/console/',
      'https://evil.example/',
      'file:///etc/passwd',
      'javascript:alert(1)',
      'not a url',
    ])
      expect(p.allowNavigation(bad), bad).toBe(false);
  });

  it('new windows: never; outside https links go to the OS browser, everything else is dropped', () => {
    const p = consolePolicy({ origin: ORIGIN, pinnedCert: null });
    expect(p.windowOpen('https://docs.example.org/guide')).toBe('external');
    expect(p.windowOpen(`${ORIGIN}/console/popup`)).toBe('deny');
    expect(p.windowOpen('http://plain.example/')).toBe('deny');
    expect(p.windowOpen('file:///etc/passwd')).toBe('deny');
    expect(p.windowOpen('smb://server/share')).toBe('deny');
  });

  it('permissions: microphone and camera only for the console’s browser-voice pages; nothing else', () => {
    const p = consolePolicy({ origin: ORIGIN, pinnedCert: null });
    expect(p.allowPermission('media', `${ORIGIN}/console/voice`, ['audio'])).toBe(true);
    expect(p.allowPermission('media', `${ORIGIN}/console/voice/call/42`, ['audio', 'video'])).toBe(true);
    expect(p.allowPermission('media', `${ORIGIN}/console/calls/browser`, ['audio'])).toBe(true);
    expect(p.allowPermission('media', `${ORIGIN}/console/voiceover`, ['audio'])).toBe(false);
    expect(p.allowPermission('media', `${ORIGIN}/console/settings`, ['audio'])).toBe(false);
    expect(p.allowPermission('media', 'https://evil.example/console/voice', ['audio'])).toBe(false);
    expect(p.allowPermission('media', `${ORIGIN}/console/voice`, ['audio', 'screen'])).toBe(false);
    for (const perm of ['geolocation', 'notifications', 'clipboard-read', 'openExternal', 'hid', 'usb', 'serial'])
      expect(p.allowPermission(perm, `${ORIGIN}/console/voice`, []), perm).toBe(false);
  });

  it("certificate errors: only the appliance's own certificate, pinned by SHA-256, on the console origin", () => {
    const own = selfSigned('appliance');
    const other = selfSigned('intruder');
    const state = { origin: ORIGIN, pinnedCert: null as string | null };
    const p = consolePolicy(state);
    expect(p.acceptCertificate(`${ORIGIN}/console/`, own)).toBe(false); // nothing pinned yet
    // The server reports Node's AA:BB:.. form; Electron's sha256/base64 form normalises the same.
    const nodeForm = new crypto.X509Certificate(own).fingerprint256;
    state.pinnedCert = normaliseFingerprint(nodeForm);
    expect(state.pinnedCert).toBe(certFingerprint(own));
    expect(normaliseFingerprint(`sha256/${Buffer.from(state.pinnedCert, 'hex').toString('base64')}`)).toBe(state.pinnedCert);
    expect(p.acceptCertificate(`${ORIGIN}/console/`, own)).toBe(true);
    expect(p.acceptCertificate(`${ORIGIN}/console/`, other)).toBe(false);
    expect(p.acceptCertificate('https://evil.example/', own)).toBe(false);
    expect(p.acceptCertificate(`${ORIGIN}/`, 'not a certificate')).toBe(false);
  });

  it('a content security policy for console responses without one', () => {
    const p = consolePolicy({ origin: ORIGIN, pinnedCert: null });
    expect(p.contentSecurityPolicy).toBe(CONSOLE_CSP);
    expect(CONSOLE_CSP).toContain("default-src 'self'");
    expect(CONSOLE_CSP).toContain("object-src 'none'");
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
    expect(CONSOLE_CSP).not.toContain('unsafe-eval');
  });
});
