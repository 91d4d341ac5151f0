import { describe, expect, it } from 'vitest';
import webhooks from '../../../plugins/webhooks/index.ts';
import { storeAt } from '../../support/migrations.ts';

const ADMISSION = "SELECT id FROM webhook_deliveries WHERE subscription_id = ? AND state = 'queued' ORDER BY created_at, rowid LIMIT ?";

describe('webhooks migration 0002-admit-order-index', () => {
  it('keeps a version-1 backlog, admits it oldest first, and the admission query sorts nothing', () => {
    const { db, tenant, upgrade } = storeAt(webhooks, 1);
    db.prepare(
      "INSERT INTO webhook_subscriptions (id, tenant_id, url, events, secret_sealed, created_at, created_by) VALUES ('0123456789abcdef', ?, 'https://rx.example/h', '[\"*\"]', 'sealed', '2026-01-01T00:00:00.000Z', 'test')",
    ).run(tenant.id);
    const ins = db.prepare(
      "INSERT INTO webhook_deliveries (id, tenant_id, subscription_id, event_id, event, payload, state, created_at) VALUES (?, ?, '0123456789abcdef', ?, 'call.ended', '{}', 'queued', ?)",
    );
    // One event batch: the same millisecond, ids in random order (UUIDs), inserted in event order.
    const ids = ['f3', '0a', '9c', '5e', 'b1'];
    ids.forEach((id, i) => ins.run(id, tenant.id, i + 1, '2026-01-01T00:00:00.000Z'));
    expect(upgrade()).toEqual(['0002-admit-order-index']);
    expect((db.prepare(ADMISSION).all('0123456789abcdef', 10) as { id: string }[]).map((r) => r.id)).toEqual(ids);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${ADMISSION}`).all('0123456789abcdef', 10) as { detail: string }[]).map((r) => r.detail).join('\n');
    expect(plan).toMatch(/USING INDEX webhook_deliveries_sub/);
    expect(plan).not.toMatch(/TEMP B-TREE/);
    db.close();
  });
});
