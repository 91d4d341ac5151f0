import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../server/clock.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { hidden } from './helpers.ts';

// The appliance's clock three days behind the wall clock: the sealed WebAuthn challenge's
// 5-minute life must be measured on it (ctx.clock), not on the machine's wall clock.
const clock = new ManualClock(Date.now() - 3 * 86_400_000);
let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ clock });
});
afterAll(async () => {
  await s?.stop();
});

/** A browser's cookie jar for the JSON calls of the sign-in page. */
function jar() {
  const cookies = new Map<string, string>();
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const i = kv!.indexOf('=');
      cookies.set(kv!.slice(0, i), kv!.slice(i + 1));
    }
  };
  const header = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  return { keep, header };
}

/** Opens the sign-in page, asks for passkey options (the sealed challenge cookie), and returns a verify call. */
async function startPasskeySignIn(): Promise<(credentialId: string) => Promise<Response>> {
  const b = jar();
  const login = await s.fetch('/login.html');
  b.keep(login);
  const csrf = hidden(await login.text(), 'csrf');
  const opts = await s.fetch('/oidc.ashx/passkey/options', { method: 'POST', json: { csrf }, headers: { cookie: b.header() } });
  expect(opts.status).toBe(200);
  b.keep(opts);
  return (id) => s.fetch('/oidc.ashx/passkey/verify', { method: 'POST', json: { csrf, response: { id } }, headers: { cookie: b.header() } });
}

describe('the WebAuthn challenge expires on the appliance clock', () => {
  it('within its 5 minutes of the clock the challenge is taken (the credential is what fails)', async () => {
    const verify = await startPasskeySignIn();
    clock.advance(299_000);
    const r = await verify('no-such-credential');
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({
      error: 'passkey_rejected',
      reason: 'unknown_credential',
      error_description: expect.stringContaining('unknown credential'),
    });
  });

  it('after 5 minutes of the clock the challenge is expired, however little wall time passed', async () => {
    const verify = await startPasskeySignIn();
    clock.advance(301_000);
    const r = await verify('no-such-credential');
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({
      error: 'passkey_rejected',
      reason: 'challenge_expired',
      error_description: expect.stringContaining('no or expired challenge'),
    });
  });
});
