import { describe, expect, it } from 'vitest';
import walletIssuer from '../../../plugins/wallet-issuer/index.ts';
import { storeAt } from '../../support/migrations.ts';

describe('wallet-issuer migrations', () => {
  it('0002–0004 keep version-1 rows: revoked entries counted through the partial index, existing tokens start at 0 issued and with no account', () => {
    const { db, tenant, upgrade } = storeAt(walletIssuer, 1);
    const cred = db.prepare(
      "INSERT INTO wi_credential (tenant_id, id, offer_id, format, list_id, idx, created_at, expires_at, revoked_at) VALUES (?, ?, 'off_1', 'dc+sd-jwt', 1, ?, 'x', 'y', ?)",
    );
    cred.run(tenant.id, 'cred_a', 0, null);
    cred.run(tenant.id, 'cred_b', 1, '2026-01-01T00:00:00.000Z');
    db.prepare("INSERT INTO wi_token (tenant_id, token_hash, offer_id, configuration_ids, expires_at) VALUES (?, 'h', 'off_1', '[]', 99)").run(tenant.id);
    db.prepare(
      "INSERT INTO wi_offer (tenant_id, id, configuration_ids, sealed_claims, sealed_grant, created_by, created_at, expires_at) VALUES (?, 'off_1', '[]', 's', 'g', 'admin', 'x', 99)",
    ).run(tenant.id);
    expect(upgrade()).toEqual(['0002-revoked-index', '0003-token-issued', '0004-sign-in']);
    const count = 'SELECT COUNT(*) AS n FROM wi_credential WHERE tenant_id = ? AND list_id = ? AND revoked_at IS NOT NULL';
    expect((db.prepare(count).get(tenant.id, 1) as { n: number }).n).toBe(1);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${count}`).all(tenant.id, 1) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(plan).toMatch(/wi_credential_revoked/);
    expect(db.prepare('SELECT issued, user_id FROM wi_token').get()).toEqual({ issued: 0, user_id: null });
    // 0004: an old offer is bound to no account; sign-ins under way have their table.
    expect(db.prepare('SELECT subject_user FROM wi_offer').get()).toEqual({ subject_user: null });
    expect(db.prepare('SELECT COUNT(*) AS n FROM wi_login').get()).toEqual({ n: 0 });
    db.close();
  });
});
