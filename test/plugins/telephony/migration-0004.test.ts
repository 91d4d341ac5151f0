import { describe, expect, it } from 'vitest';
import telephony from '../../../plugins/telephony/index.ts';
import { TelephonyRepo } from '../../../plugins/telephony/repo.ts';
import { storeAt } from '../../support/migrations.ts';

describe('telephony migration 0004-inbound-sip', () => {
  it('a version-3 trunk takes inbound calls by its address; the phone and inbound-call tables are usable', () => {
    const { db, tenant, upgrade } = storeAt(telephony, 3);
    const now = '2026-01-01T00:00:00.000Z';
    db.prepare(
      `INSERT INTO tel_trunks (tenant_id, id, name, host, port, transport, dns_srv, created_at, updated_at) VALUES (?, 'main', 'Main', 'sip.example', 5060, 'udp', 1, ?, ?)`,
    ).run(tenant.id, now, now);
    expect(upgrade()[0]).toBe('0004-inbound-sip');
    expect(new TelephonyRepo(db).trunks(tenant).find((t) => t.id === 'main')).toMatchObject({ host: 'sip.example', dns_srv: 1, inbound_auth: 'address' });
    expect(() => db.prepare(`UPDATE tel_trunks SET inbound_auth = 'open' WHERE id = 'main'`).run()).toThrow(/CHECK/);
    db.prepare(`INSERT INTO tel_phones (tenant_id, user, username, password_sealed, created_at, updated_at) VALUES (?, 'alice', 'alice', 'sealed', ?, ?)`).run(
      tenant.id,
      now,
      now,
    );
    // One registrar for every tenant: the SIP user name is unique across them.
    expect(() =>
      db
        .prepare(`INSERT INTO tel_phones (tenant_id, user, username, password_sealed, created_at, updated_at) VALUES ('other', 'alice', 'alice', 's', ?, ?)`)
        .run(now, now),
    ).toThrow(/UNIQUE/);
    db.prepare(`INSERT INTO tel_inbound_calls (call_id, tenant_id, started_at) VALUES ('vnum0123456789ab', ?, ?)`).run(tenant.id, now);
    expect(db.prepare('SELECT status, outcome, caller_source FROM tel_inbound_calls').get()).toEqual({ status: 'ringing', outcome: '', caller_source: 'vnum' });
    db.close();
  });
});
