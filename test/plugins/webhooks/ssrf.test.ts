import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { DEFAULT_POLICY, mergePolicy, refusal, resolveChecked } from '../../../plugins/webhooks/net-policy.ts';
import { send } from '../../../plugins/webhooks/sender.ts';
import { Receiver, admin, testPlugins, until } from './support.ts';

describe('address policy', () => {
  it('refuses loopback, link-local, metadata and unspecified addresses by default and allows the LAN', () => {
    for (const a of [
      '127.0.0.1',
      '127.5.6.7',
      '::1',
      '::ffff:127.0.0.1',
      '169.254.169.254',
      '169.254.10.1',
      'fe80::1',
      '0.0.0.0',
      '::',
      '224.0.0.1',
      '255.255.255.255',
      'fd00:ec2::254',
    ]) {
      expect(refusal(a, DEFAULT_POLICY), a).not.toBeNull();
    }
    for (const a of ['10.1.2.3', '172.16.0.9', '192.168.1.20', '100.64.0.1', 'fd12::1', '93.184.216.34', '2a00:1450:4001:82b::200e']) {
      expect(refusal(a, DEFAULT_POLICY), a).toBeNull();
    }
  });

  it("refuses documentation, benchmarking and IPv4-embedding ranges, and this appliance's own addresses, unless allow-listed", () => {
    // Documentation (RFC 5737, RFC 3849), benchmarking (RFC 2544), IETF assignments, 6to4 relay,
    // discard (RFC 6666), and NAT64 / 6to4 / Teredo forms that embed 127.0.0.1 or a LAN address.
    for (const a of [
      '192.0.2.10',
      '198.51.100.7',
      '203.0.113.250',
      '2001:db8::1',
      '198.18.0.1',
      '198.19.255.1',
      '192.0.0.8',
      '192.88.99.1',
      '100::1',
      '64:ff9b::7f00:1',
      '64:ff9b:1::a00:1',
      '2002:7f00:1::1',
      '2001:0:4136:e378::1',
    ]) {
      expect(refusal(a, DEFAULT_POLICY), a).toMatch(/special-purpose/);
    }
    const own = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i && !i.internal)
      .map((i) => i!.address.split('%')[0]!);
    for (const a of own) expect(refusal(a, { ...DEFAULT_POLICY, allowPrivate: true, allowLinkLocal: true }), a).not.toBeNull();
    // An operator's explicit allow-list still wins (a documented escape hatch for lab setups).
    expect(refusal('192.0.2.10', { ...DEFAULT_POLICY, allowCidrs: ['192.0.2.0/24'] })).toBeNull();
  });

  it('refuses IPv4-compatible and IPv4-translated addresses whatever the policy allows (Linux routes them off the machine)', () => {
    const open = mergePolicy({ allowLoopback: true, allowLinkLocal: true, allowPrivate: true, allowCidrs: ['::/0'] });
    // ::127.0.0.1 is ::7f00:1 (what the URL parser makes of [::127.0.0.1]); ::ffff:0:x is RFC 2765's translated form.
    for (const a of ['::127.0.0.1', '::7f00:1', '[::7f00:1]', '::ffff:0:7f00:1', '::ffff:0:a00:1', '::a00:1', '::c0a8:101', '0:0:0:0:0:0:7f00:1']) {
      expect(refusal(a, DEFAULT_POLICY), a).toMatch(/IPv4-compatible or IPv4-translated/);
      expect(refusal(a, open), a).toMatch(/IPv4-compatible or IPv4-translated/);
    }
    // The real loopback and the mapped form (::ffff:a.b.c.d, which Linux does deliver to the IPv4 address) keep their rules.
    expect(refusal('::1', open)).toBeNull();
    expect(refusal('::ffff:127.0.0.1', open)).toBeNull();
    expect(refusal('::ffff:7f00:1', DEFAULT_POLICY)).toMatch(/loopback/);
    expect(refusal('::', DEFAULT_POLICY)).toMatch(/unspecified/);
  });

  it('is configurable: loopback, private ranges, deny and allow lists; metadata needs an explicit allow', () => {
    expect(refusal('127.0.0.1', mergePolicy({ allowLoopback: true }))).toBeNull();
    expect(refusal('192.168.1.1', mergePolicy({ allowPrivate: false }))).toMatch(/private/);
    expect(refusal('169.254.169.254', mergePolicy({ allowLinkLocal: true }))).toMatch(/metadata/);
    expect(refusal('169.254.10.1', mergePolicy({ allowLinkLocal: true }))).toBeNull();
    expect(refusal('169.254.169.254', mergePolicy({ allowCidrs: ['169.254.169.254/32'] }))).toBeNull();
    expect(refusal('10.9.9.9', mergePolicy({ denyCidrs: ['10.9.0.0/16'] }))).toMatch(/deny list/);
    // A tenant layer overrides the defaults layer.
    expect(refusal('127.0.0.1', mergePolicy({ allowLoopback: false }, { allowLoopback: true }))).toBeNull();
  });

  it('resolves once and connects to the checked address: a name that resolves to loopback is refused', async () => {
    const rx = await new Receiver().start();
    try {
      const port = new URL(rx.url).port;
      const rebind = async () => [{ address: '127.0.0.1', family: 4 }];
      await expect(resolveChecked(new URL(`http://rebind.example:${port}/`), DEFAULT_POLICY, rebind)).rejects.toThrow(/loopback/);
      const d = {
        url: `http://rebind.example:${port}/x`,
        body: '{}',
        event: 'call.ended',
        deliveryId: 'd1',
        attempt: 1,
        secret: 'whsec_AAAA',
        timestampSec: 1,
      };
      const refused = await send(d, { policy: DEFAULT_POLICY, timeoutMs: 1000, maxResponseBytes: 100, resolve: rebind });
      expect(refused).toMatchObject({ status: null, refused: true });
      expect(rx.received).toHaveLength(0);
      // Allowed: the request goes to the address the check saw, with the name kept in Host.
      const ok = await send(d, { policy: mergePolicy({ allowLoopback: true }), timeoutMs: 1000, maxResponseBytes: 100, resolve: rebind });
      expect(ok.status).toBe(200);
      expect(rx.received[0]!.headers.host).toBe(`rebind.example:${port}`);
      // Of several addresses, a refused one is skipped, an allowed one is used.
      const mixed = async () => [
        { address: '169.254.169.254', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ];
      expect((await resolveChecked(new URL('http://x.example/'), mergePolicy({ allowLoopback: true }), mixed)).address).toBe('127.0.0.1');
    } finally {
      await rx.stop();
    }
  });

  it('reads at most maxResponseBytes of a response body', async () => {
    const rx = await new Receiver().start();
    try {
      rx.respond = () => ({ status: 500, body: 'x'.repeat(100_000) });
      const r = await send(
        { url: `${rx.url}/big`, body: '{}', event: 'e', deliveryId: 'd', attempt: 1, secret: 'whsec_AAAA', timestampSec: 1 },
        { policy: mergePolicy({ allowLoopback: true }), timeoutMs: 2000, maxResponseBytes: 64 },
      );
      expect(r.status).toBe(500);
      expect(r.body).toHaveLength(64);
    } finally {
      await rx.stop();
    }
  });
});

describe('SSRF refusals on the admin surface (default policy, one tenant allowed loopback)', () => {
  let s: TestServer;
  let rx: Receiver;
  beforeAll(async () => {
    rx = await new Receiver().start();
    s = await startTestServer({
      plugins: testPlugins(),
      overrides: { plugins: { webhooks: { tenants: { 'lab.example': { allowLoopback: true } } } } },
    });
  });
  afterAll(async () => {
    await s?.stop();
    await rx?.stop();
  });

  it('refuses loopback, metadata, link-local and unspecified targets with 400 address_refused', async () => {
    const port = new URL(rx.url).port;
    for (const url of [
      rx.url,
      `http://[::1]:${port}/`,
      `http://localhost:${port}/`,
      'http://169.254.169.254/latest/meta-data/',
      'http://169.254.1.1/',
      'http://0.0.0.0/',
      'http://[::ffff:127.0.0.1]/',
      'http://2130706433/',
    ]) {
      const r = await admin(s, 'add', { body: { url, events: ['*'] } });
      expect(r.status, url).toBe(400);
      expect(r.json.error, url).toBe('address_refused');
      // The answer does not say what the name resolved to or which rule refused it.
      expect(r.json.error_description, url).not.toMatch(/127\.|::1|169\.254|loopback|link-local|metadata/);
    }
    // Documentation ranges (RFC 5737) and this appliance's own LAN addresses are refused too.
    const own = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i && !i.internal && i.family === 'IPv4');
    for (const url of ['http://203.0.113.9/hook', ...(own ? [`http://${own.address}:${port}/`] : [])]) {
      expect((await admin(s, 'add', { body: { url, events: ['*'] } })).json.error, url).toBe('address_refused');
    }
    expect((await admin(s, 'add', { body: { url: 'http://192.168.55.10/hook', events: ['*'] } })).status).toBe(200);
  });

  it('a tenant whose policy allows loopback gets its deliveries; the other tenant still cannot add one', async () => {
    await s.addTenant('lab.example');
    const r = await admin(s, 'add', { host: 'lab.example', body: { url: `${rx.url}/lab`, events: ['*'] } });
    expect(r.status).toBe(200);
    const lab = s.appliance.core.tenants.byHost('lab.example')!;
    s.appliance.core.events.emit(lab.id, 'call.ended', { callId: 'lab-1' });
    await until(() => rx.received.find((x) => x.path === '/lab'));
    expect((await admin(s, 'add', { body: { url: `${rx.url}/primary`, events: ['*'] } })).status).toBe(400);
  });

  it('refuses the IPv4-compatible and IPv4-translated spellings of loopback, even for a tenant allowed loopback', async () => {
    const port = new URL(rx.url).port;
    for (const url of [`http://[::127.0.0.1]:${port}/`, `http://[::7f00:1]:${port}/`, `http://[::ffff:0:7f00:1]:${port}/`, `http://[::ffff:0:c0a8:101]/`]) {
      for (const host of [undefined, 'lab.example']) {
        const r = await admin(s, 'add', { host, body: { url, events: ['*'] } });
        expect(r.status, `${url} ${host}`).toBe(400);
        expect(r.json.error, url).toBe('address_refused');
      }
    }
  });

  it('a bad CIDR in the settings stops the plugin with its path', async () => {
    await expect(startTestServer({ plugins: testPlugins(), overrides: { plugins: { webhooks: { denyCidrs: ['10.0.0.0/99'] } } } })).rejects.toThrow(
      /plugins\.webhooks\.denyCidrs/,
    );
    await expect(startTestServer({ plugins: testPlugins(), overrides: { plugins: { webhooks: { caFile: 'no-such-ca.pem' } } } })).rejects.toThrow(
      /no-such-ca\.pem/,
    );
  });
});
