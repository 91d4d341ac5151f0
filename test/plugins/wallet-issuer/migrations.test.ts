import { describe, expect, it } from 'vitest';
import walletIssuer from '../../../plugins/wallet-issuer/index.ts';
import { storeAt } from '../../support/migrations.ts';

describe('wallet-issuer migrations', () => {
  it('0002 and 0003 keep version-1 rows: revoked entries counted through the partial index, existing tokens start at 0 issued', () => {
    const { db, tenant, upgrade } = storeAt(walletIssuer, 1);
    const cred = db.prepare(
      "INSERT INTO wi_credential (tenant_id, id, offer_id, format, list_id, idx, created_at, expires_at, revoked_at) VALUES (?, ?, 'off_1', 'dc+sd-jwt', 1, ?, 'x', 'y', ?)",
    );
    cred.run(tenant.id, 'cred_a', 0, null);
    cred.run(tenant.id, 'cred_b', 1, '2026-01-01T00:00:00.000Z');
    db.prepare("INSERT INTO wi_token (tenant_id, token_hash, offer_id, configuration_ids, expires_at) VALUES (?, 'h', 'off_1', '[]', 99)").run(tenant.id);
    expect(upgrade()).toEqual(['0002-revoked-index', '0003-token-issued']);
    const count = 'SELECT COUNT(*) AS n FROM wi_credential WHERE tenant_id = ? AND list_id = ? AND revoked_at IS NOT NULL';
    expect((db.prepare(count).get(tenant.id, 1) as { n: number }).n).toBe(1);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${count}`).all(tenant.id, 1) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(plan).toMatch(/wi_credential_revoked/);
    expect(db.prepare('SELECT issued FROM wi_token').get()).toEqual({ issued: 0 });
    db.close();
  });
});
