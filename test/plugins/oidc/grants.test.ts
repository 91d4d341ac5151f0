import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { definePlugin, type AnyPlugin } from '../../../server/plugin.ts';
import audit from '../../../plugins/audit/index.ts';
import oidcPlugin from '../../../plugins/oidc/index.ts';
import { oauthError } from '../../../plugins/oidc/provider.ts';
import { OIDC } from '../../../plugins/oidc/api.ts';
import { startTestServer, type TestServer } from '../../support/server.ts';
import { tokenForm } from './helpers.ts';

const PRE_AUTH = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';

/** A stand-in for the wallet issuer: it plugs the OID4VCI grant into the token endpoint. */
const issuerLike = definePlugin({
  name: 'grant-test',
  description: 'registers the pre-authorized_code grant',
  dependsOn: ['oidc'],
  setup(ctx) {
    ctx.use(OIDC).registerGrant({
      type: PRE_AUTH,
      parameters: ['pre-authorized_code', 'tx_code'],
      clientAuth: 'optional',
      handler: async (g) => {
        if (g.form['pre-authorized_code'] !== 'good') throw oauthError('invalid_grant', 'unknown pre-authorized_code');
        return { access_token: `cred-${g.tenant.id}`, token_type: 'Bearer', expires_in: 300, c_nonce: 'n' };
      },
    });
  },
});

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ plugins: [audit, oidcPlugin, issuerLike] as AnyPlugin[] });
});
afterAll(async () => {
  await s?.stop();
});

describe('pluggable grants', () => {
  it('a grant registered through ctx.use("oidc") is listed in discovery and served without client authentication', async () => {
    const d = (await (await s.fetch('/.well-known/openid-configuration')).json()) as { grant_types_supported: string[] };
    expect(d.grant_types_supported).toContain(PRE_AUTH);
    const t = await tokenForm(s, `127.0.0.1:${s.port}`, { grant_type: PRE_AUTH, 'pre-authorized_code': 'good' });
    expect(t.status).toBe(200);
    expect(t.body).toMatchObject({ access_token: `cred-${s.primary.id}`, c_nonce: 'n' });
    const bad = await tokenForm(s, `127.0.0.1:${s.port}`, { grant_type: PRE_AUTH, 'pre-authorized_code': 'forged' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_grant');
  });
});
