import { describe, expect, it } from 'vitest';
import telephony from '../../../plugins/telephony/index.ts';
import { TelephonyRepo } from '../../../plugins/telephony/repo.ts';
import { storeAt } from '../../support/migrations.ts';

describe('telephony migration 0007-srtp-g722', () => {
  it('existing trunks and phones keep plain RTP; G.722 goes first only where the old default codec list was kept', () => {
    const { db, tenant, upgrade } = storeAt(telephony, 5);
    const now = '2026-01-01T00:00:00.000Z';
    const trunk = db.prepare(
      `INSERT INTO tel_trunks (tenant_id, id, name, host, port, transport, codecs, created_at, updated_at) VALUES (?, ?, ?, 'sip.example', 5060, 'udp', ?, ?, ?)`,
    );
    trunk.run(tenant.id, 'main', 'Main', '["PCMU","PCMA"]', now, now);
    trunk.run(tenant.id, 'alaw', 'A-law only', '["PCMA"]', now, now);
    db.prepare(`INSERT INTO tel_phones (tenant_id, user, username, password_sealed, created_at, updated_at) VALUES (?, 'bob', 'bob', 'x', ?, ?)`).run(
      tenant.id,
      now,
      now,
    );
    expect(upgrade()).toContain('0007-srtp-g722');
    const rows = new TelephonyRepo(db).trunks(tenant);
    expect(rows.find((t) => t.id === 'main')).toMatchObject({ srtp: 'off', codecs: '["G722","PCMU","PCMA"]' });
    expect(rows.find((t) => t.id === 'alaw')).toMatchObject({ srtp: 'off', codecs: '["PCMA"]' });
    expect(db.prepare('SELECT srtp FROM tel_phones WHERE user = ?').get('bob')).toEqual({ srtp: 'off' });
    expect(() => db.prepare(`UPDATE tel_phones SET srtp = 'sometimes'`).run()).toThrow(/CHECK/);
    db.close();
  });
});
