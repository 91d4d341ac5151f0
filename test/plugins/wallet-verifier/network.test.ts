import crypto from 'node:crypto';
import canonicalize from 'canonicalize';
import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { runCli } from '../../support/cli.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { adminCall, body, openSession, sendEncrypted, VERIFIER_OVERRIDES } from './helpers.ts';
import { issuePid, makeHolder, makeIssuerCa, presentPid, type Holder, type TestCa } from './wallet.ts';

let s: TestServer;
let ca: TestCa;
let holder: Holder;
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  s = await startTestServer({ clock, overrides: VERIFIER_OVERRIDES });
  ca = await makeIssuerCa();
  holder = await makeHolder();
  expect((await adminCall(s, 'POST', '/signal.ashx?verifier-anchors=add', 'verifier-anchors-add', { pem: ca.rootPem })).status).toBe(200);
});
afterAll(async () => {
  await s?.stop();
});

const addProfile = (json: unknown) => adminCall(s, 'POST', '/signal.ashx?verifier-profiles=add', 'verifier-profiles-add', json);

async function presentFor(profile: string) {
  const o = await openSession(s, `preset=pid-network&scope=${encodeURIComponent('openid network_access')}&network_profile=${profile}`);
  const token = await presentPid(
    await issuePid(ca, holder),
    holder,
    { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) },
    {
      family_name: true,
      given_name: true,
      birthdate: true,
      nationalities: true,
    },
  );
  return { o, r: await sendEncrypted(s, o, token) };
}

describe('network access profiles and the signed NetworkConfig', () => {
  it('scope=openid network_access: the result carries a NetworkConfig signed (ES256, x5c = verifier certificate) over its RFC 8785 canonical JSON', async () => {
    expect((await addProfile({ name: 'office-wifi', type: 'wifi-wpa3-eap', ssid: 'Office', eap_method: 'TTLS', ttl_minutes: 60 })).status).toBe(200);
    const { o, r } = await presentFor('office-wifi');
    expect(r.status).toBe(200);
    const out = await body(r);
    const nc = out.network_config;
    expect(nc).toMatchObject({
      profile_id: 'office-wifi',
      network_type: 'wifi-wpa3-eap',
      ssid: 'Office',
      eap_method: 'TTLS',
      identity: 'erika.mustermann@localhost',
    });
    expect(nc.password_or_psk).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(Date.parse(nc.expires_at) - clock.now()).toBe(3600_000);
    const caPem = await (await s.fetch('/rp-cert.ashx?ca')).text();
    expect(nc.ca_certificate_pem.replace(/\s/g, '')).toBe(caPem.replace(/\s/g, ''));
    // The signature: x5c leaf is the verifier certificate (under the tenant's RP CA); payload = canonical body.
    const header = jose.decodeProtectedHeader(nc.signature);
    expect(header.alg).toBe('ES256');
    const leaf = new crypto.X509Certificate(Buffer.from(header.x5c![0]!, 'base64'));
    expect(leaf.verify(new crypto.X509Certificate(caPem).publicKey)).toBe(true);
    const { payload } = await jose.compactVerify(nc.signature, leaf.publicKey);
    const { signature: _sig, ...rest } = nc;
    expect(Buffer.from(payload).toString('utf8')).toBe(canonicalize(rest));
    // Idempotent until expiry, then 404; unknown sessions 404.
    const again = await s.fetch(`/oidc.ashx?action=network-config&session_id=${o.sessionId}`);
    expect(again.status).toBe(200);
    expect(await body(again)).toEqual(nc);
    expect(again.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expect(await body(await s.fetch(`/oidc.ashx?action=network-config&session_id=${o.sessionId}`))).toEqual(nc);
    expect((await s.fetch('/oidc.ashx?action=network-config&session_id=unknown')).status).toBe(404);
    clock.advance(3601_000);
    try {
      expect((await s.fetch(`/oidc.ashx?action=network-config&session_id=${o.sessionId}`)).status).toBe(404);
    } finally {
      clock.advance(-3601_000);
    }
  });

  it('every network_type of the spec; EAP-TLS has no password; without network_access there is no network_config', async () => {
    const cases: [Record<string, unknown>, Record<string, unknown>][] = [
      [{ name: 'psk', type: 'wifi-wpa2-psk', ssid: 'Guest' }, { ssid: 'Guest' }],
      [{ name: 'eap2', type: 'wifi-wpa2-eap', ssid: 'Staff', eap_method: 'PEAP' }, { eap_method: 'PEAP' }],
      [{ name: 'tls', type: 'wifi-wpa2-eap', ssid: 'Staff', eap_method: 'TLS' }, { eap_method: 'TLS' }],
      [{ name: 'hs20', type: 'wifi-hotspot20' }, { eap_method: 'PEAP' }],
      [{ name: 'lte', type: 'apn-4g', identity_template: '{family_name}-{birthdate}' }, { identity: 'mustermann-1964-08-12' }],
      [{ name: 'nr', type: 'apn-5g' }, {}],
      [{ name: 'ovpn', type: 'openvpn' }, {}],
      [{ name: 'wg', type: 'wireguard' }, {}],
    ];
    for (const [json, expected] of cases) {
      expect((await addProfile(json)).status).toBe(200);
      const { r } = await presentFor(json.name as string);
      const nc = (await body(r)).network_config;
      expect(nc).toMatchObject({ profile_id: json.name, network_type: json.type, ...expected });
      if (json.eap_method === 'TLS') expect(nc.password_or_psk).toBeUndefined();
      else expect(nc.password_or_psk).toBeTruthy();
    }
    const o = await openSession(s);
    const r = await sendEncrypted(
      s,
      o,
      await presentPid(await issuePid(ca, holder), holder, { aud: o.clientId, nonce: o.nonce, iat: Math.floor(clock.now() / 1000) }),
    );
    expect((await body(r)).network_config).toBeUndefined();
    expect((await s.fetch(`/oidc.ashx?action=network-config&session_id=${o.sessionId}`)).status).toBe(404);
  });

  it('bad profiles and unknown profiles at vp-start are 400; list and remove over the API; the CLI adds, lists and removes', async () => {
    for (const json of [
      { name: 'x', type: 'carrier-pigeon' },
      { name: 'x', type: 'wifi-wpa2-psk' },
      { name: 'x', type: 'apn-4g', ssid: 'no' },
      { name: 'x', type: 'wifi-wpa2-eap', ssid: 'S', eap_method: 'EAP-FOO' },
      { name: '../x', type: 'openvpn' },
    ]) {
      expect((await addProfile(json)).status).toBe(400);
    }
    expect(
      (await s.fetch(`/oidc.ashx?action=vp-start&preset=pid-network&scope=${encodeURIComponent('openid network_access')}&network_profile=nope`)).status,
    ).toBe(400);
    expect((await s.fetch(`/oidc.ashx?action=vp-start&preset=pid-network&scope=${encodeURIComponent('openid network_access')}`)).status).toBe(400);
    expect((await s.fetch('/signal.ashx?verifier-profiles=list')).status).toBe(401);

    const add = await runCli(
      [
        'verifier',
        'profile',
        'add',
        'lobby',
        '--type',
        'wifi-wpa2-eap',
        '--ssid',
        'Lobby',
        '--eap-method',
        'MSCHAPv2',
        '--identity-template',
        '{given_name}@{host}',
        '--ttl-minutes',
        '30',
      ],
      { dataDir: s.dataDir },
    );
    expect(add.stderr).toBe('');
    expect(add.code).toBe(0);
    const list = JSON.parse((await runCli(['verifier', 'profile', 'list', '--json'], { dataDir: s.dataDir })).stdout);
    expect(list.find((p: { name: string }) => p.name === 'lobby')).toMatchObject({
      network_type: 'wifi-wpa2-eap',
      ssid: 'Lobby',
      eap_method: 'MSCHAPv2',
      ttl_minutes: 30,
    });
    const api = await body(await adminCall(s, 'GET', '/signal.ashx?verifier-profiles=list', 'verifier-profiles-list'));
    expect(api.profiles.map((p: { name: string }) => p.name)).toContain('lobby');
    expect((await runCli(['verifier', 'profile', 'remove', 'lobby'], { dataDir: s.dataDir })).code).toBe(0);
    expect((await adminCall(s, 'POST', '/signal.ashx?verifier-profiles=remove', 'verifier-profiles-remove', { name: 'lobby' })).status).toBe(404);
    expect((await runCli(['verifier', 'profile', 'add', 'bad', '--type', 'wifi-wpa2-psk'], { dataDir: s.dataDir })).code).not.toBe(0);
    // Four CLI child processes: on a loaded 2-core machine each can take 10 s.
  }, 90_000);
});
