import { describe, expect, it } from 'vitest';
import oidc from '../../../plugins/oidc/index.ts';
import { storeAt } from '../../support/migrations.ts';

describe('oidc migration 0002-code-amr', () => {
  it('keeps the codes a version-1 store issued, with no amr (RFC 8176: absent, not made up)', () => {
    const { db, tenant, upgrade } = storeAt(oidc, 1);
    db.prepare(
      `INSERT INTO oidc_codes (code_hash, tenant_id, grant_id, client_id, user_id, redirect_uri, scope, nonce, code_challenge, code_challenge_method, auth_time, sid, expires_at, used_at)
       VALUES ('h1', ?, 'g_1', 'crm', 'u_1', 'https://crm.example/cb', 'openid email', 'n-1', 'c', 'S256', 1767225600, 's_1', 1767225660, NULL)`,
    ).run(tenant.id);
    expect(upgrade()).toEqual(['0002-code-amr']);
    const row = db.prepare('SELECT * FROM oidc_codes WHERE code_hash = ?').get('h1') as Record<string, unknown>;
    expect(row).toMatchObject({
      tenant_id: tenant.id,
      client_id: 'crm',
      redirect_uri: 'https://crm.example/cb',
      scope: 'openid email',
      code_challenge_method: 'S256',
      auth_time: 1767225600,
      amr: null,
    });
    // New codes carry the methods.
    db.prepare(
      `INSERT INTO oidc_codes (code_hash, tenant_id, grant_id, client_id, user_id, redirect_uri, scope, auth_time, expires_at, amr)
       VALUES ('h2', ?, 'g_2', 'crm', 'u_1', 'https://crm.example/cb', 'openid', 1, 2, '["pwd"]')`,
    ).run(tenant.id);
    expect((db.prepare("SELECT amr FROM oidc_codes WHERE code_hash = 'h2'").get() as { amr: string }).amr).toBe('["pwd"]');
    db.close();
  });
});
