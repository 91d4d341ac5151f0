import { describe, expect, it } from 'vitest';
import telephony from '../../../plugins/telephony/index.ts';
import { TelephonyRepo } from '../../../plugins/telephony/repo.ts';
import { storeAt } from '../../support/migrations.ts';

describe('telephony migration 0002-trunk-dns-srv', () => {
  it('a version-1 trunk keeps its host and port and is not switched to DNS SRV', () => {
    const { db, tenant, upgrade } = storeAt(telephony, 1);
    const now = '2026-01-01T00:00:00.000Z';
    db.prepare(
      `INSERT INTO tel_trunks (tenant_id, id, name, host, port, transport, created_at, updated_at) VALUES (?, 'main', 'Main', 'sip.example', 5080, 'tcp', ?, ?)`,
    ).run(tenant.id, now, now);
    expect(upgrade().slice(0, 2)).toEqual(['0002-trunk-dns-srv', '0003-transcript-shares']);
    const trunk = new TelephonyRepo(db).trunks(tenant).find((t) => t.id === 'main');
    expect(trunk).toMatchObject({ host: 'sip.example', port: 5080, transport: 'tcp', dns_srv: 0 });
    db.close();
  });
});
