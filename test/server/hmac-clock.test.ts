import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signAdminHmacV2 } from '../../server/auth.ts';
import { ManualClock } from '../../server/clock.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { probePlugin, withBuiltins } from './fixtures/test-plugins.ts';

// The appliance's clock three days behind the wall clock: the V2 signature's freshness window
// must be measured on it (ctx.clock), not on the machine's wall clock.
const clock = new ManualClock(Date.now() - 3 * 86_400_000);
let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ clock, plugins: await withBuiltins(probePlugin) });
});
afterAll(async () => {
  await s?.stop();
});

describe('admin HMAC V2 freshness follows the appliance clock', () => {
  const echo = '/signal.ashx?test=echo';
  const send = (v: string, body: string) =>
    s.fetch(echo, { method: 'POST', body, headers: { 'Content-Type': 'application/json', 'X-Service-Admin-Signature-V2': v } });
  const sign = (body: string, atMs: number) =>
    signAdminHmacV2(s.appliance.core.auth.adminSecret(), 'test-echo', `127.0.0.1:${s.port}`, body, Math.floor(atMs / 1000));

  it("a signature made at the clock's time is accepted, one made at the wall clock's time is stale", async () => {
    const onClock = await send(sign('{"msg":"clock"}', clock.now()), '{"msg":"clock"}');
    expect(onClock.status).toBe(200);
    const onWall = await send(sign('{"msg":"wall"}', Date.now()), '{"msg":"wall"}');
    expect(onWall.status).toBe(401);
    expect(((await onWall.json()) as { error: string }).error).toBe('stale_signature');
  });

  it('moving the clock past the 5-minute window makes an unused signature stale', async () => {
    const signedAt = clock.now();
    const v = sign('{"msg":"later"}', signedAt);
    clock.advance(301_000);
    const r = await send(v, '{"msg":"later"}');
    expect(r.status).toBe(401);
    expect(((await r.json()) as { error: string }).error).toBe('stale_signature');
    // Still inside the window when the clock is moved back to within it.
    clock.set(signedAt + 299_000);
    expect((await send(v, '{"msg":"later"}')).status).toBe(200);
  });
});
